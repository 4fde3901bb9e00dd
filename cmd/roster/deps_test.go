package main

import (
	"slices"
	"testing"

	"github.com/rosterhq/roster/internal/testtool"
)

// TestServerBinary_LinksNoBenchmark keeps the load generator out of the server binary:
// the benchmark commands are cmd/roster-bench, and `go list -deps ./cmd/roster` must not
// list package bench.
func TestServerBinary_LinksNoBenchmark(t *testing.T) {
	deps := testtool.Deps(t, "github.com/rosterhq/roster/cmd/roster")
	if !slices.Contains(deps, "github.com/rosterhq/roster/server") {
		t.Fatalf("go list -deps of cmd/roster does not list the server package: %v", deps)
	}
	if slices.Contains(deps, "github.com/rosterhq/roster/bench") {
		t.Fatal("cmd/roster links github.com/rosterhq/roster/bench; the benchmark belongs in cmd/roster-bench")
	}
}
