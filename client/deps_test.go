package client_test

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

// clientPkg is the package whose dependencies TestClient_Dependencies checks.
const clientPkg = "github.com/rosterhq/roster/client"

// TestClient_Dependencies keeps the Go client light: a program that imports it must not
// pull in the server's storage, Raft or encodings, nor any Roster package but the wire
// types (api) and the client itself.
func TestClient_Dependencies(t *testing.T) {
	goBin := goTool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "list", "-deps", clientPkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v%s", clientPkg, err, stderrOf(err))
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatalf("go list -deps %s listed nothing", clientPkg)
	}
	for _, dep := range deps {
		for _, banned := range []string{"bbolt", "hashicorp/raft", "msgpack"} {
			if strings.Contains(dep, banned) {
				t.Errorf("the client depends on %s", dep)
			}
		}
		if rest, ok := strings.CutPrefix(dep, "github.com/rosterhq/roster/"); ok && rest != "api" && rest != "client" {
			t.Errorf("the client depends on %s; only api and client are allowed", dep)
		}
	}
}

// goTool returns the go command of the toolchain that `go env GOROOT` names.
func goTool(t *testing.T) string {
	t.Helper()
	name := "go"
	if p, err := exec.LookPath("go"); err == nil {
		name = p
	} else if root := os.Getenv("GOROOT"); root != "" {
		name = filepath.Join(root, "bin", "go")
	} else if os.Getenv("CI") != "" {
		t.Fatal("no go command on PATH and GOROOT is not set, and CI is set")
	} else {
		t.Skip("no go command on PATH and GOROOT is not set")
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
