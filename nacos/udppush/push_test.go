package udppush

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rosterhq/roster/fanout"
	"github.com/rosterhq/roster/internal/clock"
	"github.com/rosterhq/roster/internal/storetest"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/nacos/internal/nacostesting"
	"github.com/rosterhq/roster/store"
)

// pushEnv is a pusher over a fresh store and hub, on a manual clock.
type pushEnv struct {
	t     *testing.T
	st    *store.Store
	hub   *fanout.Hub
	p     *Pusher
	conn  *nacostesting.GuardConn
	clock *clock.Manual
	reg   *prometheus.Registry
	ticks chan time.Time
	index uint64
}

var pushKey = model.ServiceKey{Namespace: "public", Group: "g1", Service: "orders"}

func newPushEnv(t *testing.T, opts Options) *pushEnv {
	t.Helper()
	st := storetest.Open(t)
	hub, err := fanout.New(st, fanout.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &pushEnv{t: t, st: st, hub: hub, conn: nacostesting.NewGuardConn(t), clock: clock.NewManual(time.Unix(1_700_000_000, 0)),
		reg: prometheus.NewRegistry(), ticks: make(chan time.Time, 64)}
	opts.Conn, opts.Clock, opts.Registerer = e.conn, e.clock, e.reg
	opts.OnTick = func(now time.Time) { e.ticks <- now }
	if e.p, err = New(hub, st, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.p.Close()
		hub.Close()
		_ = st.Close()
	})
	return e
}

// advance moves the clock and waits for the pusher's round of retries and expiry at
// the new time.
func (e *pushEnv) advance(d time.Duration) {
	e.t.Helper()
	e.clock.Advance(d)
	target := e.clock.Now()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case now := <-e.ticks:
			if !now.Before(target) {
				return
			}
		case <-deadline:
			e.t.Fatalf("no push round at %s within 10s", target)
		}
	}
}

// write applies one change to the store at the next index and returns that index.
func (e *pushEnv) write(fn func(tx *store.Txn, idx uint64) error) uint64 {
	e.t.Helper()
	e.index++
	idx := e.index
	if err := e.st.Update(func(tx *store.Txn) error {
		if err := fn(tx, idx); err != nil {
			return err
		}
		return tx.SetAppliedIndex(idx)
	}); err != nil {
		e.t.Fatal(err)
	}
	return idx
}

func (e *pushEnv) register(port int, md map[string]string) uint64 {
	e.t.Helper()
	return e.write(func(tx *store.Txn, idx uint64) error {
		return tx.RegisterInstance(idx, model.Instance{
			Namespace: pushKey.Namespace, Group: pushKey.Group, Service: pushKey.Service, IP: "127.0.0.1", Port: port,
			Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true, Metadata: md,
		})
	})
}

func (e *pushEnv) deregister(port int) uint64 {
	e.t.Helper()
	return e.write(func(tx *store.Txn, idx uint64) error {
		return tx.DeregisterInstance(idx, model.InstanceRef{
			Namespace: pushKey.Namespace, Group: pushKey.Group, Service: pushKey.Service, IP: "127.0.0.1", Port: port,
		})
	})
}

// subscribe records c as a subscriber of pushKey (all clusters) with agent.
func (e *pushEnv) subscribe(c *nacostesting.PushClient, agent string) *Subscription {
	e.t.Helper()
	s, ok := e.p.Subscribe(Query{Service: pushKey, Addr: c.Addr(), Agent: agent, App: "app1"})
	if !ok {
		e.t.Fatal("subscriber not recorded")
	}
	return s
}

func (e *pushEnv) counter(name string, labels ...string) float64 {
	e.t.Helper()
	m := e.p.m
	switch name {
	case "sent":
		return testutil.ToFloat64(m.sent)
	case "resent":
		return testutil.ToFloat64(m.resent)
	case "acked":
		return testutil.ToFloat64(m.acked)
	case "superseded":
		return testutil.ToFloat64(m.superseded)
	case "ignored":
		return testutil.ToFloat64(m.ignored)
	case "refused":
		return testutil.ToFloat64(m.refused.WithLabelValues(labels...))
	case "failed":
		return testutil.ToFloat64(m.failed.WithLabelValues(labels...))
	case "subscribers":
		return testutil.ToFloat64(m.subscribers)
	}
	e.t.Fatalf("unknown counter %s", name)
	return 0
}

func TestPush_ChangeIsPushedAndAcked(t *testing.T) {
	e := newPushEnv(t, Options{})
	e.register(8080, nil)
	c := nacostesting.NewPushClient(t, "127.0.0.1")
	e.subscribe(c, nacostesting.GoAgent)
	idx := e.register(8081, nil)

	r := c.Next()
	if r.Packet.Type != "dom" || r.From.Port() != uint16(e.conn.LocalAddr().(*net.UDPAddr).Port) {
		t.Fatalf("push %+v from %s (socket %s), gzip %v", r.Packet.Type, r.From, e.conn.LocalAddr(), r.Gzip)
	}
	want := nacos.ServiceInfoFor(pushKey, mustView(t, e.st), true, "", false, CacheMillis, e.clock.Now())
	wantJSON, _ := json.Marshal(want)
	if r.Packet.Data != string(wantJSON) {
		t.Fatalf("pushed data\n %s\nwant what instance/list answers\n %s", r.Packet.Data, wantJSON)
	}
	if got := nacostesting.HostPorts(r.Info); len(got) != 2 || r.Info.CacheMillis != CacheMillis || r.Info.Name != "g1@@orders" {
		t.Fatalf("pushed list %+v (index %d)", r.Info, idx)
	}
	c.Ack(r)
	wait.For(t, 10*time.Second, "the ack to be matched", func() bool { return e.counter("acked") == 1 })
	if e.counter("sent") != 1 || e.counter("ignored") != 0 {
		t.Fatalf("sent %v ignored %v", e.counter("sent"), e.counter("ignored"))
	}
	// Acknowledged: a retry round sends nothing more.
	e.advance(2 * time.Second)
	if got := e.conn.Destinations(); len(got) != 1 || got[0] != c.Addr() {
		t.Fatalf("packets went to %v, want one to %s", got, c.Addr())
	}
	// A second ack of the same push matches nothing.
	c.Ack(r)
	wait.For(t, 10*time.Second, "the duplicate ack to be ignored", func() bool { return e.counter("ignored") == 1 })
}

func mustView(t *testing.T, st *store.Store) store.ServiceView {
	t.Helper()
	_, v, err := st.ServiceView(nil, pushKey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPush_UnackedIsResentThenGivenUp(t *testing.T) {
	e := newPushEnv(t, Options{Retries: 2, RetryInterval: time.Second})
	c := nacostesting.NewPushClient(t, "127.0.0.1")
	s := e.subscribe(c, nacostesting.GoAgent)
	e.register(8080, nil)
	first := c.Next()
	for i := 1; i <= 2; i++ {
		e.advance(time.Second)
		again := c.Next()
		if !bytes.Equal(again.Raw, first.Raw) {
			t.Fatalf("resend %d differs from the push", i)
		}
	}
	e.advance(time.Second)
	if e.counter("failed", "no_ack") != 1 || e.counter("resent") != 2 || e.counter("sent") != 1 {
		t.Fatalf("failed %v resent %v sent %v", e.counter("failed", "no_ack"), e.counter("resent"), e.counter("sent"))
	}
	if n := len(e.conn.Destinations()); n != 3 {
		t.Fatalf("%d packets, want 3 (the push and 2 resends)", n)
	}
	if !e.p.Polling(s) {
		t.Fatal("a subscriber whose push went unacknowledged is not answered the poll cacheMillis")
	}
	// A late ack is ignored; the next push that is acknowledged ends the polling.
	c.Ack(first)
	wait.For(t, 10*time.Second, "the late ack to be ignored", func() bool { return e.counter("ignored") == 1 })
	e.register(8081, nil)
	c.Ack(c.Next())
	wait.For(t, 10*time.Second, "the ack", func() bool { return e.counter("acked") == 1 })
	if e.p.Polling(s) {
		t.Fatal("still polling after an acknowledged push")
	}
}

func TestPush_NewerStateSupersedesUnacked(t *testing.T) {
	e := newPushEnv(t, Options{})
	c := nacostesting.NewPushClient(t, "127.0.0.1")
	e.subscribe(c, nacostesting.GoAgent)
	e.register(8080, nil)
	first := c.Next()
	e.register(8081, nil)
	second := c.Next()
	if len(second.Info.Hosts) != 2 || second.Packet.LastRefTime == first.Packet.LastRefTime {
		t.Fatalf("second push %+v (lastRefTime %d, first %d)", second.Info.Hosts, second.Packet.LastRefTime, first.Packet.LastRefTime)
	}
	wait.For(t, 10*time.Second, "the first push to be superseded", func() bool { return e.counter("superseded") == 1 })
	c.Ack(first)
	wait.For(t, 10*time.Second, "the superseded ack to be ignored", func() bool { return e.counter("ignored") == 1 })
	c.Ack(second)
	wait.For(t, 10*time.Second, "the ack", func() bool { return e.counter("acked") == 1 })
	// Only the newer push is resent while unacknowledged: nothing is pending now.
	e.advance(2 * time.Second)
	if n := len(e.conn.Destinations()); n != 2 {
		t.Fatalf("%d packets, want 2", n)
	}
}

func TestPush_StateTheClientHasIsNotPushed(t *testing.T) {
	e := newPushEnv(t, Options{})
	e.register(8080, nil)
	c := nacostesting.NewPushClient(t, "127.0.0.1")
	s := e.subscribe(c, nacostesting.GoAgent)
	// The client was answered a state newer than this node's (a forwarded read, the
	// leader ahead of this node), which this node then applies.
	e.p.Answered(s, e.index+1)
	e.register(8081, nil)
	e.register(8082, nil)
	// The first push is the state after the answered one: neither the state at
	// subscription nor the answered one was pushed.
	if got := nacostesting.HostPorts(c.Next().Info); len(got) != 3 {
		t.Fatalf("first push has ports %v, want the three-instance state", got)
	}
}

func TestPush_LargeViewIsGzipped(t *testing.T) {
	e := newPushEnv(t, Options{})
	c := nacostesting.NewPushClient(t, "127.0.0.1")
	e.subscribe(c, nacostesting.GoAgent)
	md := map[string]string{"owner": "payments-team", "zone": "eu-west-1a", "version": "2024.11.3"}
	for i := range 20 {
		e.register(9000+i, md)
	}
	var r nacostesting.Push
	for len(r.Info.Hosts) < 20 { // the registrations may arrive coalesced or one by one
		r = c.Next()
		c.Ack(r)
	}
	if !r.Gzip || len(r.Raw) >= goClientMaxDatagram {
		t.Fatalf("a %d-host push: gzip %v, %d bytes", len(r.Info.Hosts), r.Gzip, len(r.Raw))
	}
	small := newPushEnv(t, Options{})
	sc := nacostesting.NewPushClient(t, "127.0.0.1")
	small.subscribe(sc, nacostesting.GoAgent)
	small.register(8080, nil)
	if r := sc.Next(); r.Gzip || len(r.Raw) >= pushGzipFrom {
		t.Fatalf("a one-host push: gzip %v, %d bytes", r.Gzip, len(r.Raw))
	}
}

func TestPush_TooLargeForTheGoClientIsNotSent(t *testing.T) {
	e := newPushEnv(t, Options{})
	goClient := nacostesting.NewPushClient(t, "127.0.0.1")
	javaClient := nacostesting.NewPushClient(t, "127.0.0.1")
	gs := e.subscribe(goClient, nacostesting.GoAgent)
	e.subscribe(javaClient, "Nacos-Java-Client:v1.4.2")
	// Random-looking metadata, different on every instance, does not compress below
	// nacos-sdk-go's 4024-byte buffer.
	rng := rand.New(rand.NewPCG(1, 2))
	e.write(func(tx *store.Txn, idx uint64) error {
		for i := range 60 {
			md := map[string]string{}
			for k := range 16 {
				md["k"+strconv.Itoa(k)] = strconv.FormatUint(rng.Uint64(), 16)
			}
			if err := tx.RegisterInstance(idx, model.Instance{
				Namespace: pushKey.Namespace, Group: pushKey.Group, Service: pushKey.Service, IP: "127.0.0.1", Port: 9000 + i,
				Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true, Metadata: md,
			}); err != nil {
				return err
			}
		}
		return nil
	})
	r := javaClient.Next()
	if len(r.Raw) <= goClientMaxDatagram || len(r.Info.Hosts) != 60 {
		t.Fatalf("the Java client got %d bytes, %d hosts", len(r.Raw), len(r.Info.Hosts))
	}
	wait.For(t, 10*time.Second, "the Go client's push to be refused as too large", func() bool {
		return e.counter("failed", "too_large") == 1
	})
	if !e.p.Polling(gs) {
		t.Fatal("a client whose view is too large to push is not answered the poll cacheMillis")
	}
	for _, d := range e.conn.Destinations() {
		if d == goClient.Addr() {
			t.Fatal("a push too large for nacos-sdk-go v1 was sent to it")
		}
	}
}

func TestPush_SubscriberExpires(t *testing.T) {
	ttl := 30 * time.Second
	e := newPushEnv(t, Options{TTL: ttl})
	kept, dropped := nacostesting.NewPushClient(t, "127.0.0.1"), nacostesting.NewPushClient(t, "127.0.0.1")
	e.subscribe(kept, nacostesting.GoAgent)
	e.subscribe(dropped, nacostesting.GoAgent)
	if e.p.Count() != 2 || e.counter("subscribers") != 2 || e.hub.Subscribers(fanout.ServiceTopic(pushKey)) != 1 {
		t.Fatalf("%d subscribers, gauge %v, fan-out subscriptions %d", e.p.Count(), e.counter("subscribers"),
			e.hub.Subscribers(fanout.ServiceTopic(pushKey)))
	}
	e.advance(ttl / 2)
	e.subscribe(kept, nacostesting.GoAgent) // renewed by its next query
	e.advance(ttl/2 + time.Second)
	if e.p.Count() != 1 || len(e.p.Subscribers(pushKey)) != 1 || e.p.Subscribers(pushKey)[0].AddrStr != kept.Addr().String() {
		t.Fatalf("after the TTL: %+v", e.p.Subscribers(pushKey))
	}
	e.register(8080, nil)
	if got := kept.Next(); len(got.Info.Hosts) != 1 {
		t.Fatalf("the renewed subscriber got %+v", got.Info)
	}
	e.advance(ttl + time.Second)
	if e.p.Count() != 0 || e.counter("subscribers") != 0 {
		t.Fatalf("%d subscribers after everyone's TTL", e.p.Count())
	}
	// The service's fan-out subscription ended with its last subscriber.
	wait.For(t, 10*time.Second, "the watch to end", func() bool { return e.hub.Subscribers(fanout.ServiceTopic(pushKey)) == 0 })
	for _, d := range e.conn.Destinations() {
		if d == dropped.Addr() {
			t.Fatal("the expired subscriber was pushed to")
		}
	}
}

// TestPush_AcknowledgedPushesKeepASubscriber checks that an acknowledged push renews a
// subscriber as a query does: nacos-sdk-go v1 does not query while pushes keep coming.
func TestPush_AcknowledgedPushesKeepASubscriber(t *testing.T) {
	ttl := 30 * time.Second
	e := newPushEnv(t, Options{TTL: ttl})
	acking, silent := nacostesting.NewPushClient(t, "127.0.0.1"), nacostesting.NewPushClient(t, "127.0.0.1")
	e.subscribe(acking, nacostesting.GoAgent)
	e.subscribe(silent, nacostesting.GoAgent)
	e.advance(20 * time.Second)
	e.register(8080, nil)
	acking.Ack(acking.Next())
	silent.Next()
	wait.For(t, 10*time.Second, "the ack", func() bool { return e.counter("acked") == 1 })
	e.advance(20 * time.Second) // 40 s after both queries, 20 s after the ack
	if subs := e.p.Subscribers(pushKey); len(subs) != 1 || subs[0].AddrStr != acking.Addr().String() {
		t.Fatalf("subscribers %+v, want only the one that acknowledged", subs)
	}
	e.advance(ttl/2 + time.Second) // beyond the TTL after the ack
	if n := e.p.Count(); n != 0 {
		t.Fatalf("%d subscribers", n)
	}
}

func TestPush_SubscriberLimit(t *testing.T) {
	e := newPushEnv(t, Options{MaxSubscribers: 2})
	for i := range 2 {
		e.subscribe(nacostesting.NewPushClient(t, "127.0.0.1"), nacostesting.GoAgent)
		if e.p.Count() != i+1 {
			t.Fatalf("%d subscribers", e.p.Count())
		}
	}
	c := nacostesting.NewPushClient(t, "127.0.0.1")
	if _, ok := e.p.Subscribe(Query{Service: pushKey, Addr: c.Addr(), Agent: nacostesting.GoAgent}); ok {
		t.Fatal("a subscriber beyond the limit was recorded")
	}
	// A renewal of a recorded one still counts.
	if _, ok := e.p.Subscribe(Query{Service: pushKey, Addr: e.p.Subscribers(pushKey)[0].addrPort(t), Agent: nacostesting.GoAgent}); !ok {
		t.Fatal("a renewal at the limit was refused")
	}
	if e.counter("refused", "limit") != 1 || e.p.Count() != 2 {
		t.Fatalf("refused %v, %d subscribers", e.counter("refused", "limit"), e.p.Count())
	}
}

// TestPush_PerClientCaps checks the caps of one client address and of one address and
// udpPort, that they free up as subscribers expire, and that a system port is never
// recorded.
func TestPush_PerClientCaps(t *testing.T) {
	e := newPushEnv(t, Options{MaxPerAddr: 3, MaxPerPort: 2})
	at := func(ip string, port uint16) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr(ip), port) }
	sub := func(addr netip.AddrPort, clusters string) bool {
		_, ok := e.p.Subscribe(Query{Service: pushKey, Clusters: clusters, Addr: addr, Agent: nacostesting.GoAgent})
		return ok
	}
	for _, tt := range []struct {
		addr     netip.AddrPort
		clusters string
		ok       bool
	}{
		{at("127.0.0.1", 40000), "a", true},
		{at("127.0.0.1", 40000), "b", true},
		{at("127.0.0.1", 40000), "c", false}, // per_port
		{at("127.0.0.1", 40000), "a", true},  // a renewal
		{at("127.0.0.1", 40001), "a", true},
		{at("127.0.0.1", 40002), "a", false}, // per_addr
		{at("127.0.0.2", 40000), "c", true},  // another address has its own caps
		{at("127.0.0.2", 1023), "a", false},  // low_port
		{at("127.0.0.2", 53), "a", false},    // low_port
	} {
		if got := sub(tt.addr, tt.clusters); got != tt.ok {
			t.Fatalf("%s clusters %q: recorded %v, want %v", tt.addr, tt.clusters, got, tt.ok)
		}
	}
	for reason, want := range map[string]float64{"per_port": 1, "per_addr": 1, "low_port": 2, "limit": 0} {
		if got := e.counter("refused", reason); got != want {
			t.Errorf("refused{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	if e.p.Count() != 4 {
		t.Fatalf("%d subscribers, want 4", e.p.Count())
	}
	// Expired subscribers no longer count against the caps.
	e.advance(DefaultSubscriberTTL + 2*time.Second)
	if e.p.Count() != 0 {
		t.Fatalf("%d subscribers after the TTL", e.p.Count())
	}
	for _, c := range []string{"x", "y"} {
		if !sub(at("127.0.0.1", 40000), c) {
			t.Fatalf("clusters %q refused once the earlier subscribers expired", c)
		}
	}
	if e.p.Count() != 2 || len(e.p.perAddr) != 1 || e.p.perPort[at("127.0.0.1", 40000)] != 2 {
		t.Fatalf("%d subscribers, per address %v, per port %v", e.p.Count(), e.p.perAddr, e.p.perPort)
	}
}

// TestPush_ChangeBudgetPerAddress checks that one change sends at most the budget's
// bytes, resends included, to one client address: the pushes beyond it are skipped,
// counted, and their subscribers poll; another address has a budget of its own.
func TestPush_ChangeBudgetPerAddress(t *testing.T) {
	const budget = 2500
	e := newPushEnv(t, Options{ChangeBudget: budget, Retries: 3})
	other := nacostesting.NewPushClient(t, "127.0.0.2")
	var subs []*Subscription
	for range 5 {
		subs = append(subs, e.subscribe(nacostesting.NewPushClient(t, "127.0.0.1"), nacostesting.GoAgent))
	}
	otherSub := e.subscribe(other, nacostesting.GoAgent)
	e.register(8080, nil)
	wait.For(t, 10*time.Second, "the change's pushes", func() bool {
		return e.counter("sent")+e.counter("failed", "budget") == 6
	})
	first := other.Next()
	size := len(first.Raw)
	if size > budget/2 {
		t.Fatalf("a push of %d bytes: the test wants several to fit in the budget", size)
	}
	fit := budget / size
	if sent := e.counter("sent"); sent != float64(fit+1) || e.counter("failed", "budget") != float64(5-fit) {
		t.Fatalf("sent %v, skipped %v; want %d sent to 127.0.0.1 (and 1 to 127.0.0.2), %d skipped",
			sent, e.counter("failed", "budget"), fit, 5-fit)
	}
	bytesTo := func(ip string) int {
		n := 0
		for _, d := range e.conn.Destinations() {
			if d.Addr() == netip.MustParseAddr(ip) {
				n += size
			}
		}
		return n
	}
	if got := bytesTo("127.0.0.1"); got > budget {
		t.Fatalf("%d bytes to 127.0.0.1, over the budget of %d", got, budget)
	}
	polling := 0
	for _, s := range subs {
		if e.p.Polling(s) {
			polling++
		}
	}
	if polling != 5-fit {
		t.Fatalf("%d subscribers poll, want the %d whose push was skipped", polling, 5-fit)
	}
	// No ack: the resends of the change are charged to the same budget, the address's
	// left over (budget - fit*size < size) has room for none of them.
	other.Ack(first)
	wait.For(t, 10*time.Second, "the ack", func() bool { return e.counter("acked") == 1 })
	e.advance(time.Second)
	if got := bytesTo("127.0.0.1"); got > budget {
		t.Fatalf("%d bytes to 127.0.0.1 with resends, over the budget of %d", got, budget)
	}
	if e.counter("resent") != 0 || e.counter("failed", "budget") != 5 {
		t.Fatalf("resent %v, skipped %v; want no resend and all 5 skipped", e.counter("resent"), e.counter("failed", "budget"))
	}
	if e.p.Polling(otherSub) {
		t.Fatal("the subscriber at another address, which acked, polls")
	}
	// The next change has a budget of its own.
	sent := e.counter("sent")
	before := sent + e.counter("failed", "budget")
	e.register(8081, nil)
	wait.For(t, 10*time.Second, "the next change's pushes", func() bool {
		return e.counter("sent")+e.counter("failed", "budget") == before+6
	})
	if got := e.counter("sent") - sent; got < 2 {
		t.Fatalf("the second change sent %v pushes, want some to 127.0.0.1 too", got)
	}

}

func (s SubscriberInfo) addrPort(t *testing.T) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(s.AddrStr)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

func TestPush_ViewsAreRenderedPerSubscriber(t *testing.T) {
	e := newPushEnv(t, Options{})
	e.write(func(tx *store.Txn, idx uint64) error {
		for i, c := range []string{"a", "b"} {
			if err := tx.RegisterInstance(idx, model.Instance{
				Namespace: pushKey.Namespace, Group: pushKey.Group, Service: pushKey.Service, IP: "127.0.0.1", Port: 8000 + i,
				Cluster: c, Weight: 1, Enabled: true, Healthy: i == 0,
			}); err != nil {
				return err
			}
		}
		return nil
	})
	type client struct {
		c           *nacostesting.PushClient
		clusters    string
		healthyOnly bool
		want        []int
	}
	clients := []client{
		{nacostesting.NewPushClient(t, "127.0.0.1"), "", false, []int{8000, 8001}},
		{nacostesting.NewPushClient(t, "127.0.0.1"), "", true, []int{8000}},
		{nacostesting.NewPushClient(t, "127.0.0.1"), "b", false, []int{8001}},
	}
	for _, cl := range clients {
		if _, ok := e.p.Subscribe(Query{Service: pushKey, Clusters: cl.clusters, HealthyOnly: cl.healthyOnly,
			Addr: cl.c.Addr(), Agent: nacostesting.GoAgent}); !ok {
			t.Fatal("not recorded")
		}
	}
	// A change of the service's metadata changes every view.
	e.write(func(tx *store.Txn, idx uint64) error {
		return tx.UpsertService(idx, model.Service{Namespace: pushKey.Namespace, Group: pushKey.Group, Name: pushKey.Service,
			Metadata: map[string]string{"v": "2"}})
	})
	for _, cl := range clients {
		r := cl.c.Next()
		if got := nacostesting.HostPorts(r.Info); fmt.Sprint(got) != fmt.Sprint(cl.want) || r.Info.Clusters != cl.clusters || r.Info.Metadata["v"] != "2" {
			t.Errorf("clusters %q healthyOnly %v: ports %v clusters %q metadata %v, want %v", cl.clusters, cl.healthyOnly,
				got, r.Info.Clusters, r.Info.Metadata, cl.want)
		}
	}
}

func TestPush_MissingServiceIsAnEmptyList(t *testing.T) {
	e := newPushEnv(t, Options{})
	e.register(8080, nil)
	c := nacostesting.NewPushClient(t, "127.0.0.1")
	e.subscribe(c, nacostesting.GoAgent)
	e.deregister(8080)
	if r := c.Next(); len(r.Info.Hosts) != 0 {
		t.Fatalf("after the last deregistration: %+v", r.Info.Hosts)
	}
	e.write(func(tx *store.Txn, idx uint64) error { return tx.DeleteService(idx, pushKey) })
	if r := c.Next(); len(r.Info.Hosts) != 0 || r.Info.Name != "g1@@orders" {
		t.Fatalf("after the service was deleted: %+v", r.Info)
	}
}

func TestPush_StopsWithTheHub(t *testing.T) {
	e := newPushEnv(t, Options{})
	c := nacostesting.NewPushClient(t, "127.0.0.1")
	e.subscribe(c, nacostesting.GoAgent)
	e.hub.Close()
	wait.For(t, 10*time.Second, "the pusher to stop", func() bool { return e.p.Count() == 0 })
	if _, ok := e.p.Subscribe(Query{Service: pushKey, Addr: c.Addr(), Agent: nacostesting.GoAgent}); ok {
		t.Fatal("a stopped pusher recorded a subscriber")
	}
	e.p.wg.Wait()
}

func TestSupported(t *testing.T) {
	for agent, want := range map[string]bool{
		"Nacos-Go-Client:v1.0.1":          true,
		"Nacos-Go-Client:v0.1.0":          true,
		"Nacos-Go-Client:v0.0.9":          false,
		"Nacos-Java-Client:v1.4.2":        true,
		"Nacos-Java-Client:v2.0.0-BETA":   true,
		"Nacos-C-Client:v1.0.12":          true,
		"Nacos-C-Client:v1.0.11":          false,
		"vip-client4cpp:v1.1":             true,
		"Nacos-CSharp-Client:v0.9.0":      true,
		"Nacos-DNS:v0.4.3":                true,
		"Nacos-DNS:v0.4.2":                false,
		"Nacos-Go-Client":                 false,
		"Nacos-Go-Client:vX":              false,
		"Nacos-Python-Client:v0.1.0":      false,
		"curl/8.5.0":                      false,
		"":                                false,
		"Go-http-client/1.1":              false,
		"Nacos-Java-Client:v1.4.2;extra":  true,
		"Nacos-Java-Client:v10":           true,
		"Nacos-Java-Client:v0.1.0.RELEAS": true,
	} {
		if got := Supported(agent); got != want {
			t.Errorf("pushAgent(%q) = %v, want %v", agent, got, want)
		}
	}
}

func TestTarget(t *testing.T) {
	for remote, want := range map[string]string{
		"127.0.0.1:40000":        "127.0.0.1:5000",
		"[::ffff:127.0.0.1]:400": "127.0.0.1:5000",
		"[::1]:40000":            "[::1]:5000",
		"127.1.2.3:1":            "127.1.2.3:5000",
		"0.0.0.0:1":              "",
		"[::]:1":                 "",
		"224.0.0.1:1":            "",
		"[ff02::1]:1":            "",
		"255.255.255.255:1":      "",
		"pipe":                   "",
		"example.com:80":         "",
	} {
		got, ok := Target(remote, 5000)
		if (want == "") == ok || (ok && got.String() != want) {
			t.Errorf("pushAddr(%q) = %v %v, want %q", remote, got, ok, want)
		}
	}
}

func TestParseAck(t *testing.T) {
	for in, want := range map[string]int64{
		`{"type":"push-ack","lastRefTime":"123","data":""}`:   123,
		`{"type": "push-ack", "lastRefTime":"77", "data":""}`: 77,
		`{"type":"push-ack","lastRefTime":456}`:               456,
		`{"type":"dump-ack","lastRefTime":"1"}`:               -1,
		`{"type":"push-ack","lastRefTime":"x"}`:               -1,
		`{"type":"push-ack"}`:                                 -1,
		`not json`:                                            -1,
	} {
		got, ok := parseAck([]byte(in))
		if (want < 0) == ok || (ok && got != want) {
			t.Errorf("parseAck(%s) = %d %v, want %d", in, got, ok, want)
		}
	}
}

func TestAddrFor(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8848": "127.0.0.1:0",
		"[::]:8848":      "[::]:0",
		":8848":          ":0",
		"bad":            "",
	} {
		if got := AddrFor(in); got != want {
			t.Errorf("AddrFor(%q) = %q, want %q", in, got, want)
		}
	}
}
