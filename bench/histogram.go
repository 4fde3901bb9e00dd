// Package bench is Roster's load generator: closed-loop HTTP workloads (register,
// deregister, read, mixed, watch) against a Roster cluster's native API or an etcd
// cluster's JSON gateway, with latency histograms, CPU accounting and reports, and the
// SSE fan-out benchmark (Fanout) of many subscribers on one Roster node.
package bench

import (
	"math"
	"math/bits"
	"time"
)

// subBucketBits sets the histogram's precision: each power-of-two range of values is
// split into 2^subBucketBits equal buckets, so a recorded value is reported with a
// relative error below 2^-subBucketBits (under 0.8%).
const subBucketBits = 7

// maxTrackable is the largest latency the histogram distinguishes; larger values are
// counted in the last bucket (and still reported exactly by Max).
const maxTrackable = time.Duration(1) << maxTrackableBits // about 18 minutes

const maxTrackableBits = 40

const subBuckets = 1 << subBucketBits

// numBuckets covers every value from 0 to maxTrackable (== bucketIndex(maxTrackable)+1).
const numBuckets = (maxTrackableBits-subBucketBits+1)<<subBucketBits + 1

// Histogram records durations in logarithmic buckets of bounded relative error. Its
// memory is fixed (a few tens of KiB) whatever the number of samples. The zero value is
// not usable; call NewHistogram. A Histogram is not safe for concurrent use: give each
// goroutine its own and Merge them.
type Histogram struct {
	counts []uint64
	count  uint64
	sum    float64 // nanoseconds
	min    time.Duration
	max    time.Duration
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{counts: make([]uint64, numBuckets), min: math.MaxInt64}
}

// bucketIndex maps a value to its bucket: values below 2*subBuckets map to themselves;
// above, each power of two gets subBuckets buckets.
func bucketIndex(v uint64) int {
	msb := bits.Len64(v) - 1
	if msb <= subBucketBits {
		return int(v)
	}
	shift := msb - subBucketBits
	return (shift+1)<<subBucketBits + int(v>>uint(shift)) - subBuckets
}

// bucketUpper is the largest value that maps to bucket i.
func bucketUpper(i int) uint64 {
	if i < 2*subBuckets {
		return uint64(i)
	}
	shift := i>>subBucketBits - 1
	lower := uint64(i&(subBuckets-1)+subBuckets) << uint(shift)
	return lower + (uint64(1) << uint(shift)) - 1
}

// Record adds one sample. Negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	v := d
	if v > maxTrackable {
		v = maxTrackable
	}
	h.counts[bucketIndex(uint64(v))]++
	h.count++
	h.sum += float64(d)
	if d < h.min {
		h.min = d
	}
	if d > h.max {
		h.max = d
	}
}

// Merge adds every sample of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.count == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.count += o.count
	h.sum += o.sum
	if o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
}

// Count is the number of samples recorded.
func (h *Histogram) Count() uint64 { return h.count }

// Max is the largest sample recorded, exactly (0 when empty).
func (h *Histogram) Max() time.Duration {
	if h.count == 0 {
		return 0
	}
	return h.max
}

// Min is the smallest sample recorded, exactly (0 when empty).
func (h *Histogram) Min() time.Duration {
	if h.count == 0 {
		return 0
	}
	return h.min
}

// Mean is the exact mean of the samples (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.count))
}

// Percentile returns the value at quantile q (0 < q ≤ 1, for example 0.99): the
// smallest recorded value v such that at least q of the samples are ≤ v, reported as
// the upper end of v's bucket, clamped to [Min, Max]. Its relative error is below
// 2^-7. It returns 0 when the histogram is empty.
func (h *Histogram) Percentile(q float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	if q <= 0 {
		return h.min
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(math.Ceil(q * float64(h.count)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := time.Duration(bucketUpper(i))
			if v > h.max {
				v = h.max
			}
			if v < h.min {
				v = h.min
			}
			return v
		}
	}
	return h.max
}
