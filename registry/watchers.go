package registry

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/internal/prom"
)

// ErrTooManyWatchers refuses a blocking query or a stream beyond the node's limit (429).
var ErrTooManyWatchers = errors.New("too many watchers")

// WatchRetryAfter is the Retry-After a refused watcher is answered with, in seconds.
const WatchRetryAfter = 5

// Watchers bounds how many blocking queries and streams a node holds at once: each is a
// connection, a goroutine or a subscription for as long as the client wants, and
// without a bound enough of them exhaust the node's descriptors and memory and starve
// everything else it does, Raft included. The nil *Watchers allows everything.
type Watchers struct {
	max      int64
	n        atomic.Int64
	open     prometheus.GaugeFunc
	refusals prometheus.Counter
	maxGauge prometheus.Gauge
}

// NewWatchers returns a limit of max concurrent watchers (max ≤ 0: no limit) whose
// metrics reg receives (nil: none).
func NewWatchers(limit int, reg prometheus.Registerer) (*Watchers, error) {
	w := &Watchers{max: int64(limit)}
	w.refusals = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "roster_watchers_refused_total", Help: "Blocking queries and streams refused with 429 because the node held its limit of them.",
	})
	w.maxGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "roster_watchers_max", Help: "The most blocking queries and streams this node holds at once (0: no limit).",
	})
	w.maxGauge.Set(float64(max(limit, 0)))
	w.open = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "roster_watchers", Help: "Blocking queries and streams this node holds now.",
	}, func() float64 { return float64(w.n.Load()) })
	if reg != nil {
		var err error
		if w.refusals, err = prom.Register(reg, w.refusals); err != nil {
			return nil, err
		}
		if w.maxGauge, err = prom.Register(reg, w.maxGauge); err != nil {
			return nil, err
		}
		if _, err = prom.Register(reg, prometheus.Collector(w.open)); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Acquire takes a place for one watcher, or says there is none. Every successful
// Acquire needs one Release.
func (w *Watchers) Acquire() bool {
	if w == nil {
		return true
	}
	if n := w.n.Add(1); w.max > 0 && n > w.max {
		w.n.Add(-1)
		w.refusals.Inc()
		return false
	}
	return true
}

// Release gives a place back.
func (w *Watchers) Release() {
	if w != nil {
		w.n.Add(-1)
	}
}

// Held returns the number of watchers held now.
func (w *Watchers) Held() int {
	if w == nil {
		return 0
	}
	return int(w.n.Load())
}

// refused is the error of a refused watcher.
func (w *Watchers) refused() error {
	return fmt.Errorf("%w: this node holds %d blocking queries and streams, its limit (--max-watchers); retry in %d s or at another node",
		ErrTooManyWatchers, w.max, WatchRetryAfter)
}
