// Package wait is the one poll-with-deadline helper of Roster's tests: a test waits on
// a condition, never for a fixed time.
package wait

import (
	"testing"
	"time"
)

// Interval is how often For checks its condition.
const Interval = 5 * time.Millisecond

// For polls cond every Interval until it holds and returns how long that took; when
// timeout passes first, it fails the test naming what it waited for.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(Interval)
	}
	return time.Since(start)
}
