package client_test

import (
	"strings"
	"testing"

	"github.com/rosterhq/roster/internal/testtool"
)

// clientPkg is the package whose dependencies TestClient_Dependencies checks.
const clientPkg = "github.com/rosterhq/roster/client"

// TestClient_Dependencies keeps the Go client light: a program that imports it must not
// pull in the server's storage, Raft or encodings, nor any Roster package but the wire
// types (api) and the client itself (client, client/sse).
func TestClient_Dependencies(t *testing.T) {
	for _, dep := range testtool.Deps(t, clientPkg) {
		for _, banned := range []string{"bbolt", "hashicorp/raft", "msgpack"} {
			if strings.Contains(dep, banned) {
				t.Errorf("the client depends on %s", dep)
			}
		}
		if rest, ok := strings.CutPrefix(dep, "github.com/rosterhq/roster/"); ok && rest != "api" && rest != "client" && rest != "client/sse" {
			t.Errorf("the client depends on %s; only api, client and client/sse are allowed", dep)
		}
	}
}
