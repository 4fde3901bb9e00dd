package bench

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// ErrExhausted is returned by an Op that has nothing left to do (for example a
// deregister workload whose pool of instances is empty). The runner then stops every
// worker and ends the measurement window at that moment; the point is reported with
// Exhausted set.
var ErrExhausted = errors.New("bench: workload exhausted")

// Op performs one request on behalf of a worker (0 ≤ worker < Workers). It is called
// concurrently for distinct workers and never concurrently for the same worker.
type Op func(ctx context.Context, worker int) error

// RunConfig describes one closed-loop measurement.
type RunConfig struct {
	// Workers is the number of closed-loop workers; each has at most one request in flight.
	Workers int
	// Warmup is run before the measurement window; its requests are not counted.
	Warmup time.Duration
	// Duration is the length of the measurement window.
	Duration time.Duration
	// Grace bounds how long the runner waits, after the window, for requests still in
	// flight before cancelling them (0 = 10s).
	Grace time.Duration
	// Observers are told when the measurement window starts and ends.
	Observers []WindowObserver
	// MaxErrorKinds bounds the distinct error messages kept (0 = 8).
	MaxErrorKinds int
}

// WindowObserver is notified of the measurement window's boundaries, for example to
// sample processes' CPU time over exactly the measured interval.
type WindowObserver interface {
	WindowStart(t time.Time)
	WindowEnd(t time.Time)
}

// Stats is the outcome of one Run. Only requests that completed inside the measurement
// window are counted; Latency holds the successful ones.
type Stats struct {
	Workers   int
	Elapsed   time.Duration // length of the measurement window actually used
	Requests  uint64        // successful requests completed in the window
	Errors    uint64        // failed requests completed in the window
	Latency   *Histogram
	ErrorKind map[string]uint64 // error message → count (bounded, see RunConfig.MaxErrorKinds)
	Exhausted bool              // the window was cut short by ErrExhausted
}

// Throughput is successful requests per second over the window.
func (s *Stats) Throughput() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Requests) / s.Elapsed.Seconds()
}

// ErrorSamples lists the recorded error messages, most frequent first, as "count× msg".
func (s *Stats) ErrorSamples() []string {
	type kv struct {
		msg string
		n   uint64
	}
	var all []kv
	for m, n := range s.ErrorKind {
		all = append(all, kv{m, n})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].msg < all[j].msg
	})
	out := make([]string, 0, len(all))
	for _, e := range all {
		out = append(out, fmt.Sprintf("%d× %s", e.n, e.msg))
	}
	return out
}

type workerStats struct {
	hist   *Histogram
	ok     uint64
	failed uint64
	kinds  map[string]uint64
}

// Run drives cfg.Workers closed-loop workers calling op until the warm-up and the
// measurement window have passed (or ctx is done, or op returns ErrExhausted). A worker
// issues its next request as soon as the previous one completes. Requests completing in
// [window start, window end) are counted; those in flight at the end are awaited (up to
// Grace) but not counted. Run returns an error only for an invalid configuration, a
// cancelled ctx, or a workload exhausted before the window began.
func Run(ctx context.Context, cfg RunConfig, op Op) (*Stats, error) {
	if cfg.Workers <= 0 {
		return nil, fmt.Errorf("bench: workers must be positive, got %d", cfg.Workers)
	}
	if cfg.Duration <= 0 {
		return nil, fmt.Errorf("bench: duration must be positive, got %s", cfg.Duration)
	}
	if cfg.Warmup < 0 {
		return nil, fmt.Errorf("bench: warm-up must not be negative, got %s", cfg.Warmup)
	}
	grace := cfg.Grace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	maxKinds := cfg.MaxErrorKinds
	if maxKinds <= 0 {
		maxKinds = 8
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	start := time.Now()
	winStart := start.Add(cfg.Warmup)
	winEnd := winStart.Add(cfg.Duration)

	var (
		stop        atomic.Bool
		exhaustOnce sync.Once
		exhaustedAt atomic.Int64 // UnixNano; 0 = not exhausted
		stopCh      = make(chan struct{})
	)
	// windowEnd is the effective end: the planned end, or the exhaustion moment.
	windowEnd := func() time.Time {
		if n := exhaustedAt.Load(); n != 0 {
			return time.Unix(0, n)
		}
		return winEnd
	}

	per := make([]*workerStats, cfg.Workers)
	var wg sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		ws := &workerStats{hist: NewHistogram(), kinds: map[string]uint64{}}
		per[w] = ws
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for !stop.Load() && runCtx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(winEnd) {
					return
				}
				err := op(runCtx, w)
				t1 := time.Now()
				if errors.Is(err, ErrExhausted) {
					exhaustOnce.Do(func() {
						exhaustedAt.Store(t1.UnixNano())
						stop.Store(true)
						close(stopCh)
					})
					return
				}
				if t1.Before(winStart) || !t1.Before(windowEnd()) {
					continue
				}
				if err != nil {
					ws.failed++
					msg := err.Error()
					if _, ok := ws.kinds[msg]; ok || len(ws.kinds) < maxKinds {
						ws.kinds[msg]++
					}
					continue
				}
				ws.ok++
				ws.hist.Record(t1.Sub(t0))
			}
		}(w)
	}

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// Window boundaries for the observers.
	startedWindow := false
	select {
	case <-time.After(time.Until(winStart)):
		startedWindow = true
		for _, o := range cfg.Observers {
			o.WindowStart(winStart)
		}
	case <-stopCh:
	case <-ctx.Done():
	}
	if startedWindow {
		select {
		case <-time.After(time.Until(winEnd)):
		case <-stopCh:
		case <-ctx.Done():
		}
		end := windowEnd()
		for _, o := range cfg.Observers {
			o.WindowEnd(end)
		}
	}
	// Let requests in flight finish, then cancel the stragglers.
	select {
	case <-done:
	case <-time.After(time.Until(winEnd.Add(grace))):
		cancel()
		<-done
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	st := &Stats{Workers: cfg.Workers, Latency: NewHistogram(), ErrorKind: map[string]uint64{}}
	end := windowEnd()
	if end.Before(winStart) || end.Equal(winStart) {
		return nil, fmt.Errorf("bench: workload exhausted during warm-up (%s after start)", end.Sub(start).Round(time.Millisecond))
	}
	st.Elapsed = end.Sub(winStart)
	st.Exhausted = exhaustedAt.Load() != 0 && end.Before(winEnd)
	for _, ws := range per {
		st.Requests += ws.ok
		st.Errors += ws.failed
		st.Latency.Merge(ws.hist)
		for m, n := range ws.kinds {
			if _, ok := st.ErrorKind[m]; ok || len(st.ErrorKind) < maxKinds {
				st.ErrorKind[m] += n
			}
		}
	}
	return st, nil
}
