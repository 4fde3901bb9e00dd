package healthcheck

import (
	"testing"
	"time"
)

// Each failure doubles the wait from the floor up to maxRetryBackoff; until the wait is
// over the backoff holds; a success starts it over at the floor.
func TestBackoff_DoublesFromTheFloorToTheCapAndStartsOver(t *testing.T) {
	now := time.Unix(1000, 0)
	var b backoff
	if b.holds(now) {
		t.Fatal("a backoff that never failed holds")
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, maxRetryBackoff, maxRetryBackoff}
	for i, w := range want {
		if got := b.failed(now, firstRetry); got != w {
			t.Fatalf("failure %d: wait %s, want %s", i+1, got, w)
		}
	}
	if !b.holds(now.Add(maxRetryBackoff-time.Millisecond)) || b.holds(now.Add(maxRetryBackoff)) {
		t.Fatalf("holds until %s, want until %s", b.at, now.Add(maxRetryBackoff))
	}
	b.succeeded()
	if b.holds(now) {
		t.Fatal("holds after a success")
	}
	if got := b.failed(now, time.Second); got != time.Second {
		t.Fatalf("first failure after a success: wait %s, want the floor 1s", got)
	}
}
