package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rosterhq/roster/client/sse"
	"github.com/rosterhq/roster/internal/procstat"
)

// FanoutConfig configures Fanout: Watchers SSE subscribers on one node, then Writes
// writes to the service they follow, one at a time.
type FanoutConfig struct {
	// Endpoint is the node the subscribers connect to; Others are the cluster's other
	// members. Writes go to the leader among them; a side client samples every member's
	// Raft last contact.
	Endpoint string
	Others   []string
	// Watchers is the number of subscribers (0 = 10,000); each is one TCP connection with
	// one goroutine, a read buffer of BufferSize bytes (0 = 2048) and the SSE parser's own
	// 256 bytes.
	Watchers   int
	BufferSize int
	// Writes is the number of writes (0 = 20); each re-registers one instance of the
	// service and waits until every subscriber saw it (or WriteTimeout, 0 = 60s), then
	// WriteGap passes (0 = 100ms; negative = none).
	Writes       int
	WriteTimeout time.Duration
	WriteGap     time.Duration
	// Instances is the size of the service followed (0 = 10); Service its name (""
	// = "bench-fanout"). Its instances have loopback addresses and no health check.
	Instances int
	Service   string
	// PID is Endpoint's server process, whose RSS, open files and CPU are reported (0 =
	// unknown).
	PID int
	// Baseline is how long the side client samples before the subscribers are opened (0 =
	// 2s); Idle how long it samples once they all have their first event (0 = 2s), before
	// the RSS after opening is taken. ProbeEvery is the side client's period (0 = 10ms).
	Baseline, Idle, ProbeEvery time.Duration
	// OpenConcurrency bounds the subscribers connecting at once (0 = 64); OpenTimeout
	// bounds the time until all have their first event (0 = 5m).
	OpenConcurrency int
	OpenTimeout     time.Duration
	// HeartbeatInterval is the leader's heartbeat interval the last-contact samples are
	// compared with (0 = 50ms, Roster's default: a 500ms heartbeat timeout / 10).
	HeartbeatInterval time.Duration
	// Verify decodes every event's JSON and checks its index against the id; by default
	// the subscribers read the id only, to keep the client's CPU low.
	Verify bool
	// Timeout bounds each setup request, write and side-client request (0 = 10s).
	Timeout time.Duration
	// Progress receives one line per phase (nil = none).
	Progress io.Writer
}

func (c *FanoutConfig) defaults() error {
	if c.Endpoint == "" {
		return errors.New("bench: fanout needs an endpoint")
	}
	set := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	seti := func(d *int, v int) {
		if *d == 0 {
			*d = v
		}
	}
	seti(&c.Watchers, 10000)
	seti(&c.BufferSize, 2048)
	seti(&c.Writes, 20)
	seti(&c.Instances, 10)
	seti(&c.OpenConcurrency, 64)
	set(&c.WriteTimeout, 60*time.Second)
	set(&c.WriteGap, 100*time.Millisecond)
	set(&c.Baseline, 2*time.Second)
	set(&c.Idle, 2*time.Second)
	set(&c.ProbeEvery, 10*time.Millisecond)
	set(&c.OpenTimeout, 5*time.Minute)
	set(&c.HeartbeatInterval, 50*time.Millisecond)
	set(&c.Timeout, 10*time.Second)
	if c.WriteGap < 0 {
		c.WriteGap = 0
	}
	if c.Service == "" {
		c.Service = "bench-fanout"
	}
	if c.Watchers < 0 || c.Writes < 0 || c.Instances < 1 || c.BufferSize < 16 || c.OpenConcurrency < 1 {
		return fmt.Errorf("bench: fanout: bad sizes (watchers %d, writes %d, instances %d, buffer %d, open concurrency %d)",
			c.Watchers, c.Writes, c.Instances, c.BufferSize, c.OpenConcurrency)
	}
	return nil
}

// FanoutResult is what Fanout measured.
type FanoutResult struct {
	Meta Meta `json:"meta"`
	// Endpoint is the subscribers' node, Role its role when the run started ("leader" or
	// "follower"), Leader the leader's endpoint.
	Endpoint  string `json:"endpoint"`
	Role      string `json:"role"`
	Leader    string `json:"leader"`
	Service   string `json:"service"`
	Instances int    `json:"instances"`
	Watchers  int    `json:"watchers"`
	// Established is the number of subscribers that got their first event; OpenSeconds
	// the time from the first connection to the last first event.
	Established int     `json:"established"`
	OpenSeconds float64 `json:"open_s"`
	// Reconnects counts streams a subscriber had to open again (after an error or the end
	// of a stream; it resumes with Last-Event-ID); ErrorSamples the last errors.
	Reconnects   uint64   `json:"reconnects"`
	ErrorSamples []string `json:"error_samples,omitempty"`
	// Server is Endpoint's process (-1 where unknown), Client this process.
	Server FanoutProcess `json:"server"`
	Client FanoutProcess `json:"client"`
	// RSSPerWatcherKiB is the server's RSS growth from before opening to idle with every
	// subscriber established, divided by Watchers.
	RSSPerWatcherKiB float64 `json:"rss_per_watcher_kib"`
	// ClientRSSPerWatcherKiB is the same for this process.
	ClientRSSPerWatcherKiB float64 `json:"client_rss_per_watcher_kib"`
	// Writes, WriteErrors and the write latency (issue → ack).
	Writes      int     `json:"writes"`
	WriteErrors int     `json:"write_errors"`
	WriteAck    Latency `json:"write_ack"`
	// Deliveries counts (write, subscriber) pairs delivered; Missing those not delivered
	// within WriteTimeout; BeforeAck those received before the write's ack (counted as 0
	// in DeliveryAfterAck).
	Deliveries uint64 `json:"deliveries"`
	Missing    uint64 `json:"missing"`
	BeforeAck  uint64 `json:"before_ack"`
	// DeliveryAfterAck is ack → received over every delivery, DeliveryAfterStart issue →
	// received, AllSeenAfterAck per write: ack → the last subscriber received it.
	DeliveryAfterAck   Latency       `json:"delivery_after_ack"`
	DeliveryAfterStart Latency       `json:"delivery_after_start"`
	AllSeenAfterAck    Latency       `json:"all_seen_after_ack"`
	PerWrite           []FanoutWrite `json:"per_write"`
	// Phases are the side client's samples, per phase: baseline (before opening), open,
	// idle (every subscriber established) and writes.
	Phases              []FanoutPhase `json:"phases"`
	ProbeEveryMS        float64       `json:"probe_every_ms"`
	HeartbeatIntervalMS float64       `json:"heartbeat_interval_ms"`
}

// FanoutProcess is a process's RSS (KiB), open files and goroutines before opening,
// when idle with every subscriber established, and after the writes; -1 where unknown.
type FanoutProcess struct {
	PID              int   `json:"pid"`
	RSSBeforeKiB     int64 `json:"rss_before_kib"`
	RSSIdleKiB       int64 `json:"rss_idle_kib"`
	RSSAfterKiB      int64 `json:"rss_after_kib"`
	PeakRSSKiB       int64 `json:"peak_rss_kib"`
	FDsBefore        int   `json:"fds_before"`
	FDsIdle          int   `json:"fds_idle"`
	GoroutinesBefore int   `json:"goroutines_before"`
	GoroutinesIdle   int   `json:"goroutines_idle"`
}

// unknownProcess is a FanoutProcess with every figure unknown.
func unknownProcess(pid int) FanoutProcess {
	return FanoutProcess{PID: pid, RSSBeforeKiB: -1, RSSIdleKiB: -1, RSSAfterKiB: -1, PeakRSSKiB: -1,
		FDsBefore: -1, FDsIdle: -1, GoroutinesBefore: -1, GoroutinesIdle: -1}
}

// FanoutWrite is one write: its index, ack latency and the delivery latencies after
// the ack (ms).
type FanoutWrite struct {
	Index   uint64  `json:"index"`
	AckMS   float64 `json:"ack_ms"`
	P50MS   float64 `json:"p50_ms"`
	P99MS   float64 `json:"p99_ms"`
	MaxMS   float64 `json:"max_ms"`
	Missing int     `json:"missing"`
}

// FanoutPhase is the side client's view of one phase: the latency of GET
// /v1/status/ready and of a stale instances read on the subscribers' node, every
// member's largest Raft last contact (X-Roster-Last-Contact, ms) and the number of its
// samples above the heartbeat interval, and the CPU of the server and of this process.
type FanoutPhase struct {
	Name           string             `json:"name"`
	Seconds        float64            `json:"seconds"`
	Ready          ProbeStats         `json:"ready"`
	StaleRead      ProbeStats         `json:"stale_read"`
	LastContactMax map[string]float64 `json:"last_contact_max_ms"`
	LateContacts   map[string]uint64  `json:"last_contact_over_heartbeat"`
	ServerCPU      float64            `json:"server_cpu_cores"`
	ClientCPU      float64            `json:"client_cpu_cores"`
}

// ProbeStats summarises one kind of side-client request.
type ProbeStats struct {
	Count     uint64  `json:"count"`
	Errors    uint64  `json:"errors"`
	Latency   Latency `json:"latency"`
	LastError string  `json:"last_error,omitempty"`
}

// fanEvent is one event a subscriber received.
type fanEvent struct {
	idx uint64
	at  time.Time
}

// fanSub is one subscriber's state, shared with the writer.
type fanSub struct {
	mu      sync.Mutex
	ready   bool
	idx     uint64
	ring    [4]fanEvent // the last events of higher index, oldest overwritten
	n       int
	counted int // the last write this subscriber was counted for
}

// fanGoal is the write the subscribers are waited for.
type fanGoal struct {
	k       int
	idx     uint64
	pending atomic.Int64
	done    chan struct{}
}

type fanout struct {
	cfg      FanoutConfig
	host     string
	request  string // the request without Last-Event-ID and the final CRLF
	subs     []*fanSub
	goal     atomic.Pointer[fanGoal]
	ready    atomic.Int64
	allReady chan struct{}
	fatal    chan struct{}
	fatalErr atomic.Value
	fatalOne sync.Once

	reconnects atomic.Uint64
	errMu      sync.Mutex
	errs       []string
}

// Fanout opens cfg.Watchers SSE subscribers on cfg.Endpoint, waits until each has its
// first event, then makes cfg.Writes writes one at a time and records, for every
// subscriber, when it received each; a side client samples the node's responsiveness and
// every member's Raft last contact throughout. It returns what it measured so far along
// with an error.
func Fanout(ctx context.Context, cfg FanoutConfig) (*FanoutResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	ep := baseURL(cfg.Endpoint)
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("bench: fanout endpoint %q: %v", cfg.Endpoint, err)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("bench: fanout endpoint %q: only http", cfg.Endpoint)
	}
	if err := ensureOpenFiles(cfg.Watchers+256, "this process"); err != nil {
		return nil, err
	}
	if cfg.PID > 0 {
		if lim, err := procstat.OpenFilesLimit(cfg.PID); err == nil && lim < int64(cfg.Watchers+64) {
			return nil, fmt.Errorf("bench: the server (pid %d) may open %d files, too few for %d subscribers: start it with a higher ulimit -n",
				cfg.PID, lim, cfg.Watchers)
		}
	}
	eps := append([]string{ep}, cfg.Others...)
	for i := range eps {
		eps[i] = baseURL(eps[i])
	}
	c, err := NewClient(ctx, ClientConfig{System: SystemRoster, Endpoints: eps, WriteTarget: TargetLeader, ReadTarget: TargetAll,
		Timeout: cfg.Timeout, MaxConns: 4})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	leader := c.(*rosterClient).writeTo[0]
	res := &FanoutResult{Endpoint: ep, Leader: leader, Role: "follower", Service: cfg.Service, Instances: cfg.Instances,
		Watchers: cfg.Watchers, ProbeEveryMS: ms(cfg.ProbeEvery), HeartbeatIntervalMS: ms(cfg.HeartbeatInterval)}
	if leader == ep {
		res.Role = "leader"
	}
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "== %s fanout: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
		}
	}

	// The service: Instances loopback instances, health check NONE, readable on the node.
	if err := ensureService(ctx, c, cfg.Service, cfg.Instances); err != nil {
		return nil, err
	}
	if err := waitInstances(ctx, c, cfg.Service, cfg.Instances); err != nil {
		return nil, err
	}

	f := &fanout{cfg: cfg, host: u.Host, subs: make([]*fanSub, cfg.Watchers),
		allReady: make(chan struct{}), fatal: make(chan struct{})}
	f.request = "GET " + rosterPrefix + cfg.Service + "/instances HTTP/1.1\r\nHost: " + u.Host +
		"\r\nAccept: text/event-stream\r\nCache-Control: no-cache\r\nUser-Agent: roster-bench-fanout\r\n"
	for i := range f.subs {
		f.subs[i] = &fanSub{}
	}
	if cfg.Watchers == 0 {
		close(f.allReady)
	}

	sampler := newFanSampler(cfg, ep, eps)
	sampler.start(ctx)
	defer sampler.stop()

	// Baseline.
	sampler.phase("baseline")
	progress("baseline: side client on %s for %s (%s is the %s)", ep, cfg.Baseline, ep, res.Role)
	if err := sleepCtx(ctx, cfg.Baseline); err != nil {
		return res, err
	}
	res.Server, res.Client = unknownProcess(cfg.PID), unknownProcess(os.Getpid())
	res.Server.RSSBeforeKiB, res.Server.FDsBefore = procRSS(cfg.PID, "VmRSS"), procFDs(cfg.PID)
	res.Server.GoroutinesBefore = goroutinesOf(ctx, ep)
	res.Client.RSSBeforeKiB, res.Client.FDsBefore = procRSS(0, "VmRSS"), procFDs(0)
	res.Client.GoroutinesBefore = runtime.NumGoroutine()

	// Open.
	sampler.phase("open")
	progress("opening %d subscribers (%d at a time)", cfg.Watchers, cfg.OpenConcurrency)
	subCtx, stopSubs := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stopSubs(); wg.Wait() }()
	openStart := time.Now()
	sem := make(chan struct{}, cfg.OpenConcurrency)
	wg.Add(1) // the opener, so that its Adds never race with Wait
	go func() {
		defer wg.Done()
		for i, s := range f.subs {
			select {
			case sem <- struct{}{}:
			case <-subCtx.Done():
				return
			}
			wg.Add(1)
			go func(i int, s *fanSub) {
				defer wg.Done()
				f.run(subCtx, s, func() { <-sem })
			}(i, s)
		}
	}()
	openTimer := time.NewTimer(cfg.OpenTimeout)
	defer openTimer.Stop()
	select {
	case <-f.allReady:
	case <-f.fatal:
	case <-openTimer.C:
	case <-ctx.Done():
	}
	res.Established = int(f.ready.Load())
	res.OpenSeconds = time.Since(openStart).Seconds()
	finish := func() {
		res.Reconnects = f.reconnects.Load()
		res.ErrorSamples = f.errorSamples()
		res.Phases = sampler.results()
	}
	if res.Established < cfg.Watchers {
		sampler.phase("")
		finish()
		if err, _ := f.fatalErr.Load().(error); err != nil {
			return res, fmt.Errorf("bench: fanout: %w", err)
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, fmt.Errorf("bench: fanout: %d of %d subscribers got their first event within %s (last errors: %s)",
			res.Established, cfg.Watchers, cfg.OpenTimeout, strings.Join(res.ErrorSamples, "; "))
	}
	progress("%d subscribers established in %.1f s; idle for %s", res.Established, res.OpenSeconds, cfg.Idle)

	// Idle.
	sampler.phase("idle")
	if err := sleepCtx(ctx, cfg.Idle); err != nil {
		return res, err
	}
	res.Server.RSSIdleKiB, res.Server.FDsIdle = procRSS(cfg.PID, "VmRSS"), procFDs(cfg.PID)
	res.Server.GoroutinesIdle = goroutinesOf(ctx, ep)
	res.Client.RSSIdleKiB, res.Client.FDsIdle = procRSS(0, "VmRSS"), procFDs(0)
	res.Client.GoroutinesIdle = runtime.NumGoroutine()
	if cfg.Watchers > 0 {
		if res.Server.RSSBeforeKiB >= 0 && res.Server.RSSIdleKiB >= 0 {
			res.RSSPerWatcherKiB = float64(res.Server.RSSIdleKiB-res.Server.RSSBeforeKiB) / float64(cfg.Watchers)
		}
		if res.Client.RSSBeforeKiB >= 0 && res.Client.RSSIdleKiB >= 0 {
			res.ClientRSSPerWatcherKiB = float64(res.Client.RSSIdleKiB-res.Client.RSSBeforeKiB) / float64(cfg.Watchers)
		}
	}

	// Writes.
	sampler.phase("writes")
	progress("%d writes, each waiting for all %d subscribers", cfg.Writes, cfg.Watchers)
	err = f.writes(ctx, c, res)
	sampler.phase("")
	res.Server.RSSAfterKiB, res.Server.PeakRSSKiB = procRSS(cfg.PID, "VmRSS"), procRSS(cfg.PID, "VmHWM")
	res.Client.RSSAfterKiB, res.Client.PeakRSSKiB = procRSS(0, "VmRSS"), procRSS(0, "VmHWM")
	finish()
	return res, err
}

// waitInstances polls the endpoint's stale read until the service holds n instances.
func waitInstances(ctx context.Context, c Client, service string, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, got, err := c.Read(ctx, 0, service, Stale)
		if err == nil && got == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: fanout setup: %s on the subscribers' node holds %d instances, want %d (%v)", service, got, n, err)
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writes makes the writes and records the deliveries in res.
func (f *fanout) writes(ctx context.Context, c Client, res *FanoutResult) error {
	cfg := f.cfg
	key := fixedKey(cfg.Service, 0)
	ack, afterAck, afterStart, allSeen := NewHistogram(), NewHistogram(), NewHistogram(), NewHistogram()
	defer func() {
		res.WriteAck, res.DeliveryAfterAck = Summarize(ack), Summarize(afterAck)
		res.DeliveryAfterStart, res.AllSeenAfterAck = Summarize(afterStart), Summarize(allSeen)
	}()
	gen := uint64(time.Now().UnixNano())
	for k := 1; k <= cfg.Writes; k++ {
		f.goal.Store(nil)
		gen++
		t0 := time.Now()
		idx, err := c.Register(ctx, 0, key, gen)
		acked := time.Now()
		if err != nil {
			res.WriteErrors++
			f.noteErr(fmt.Errorf("write %d: %w", k, err))
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		res.Writes++
		ack.Record(acked.Sub(t0))
		g := &fanGoal{k: k, idx: idx, done: make(chan struct{})}
		g.pending.Store(int64(len(f.subs)))
		if len(f.subs) == 0 {
			close(g.done)
		}
		f.goal.Store(g)
		for _, s := range f.subs {
			s.mu.Lock()
			f.count(s, g)
			s.mu.Unlock()
		}
		t := time.NewTimer(cfg.WriteTimeout)
		select {
		case <-g.done:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w := FanoutWrite{Index: idx, AckMS: ms(acked.Sub(t0))}
		per := NewHistogram()
		var slowest time.Duration
		for _, s := range f.subs {
			at, ok := s.receivedAt(idx)
			if !ok {
				w.Missing++
				continue
			}
			d := at.Sub(acked)
			if d < 0 {
				res.BeforeAck++
				d = 0
			}
			afterAck.Record(d)
			per.Record(d)
			afterStart.Record(at.Sub(t0))
			slowest = max(slowest, d)
		}
		res.Deliveries += per.Count()
		res.Missing += uint64(w.Missing)
		if w.Missing == 0 {
			allSeen.Record(slowest)
		}
		w.P50MS, w.P99MS, w.MaxMS = ms(per.Percentile(0.5)), ms(per.Percentile(0.99)), ms(per.Max())
		res.PerWrite = append(res.PerWrite, w)
		if cfg.WriteGap > 0 && k < cfg.Writes {
			if err := sleepCtx(ctx, cfg.WriteGap); err != nil {
				return err
			}
		}
	}
	if res.Missing > 0 {
		return fmt.Errorf("bench: fanout: %d deliveries missing after %s (last errors: %s)", res.Missing, cfg.WriteTimeout,
			strings.Join(f.errorSamples(), "; "))
	}
	if res.WriteErrors > 0 {
		return fmt.Errorf("bench: fanout: %d of %d writes failed", res.WriteErrors, cfg.Writes)
	}
	return nil
}

// count counts s for g when it has seen g's index (s.mu held).
func (f *fanout) count(s *fanSub, g *fanGoal) {
	if g != nil && s.idx >= g.idx && s.counted < g.k {
		s.counted = g.k
		if g.pending.Add(-1) == 0 {
			close(g.done)
		}
	}
}

// receivedAt is when s received the first event of index ≥ idx.
func (s *fanSub) receivedAt(idx uint64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best fanEvent
	found := false
	for i := 0; i < len(s.ring) && i < s.n; i++ {
		e := s.ring[i]
		if e.idx >= idx && (!found || e.idx < best.idx) {
			best, found = e, true
		}
	}
	return best.at, found
}

// deliver records an event of s.
func (f *fanout) deliver(s *fanSub, idx uint64, at time.Time) {
	s.mu.Lock()
	first := !s.ready
	s.ready = true
	if idx > s.idx || first {
		s.idx = max(s.idx, idx)
		s.ring[s.n%len(s.ring)] = fanEvent{idx: idx, at: at}
		s.n++
	}
	f.count(s, f.goal.Load())
	s.mu.Unlock()
	if first && f.ready.Add(1) == int64(len(f.subs)) {
		close(f.allReady)
	}
}

func (f *fanout) noteErr(err error) {
	f.errMu.Lock()
	defer f.errMu.Unlock()
	f.errs = append(f.errs, err.Error())
	if len(f.errs) > 8 {
		f.errs = f.errs[len(f.errs)-8:]
	}
}

func (f *fanout) errorSamples() []string {
	f.errMu.Lock()
	defer f.errMu.Unlock()
	return append([]string(nil), f.errs...)
}

func (f *fanout) fail(err error) {
	f.fatalOne.Do(func() {
		f.fatalErr.Store(err)
		close(f.fatal)
	})
}

// run keeps one subscriber's stream open until ctx is done, reconnecting with
// Last-Event-ID after the server's retry time (at least 100ms, with jitter). release is
// called once, when the first stream has delivered its first event or failed.
func (f *fanout) run(ctx context.Context, s *fanSub, release func()) {
	var once sync.Once
	rel := func() { once.Do(release) }
	defer rel()
	lastID := ""
	for attempt := 0; ctx.Err() == nil; attempt++ {
		retry, err := f.stream(ctx, s, &lastID, rel)
		rel()
		if ctx.Err() != nil {
			return
		}
		f.noteErr(err)
		if errors.Is(err, errNoSSE) {
			f.fail(err)
			return
		}
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			f.fail(fmt.Errorf("%w: raise the open-file limit (ulimit -n) above %d", err, f.cfg.Watchers+256))
			return
		}
		f.reconnects.Add(1)
		retry = max(retry, 100*time.Millisecond)
		if attempt > 3 {
			retry = max(retry, time.Second)
		}
		if sleepCtx(ctx, retry/2+rand.N(retry)) != nil {
			return
		}
	}
}

// sseSmallBuffer is the SSE parser's buffer in a fan-out subscriber, on top of the
// connection's.
const sseSmallBuffer = 256

// stream runs one connection of subscriber s: the request (with Last-Event-ID when
// *lastID is set), the answer's headers, then its events. It returns the retry time the
// server asked for and why the stream ended.
func (f *fanout) stream(ctx context.Context, s *fanSub, lastID *string, firstEvent func()) (time.Duration, error) {
	d := net.Dialer{Timeout: f.cfg.Timeout}
	conn, err := d.DialContext(ctx, "tcp", f.host)
	if err != nil {
		return 0, shortenNetErr(err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer func() { stop(); _ = conn.Close() }()
	req := f.request
	if *lastID != "" {
		req += "Last-Event-ID: " + *lastID + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		return 0, err
	}
	br := bufio.NewReaderSize(conn, f.cfg.BufferSize)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, fmt.Errorf("read response: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if err := checkSSEResponse(resp, "sse subscribe to "+f.cfg.Service,
		"the fan-out benchmark needs a server that has it"); err != nil {
		return 0, err
	}
	p := sse.NewReader(resp.Body, sseSmallBuffer)
	for n := 0; ; n++ {
		ev, err := p.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("sse stream ended by the server after %d events", n)
			}
			return p.Retry(), err
		}
		at := time.Now()
		var idx uint64
		if f.cfg.Verify {
			idx, err = decodeRosterEvent(ev, "instances")
		} else if ev.Type != "instances" && ev.Type != "not_found" {
			err = fmt.Errorf("sse: unexpected event type %q (id %s)", ev.Type, ev.ID)
		} else {
			idx, err = parseSSEIndex(ev)
		}
		if err != nil {
			return p.Retry(), err
		}
		*lastID = p.LastEventID()
		f.deliver(s, idx, at)
		if n == 0 {
			firstEvent()
		}
	}
}

// procRSS reads a memory field (VmRSS, VmHWM) of /proc/PID/status in KiB (pid 0 = this
// process); -1 when unknown.
func procRSS(pid int, field string) int64 {
	if pid < 0 {
		return -1
	}
	v, err := procstat.StatusKiB(pid, field)
	if err != nil {
		return -1
	}
	return v
}

// procFDs counts the open files of pid (0 = this process); -1 when unknown.
func procFDs(pid int) int {
	if pid < 0 {
		return -1
	}
	n, err := procstat.FDs(pid)
	if err != nil {
		return -1
	}
	return n
}

// goroutinesOf reads go_goroutines from the node's /metrics; -1 when unknown.
func goroutinesOf(ctx context.Context, ep string) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep+"/metrics", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				return -1
			}
			return int(v)
		}
	}
	return -1
}

// fanSampler is the side client: every ProbeEvery it times GET /v1/status/ready and a
// stale instances read on the subscribers' node, and reads every member's Raft last
// contact from the X-Roster-Last-Contact header of their answers.
type fanSampler struct {
	cfg    FanoutConfig
	target string
	eps    []string
	hc     *http.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	cur  *phaseAcc
	done []*phaseAcc
}

// phaseAcc accumulates one phase's samples.
type phaseAcc struct {
	name         string
	start, end   time.Time
	ready, stale probeAcc
	lcMax        map[string]int64
	late         map[string]uint64
	srv, cli     *CPUMeter
}

type probeAcc struct {
	h       *Histogram
	errors  uint64
	lastErr string
}

func (a *probeAcc) stats() ProbeStats {
	return ProbeStats{Count: a.h.Count(), Errors: a.errors, Latency: Summarize(a.h), LastError: a.lastErr}
}

func newFanSampler(cfg FanoutConfig, target string, eps []string) *fanSampler {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	return &fanSampler{cfg: cfg, target: target, eps: eps, hc: &http.Client{Transport: tr, Timeout: cfg.Timeout}}
}

// nodeName is the host:port of an endpoint URL.
func nodeName(ep string) string {
	if u, err := url.Parse(ep); err == nil && u.Host != "" {
		return u.Host
	}
	return ep
}

func (s *fanSampler) start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	loop := func(fn func(context.Context)) {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t := time.NewTicker(s.cfg.ProbeEvery)
			defer t.Stop()
			for {
				fn(ctx)
				select {
				case <-t.C:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	loop(func(ctx context.Context) { s.probe(ctx, s.target, s.target+"/v1/status/ready", "ready") })
	loop(func(ctx context.Context) {
		s.probe(ctx, s.target, s.target+rosterPrefix+s.cfg.Service+"/instances?consistency=stale", "stale")
	})
	for _, ep := range s.eps {
		if ep != s.target {
			loop(func(ctx context.Context) { s.probe(ctx, ep, ep+"/v1/status/ready", "") })
		}
	}
}

func (s *fanSampler) stop() {
	if s.cancel != nil {
		s.cancel()
		s.wg.Wait()
		s.hc.CloseIdleConnections()
	}
}

// probe makes one request and records its latency under kind ("ready", "stale" or ""
// for last contact only) and the node's last contact.
func (s *fanSampler) probe(ctx context.Context, ep, url, kind string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return
	}
	t0 := time.Now()
	resp, err := s.hc.Do(req)
	var lc int64 = -1
	if err == nil {
		_, excerpt, rerr := drain(resp)
		_ = resp.Body.Close()
		if v, perr := strconv.ParseInt(resp.Header.Get("X-Roster-Last-Contact"), 10, 64); perr == nil {
			lc = v
		}
		switch {
		case rerr != nil:
			err = rerr
		case resp.StatusCode != http.StatusOK:
			err = &statusError{code: resp.StatusCode, body: excerpt}
		}
	}
	lat := time.Since(t0)
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.cur
	if p == nil {
		return
	}
	if lc >= 0 {
		node := nodeName(ep)
		p.lcMax[node] = max(p.lcMax[node], lc)
		if time.Duration(lc)*time.Millisecond > s.cfg.HeartbeatInterval {
			p.late[node]++
		}
	}
	var a *probeAcc
	switch kind {
	case "ready":
		a = &p.ready
	case "stale":
		a = &p.stale
	default:
		return
	}
	if err != nil {
		a.errors++
		a.lastErr = shortenNetErr(err).Error()
		return
	}
	a.h.Record(lat)
}

// phase ends the current phase and starts the named one ("" = none).
func (s *fanSampler) phase(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if p := s.cur; p != nil {
		p.end = now
		p.srv.WindowEnd(now)
		p.cli.WindowEnd(now)
		s.done = append(s.done, p)
		s.cur = nil
	}
	if name == "" {
		return
	}
	var pids []int
	if s.cfg.PID > 0 {
		pids = []int{s.cfg.PID}
	}
	p := &phaseAcc{name: name, start: now, ready: probeAcc{h: NewHistogram()}, stale: probeAcc{h: NewHistogram()},
		lcMax: map[string]int64{}, late: map[string]uint64{}, srv: NewCPUMeter(pids), cli: NewCPUMeter([]int{0})}
	p.srv.WindowStart(now)
	p.cli.WindowStart(now)
	s.cur = p
}

// results returns the finished phases.
func (s *fanSampler) results() []FanoutPhase {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]FanoutPhase, 0, len(s.done))
	for _, p := range s.done {
		fp := FanoutPhase{Name: p.name, Seconds: p.end.Sub(p.start).Seconds(), Ready: p.ready.stats(), StaleRead: p.stale.stats(),
			LastContactMax: map[string]float64{}, LateContacts: map[string]uint64{}, ServerCPU: -1}
		for _, ep := range s.eps {
			n := nodeName(ep)
			if v, ok := p.lcMax[n]; ok {
				fp.LastContactMax[n] = float64(v)
				fp.LateContacts[n] = p.late[n]
			}
		}
		// Clock ticks make the CPU of a phase shorter than 100 ms meaningless.
		fp.ClientCPU = -1
		if fp.Seconds >= 0.1 {
			if s.cfg.PID > 0 {
				fp.ServerCPU, _ = p.srv.Cores()
			}
			fp.ClientCPU, _ = p.cli.Cores()
		}
		out = append(out, fp)
	}
	return out
}
