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

// Until is For of a condition that says why it does not hold yet: the failure names
// its last reason.
func Until(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, why string)) time.Duration {
	t.Helper()
	why := ""
	d := For(&reasoned{TB: t, why: &why}, timeout, what, func() bool {
		ok, w := cond()
		why = w
		return ok
	})
	return d
}

// reasoned adds the last reason to a failure of For.
type reasoned struct {
	testing.TB
	why *string
}

func (r *reasoned) Fatalf(format string, args ...any) {
	r.TB.Helper()
	r.TB.Fatalf(format+": %s", append(args, *r.why)...)
}
