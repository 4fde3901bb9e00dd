package healthcheck

import "testing"

func TestStep_RiseFall(t *testing.T) {
	tests := []struct {
		name     string
		start    hstate
		outcomes string // s = success, f = failure
		rise     int
		fall     int
		want     hstate
		flips    int
	}{
		{"unhealthy rises after rise successes", hstate{}, "ss", 2, 3, hstate{healthy: true, succ: 2}, 1},
		{"unhealthy stays below rise", hstate{}, "s", 2, 3, hstate{succ: 1}, 0},
		{"failure resets the successes", hstate{}, "sfs", 2, 3, hstate{succ: 1}, 0},
		{"healthy falls after fall failures", hstate{healthy: true}, "fff", 2, 3, hstate{fail: 3}, 1},
		{"healthy stays below fall", hstate{healthy: true}, "ff", 2, 3, hstate{healthy: true, fail: 2}, 0},
		{"success resets the failures", hstate{healthy: true}, "ffsff", 2, 3, hstate{healthy: true, fail: 2}, 0},
		{"success keeps healthy", hstate{healthy: true}, "sss", 2, 3, hstate{healthy: true, succ: 3}, 0},
		{"failure keeps unhealthy", hstate{}, "ff", 2, 3, hstate{fail: 2}, 0},
		{"rise and fall of one flip at once", hstate{}, "sf", 1, 1, hstate{fail: 1}, 2},
		{"flap needs the full count again", hstate{healthy: true}, "fffssf", 2, 3, hstate{healthy: true, fail: 1}, 2},
		{"counters carried from before", hstate{succ: 1}, "s", 2, 3, hstate{healthy: true, succ: 2}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, flips := tc.start, 0
			for _, c := range tc.outcomes {
				var flipped bool
				s, flipped = step(s, c == 's', tc.rise, tc.fall)
				if flipped {
					flips++
				}
			}
			if s != tc.want || flips != tc.flips {
				t.Fatalf("got %+v with %d flips, want %+v with %d", s, flips, tc.want, tc.flips)
			}
		})
	}
}

func TestStep_CountersSaturate(t *testing.T) {
	s := hstate{healthy: true, succ: maxCount}
	s, _ = step(s, true, 2, 3)
	if s.succ != maxCount {
		t.Fatalf("succ = %d, want saturated at %d", s.succ, maxCount)
	}
}
