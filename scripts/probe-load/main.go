// Command probe-load measures the health prober: the CPU it needs for N instances and
// how late its probes start, and how long it takes to detect a dead instance.
//
// Load: a child process (this binary with -serve N) holds N loopback TCP listeners
// that accept and close (-check http: that answer GET with 200); the prober, in this process, probes them through a real store
// for -duration after -warmup. Reported: probes per second, CPU of this process
// (getrusage; cores = CPU seconds / wall seconds) and of the listener process, and the
// schedule-lag percentiles from the prober's histogram (interpolated within buckets).
//
// Detection (-detect): -kills in-process listeners probed every -detect-interval with
// fall -detect-fall; after a warm-up they are closed one by one, -kill-every apart, and
// the time from each close to the SetHealth command carrying its transition is reported.
//
//	go run ./scripts/probe-load -n 1000,10000 -interval 5s -duration 30s -detect
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/healthcheck"
	"github.com/rosterhq/roster/internal/procstat"
	"github.com/rosterhq/roster/internal/testnet"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

var svc = model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "load"}

func main() {
	var (
		serve      = flag.Int("serve", 0, "internal: hold this many listeners and print their ports")
		check      = flag.String("check", "tcp", "check type of the load runs: tcp or http")
		counts     = flag.String("n", "1000,10000", "comma-separated instance counts for the load runs (empty: none)")
		interval   = flag.Duration("interval", 5*time.Second, "probe interval of the load runs")
		duration   = flag.Duration("duration", 30*time.Second, "measurement window of each load run")
		warmup     = flag.Duration("warmup", 5*time.Second, "time before the window opens")
		cpuprofile = flag.String("cpuprofile", "", "write a CPU profile of the last load window to this file")
		detect     = flag.Bool("detect", false, "also measure detection latency")
		kills      = flag.Int("kills", 50, "listeners closed in the detection run")
		detectIv   = flag.Duration("detect-interval", time.Second, "probe interval of the detection run")
		detectFall = flag.Int("detect-fall", 2, "fall of the detection run")
		killEvery  = flag.Duration("kill-every", 137*time.Millisecond, "time between two closes in the detection run")
	)
	flag.Parse()
	if *serve > 0 {
		if err := serveListeners(*serve, *check == "http"); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		return
	}
	raiseNofile()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fmt.Printf("GOMAXPROCS=%d NumCPU=%d %s\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.Version())
	for _, f := range strings.Split(*counts, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			fatal(err)
		}
		if err := runLoad(n, *check == "http", *interval, *warmup, *duration, *cpuprofile, logger); err != nil {
			fatal(err)
		}
	}
	if *detect {
		if err := runDetect(*kills, *detectIv, *detectFall, *killEvery, logger); err != nil {
			fatal(err)
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "probe-load:", err)
	os.Exit(1)
}

// raiseNofile lifts the soft descriptor limit to the hard one.
func raiseNofile() {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
}

// serveListeners is the child: n listeners that accept and close (or answer HTTP GETs
// with 200), their ports on stdout, until stdin closes.
func serveListeners(n int, serveHTTP bool) error {
	raiseNofile()
	w := bufio.NewWriter(os.Stdout)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		if serveHTTP {
			srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), ReadHeaderTimeout: 10 * time.Second}
			go func() { _ = srv.Serve(ln) }()
		} else {
			testnet.Serve(ln, nil)
		}
		fmt.Fprintln(w, ln.Addr().(*net.TCPAddr).Port)
	}
	fmt.Fprintln(w, "READY")
	if err := w.Flush(); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// storeApplier applies SetHealth straight to the store with increasing indexes, and
// records when each instance's transitions were submitted.
type storeApplier struct {
	st *store.Store
	mu sync.Mutex
	// idx is the last index used.
	idx  uint64
	subs map[model.InstanceRef][]submission
}

type submission struct {
	at      time.Time
	healthy bool
}

func (a *storeApplier) Apply(_ context.Context, cmd fsm.Command) (uint64, error) {
	now := time.Now()
	req, ok := cmd.(fsm.SetHealthAtRequest)
	if !ok {
		return 0, fmt.Errorf("unexpected command %s", cmd.MessageType())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, u := range req.Updates {
		a.subs[u.Ref] = append(a.subs[u.Ref], submission{at: now, healthy: u.Healthy})
	}
	a.idx++
	if _, err := a.st.SetHealthAt(a.idx, req.Updates, req.At); err != nil {
		return 0, err
	}
	return a.idx, nil
}

func (a *storeApplier) firstUnhealthy(ref model.InstanceRef) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.subs[ref] {
		if !s.healthy {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// openStore creates a store holding one TCP cluster and an instance per port.
func openStore(dir string, ports []int, hc model.HealthCheck) (*store.Store, *storeApplier, []model.Instance, error) {
	st, err := store.Open(filepath.Join(dir, "state.db"), store.Options{NoSync: true})
	if err != nil {
		return nil, nil, nil, err
	}
	ins := make([]model.Instance, len(ports))
	idx := uint64(1)
	err = st.Update(func(tx *store.Txn) error {
		if err := tx.UpsertCluster(idx, model.Cluster{Namespace: svc.Namespace, Group: svc.Group, Service: svc.Service,
			Name: model.DefaultCluster, HealthCheck: hc}); err != nil {
			return err
		}
		for i, p := range ports {
			idx++
			ins[i] = model.Instance{Namespace: svc.Namespace, Group: svc.Group, Service: svc.Service,
				IP: "127.0.0.1", Port: p, Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true}
			if err := tx.RegisterInstance(idx, ins[i]); err != nil {
				return err
			}
		}
		return tx.SetAppliedIndex(idx)
	})
	if err != nil {
		_ = st.Close()
		return nil, nil, nil, err
	}
	return st, &storeApplier{st: st, idx: idx, subs: make(map[model.InstanceRef][]submission)}, ins, nil
}

func runLoad(n int, useHTTP bool, interval, warmup, window time.Duration, cpuprofile string, logger *slog.Logger) error {
	kind := "tcp"
	if useHTTP {
		kind = "http"
	}
	child := exec.Command(os.Args[0], "-serve", strconv.Itoa(n), "-check", kind)
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	if err := child.Start(); err != nil {
		return err
	}
	defer func() {
		_ = stdin.Close()
		_ = child.Wait()
	}()
	ports := make([]int, 0, n)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "READY" {
		p, err := strconv.Atoi(sc.Text())
		if err != nil {
			return err
		}
		ports = append(ports, p)
	}
	if len(ports) != n {
		return fmt.Errorf("listener process gave %d ports, want %d", len(ports), n)
	}

	dir, err := os.MkdirTemp("", "probe-load")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	hc := model.HealthCheck{Type: model.CheckTCP, Interval: model.Duration(interval),
		Timeout: model.Duration(min(2*time.Second, interval/2)), Rise: 2, Fall: 3}
	if useHTTP {
		hc.Type, hc.Path = model.CheckHTTP, "/health"
	}
	st, app, _, err := openStore(dir, ports, hc)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()

	reg := prometheus.NewRegistry()
	p, err := healthcheck.NewProber(healthcheck.Config{Registerer: reg, Policy: loopbackPolicy()}, st, app, logger)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	time.Sleep(warmup)

	before, err := gather(reg)
	if err != nil {
		return err
	}
	childBefore := procCPU(child.Process.Pid)
	cpuBefore := selfCPU()
	start := time.Now()
	var prof *os.File
	if cpuprofile != "" {
		if prof, err = os.Create(cpuprofile); err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(prof); err != nil {
			return err
		}
	}
	time.Sleep(window)
	if prof != nil {
		pprof.StopCPUProfile()
		_ = prof.Close()
	}
	wall := time.Since(start)
	cpu := selfCPU().minus(cpuBefore)
	childCPU := procCPU(child.Process.Pid) - childBefore
	after, err := gather(reg)
	if err != nil {
		return err
	}

	ok := after.counter("roster_health_probes_total", "outcome", "success") - before.counter("roster_health_probes_total", "outcome", "success")
	failed := after.counter("roster_health_probes_total", "outcome", "failure") - before.counter("roster_health_probes_total", "outcome", "failure")
	skipped := after.counter("roster_health_probes_skipped_total", "", "") - before.counter("roster_health_probes_skipped_total", "", "")
	lag := after.histogram("roster_health_schedule_lag_seconds").minus(before.histogram("roster_health_schedule_lag_seconds"))
	lat := after.histogram("roster_health_probe_duration_seconds").minus(before.histogram("roster_health_probe_duration_seconds"))
	fmt.Printf("\n== load: %d instances, %s every %s, window %s (after %s warm-up)\n", n, hc.Type, interval, wall.Round(time.Millisecond), warmup)
	fmt.Printf("probes: %.0f ok, %.0f failed, %.0f skipped rounds; %.0f/s (expected %.0f/s)\n",
		ok, failed, skipped, (ok+failed)/wall.Seconds(), float64(n)/interval.Seconds())
	fmt.Printf("prober process CPU: %.2fs (user %.2fs, sys %.2fs) over %.1fs = %.3f cores (%.1f µs per probe)\n",
		cpu.total().Seconds(), cpu.user.Seconds(), cpu.sys.Seconds(), wall.Seconds(),
		cpu.total().Seconds()/wall.Seconds(), cpu.total().Seconds()/(ok+failed)*1e6)
	if childCPU >= 0 {
		fmt.Printf("listener process CPU (not part of the prober): %.3f cores\n", childCPU.Seconds()/wall.Seconds())
	}
	fmt.Printf("schedule lag: p50 %s  p90 %s  p99 %s  p99.9 %s  max ≤ %s (n=%d)\n",
		fmtSec(lag.quantile(0.5)), fmtSec(lag.quantile(0.9)), fmtSec(lag.quantile(0.99)), fmtSec(lag.quantile(0.999)), fmtSec(lag.maxBound()), lag.count)
	fmt.Printf("probe latency: p50 %s  p99 %s\n", fmtSec(lat.quantile(0.5)), fmtSec(lat.quantile(0.99)))
	return nil
}

func runDetect(kills int, interval time.Duration, fall int, every time.Duration, logger *slog.Logger) error {
	lns := make([]net.Listener, kills)
	ports := make([]int, kills)
	defer func() {
		for _, ln := range lns {
			if ln != nil {
				_ = ln.Close()
			}
		}
	}()
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
			}
		}()
		lns[i], ports[i] = ln, ln.Addr().(*net.TCPAddr).Port
	}
	dir, err := os.MkdirTemp("", "probe-load")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	timeout := min(500*time.Millisecond, interval/2)
	hc := model.HealthCheck{Type: model.CheckTCP, Interval: model.Duration(interval),
		Timeout: model.Duration(timeout), Rise: 2, Fall: fall}
	st, app, ins, err := openStore(dir, ports, hc)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	cfg := healthcheck.Config{Policy: loopbackPolicy()}
	if err := cfg.Validate(); err != nil {
		return err
	}
	p, err := healthcheck.NewProber(cfg, st, app, logger)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)

	// Warm-up: every instance probed successfully at least once.
	deadline := time.Now().Add(interval + 10*time.Second)
	for {
		rs, running := p.Results(svc)
		n := 0
		for _, r := range rs {
			if r.ConsecutiveSuccesses > 0 {
				n++
			}
		}
		if running && n == kills {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("detection warm-up did not finish")
		}
		time.Sleep(10 * time.Millisecond)
	}

	closed := make([]time.Time, kills)
	for i, ln := range lns {
		closed[i] = time.Now()
		_ = ln.Close()
		time.Sleep(every)
	}
	bound := time.Duration(fall)*interval + timeout + cfg.FlushInterval
	deadline = time.Now().Add(bound + 5*time.Second)
	lat := make([]time.Duration, 0, kills)
	for len(lat) < kills {
		lat = lat[:0]
		for i, in := range ins {
			if at, ok := app.firstUnhealthy(in.Ref()); ok {
				lat = append(lat, at.Sub(closed[i]))
			}
		}
		if len(lat) < kills && time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d closes detected", len(lat), kills)
		}
		time.Sleep(10 * time.Millisecond)
	}
	slices.Sort(lat)
	q := func(f float64) time.Duration { return lat[int(math.Ceil(f*float64(len(lat))))-1] }
	fmt.Printf("\n== detection: %d listeners closed %s apart; interval %s, timeout %s, fall %d, flush window %s\n",
		kills, every, interval, timeout, fall, cfg.FlushInterval)
	fmt.Printf("close → SetHealth submitted: min %s  p50 %s  p90 %s  max %s  (bound fall×interval+timeout+flush = %s)\n",
		lat[0].Round(time.Millisecond), q(0.5).Round(time.Millisecond), q(0.9).Round(time.Millisecond),
		lat[len(lat)-1].Round(time.Millisecond), bound)
	return nil
}

// cpuTime is a process's CPU time.
type cpuTime struct{ user, sys time.Duration }

func (c cpuTime) total() time.Duration { return c.user + c.sys }

func (c cpuTime) minus(o cpuTime) cpuTime { return cpuTime{c.user - o.user, c.sys - o.sys} }

// selfCPU is this process's CPU time (getrusage).
func selfCPU() cpuTime {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTime{}
	}
	return cpuTime{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

// procCPU reads another process's user+system CPU time from /proc (-1 if unavailable).
func procCPU(pid int) time.Duration {
	d, err := procstat.CPUTime(pid)
	if err != nil {
		return -1
	}
	return d
}

type families map[string]*dto.MetricFamily

func gather(reg *prometheus.Registry) (families, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	out := make(families, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out, nil
}

// counter sums the family's counters whose label has the value (label "": all).
func (f families) counter(name, label, value string) float64 {
	mf := f[name]
	if mf == nil {
		return 0
	}
	sum := 0.0
	for _, m := range mf.GetMetric() {
		if label == "" || slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
			return l.GetName() == label && l.GetValue() == value
		}) {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// hist is a classic histogram: cumulative counts per upper bound.
type hist struct {
	bounds []float64
	cum    []uint64
	count  uint64
}

// histogram merges the family's series.
func (f families) histogram(name string) hist {
	var h hist
	mf := f[name]
	if mf == nil {
		return h
	}
	for _, m := range mf.GetMetric() {
		mh := m.GetHistogram()
		if h.bounds == nil {
			for _, b := range mh.GetBucket() {
				h.bounds = append(h.bounds, b.GetUpperBound())
			}
			h.cum = make([]uint64, len(h.bounds))
		}
		for i, b := range mh.GetBucket() {
			h.cum[i] += b.GetCumulativeCount()
		}
		h.count += mh.GetSampleCount()
	}
	return h
}

func (h hist) minus(o hist) hist {
	r := hist{bounds: h.bounds, cum: slices.Clone(h.cum), count: h.count - o.count}
	for i := range r.cum {
		if i < len(o.cum) {
			r.cum[i] -= o.cum[i]
		}
	}
	return r
}

// quantile interpolates linearly inside the bucket holding the q-quantile.
func (h hist) quantile(q float64) float64 {
	if h.count == 0 {
		return math.NaN()
	}
	rank := q * float64(h.count)
	lower, prev := 0.0, uint64(0)
	for i, b := range h.bounds {
		if float64(h.cum[i]) >= rank {
			inBucket := float64(h.cum[i] - prev)
			if inBucket == 0 {
				return b
			}
			return lower + (b-lower)*(rank-float64(prev))/inBucket
		}
		lower, prev = b, h.cum[i]
	}
	return math.Inf(1)
}

// maxBound is the upper bound of the highest non-empty bucket.
func (h hist) maxBound() float64 {
	prev := uint64(0)
	top := math.NaN()
	for i, b := range h.bounds {
		if h.cum[i] > prev {
			top = b
		}
		prev = h.cum[i]
	}
	if h.count > prev {
		return math.Inf(1)
	}
	return top
}

func fmtSec(s float64) string {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return fmt.Sprint(s)
	}
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond).String()
}

// loopbackPolicy confines the benchmark's probes to this machine.
func loopbackPolicy() healthcheck.Policy {
	p, err := healthcheck.ParsePolicy(healthcheck.LoopbackOnly, "")
	if err != nil {
		panic(err)
	}
	return p
}
