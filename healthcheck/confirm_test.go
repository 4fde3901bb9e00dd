package healthcheck

import (
	"context"
	"errors"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
)

// fakeConfirmer answers confirmations with fixed views of the other voters, out of
// voters (0: the leader and one per view), or fails with err.
type fakeConfirmer struct {
	mu     sync.Mutex
	views  []Vantage // what the other voters answer
	voters int
	err    error
	calls  []ProbeRequest
}

func (c *fakeConfirmer) Confirm(_ context.Context, req ProbeRequest) (Confirmation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, req)
	if c.err != nil {
		return Confirmation{}, c.err
	}
	voters := c.voters
	if voters == 0 {
		voters = 1 + len(c.views)
	}
	return Confirmation{Voters: voters, Views: append([]Vantage(nil), c.views...)}, nil
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
// voters (the leader included) saw the same; a voter that did not answer counts as one
// that did not see it. Otherwise the committed health stands, the counters start again,
// the views are shown with the instance, and the metrics say why: overruled when enough
// voters saw otherwise, inconclusive when too few answered.
func TestProber_MajorityConfirmation(t *testing.T) {
	const interval = 10 * time.Second
	cases := []struct {
		name         string
		confirm      model.ConfirmMode
		startUp      bool      // the instance's committed health, and the opposite of what the leader sees
		peers        []Vantage // the other voters' views
		voters       int       // the voters of the configuration (0: the leader and one per view)
		err          error     // the voters could not be listed
		committed    bool      // whether the transition is committed
		asked        bool      // whether the other voters were asked at all
		wantViews    int       // vantages shown with the result (0: none)
		overruling   float64
		inconclusive map[string]float64 // by reason
	}{
		{name: "down: one of two others agrees", startUp: true, peers: []Vantage{peer("n2", false), peer("n3", true)},
			committed: true, asked: true, wantViews: 3},
		{name: "down: both others still reach it", startUp: true, peers: []Vantage{peer("n2", true), peer("n3", true)},
			committed: false, asked: true, wantViews: 3, overruling: 1},
		{name: "down: one other disagrees, one is silent", startUp: true, peers: []Vantage{peer("n2", true), silent("n3")},
			committed: false, asked: true, wantViews: 3, inconclusive: map[string]float64{inconclusiveUnanswered: 1}},
		{name: "down: nobody else answers", startUp: true, peers: []Vantage{silent("n2"), silent("n3")},
			committed: false, asked: true, wantViews: 3, inconclusive: map[string]float64{inconclusiveUnanswered: 1}},
		{name: "down: one other agrees, one is silent", startUp: true, peers: []Vantage{peer("n2", false), silent("n3")},
			committed: true, asked: true, wantViews: 3},
		{name: "down: two voters, the other silent", startUp: true, peers: []Vantage{silent("n2")},
			committed: false, asked: true, wantViews: 2, inconclusive: map[string]float64{inconclusiveUnanswered: 1}},
		{name: "down: a voter missing from the views counts as silent", startUp: true, peers: []Vantage{peer("n2", false)}, voters: 4,
			committed: false, asked: true, wantViews: 2, inconclusive: map[string]float64{inconclusiveUnanswered: 1}},
		{name: "down: the leader alone is every voter", startUp: true, committed: true, asked: true, wantViews: 1},
		{name: "down: the voters cannot be listed", startUp: true, err: errors.New("no configuration"),
			committed: false, asked: true, wantViews: 1, inconclusive: map[string]float64{inconclusiveConfiguration: 1}},
		{name: "up: both others cannot reach it", startUp: false, peers: []Vantage{peer("n2", false), peer("n3", false)},
			committed: false, asked: true, wantViews: 3, overruling: 1},
		{name: "up: both others agree", startUp: false, peers: []Vantage{peer("n2", true), peer("n3", true)},
			committed: true, asked: true, wantViews: 3},
		{name: "up: nobody else answers", startUp: false, peers: []Vantage{silent("n2"), silent("n3")},
			committed: false, asked: true, wantViews: 3, inconclusive: map[string]float64{inconclusiveUnanswered: 1}},
		{name: "leader mode: nobody is asked", confirm: model.ConfirmLeader, startUp: true,
			peers: []Vantage{peer("n2", true), peer("n3", true)}, committed: true, asked: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc := tcpCheck(interval, 1, 1)
			hc.Confirm = tc.confirm
			e := newFakeEnv(hc)
			conf := &fakeConfirmer{voters: tc.voters, err: tc.err}
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
			for _, reason := range []string{inconclusiveUnanswered, inconclusiveConfiguration} {
				if got := metricValue(t, p.met.inconclusive.WithLabelValues(reason)); got != tc.inconclusive[reason] {
					t.Fatalf("inconclusive{reason=%q} = %v, want %v", reason, got, tc.inconclusive[reason])
				}
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

// The decision counts the voters of the configuration, not the nodes that answered: a
// transition needs a majority of the voters (the leader included) agreeing; it is
// overruled when it cannot get one even if every silent voter had agreed, and
// inconclusive otherwise.
func TestDecide(t *testing.T) {
	cases := []struct {
		voters, agree, disagree int
		want                    verdict
	}{
		{voters: 1, agree: 1, want: verdictConfirmed}, // a one-node cluster: the leader is the majority
		{voters: 2, agree: 2, want: verdictConfirmed},
		{voters: 2, agree: 1, want: verdictInconclusive}, // the other voter is down
		{voters: 2, agree: 1, disagree: 1, want: verdictOverruled},
		{voters: 3, agree: 2, want: verdictConfirmed}, // one voter down: leader and one follower suffice
		{voters: 3, agree: 3, want: verdictConfirmed},
		{voters: 3, agree: 2, disagree: 1, want: verdictConfirmed},
		{voters: 3, agree: 1, want: verdictInconclusive}, // no follower answered
		{voters: 3, agree: 1, disagree: 1, want: verdictInconclusive},
		{voters: 3, agree: 1, disagree: 2, want: verdictOverruled},
		{voters: 4, agree: 2, disagree: 1, want: verdictInconclusive},
		{voters: 4, agree: 2, disagree: 2, want: verdictOverruled},
		{voters: 4, agree: 3, want: verdictConfirmed},
		{voters: 5, agree: 3, want: verdictConfirmed},
		{voters: 5, agree: 2, want: verdictInconclusive},
		{voters: 5, agree: 1, disagree: 2, want: verdictInconclusive},
		{voters: 5, agree: 2, disagree: 3, want: verdictOverruled},
	}
	for _, tc := range cases {
		if got := decide(tc.voters, tc.agree, tc.disagree); got != tc.want {
			t.Errorf("decide(voters %d, agree %d, disagree %d) = %v, want %v", tc.voters, tc.agree, tc.disagree, got, tc.want)
		}
	}
}

// peerProber stands for the other voters of a three-voter cluster asked over the
// network: each answers at once when it can, and a voter that cannot (a loaded or
// partitioned node) holds the request until the confirmation's deadline, as the
// server's confirmer does.
type peerProber struct {
	mu      sync.Mutex
	healthy map[string]bool // what each peer sees when it answers
	can     map[string]bool // whether each peer can answer
	calls   int
}

func (c *peerProber) Confirm(ctx context.Context, _ ProbeRequest) (Confirmation, error) {
	c.mu.Lock()
	c.calls++
	can, healthy := maps.Clone(c.can), maps.Clone(c.healthy)
	c.mu.Unlock()
	out := Confirmation{Voters: 1 + len(healthy)}
	for _, node := range slices.Sorted(maps.Keys(healthy)) {
		if can[node] {
			out.Views = append(out.Views, peer(node, healthy[node]))
			continue
		}
		<-ctx.Done()
		out.Views = append(out.Views, Vantage{Node: node, Error: "not answered: " + ctx.Err().Error()})
	}
	return out, nil
}

func (c *peerProber) answer(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.can[node] = true
}

func (c *peerProber) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// The other voters see the instance down too but cannot answer in time: the leader's
// view alone is not a majority of the voters, so the transition is not committed, the
// confirmation counts as inconclusive, and the next probe round asks again. Once one of
// the two followers answers (the other still silent, as with a voter down), the leader
// and it are a majority and the transition commits.
func TestProber_SilentFollowersCommitNothing(t *testing.T) {
	const interval = 10 * time.Second
	hc := tcpCheck(interval, 1, 1)
	hc.Timeout = model.Duration(100 * time.Millisecond) // the confirmation waits 1.1 s for the silent
	e := newFakeEnv(hc)
	conf := &peerProber{healthy: map[string]bool{"n2": false, "n3": false}, can: map[string]bool{}}
	e.cfg.Confirmer, e.cfg.NodeID = conf, "n1"
	in := e.addInstances(1, true)[0]
	e.net.setDown(in.Addr(), true)
	p, _ := e.start(t)
	unanswered := p.met.inconclusive.WithLabelValues(inconclusiveUnanswered)

	e.clk.Advance(interval)
	wait.For(t, 10*time.Second, "the confirmation found inconclusive", func() bool {
		return metricValue(t, unanswered) == 1
	})
	r, _ := resultFor(p, in.IP, in.Port)
	if r.Pending || r.ConsecutiveFailures != 0 || len(r.Vantages) != 3 || r.Vantages[1].Answered || r.Vantages[2].Answered {
		t.Fatalf("after an inconclusive confirmation: %+v", r)
	}
	e.clk.Advance(2 * e.cfg.FlushInterval)
	if got := e.src.instance(in.Ref()).Healthy; !got {
		t.Fatal("a transition only the leader saw was committed")
	}
	if n := len(e.app.updates()); n != 0 {
		t.Fatalf("%d health updates submitted without a majority of the voters", n)
	}
	if got := metricValue(t, p.met.overruled); got != 0 {
		t.Fatalf("overruled = %v for a confirmation nobody answered", got)
	}

	// The next round decides again, and again finds no majority.
	e.clk.Advance(interval)
	wait.For(t, 10*time.Second, "the second confirmation found inconclusive", func() bool {
		return conf.count() == 2 && metricValue(t, unanswered) == 2
	})
	if got := e.src.instance(in.Ref()).Healthy; !got {
		t.Fatal("a transition only the leader saw was committed")
	}

	// n2 answers now; n3 stays silent: the leader and n2 are two of three voters.
	conf.answer("n2")
	e.clk.Advance(interval)
	wait.For(t, 10*time.Second, "the transition committed", func() bool {
		e.clk.Advance(e.cfg.FlushInterval)
		return !e.src.instance(in.Ref()).Healthy
	})
	if got := metricValue(t, unanswered); got != 2 {
		t.Fatalf("inconclusive = %v after the confirmed round, want 2", got)
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
