package bench

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

func TestHistogram_Percentiles(t *testing.T) {
	seq := func(from, to, step time.Duration) []time.Duration {
		var out []time.Duration
		for v := from; v <= to; v += step {
			out = append(out, v)
		}
		return out
	}
	tests := []struct {
		name    string
		samples []time.Duration
		q       float64
		want    time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"single", []time.Duration{3 * time.Millisecond}, 0.99, 3 * time.Millisecond},
		{"small values are exact p50", seq(1, 100, 1), 0.50, 50},
		{"small values are exact p90", seq(1, 100, 1), 0.90, 90},
		{"small values are exact p99", seq(1, 100, 1), 0.99, 99},
		{"1..1000ms p50", seq(time.Millisecond, time.Second, time.Millisecond), 0.50, 500 * time.Millisecond},
		{"1..1000ms p90", seq(time.Millisecond, time.Second, time.Millisecond), 0.90, 900 * time.Millisecond},
		{"1..1000ms p99", seq(time.Millisecond, time.Second, time.Millisecond), 0.99, 990 * time.Millisecond},
		{"1..1000ms max", seq(time.Millisecond, time.Second, time.Millisecond), 1, time.Second},
		{"1..1000ms min", seq(time.Millisecond, time.Second, time.Millisecond), 0, time.Millisecond},
		{"outlier is p99 of 100", append(seq(time.Millisecond, 99*time.Millisecond, time.Millisecond), 5*time.Second), 0.995, 5 * time.Second},
		{"beyond trackable clamps to max", []time.Duration{time.Hour}, 0.5, time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistogram()
			for _, s := range tc.samples {
				h.Record(s)
			}
			got := h.Percentile(tc.q)
			diff := got - tc.want
			if diff < 0 {
				diff = -diff
			}
			if float64(diff) > float64(tc.want)/128 {
				t.Fatalf("Percentile(%v) = %v, want %v (±1/128)", tc.q, got, tc.want)
			}
		})
	}
}

func TestHistogram_MatchesSortedSamples(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	h := NewHistogram()
	var all []time.Duration
	for i := 0; i < 20000; i++ {
		// Log-normal-ish spread from microseconds to seconds.
		d := time.Duration(float64(time.Microsecond) * (1 + r.ExpFloat64()*r.ExpFloat64()*2000))
		all = append(all, d)
		h.Record(d)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := all[int(q*float64(len(all)))-1]
		got := h.Percentile(q)
		if got < exact || float64(got-exact) > float64(exact)/128 {
			t.Errorf("q=%v: got %v, exact %v", q, got, exact)
		}
	}
	if h.Max() != all[len(all)-1] || h.Min() != all[0] {
		t.Errorf("min/max %v/%v, want %v/%v", h.Min(), h.Max(), all[0], all[len(all)-1])
	}
	if h.Count() != uint64(len(all)) {
		t.Errorf("count %d", h.Count())
	}
}

func TestHistogram_MergeAddsSamples(t *testing.T) {
	a, b := NewHistogram(), NewHistogram()
	for i := 1; i <= 50; i++ {
		a.Record(time.Duration(i) * time.Millisecond)
		b.Record(time.Duration(50+i) * time.Millisecond)
	}
	a.Merge(b)
	if a.Count() != 100 || a.Max() != 100*time.Millisecond || a.Min() != time.Millisecond {
		t.Fatalf("merged count %d min %v max %v", a.Count(), a.Min(), a.Max())
	}
	if p := a.Percentile(0.75); p < 75*time.Millisecond || p > 76*time.Millisecond {
		t.Fatalf("p75 %v", p)
	}
	if m := a.Mean(); m < 50*time.Millisecond || m > 51*time.Millisecond {
		t.Fatalf("mean %v", m)
	}
}

func TestHistogram_BucketsRoundTrip(t *testing.T) {
	if got := bucketIndex(uint64(maxTrackable)) + 1; got != numBuckets {
		t.Fatalf("numBuckets %d, want %d", numBuckets, got)
	}
	for i := 0; i < numBuckets; i++ {
		up := bucketUpper(i)
		if bucketIndex(up) != i {
			t.Fatalf("bucket %d: upper %d maps to %d", i, up, bucketIndex(up))
		}
		if i > 0 && bucketIndex(bucketUpper(i-1)+1) != i {
			t.Fatalf("bucket %d does not start right after bucket %d", i, i-1)
		}
	}
}
