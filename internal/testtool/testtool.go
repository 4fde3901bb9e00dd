// Package testtool is for tests that need a program the machine may lack (dig,
// Chromium, MariaDB). Outside CI such a test is skipped with a message saying what to
// install; under CI=true, where .ci/run installs every such program, it fails instead:
// CI never skips a test.
package testtool

import (
	"os"
	"testing"
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
