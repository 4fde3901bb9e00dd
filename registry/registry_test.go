package registry

import (
	"testing"
	"time"
)

// TestWithJitter_Bounds checks the jitter is there and stays within wait/16.
func TestWithJitter_Bounds(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := withJitter(160 * time.Millisecond)
		if d < 160*time.Millisecond || d >= 170*time.Millisecond {
			t.Fatalf("%s", d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Fatalf("only %d distinct waits in 1000: no jitter", len(seen))
	}
	if d := withJitter(10 * time.Nanosecond); d != 10*time.Nanosecond {
		t.Fatalf("%s", d)
	}
}
