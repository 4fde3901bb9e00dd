// Package testtool is for tests that need a program the machine may lack (dig,
// Chromium, MariaDB, the go command). Outside CI such a test is skipped with a message saying what to
// install; under CI=true, where .ci/run installs every such program, it fails instead:
// CI never skips a test.
package testtool

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Missing ends the test because the program what is not installed: a failure under
// CI=true, a skip otherwise. install says how to get it.
func Missing(t testing.TB, what, install string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed, and CI=true: .ci/run installs it (%s)", what, install)
		return
	}
	t.Skipf("%s is not installed (%s)", what, install)
}

// Deps returns the import paths of pkg and of every package it depends on, as `go list
// -deps` prints them (test files excluded), with the go command of the toolchain that
// runs the test.
func Deps(t testing.TB, pkg string) []string {
	t.Helper()
	goBin := goTool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v%s", pkg, err, stderrOf(err))
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatalf("go list -deps %s listed nothing", pkg)
	}
	return deps
}

// goTool returns the go command of the toolchain that `go env GOROOT` names.
func goTool(t testing.TB) string {
	t.Helper()
	name := "go"
	if p, err := exec.LookPath("go"); err == nil {
		name = p
	} else if root := os.Getenv("GOROOT"); root != "" {
		name = filepath.Join(root, "bin", "go")
	} else {
		Missing(t, "the go command (neither on PATH nor under GOROOT)", "install Go or set GOROOT")
	}
	out, err := exec.Command(name, "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("%s env GOROOT: %v%s", name, err, stderrOf(err))
	}
	root := strings.TrimSpace(string(out))
	if root == "" {
		t.Fatalf("%s env GOROOT printed nothing", name)
	}
	return filepath.Join(root, "bin", "go")
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}
