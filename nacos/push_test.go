package nacos

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rosterhq/roster/fanout"
	"github.com/rosterhq/roster/internal/clock"
	"github.com/rosterhq/roster/internal/storetest"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

const goAgent = "Nacos-Go-Client:v1.0.1"

// guardConn is a push socket on 127.0.0.1 that records where every packet goes and
// refuses (failing the test) any destination off loopback.
type guardConn struct {
	*net.UDPConn
	t     testing.TB
	mu    sync.Mutex
	dests []netip.AddrPort
	bytes int
}

func newGuardConn(t testing.TB) *guardConn {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	return &guardConn{UDPConn: c, t: t}
}

func (c *guardConn) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	if !addr.Addr().IsLoopback() {
		c.t.Errorf("a push was addressed to %s, off loopback", addr)
		return 0, errors.New("guardConn: refused")
	}
	c.mu.Lock()
	c.dests = append(c.dests, addr)
	c.bytes += len(b)
	c.mu.Unlock()
	return c.UDPConn.WriteToUDPAddrPort(b, addr)
}

// destinations lists where packets were sent, in order.
func (c *guardConn) destinations() []netip.AddrPort {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]netip.AddrPort(nil), c.dests...)
}

// sentBytes is the number of bytes sent.
func (c *guardConn) sentBytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// pushEnv is a pusher over a fresh store and hub, on a manual clock.
type pushEnv struct {
	t     *testing.T
	st    *store.Store
	hub   *fanout.Hub
	p     *pusher
	conn  *guardConn
	clock *clock.Manual
	reg   *prometheus.Registry
	ticks chan time.Time
	index uint64
}

var pushKey = model.ServiceKey{Namespace: "public", Group: "g1", Service: "orders"}

func newPushEnv(t *testing.T, opts pushOptions) *pushEnv {
	t.Helper()
	st := storetest.Open(t)
	hub, err := fanout.New(st, fanout.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &pushEnv{t: t, st: st, hub: hub, conn: newGuardConn(t), clock: clock.NewManual(time.Unix(1_700_000_000, 0)),
		reg: prometheus.NewRegistry(), ticks: make(chan time.Time, 64)}
	opts.Conn, opts.Clock, opts.Registerer = e.conn, e.clock, e.reg
	opts.onTick = func(now time.Time) { e.ticks <- now }
	if e.p, err = newPusher(hub, st, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.p.close()
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
func (e *pushEnv) subscribe(c *pushClient, agent string) *pushSub {
	e.t.Helper()
	s, ok := e.p.subscribe(pushQuery{service: pushKey, addr: c.addr(), agent: agent, app: "app1"})
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

// pushClient is a UDP socket standing in for a Nacos client's push receiver.
type pushClient struct {
	t    *testing.T
	conn *net.UDPConn
}

func newPushClient(t *testing.T, ip string) *pushClient {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &pushClient{t: t, conn: c}
}

func (c *pushClient) addr() netip.AddrPort { return c.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// received is one push as the client read it.
type received struct {
	raw    []byte
	gzip   bool
	packet pushPacket
	info   ServiceInfo
	from   netip.AddrPort
}

// next reads the next push (10 s at most) and decodes it as nacos-sdk-go v1 does.
func (c *pushClient) next() received {
	c.t.Helper()
	buf := make([]byte, 64<<10)
	if err := c.conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		c.t.Fatal(err)
	}
	n, from, err := c.conn.ReadFromUDPAddrPort(buf)
	if err != nil {
		c.t.Fatalf("no push: %v", err)
	}
	r := received{raw: append([]byte(nil), buf[:n]...), from: from}
	body := r.raw
	if bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
		r.gzip = true
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			c.t.Fatal(err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := json.Unmarshal(body, &r.packet); err != nil {
		c.t.Fatalf("push %q: %v", body, err)
	}
	if err := json.Unmarshal([]byte(r.packet.Data), &r.info); err != nil {
		c.t.Fatalf("push data %q: %v", r.packet.Data, err)
	}
	return r
}

// ack answers a push as nacos-sdk-go v1 does (lastRefTime as a string), to its source.
func (c *pushClient) ack(r received) {
	c.t.Helper()
	b := fmt.Sprintf(`{"data":"","lastRefTime":"%d","type":"push-ack"}`, r.packet.LastRefTime)
	if _, err := c.conn.WriteToUDPAddrPort([]byte(b), r.from); err != nil {
		c.t.Fatal(err)
	}
}

// hostPorts lists the ports of a pushed list.
func hostPorts(info ServiceInfo) []int {
	var out []int
	for _, h := range info.Hosts {
		out = append(out, h.Port)
	}
	return out
}

func TestPush_ChangeIsPushedAndAcked(t *testing.T) {
	e := newPushEnv(t, pushOptions{})
	e.register(8080, nil)
	c := newPushClient(t, "127.0.0.1")
	e.subscribe(c, goAgent)
	idx := e.register(8081, nil)

	r := c.next()
	if r.packet.Type != "dom" || r.from.Port() != uint16(e.conn.LocalAddr().(*net.UDPAddr).Port) {
		t.Fatalf("push %+v from %s (socket %s), gzip %v", r.packet.Type, r.from, e.conn.LocalAddr(), r.gzip)
	}
	want := ServiceInfoFor(pushKey, mustView(t, e.st), true, "", false, PushCacheMillis, e.clock.Now())
	wantJSON, _ := json.Marshal(want)
	if r.packet.Data != string(wantJSON) {
		t.Fatalf("pushed data\n %s\nwant what instance/list answers\n %s", r.packet.Data, wantJSON)
	}
	if got := hostPorts(r.info); len(got) != 2 || r.info.CacheMillis != PushCacheMillis || r.info.Name != "g1@@orders" {
		t.Fatalf("pushed list %+v (index %d)", r.info, idx)
	}
	c.ack(r)
	wait.For(t, 10*time.Second, "the ack to be matched", func() bool { return e.counter("acked") == 1 })
	if e.counter("sent") != 1 || e.counter("ignored") != 0 {
		t.Fatalf("sent %v ignored %v", e.counter("sent"), e.counter("ignored"))
	}
	// Acknowledged: a retry round sends nothing more.
	e.advance(2 * time.Second)
	if got := e.conn.destinations(); len(got) != 1 || got[0] != c.addr() {
		t.Fatalf("packets went to %v, want one to %s", got, c.addr())
	}
	// A second ack of the same push matches nothing.
	c.ack(r)
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
	e := newPushEnv(t, pushOptions{Retries: 2, RetryInterval: time.Second})
	c := newPushClient(t, "127.0.0.1")
	s := e.subscribe(c, goAgent)
	e.register(8080, nil)
	first := c.next()
	for i := 1; i <= 2; i++ {
		e.advance(time.Second)
		again := c.next()
		if !bytes.Equal(again.raw, first.raw) {
			t.Fatalf("resend %d differs from the push", i)
		}
	}
	e.advance(time.Second)
	if e.counter("failed", "no_ack") != 1 || e.counter("resent") != 2 || e.counter("sent") != 1 {
		t.Fatalf("failed %v resent %v sent %v", e.counter("failed", "no_ack"), e.counter("resent"), e.counter("sent"))
	}
	if n := len(e.conn.destinations()); n != 3 {
		t.Fatalf("%d packets, want 3 (the push and 2 resends)", n)
	}
	if !e.p.polling(s) {
		t.Fatal("a subscriber whose push went unacknowledged is not answered the poll cacheMillis")
	}
	// A late ack is ignored; the next push that is acknowledged ends the polling.
	c.ack(first)
	wait.For(t, 10*time.Second, "the late ack to be ignored", func() bool { return e.counter("ignored") == 1 })
	e.register(8081, nil)
	c.ack(c.next())
	wait.For(t, 10*time.Second, "the ack", func() bool { return e.counter("acked") == 1 })
	if e.p.polling(s) {
		t.Fatal("still polling after an acknowledged push")
	}
}

func TestPush_NewerStateSupersedesUnacked(t *testing.T) {
	e := newPushEnv(t, pushOptions{})
	c := newPushClient(t, "127.0.0.1")
	e.subscribe(c, goAgent)
	e.register(8080, nil)
	first := c.next()
	e.register(8081, nil)
	second := c.next()
	if len(second.info.Hosts) != 2 || second.packet.LastRefTime == first.packet.LastRefTime {
		t.Fatalf("second push %+v (lastRefTime %d, first %d)", second.info.Hosts, second.packet.LastRefTime, first.packet.LastRefTime)
	}
	wait.For(t, 10*time.Second, "the first push to be superseded", func() bool { return e.counter("superseded") == 1 })
	c.ack(first)
	wait.For(t, 10*time.Second, "the superseded ack to be ignored", func() bool { return e.counter("ignored") == 1 })
	c.ack(second)
	wait.For(t, 10*time.Second, "the ack", func() bool { return e.counter("acked") == 1 })
	// Only the newer push is resent while unacknowledged: nothing is pending now.
	e.advance(2 * time.Second)
	if n := len(e.conn.destinations()); n != 2 {
		t.Fatalf("%d packets, want 2", n)
	}
}

func TestPush_StateTheClientHasIsNotPushed(t *testing.T) {
	e := newPushEnv(t, pushOptions{})
	e.register(8080, nil)
	c := newPushClient(t, "127.0.0.1")
	s := e.subscribe(c, goAgent)
	// The client was answered a state newer than this node's (a forwarded read, the
	// leader ahead of this node), which this node then applies.
	e.p.answered(s, e.index+1)
	e.register(8081, nil)
	e.register(8082, nil)
	// The first push is the state after the answered one: neither the state at
	// subscription nor the answered one was pushed.
	if got := hostPorts(c.next().info); len(got) != 3 {
		t.Fatalf("first push has ports %v, want the three-instance state", got)
	}
}

func TestPush_LargeViewIsGzipped(t *testing.T) {
	e := newPushEnv(t, pushOptions{})
	c := newPushClient(t, "127.0.0.1")
	e.subscribe(c, goAgent)
	md := map[string]string{"owner": "payments-team", "zone": "eu-west-1a", "version": "2024.11.3"}
	for i := range 20 {
		e.register(9000+i, md)
	}
	var r received
	for len(r.info.Hosts) < 20 { // the registrations may arrive coalesced or one by one
		r = c.next()
		c.ack(r)
	}
	if !r.gzip || len(r.raw) >= goClientMaxDatagram {
		t.Fatalf("a %d-host push: gzip %v, %d bytes", len(r.info.Hosts), r.gzip, len(r.raw))
	}
	small := newPushEnv(t, pushOptions{})
	sc := newPushClient(t, "127.0.0.1")
	small.subscribe(sc, goAgent)
	small.register(8080, nil)
	if r := sc.next(); r.gzip || len(r.raw) >= pushGzipFrom {
		t.Fatalf("a one-host push: gzip %v, %d bytes", r.gzip, len(r.raw))
	}
}

func TestPush_TooLargeForTheGoClientIsNotSent(t *testing.T) {
	e := newPushEnv(t, pushOptions{})
	goClient := newPushClient(t, "127.0.0.1")
	javaClient := newPushClient(t, "127.0.0.1")
	gs := e.subscribe(goClient, goAgent)
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
	r := javaClient.next()
	if len(r.raw) <= goClientMaxDatagram || len(r.info.Hosts) != 60 {
		t.Fatalf("the Java client got %d bytes, %d hosts", len(r.raw), len(r.info.Hosts))
	}
	wait.For(t, 10*time.Second, "the Go client's push to be refused as too large", func() bool {
		return e.counter("failed", "too_large") == 1
	})
	if !e.p.polling(gs) {
		t.Fatal("a client whose view is too large to push is not answered the poll cacheMillis")
	}
	for _, d := range e.conn.destinations() {
		if d == goClient.addr() {
			t.Fatal("a push too large for nacos-sdk-go v1 was sent to it")
		}
	}
}

func TestPush_SubscriberExpires(t *testing.T) {
	ttl := 30 * time.Second
	e := newPushEnv(t, pushOptions{TTL: ttl})
	kept, dropped := newPushClient(t, "127.0.0.1"), newPushClient(t, "127.0.0.1")
	e.subscribe(kept, goAgent)
	e.subscribe(dropped, goAgent)
	if e.p.count() != 2 || e.counter("subscribers") != 2 || e.hub.Subscribers(fanout.ServiceTopic(pushKey)) != 1 {
		t.Fatalf("%d subscribers, gauge %v, fan-out subscriptions %d", e.p.count(), e.counter("subscribers"),
			e.hub.Subscribers(fanout.ServiceTopic(pushKey)))
	}
	e.advance(ttl / 2)
	e.subscribe(kept, goAgent) // renewed by its next query
	e.advance(ttl/2 + time.Second)
	if e.p.count() != 1 || len(e.p.subscribers(pushKey)) != 1 || e.p.subscribers(pushKey)[0].AddrStr != kept.addr().String() {
		t.Fatalf("after the TTL: %+v", e.p.subscribers(pushKey))
	}
	e.register(8080, nil)
	if got := kept.next(); len(got.info.Hosts) != 1 {
		t.Fatalf("the renewed subscriber got %+v", got.info)
	}
	e.advance(ttl + time.Second)
	if e.p.count() != 0 || e.counter("subscribers") != 0 {
		t.Fatalf("%d subscribers after everyone's TTL", e.p.count())
	}
	// The service's fan-out subscription ended with its last subscriber.
	wait.For(t, 10*time.Second, "the watch to end", func() bool { return e.hub.Subscribers(fanout.ServiceTopic(pushKey)) == 0 })
	for _, d := range e.conn.destinations() {
		if d == dropped.addr() {
			t.Fatal("the expired subscriber was pushed to")
		}
	}
}

// TestPush_AcknowledgedPushesKeepASubscriber checks that an acknowledged push renews a
// subscriber as a query does: nacos-sdk-go v1 does not query while pushes keep coming.
func TestPush_AcknowledgedPushesKeepASubscriber(t *testing.T) {
	ttl := 30 * time.Second
	e := newPushEnv(t, pushOptions{TTL: ttl})
	acking, silent := newPushClient(t, "127.0.0.1"), newPushClient(t, "127.0.0.1")
	e.subscribe(acking, goAgent)
	e.subscribe(silent, goAgent)
	e.advance(20 * time.Second)
	e.register(8080, nil)
	acking.ack(acking.next())
	silent.next()
	wait.For(t, 10*time.Second, "the ack", func() bool { return e.counter("acked") == 1 })
	e.advance(20 * time.Second) // 40 s after both queries, 20 s after the ack
	if subs := e.p.subscribers(pushKey); len(subs) != 1 || subs[0].AddrStr != acking.addr().String() {
		t.Fatalf("subscribers %+v, want only the one that acknowledged", subs)
	}
	e.advance(ttl/2 + time.Second) // beyond the TTL after the ack
	if n := e.p.count(); n != 0 {
		t.Fatalf("%d subscribers", n)
	}
}

func TestPush_SubscriberLimit(t *testing.T) {
	e := newPushEnv(t, pushOptions{MaxSubscribers: 2})
	for i := range 2 {
		e.subscribe(newPushClient(t, "127.0.0.1"), goAgent)
		if e.p.count() != i+1 {
			t.Fatalf("%d subscribers", e.p.count())
		}
	}
	c := newPushClient(t, "127.0.0.1")
	if _, ok := e.p.subscribe(pushQuery{service: pushKey, addr: c.addr(), agent: goAgent}); ok {
		t.Fatal("a subscriber beyond the limit was recorded")
	}
	// A renewal of a recorded one still counts.
	if _, ok := e.p.subscribe(pushQuery{service: pushKey, addr: e.p.subscribers(pushKey)[0].addrPort(t), agent: goAgent}); !ok {
		t.Fatal("a renewal at the limit was refused")
	}
	if e.counter("refused", "limit") != 1 || e.p.count() != 2 {
		t.Fatalf("refused %v, %d subscribers", e.counter("refused", "limit"), e.p.count())
	}
}

// TestPush_PerClientCaps checks the caps of one client address and of one address and
// udpPort, that they free up as subscribers expire, and that a system port is never
// recorded.
func TestPush_PerClientCaps(t *testing.T) {
	e := newPushEnv(t, pushOptions{MaxPerAddr: 3, MaxPerPort: 2})
	at := func(ip string, port uint16) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr(ip), port) }
	sub := func(addr netip.AddrPort, clusters string) bool {
		_, ok := e.p.subscribe(pushQuery{service: pushKey, clusters: clusters, addr: addr, agent: goAgent})
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
	if e.p.count() != 4 {
		t.Fatalf("%d subscribers, want 4", e.p.count())
	}
	// Expired subscribers no longer count against the caps.
	e.advance(DefaultPushSubscriberTTL + 2*time.Second)
	if e.p.count() != 0 {
		t.Fatalf("%d subscribers after the TTL", e.p.count())
	}
	for _, c := range []string{"x", "y"} {
		if !sub(at("127.0.0.1", 40000), c) {
			t.Fatalf("clusters %q refused once the earlier subscribers expired", c)
		}
	}
	if e.p.count() != 2 || len(e.p.perAddr) != 1 || e.p.perPort[at("127.0.0.1", 40000)] != 2 {
		t.Fatalf("%d subscribers, per address %v, per port %v", e.p.count(), e.p.perAddr, e.p.perPort)
	}
}

// TestPush_ChangeBudgetPerAddress checks that one change sends at most the budget's
// bytes, resends included, to one client address: the pushes beyond it are skipped,
// counted, and their subscribers poll; another address has a budget of its own.
func TestPush_ChangeBudgetPerAddress(t *testing.T) {
	const budget = 2500
	e := newPushEnv(t, pushOptions{ChangeBudget: budget, Retries: 3})
	other := newPushClient(t, "127.0.0.2")
	var subs []*pushSub
	for range 5 {
		subs = append(subs, e.subscribe(newPushClient(t, "127.0.0.1"), goAgent))
	}
	otherSub := e.subscribe(other, goAgent)
	e.register(8080, nil)
	wait.For(t, 10*time.Second, "the change's pushes", func() bool {
		return e.counter("sent")+e.counter("failed", "budget") == 6
	})
	first := other.next()
	size := len(first.raw)
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
		for _, d := range e.conn.destinations() {
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
		if e.p.polling(s) {
			polling++
		}
	}
	if polling != 5-fit {
		t.Fatalf("%d subscribers poll, want the %d whose push was skipped", polling, 5-fit)
	}
	// No ack: the resends of the change are charged to the same budget, the address's
	// left over (budget - fit*size < size) has room for none of them.
	other.ack(first)
	wait.For(t, 10*time.Second, "the ack", func() bool { return e.counter("acked") == 1 })
	e.advance(time.Second)
	if got := bytesTo("127.0.0.1"); got > budget {
		t.Fatalf("%d bytes to 127.0.0.1 with resends, over the budget of %d", got, budget)
	}
	if e.counter("resent") != 0 || e.counter("failed", "budget") != 5 {
		t.Fatalf("resent %v, skipped %v; want no resend and all 5 skipped", e.counter("resent"), e.counter("failed", "budget"))
	}
	if e.p.polling(otherSub) {
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

func (s pushSubscriber) addrPort(t *testing.T) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(s.AddrStr)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

func TestPush_ViewsAreRenderedPerSubscriber(t *testing.T) {
	e := newPushEnv(t, pushOptions{})
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
		c           *pushClient
		clusters    string
		healthyOnly bool
		want        []int
	}
	clients := []client{
		{newPushClient(t, "127.0.0.1"), "", false, []int{8000, 8001}},
		{newPushClient(t, "127.0.0.1"), "", true, []int{8000}},
		{newPushClient(t, "127.0.0.1"), "b", false, []int{8001}},
	}
	for _, cl := range clients {
		if _, ok := e.p.subscribe(pushQuery{service: pushKey, clusters: cl.clusters, healthyOnly: cl.healthyOnly,
			addr: cl.c.addr(), agent: goAgent}); !ok {
			t.Fatal("not recorded")
		}
	}
	// A change of the service's metadata changes every view.
	e.write(func(tx *store.Txn, idx uint64) error {
		return tx.UpsertService(idx, model.Service{Namespace: pushKey.Namespace, Group: pushKey.Group, Name: pushKey.Service,
			Metadata: map[string]string{"v": "2"}})
	})
	for _, cl := range clients {
		r := cl.c.next()
		if got := hostPorts(r.info); fmt.Sprint(got) != fmt.Sprint(cl.want) || r.info.Clusters != cl.clusters || r.info.Metadata["v"] != "2" {
			t.Errorf("clusters %q healthyOnly %v: ports %v clusters %q metadata %v, want %v", cl.clusters, cl.healthyOnly,
				got, r.info.Clusters, r.info.Metadata, cl.want)
		}
	}
}

func TestPush_MissingServiceIsAnEmptyList(t *testing.T) {
	e := newPushEnv(t, pushOptions{})
	e.register(8080, nil)
	c := newPushClient(t, "127.0.0.1")
	e.subscribe(c, goAgent)
	e.deregister(8080)
	if r := c.next(); len(r.info.Hosts) != 0 {
		t.Fatalf("after the last deregistration: %+v", r.info.Hosts)
	}
	e.write(func(tx *store.Txn, idx uint64) error { return tx.DeleteService(idx, pushKey) })
	if r := c.next(); len(r.info.Hosts) != 0 || r.info.Name != "g1@@orders" {
		t.Fatalf("after the service was deleted: %+v", r.info)
	}
}

func TestPush_StopsWithTheHub(t *testing.T) {
	e := newPushEnv(t, pushOptions{})
	c := newPushClient(t, "127.0.0.1")
	e.subscribe(c, goAgent)
	e.hub.Close()
	wait.For(t, 10*time.Second, "the pusher to stop", func() bool { return e.p.count() == 0 })
	if _, ok := e.p.subscribe(pushQuery{service: pushKey, addr: c.addr(), agent: goAgent}); ok {
		t.Fatal("a stopped pusher recorded a subscriber")
	}
	e.p.wg.Wait()
}

func TestPushAgent(t *testing.T) {
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
		if got := pushAgent(agent); got != want {
			t.Errorf("pushAgent(%q) = %v, want %v", agent, got, want)
		}
	}
}

func TestPushAddr(t *testing.T) {
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
		got, ok := pushAddr(remote, 5000)
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

func TestPushAddrFor(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8848": "127.0.0.1:0",
		"[::]:8848":      "[::]:0",
		":8848":          ":0",
		"bad":            "",
	} {
		if got := PushAddrFor(in); got != want {
			t.Errorf("PushAddrFor(%q) = %q, want %q", in, got, want)
		}
	}
}
