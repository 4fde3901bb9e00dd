package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// SuiteConfig is a set of points to measure against one system: every workload, in
// every applicable consistency mode and service size, at every concurrency.
type SuiteConfig struct {
	Client        ClientConfig
	Workloads     []string
	Consistencies []string // read, mixed and watch
	Instances     []int    // read
	Concurrency   []int
	Warmup        time.Duration
	Duration      time.Duration
	// Services, ReadRatio and Pool are passed to every Spec (see Spec).
	Services  int
	ReadRatio float64
	Pool      int
	// RegisterLimit is passed to the register workload's Spec (see Spec).
	RegisterLimit int
	// CPUPids are the cluster processes whose CPU use is reported per point.
	CPUPids []int
	// Label is copied into every Result (for example the round number).
	Label string
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
}

// Validate rejects unknown names and empty lists and fills defaults.
func (c *SuiteConfig) Validate() error {
	if len(c.Workloads) == 0 {
		return fmt.Errorf("bench: no workloads")
	}
	known := map[string]bool{}
	for _, w := range Workloads() {
		known[w] = true
	}
	for _, w := range c.Workloads {
		if !known[w] {
			return fmt.Errorf("bench: unknown workload %q (want one of %s)", w, strings.Join(Workloads(), ", "))
		}
	}
	if len(c.Consistencies) == 0 {
		c.Consistencies = []string{Linearizable}
	}
	for _, m := range c.Consistencies {
		if m != Linearizable && m != Leader && m != Stale {
			return fmt.Errorf("bench: unknown consistency %q (want %s, %s or %s)", m, Linearizable, Leader, Stale)
		}
	}
	if len(c.Instances) == 0 {
		c.Instances = []int{10}
	}
	for _, n := range c.Instances {
		if n <= 0 || n > 65536 {
			return fmt.Errorf("bench: instances %d out of range 1..65536", n)
		}
	}
	if len(c.Concurrency) == 0 {
		return fmt.Errorf("bench: no concurrency levels")
	}
	for _, n := range c.Concurrency {
		if n <= 0 {
			return fmt.Errorf("bench: concurrency %d must be positive", n)
		}
	}
	if c.Duration <= 0 {
		return fmt.Errorf("bench: duration must be positive")
	}
	if c.Warmup < 0 {
		return fmt.Errorf("bench: warm-up must not be negative")
	}
	if c.RegisterLimit < 0 {
		return fmt.Errorf("bench: register limit must not be negative")
	}
	if err := validWatchTransport(c.Client.WatchTransport); err != nil {
		return err
	}
	if c.Client.System == SystemRoster && c.Client.WatchTransportOrDefault() == WatchSSE {
		for _, w := range c.Workloads {
			if w != WorkloadWatch {
				continue
			}
			for _, m := range c.Consistencies {
				if m != Stale {
					return fmt.Errorf("bench: watch in mode %s: %w", m, errSSEStale)
				}
			}
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Specs expands the configuration into workload specs, in the order they run.
func (c *SuiteConfig) Specs() []Spec {
	var out []Spec
	base := Spec{Services: c.Services, ReadRatio: c.ReadRatio, Pool: c.Pool, RegisterLimit: c.RegisterLimit}
	for _, w := range c.Workloads {
		s := base
		s.Workload = w
		switch w {
		case WorkloadRead:
			for _, n := range c.Instances {
				for _, m := range c.Consistencies {
					s.Instances, s.Consistency = n, m
					out = append(out, s)
				}
			}
		case WorkloadMixed, WorkloadWatch:
			for _, m := range c.Consistencies {
				s.Consistency = m
				out = append(out, s)
			}
		default:
			out = append(out, s)
		}
	}
	return out
}

// RunSuite measures every point of cfg in turn and returns the results. progress, when
// not nil, receives each result's table row as soon as it is measured.
func RunSuite(ctx context.Context, cfg SuiteConfig, progress io.Writer) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	maxConc := 0
	for _, n := range cfg.Concurrency {
		maxConc = max(maxConc, n)
	}
	cc := cfg.Client
	if cc.MaxConns == 0 {
		cc.MaxConns = maxConc + 16
	}
	client, err := NewClient(ctx, cc)
	if err != nil {
		return nil, err
	}
	defer client.Close()

	var results []Result
	for _, spec := range cfg.Specs() {
		for _, conc := range cfg.Concurrency {
			r, err := RunPoint(ctx, client, cfg, spec, conc)
			if err != nil {
				return results, fmt.Errorf("%s %s c=%d: %w", client.System(), spec.Workload, conc, err)
			}
			results = append(results, r)
			if progress != nil {
				if err := WriteTable(progress, []Result{r}); err != nil {
					return results, err
				}
			}
		}
	}
	return results, nil
}

// RunPoint prepares spec, measures it at concurrency conc and returns the result.
func RunPoint(ctx context.Context, client Client, cfg SuiteConfig, spec Spec, conc int) (Result, error) {
	cfg.Logger.Info("point", "system", client.System(), "workload", spec.Workload, "consistency", spec.Consistency,
		"instances", spec.Instances, "concurrency", conc)
	plan, err := Prepare(ctx, client, spec, conc)
	if err != nil {
		return Result{}, err
	}
	if plan.Close != nil {
		defer plan.Close()
	}
	self := NewCPUMeter([]int{0})
	machine := NewMachineMeter()
	obs := append([]WindowObserver{self, machine}, plan.Observers...)
	var server *CPUMeter
	if len(cfg.CPUPids) > 0 {
		server = NewCPUMeter(cfg.CPUPids)
		obs = append(obs, server)
	}
	started := time.Now()
	st, err := Run(ctx, RunConfig{Workers: plan.Workers, Warmup: cfg.Warmup, Duration: cfg.Duration, Observers: obs}, plan.Op)
	if err != nil {
		return Result{}, err
	}
	r := Result{
		System:        client.System(),
		Workload:      spec.Workload,
		Concurrency:   conc,
		Label:         cfg.Label,
		Started:       started,
		WindowSeconds: st.Elapsed.Seconds(),
		Requests:      st.Requests,
		Errors:        st.Errors,
		RPS:           st.Throughput(),
		Latency:       Summarize(st.Latency),
		ServerCPU:     -1,
		Exhausted:     st.Exhausted,
		ErrorSamples:  st.ErrorSamples(),
	}
	switch spec.Workload {
	case WorkloadRead:
		r.Consistency, r.Instances = spec.Consistency, spec.Instances
	case WorkloadMixed, WorkloadWatch:
		r.Consistency = spec.Consistency
	}
	if spec.Workload == WorkloadWatch && client.System() == SystemRoster {
		r.WatchTransport = cfg.Client.WatchTransportOrDefault()
	}
	if spec.Workload == WorkloadRead || spec.Workload == WorkloadMixed || spec.Workload == WorkloadWatch {
		if cfg.Client.ReadTarget == TargetAll {
			r.ReadTarget = TargetAll
		}
	}
	r.ClientCPU, _ = self.Cores()
	r.OtherCPU = -1
	if server != nil {
		cores, err := server.Cores()
		if err != nil {
			cfg.Logger.Warn("server cpu", "err", err)
		}
		r.ServerCPU = cores
		if all, err := machine.Cores(); err == nil {
			r.OtherCPU = max(0, all-cores-r.ClientCPU)
		}
	}
	if plan.Extra != nil {
		r.Extra = plan.Extra()
	}
	if plan.Notes != nil {
		r.ErrorSamples = append(r.ErrorSamples, plan.Notes()...)
	}
	return r, nil
}

// SystemVersion asks the system for its version string (etcd's GET /version); it
// returns "" when the system does not say.
func SystemVersion(ctx context.Context, system string, endpoint string) string {
	if system != SystemEtcd {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL(endpoint)+"/version", nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	_, b, _ := drain(resp)
	return b
}
