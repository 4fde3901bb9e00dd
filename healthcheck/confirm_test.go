package healthcheck

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
)

// fakeConfirmer answers confirmations with fixed views of the other voters.
type fakeConfirmer struct {
	mu    sync.Mutex
	views []Vantage // what the other voters answer
	calls []ProbeRequest
}

func (c *fakeConfirmer) Confirm(_ context.Context, req ProbeRequest) []Vantage {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, req)
	return append([]Vantage(nil), c.views...)
}

func (c *fakeConfirmer) set(views ...Vantage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.views = views
}

func (c *fakeConfirmer) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

func peer(node string, healthy bool) Vantage {
	return Vantage{Node: node, Answered: true, Healthy: healthy}
}

func silent(node string) Vantage { return Vantage{Node: node, Error: "timeout"} }

// A transition decided by the leader's probes is committed only when a majority of the
// nodes that answered (the leader included) saw the same; otherwise the committed health
// stands, the counters start again, and the views are shown with the instance.
func TestProber_MajorityConfirmation(t *testing.T) {
	const interval = 10 * time.Second
	cases := []struct {
		name       string
		confirm    model.ConfirmMode
		startUp    bool      // the instance's committed health, and the opposite of what the leader sees
		peers      []Vantage // the other voters' views
		committed  bool      // whether the transition is committed
		asked      bool      // whether the other voters were asked at all
		wantViews  int       // vantages shown with the result (0: none)
		overruling float64
	}{
		{name: "down: one of two others agrees", startUp: true, peers: []Vantage{peer("n2", false), peer("n3", true)},
			committed: true, asked: true, wantViews: 3},
		{name: "down: both others still reach it", startUp: true, peers: []Vantage{peer("n2", true), peer("n3", true)},
			committed: false, asked: true, wantViews: 3, overruling: 1},
		{name: "down: one other disagrees, one is silent", startUp: true, peers: []Vantage{peer("n2", true), silent("n3")},
			committed: false, asked: true, wantViews: 3, overruling: 1},
		{name: "down: nobody else answers", startUp: true, peers: []Vantage{silent("n2"), silent("n3")},
			committed: true, asked: true, wantViews: 3},
		{name: "up: both others cannot reach it", startUp: false, peers: []Vantage{peer("n2", false), peer("n3", false)},
			committed: false, asked: true, wantViews: 3, overruling: 1},
		{name: "up: both others agree", startUp: false, peers: []Vantage{peer("n2", true), peer("n3", true)},
			committed: true, asked: true, wantViews: 3},
		{name: "leader mode: nobody is asked", confirm: model.ConfirmLeader, startUp: true,
			peers: []Vantage{peer("n2", true), peer("n3", true)}, committed: true, asked: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := tcpCheck(interval, 1, 1)
			hc.Confirm = tc.confirm
			e := newFakeEnv(hc)
			conf := &fakeConfirmer{}
			conf.set(tc.peers...)
			e.cfg.Confirmer, e.cfg.NodeID = conf, "n1"
			in := e.addInstances(1, tc.startUp)[0]
			e.net.setDown(in.Addr(), tc.startUp) // the leader sees the opposite of the committed health
			p, _ := e.start(t)

			e.clk.Advance(interval)
			if tc.asked {
				wait.For(t, 5*time.Second, "the confirmation", func() bool {
					r, _ := resultFor(p, in.IP, in.Port)
					return conf.count() == 1 && len(r.Vantages) == tc.wantViews
				})
			} else {
				wait.For(t, 5*time.Second, "the transition decided", func() bool {
					r, _ := resultFor(p, in.IP, in.Port)
					return r.Pending || r.Healthy != tc.startUp
				})
			}
			if tc.committed {
				wait.For(t, 5*time.Second, "the transition committed", func() bool {
					e.clk.Advance(e.cfg.FlushInterval)
					return e.src.instance(in.Ref()).Healthy != tc.startUp
				})
			} else {
				e.clk.Advance(2 * e.cfg.FlushInterval)
				wait.For(t, 5*time.Second, "the counters reset", func() bool {
					r, _ := resultFor(p, in.IP, in.Port)
					return !r.Pending && r.ConsecutiveFailures == 0 && r.ConsecutiveSuccesses == 0
				})
				if got := e.src.instance(in.Ref()).Healthy; got != tc.startUp {
					t.Fatalf("an overruled transition was committed: healthy %v", got)
				}
				if n := len(e.app.updates()); n != 0 {
					t.Fatalf("%d health updates submitted for an overruled transition", n)
				}
			}
			if got := conf.count(); (got > 0) != tc.asked {
				t.Fatalf("the other voters were asked %d times", got)
			}
			if got := metricValue(t, p.met.overruled); got != tc.overruling {
				t.Fatalf("overruled = %v, want %v", got, tc.overruling)
			}
			r, _ := resultFor(p, in.IP, in.Port)
			if tc.wantViews > 0 {
				if len(r.Vantages) != tc.wantViews || r.Vantages[0].Node != "n1" || r.Vantages[0].Healthy == tc.startUp {
					t.Fatalf("vantages %+v", r.Vantages)
				}
				conf.mu.Lock()
				req := conf.calls[0]
				conf.mu.Unlock()
				if req.IP != in.IP || req.Port != in.Port || req.Check.Type != model.CheckTCP {
					t.Fatalf("the others were asked to probe %+v", req)
				}
			}
		})
	}
}

// ProbeOnce probes under this node's own policy: a target it may not reach is a failed
// probe with outcome "denied", and nothing is sent.
func TestManager_ProbeOnceAppliesThePolicy(t *testing.T) {
	pol, err := ParsePolicy("", "127.100.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	net := newFakeNet()
	m, err := NewManager(Config{Policy: pol, Dial: net.dial}, newFakeSource(), &fakeApplier{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	check := tcpCheck(10*time.Second, 1, 1)
	v := m.ProbeOnce(context.Background(), ProbeRequest{Check: check, IP: "127.100.0.1", Port: 8080})
	if !v.Answered || v.Healthy || v.Outcome != OutcomeDenied {
		t.Fatalf("denied target: %+v", v)
	}
	if dials, _, _ := net.stats(); dials != 0 {
		t.Fatalf("%d dials to a denied target", dials)
	}
	v = m.ProbeOnce(context.Background(), ProbeRequest{Check: check, IP: "127.0.0.1", Port: 8080})
	if !v.Answered || !v.Healthy || v.Outcome != OutcomeSuccess {
		t.Fatalf("allowed target: %+v", v)
	}
}

// A change of who confirms is a change of the spec (the prober takes the new one), while
// "" and "majority" are the same.
func TestSpec_EqualComparesConfirm(t *testing.T) {
	base := tcpCheck(time.Second, 1, 1)
	with := func(c model.ConfirmMode) model.HealthCheck { h := base; h.Confirm = c; return h }
	cases := []struct {
		a, b  model.HealthCheck
		equal bool
	}{
		{with(""), with(model.ConfirmMajority), true},
		{with(""), with(model.ConfirmLeader), false},
		{with(model.ConfirmLeader), with(model.ConfirmLeader), true},
	}
	for _, tc := range cases {
		if got := newSpec(tc.a).equal(newSpec(tc.b)); got != tc.equal {
			t.Errorf("%q vs %q: equal %v, want %v", tc.a.Confirm, tc.b.Confirm, got, tc.equal)
		}
	}
}

// Every check type is counted in the probe counters and the latency histogram under its
// own type label.
func TestMetrics_EveryCheckTypeObserved(t *testing.T) {
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []model.CheckType{model.CheckTCP, model.CheckHTTP, model.CheckHTTPS, model.CheckTLS, model.CheckGRPC, model.CheckMySQL} {
		m.observeProbe(typ, true, 0.001)
		m.observeProbe(typ, false, 0.002)
		if got := metricValue(t, m.latency.WithLabelValues(string(typ)).(prometheus.Metric)); got != 2 {
			t.Errorf("%s: %v latency samples, want 2", typ, got)
		}
		for _, outcome := range []string{OutcomeSuccess, metricFailure} {
			if got := metricValue(t, m.probes.WithLabelValues(string(typ), outcome)); got != 1 {
				t.Errorf("%s %s: %v probes, want 1", typ, outcome, got)
			}
		}
	}
}

// A node asked to confirm probes the way the leader does, whatever the check's type:
// an HTTPS check goes to the instance's URL over TLS.
func TestManager_ProbeOnceHTTPS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	host, portText, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portText)
	pol, err := ParsePolicy(LoopbackOnly, "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(Config{Policy: pol}, newFakeSource(), &fakeApplier{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	check := model.HealthCheck{Type: model.CheckHTTPS, Path: "/healthz", TLSSkipVerify: true,
		Interval: model.Duration(2 * time.Second), Timeout: model.Duration(time.Second), Rise: 1, Fall: 1}
	if v := m.ProbeOnce(context.Background(), ProbeRequest{Check: check, IP: host, Port: port}); !v.Healthy || v.Outcome != OutcomeSuccess {
		t.Fatalf("HTTPS probe of /healthz: %+v", v)
	}
	check.Path = "/missing"
	if v := m.ProbeOnce(context.Background(), ProbeRequest{Check: check, IP: host, Port: port}); v.Healthy || v.Outcome != OutcomeStatus {
		t.Fatalf("HTTPS probe of a path answering 404: %+v", v)
	}
}
