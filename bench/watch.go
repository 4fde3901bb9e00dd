package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// watchService is the service the watch workload writes and its watchers follow.
const watchService = "bench-watch"

// watcher is the latest index one watcher has seen and when it first saw it.
type watcher struct {
	mu    sync.Mutex
	idx   uint64
	at    time.Time
	wake  chan struct{} // closed and replaced whenever idx grows
	ready chan struct{} // closed at the first report (the watch is established)
	isUp  bool
}

func newWatcher() *watcher {
	return &watcher{wake: make(chan struct{}), ready: make(chan struct{})}
}

func (w *watcher) seen(idx uint64, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.isUp {
		w.isUp = true
		close(w.ready)
	}
	if idx <= w.idx {
		return
	}
	w.idx, w.at = idx, at
	close(w.wake)
	w.wake = make(chan struct{})
}

// waitFor returns when the watcher has seen an index ≥ idx, with the time it saw it.
func (w *watcher) waitFor(ctx context.Context, idx uint64) (time.Time, error) {
	for {
		w.mu.Lock()
		if w.idx >= idx {
			at := w.at
			w.mu.Unlock()
			return at, nil
		}
		wake := w.wake
		w.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// windowGate reports whether the measurement window is open.
type windowGate struct{ open atomic.Bool }

func (g *windowGate) WindowStart(time.Time) { g.open.Store(true) }
func (g *windowGate) WindowEnd(time.Time)   { g.open.Store(false) }

// prepareWatch starts n watchers on watchService and returns a one-worker plan whose Op
// writes the service once and returns when every watcher has seen the write. The
// runner's latency is thus the time from issuing a write to the last watcher seeing it;
// Extra adds the per-delivery latency and the write latency alone.
func prepareWatch(ctx context.Context, c Client, spec Spec, n int) (*Plan, error) {
	key := fixedKey(watchService, 0)
	if err := c.PrepareService(ctx, watchService); err != nil {
		return nil, fmt.Errorf("setup watch: %w", err)
	}
	if _, err := c.Register(ctx, 0, key, 1); err != nil {
		return nil, fmt.Errorf("setup watch: %w", err)
	}
	// A follower may not have applied the registration yet: wait until the service is
	// readable, in the watchers' mode, wherever the first watchers will connect.
	for w := 0; w < min(n, 8); w++ {
		if err := pollRead(ctx, c, w, watchService, spec.Consistency); err != nil {
			return nil, fmt.Errorf("setup watch: %w", err)
		}
	}
	wctx, cancel := context.WithCancel(context.Background())
	var (
		wg          sync.WaitGroup
		watchErrors atomic.Uint64
		lastErr     atomic.Value
		fatalOnce   sync.Once
		fatal       = make(chan struct{}) // closed on an error that retrying cannot cure
	)
	ws := make([]*watcher, n)
	for i := range ws {
		ws[i] = newWatcher()
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for wctx.Err() == nil {
				err := c.Watch(wctx, i, watchService, spec.Consistency, ws[i].seen)
				if err == nil || wctx.Err() != nil {
					return
				}
				watchErrors.Add(1)
				lastErr.Store(err.Error())
				if permanentWatchError(err) {
					fatalOnce.Do(func() { close(fatal) })
					return
				}
				select {
				case <-time.After(50 * time.Millisecond):
				case <-wctx.Done():
				}
			}
		}(i)
	}
	closeAll := func() { cancel(); wg.Wait() }
	setupCtx, setupCancel := context.WithTimeout(ctx, 60*time.Second)
	defer setupCancel()
	for i, wt := range ws {
		select {
		case <-wt.ready:
		case <-fatal:
			closeAll()
			msg, _ := lastErr.Load().(string)
			return nil, fmt.Errorf("setup watch: watcher %d: %s", i, msg)
		case <-setupCtx.Done():
			closeAll()
			msg, _ := lastErr.Load().(string)
			return nil, fmt.Errorf("setup watch: watcher %d not established: %v (last watch error: %s)", i, setupCtx.Err(), msg)
		}
	}

	gate := &windowGate{}
	var (
		mu        sync.Mutex
		delivery  = NewHistogram()
		writeLat  = NewHistogram()
		gen       atomic.Uint64
		timeoutOf = 30 * time.Second
	)
	gen.Store(uint64(time.Now().UnixNano()))
	op := func(ctx context.Context, w int) error {
		t0 := time.Now()
		idx, err := c.Register(ctx, w, key, gen.Add(1))
		if err != nil {
			return err
		}
		acked := time.Now()
		wctx, cancel := context.WithTimeout(ctx, timeoutOf)
		defer cancel()
		ats := make([]time.Time, len(ws))
		for i, wt := range ws {
			at, err := wt.waitFor(wctx, idx)
			if err != nil {
				return fmt.Errorf("watcher %d did not see index %d within %s", i, idx, timeoutOf)
			}
			ats[i] = at
		}
		if gate.open.Load() {
			mu.Lock()
			writeLat.Record(acked.Sub(t0))
			for _, at := range ats {
				delivery.Record(at.Sub(t0))
			}
			mu.Unlock()
		}
		return nil
	}
	return &Plan{
		Workers:   1,
		Op:        op,
		Observers: []WindowObserver{gate},
		Close:     closeAll,
		Notes: func() []string {
			if msg, _ := lastErr.Load().(string); msg != "" {
				return []string{fmt.Sprintf("%d watch reconnects, last: %s", watchErrors.Load(), msg)}
			}
			return nil
		},
		Extra: func() map[string]float64 {
			mu.Lock()
			defer mu.Unlock()
			return map[string]float64{
				"watchers":         float64(n),
				"deliveries":       float64(delivery.Count()),
				"delivery_p50_ms":  ms(delivery.Percentile(0.50)),
				"delivery_p99_ms":  ms(delivery.Percentile(0.99)),
				"delivery_max_ms":  ms(delivery.Max()),
				"write_ack_p50_ms": ms(writeLat.Percentile(0.50)),
				"write_ack_p99_ms": ms(writeLat.Percentile(0.99)),
				"watch_reconnects": float64(watchErrors.Load()),
			}
		},
	}, nil
}

// permanentWatchError reports an error that a new watch would meet again: the server
// does not stream, or the mode cannot be streamed.
func permanentWatchError(err error) bool {
	return errors.Is(err, errNoSSE) || errors.Is(err, errSSEStale)
}

// ms converts a duration to float milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pollRead retries a read of service by worker w until it succeeds (up to 10s).
func pollRead(ctx context.Context, c Client, w int, service, mode string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, err := c.Read(ctx, w, service, mode)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
