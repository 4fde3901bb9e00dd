package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
)

// FailoverConfig describes one failover trial: write load on every member, then the
// leader is killed with SIGKILL and the trial measures how long it takes until a write
// sent afterwards to a surviving member succeeds.
type FailoverConfig struct {
	// System is SystemRoster or SystemEtcd.
	System string
	// Endpoints are every member's HTTP address, the leader's included.
	Endpoints []string
	// Leader is the endpoint of the member to kill (one of Endpoints).
	Leader string
	// KillPID is the process of Leader.
	KillPID int
	// Workers is the number of closed-loop writers before the kill (0 = 8).
	Workers int
	// Load is how long writes run before the kill (0 = 1s).
	Load time.Duration
	// ProbeEvery is the interval at which, after the kill, a new write is started through
	// a survivor whatever the earlier ones are doing (0 = 10ms): it is the resolution of the
	// measurement, since a write stuck in a dead leader's pipeline never succeeds.
	ProbeEvery time.Duration
	// Timeout bounds each write (0 = 5s); MaxWait bounds the whole recovery (0 = 60s).
	Timeout, MaxWait time.Duration
	// HealthChecks keeps Roster's default health checks on the written services.
	HealthChecks bool
	// Kill sends the signal; nil means syscall.Kill(pid, SIGKILL).
	Kill func(pid int) error
}

// FailoverResult is the outcome of one trial.
type FailoverResult struct {
	System string `json:"system"`
	Killed string `json:"killed"`
	PID    int    `json:"pid"`
	// Seconds is the time from the kill to the completion of the first successful write
	// started after it through a survivor.
	Seconds float64 `json:"seconds"`
	// Survivor is the endpoint that accepted that write.
	Survivor string `json:"survivor"`
	// LoadWrites and LoadErrors count writes completed before the kill.
	LoadWrites uint64 `json:"load_writes"`
	LoadErrors uint64 `json:"load_errors"`
	// Probes is the number of writes started after the kill; FailedAfterKill those of
	// them that failed before the first success.
	Probes          uint64 `json:"probes"`
	FailedAfterKill uint64 `json:"failed_after_kill"`
	LastError       string `json:"last_error,omitempty"`
}

// Failover runs one trial (see FailoverConfig).
func Failover(ctx context.Context, cfg FailoverConfig) (*FailoverResult, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.Load <= 0 {
		cfg.Load = time.Second
	}
	if cfg.ProbeEvery <= 0 {
		cfg.ProbeEvery = 10 * time.Millisecond
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 60 * time.Second
	}
	if cfg.Kill == nil {
		cfg.Kill = func(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
	}
	if cfg.KillPID <= 0 {
		return nil, errors.New("bench: failover needs the leader's pid")
	}
	leader := baseURL(cfg.Leader)
	var survivors []string
	for _, e := range cfg.Endpoints {
		if baseURL(e) != leader {
			survivors = append(survivors, e)
		}
	}
	if len(survivors) == len(cfg.Endpoints) || len(survivors) == 0 {
		return nil, fmt.Errorf("bench: leader %s must be one of several endpoints %v", cfg.Leader, cfg.Endpoints)
	}
	maxProbes := int(cfg.Timeout/cfg.ProbeEvery) + 1
	base := ClientConfig{System: cfg.System, WriteTarget: TargetAll, ReadTarget: TargetAll, Timeout: cfg.Timeout, HealthChecks: cfg.HealthChecks}
	pre := base
	pre.Endpoints, pre.MaxConns = cfg.Endpoints, cfg.Workers+4
	before, err := NewClient(ctx, pre)
	if err != nil {
		return nil, err
	}
	defer before.Close()
	post := base
	post.Endpoints, post.MaxConns = survivors, maxProbes
	after, err := NewClient(ctx, post)
	if err != nil {
		return nil, err
	}
	defer after.Close()

	if err := prepareServices(ctx, before, svcNames("bench-failover-%d", 10)); err != nil {
		return nil, err
	}
	gen := newAddrGen()
	nextKey := func(w int) (InstanceKey, uint64) {
		k, g := gen.next(10)
		k.Service = fmt.Sprintf("bench-failover-%d", w%10)
		return k, g
	}

	// Load: closed-loop writers over every member until the kill.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var (
		loadOK, loadErr atomic.Uint64
		lastErr         atomic.Value
		wg              sync.WaitGroup
	)
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for loadCtx.Err() == nil {
				k, g := nextKey(w)
				_, err := before.Register(loadCtx, w, k, g)
				if loadCtx.Err() != nil {
					return
				}
				if err != nil {
					loadErr.Add(1)
					lastErr.Store(err.Error())
				} else {
					loadOK.Add(1)
				}
			}
		}(w)
	}
	select {
	case <-time.After(cfg.Load):
	case <-ctx.Done():
	}
	if loadOK.Load() == 0 || ctx.Err() != nil {
		stopLoad()
		wg.Wait()
		msg, _ := lastErr.Load().(string)
		return nil, fmt.Errorf("bench: no write succeeded before the kill (%d errors) %s", loadErr.Load(), msg)
	}

	// Kill, then probe: a new write through a survivor every ProbeEvery.
	kill := time.Now()
	if err := cfg.Kill(cfg.KillPID); err != nil {
		stopLoad()
		wg.Wait()
		return nil, fmt.Errorf("bench: kill %d: %w", cfg.KillPID, err)
	}
	stopLoad()
	res := &FailoverResult{System: cfg.System, Killed: cfg.Leader, PID: cfg.KillPID, LoadWrites: loadOK.Load(), LoadErrors: loadErr.Load()}

	probeCtx, stopProbes := context.WithTimeout(ctx, cfg.MaxWait)
	defer stopProbes()
	var (
		failed    atomic.Uint64
		firstOnce sync.Once
		first     = make(chan struct{})
		firstAt   time.Time
		firstVia  string
		inFlight  = make(chan struct{}, maxProbes)
		probes    int
	)
	tick := time.NewTicker(cfg.ProbeEvery)
	defer tick.Stop()
probing:
	for {
		select {
		case inFlight <- struct{}{}:
			w := probes
			probes++
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-inFlight }()
				k, g := nextKey(w)
				_, err := after.Register(probeCtx, w, k, g)
				done := time.Now()
				if err == nil {
					firstOnce.Do(func() {
						firstAt, firstVia = done, pick(survivors, w)
						close(first)
					})
					return
				}
				if probeCtx.Err() == nil && !isClosed(first) {
					failed.Add(1)
					lastErr.Store(err.Error())
				}
			}()
		default:
			// Every probe slot is busy; wait for the next tick.
		}
		select {
		case <-first:
			break probing
		case <-probeCtx.Done():
			break probing
		case <-tick.C:
		}
	}
	stopProbes()
	wg.Wait()
	res.Probes = uint64(probes)
	res.FailedAfterKill = failed.Load()
	res.LastError, _ = lastErr.Load().(string)
	if firstAt.IsZero() {
		return res, fmt.Errorf("bench: no write succeeded within %s of the kill", cfg.MaxWait)
	}
	res.Seconds = firstAt.Sub(kill).Seconds()
	res.Survivor = firstVia
	return res, nil
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// FailoverSummary aggregates the trials of one system.
type FailoverSummary struct {
	System   string    `json:"system"`
	Trials   int       `json:"trials"`
	Failed   int       `json:"failed"` // trials with no successful write within MaxWait
	Median   float64   `json:"median_s"`
	Max      float64   `json:"max_s"`
	Min      float64   `json:"min_s"`
	Seconds  []float64 `json:"seconds"`
	Failures []string  `json:"failures,omitempty"`
}

// SummarizeFailover groups trials by system (in order of first appearance) and returns
// each system's median, min and max recovery time over its successful trials. A trial
// with Seconds ≤ 0 counts as failed.
func SummarizeFailover(trials []FailoverResult) []FailoverSummary {
	var order []string
	by := map[string]*FailoverSummary{}
	for _, tr := range trials {
		s := by[tr.System]
		if s == nil {
			s = &FailoverSummary{System: tr.System}
			by[tr.System] = s
			order = append(order, tr.System)
		}
		s.Trials++
		if tr.Seconds <= 0 {
			s.Failed++
			s.Failures = append(s.Failures, tr.LastError)
			continue
		}
		s.Seconds = append(s.Seconds, tr.Seconds)
	}
	out := make([]FailoverSummary, 0, len(order))
	for _, name := range order {
		s := by[name]
		if len(s.Seconds) > 0 {
			s.Median = median(s.Seconds)
			s.Min, s.Max = s.Seconds[0], s.Seconds[0]
			for _, v := range s.Seconds {
				s.Min, s.Max = min(s.Min, v), max(s.Max, v)
			}
		}
		out = append(out, *s)
	}
	return out
}

// WriteFailoverTable prints one row per system: trials, failures, median, min, max (s).
func WriteFailoverTable(w io.Writer, sums []FailoverSummary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\ttrials\tfailed\tmedian s\tmin s\tmax s\t")
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%.3f\t%.3f\t\n", s.System, s.Trials, s.Failed, s.Median, s.Min, s.Max)
	}
	return tw.Flush()
}
