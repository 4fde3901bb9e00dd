package openapi

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fanout"
	"github.com/rosterhq/roster/internal/clock"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/nacos/internal/nacostesting"
	"github.com/rosterhq/roster/nacos/udppush"
	"github.com/rosterhq/roster/store"
)

// pushAPI is a Nacos API with UDP pushes, served over HTTP on 127.0.0.1 so that
// queries have a loopback source address.
type pushAPI struct {
	h     http.Handler
	st    *store.Store
	node  *nacostesting.Node
	push  *udppush.Pusher
	conn  *nacostesting.GuardConn
	reg   *prometheus.Registry
	url   string
	clock *clock.Manual
	ticks chan time.Time
}

// newPushAPI is the API of node id (leader nil: it leads) with pushes; a manual clock
// is used when manual is set.
func newPushAPI(t *testing.T, id string, leader *model.Member, opts udppush.Options, manual bool) *pushAPI {
	t.Helper()
	return newPushAPIWith(t, id, leader, opts, manual, nil)
}

// newPushAPIWith is newPushAPI with configure (nil: none) adjusting the configuration.
func newPushAPIWith(t *testing.T, id string, leader *model.Member, opts udppush.Options, manual bool, configure func(*store.Store, *Config)) *pushAPI {
	t.Helper()
	a := &pushAPI{conn: nacostesting.NewGuardConn(t), reg: prometheus.NewRegistry(), ticks: make(chan time.Time, 64)}
	opts.Conn = a.conn
	if manual {
		a.clock = clock.NewManual(time.Unix(1_700_000_000, 0))
		opts.Clock = a.clock
		opts.OnTick = func(now time.Time) { a.ticks <- now }
	}
	a.h, a.st, a.node = newTestAPIWith(t, id, leader, func(st *store.Store, cfg *Config) {
		hub, err := fanout.New(st, fanout.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(hub.Close)
		cfg.Watch, cfg.Registerer, cfg.push = hub, a.reg, opts
		if configure != nil {
			configure(st, cfg)
		}
	})
	a.push = a.h.(*API).push
	t.Cleanup(a.push.Close)
	srv := httptest.NewServer(a.h)
	t.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

// advance moves the manual clock and waits for the pusher's round at the new time.
func (a *pushAPI) advance(t *testing.T, d time.Duration) {
	t.Helper()
	a.clock.Advance(d)
	target := a.clock.Now()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case now := <-a.ticks:
			if !now.Before(target) {
				return
			}
		case <-deadline:
			t.Fatalf("no push round at %s within 10s", target)
		}
	}
}

// getAs sends a GET with the given User-Agent.
func getAs(t *testing.T, url, agent string) nacostesting.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", agent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return nacostesting.Response{Code: resp.StatusCode, Header: resp.Header, Body: b}
}

// list queries the instance list as nacos-sdk-go v1 does, for a client at udpPort.
func (a *pushAPI) list(t *testing.T, query string, udpPort int) nacos.ServiceInfo {
	t.Helper()
	resp := getAs(t, a.url+"/nacos/v1/ns/instance/list?"+query+"&udpPort="+strconv.Itoa(udpPort)+"&healthyOnly=false", nacostesting.GoAgent)
	if resp.Code != http.StatusOK {
		t.Fatalf("list: %d %s", resp.Code, resp.Body)
	}
	var info nacos.ServiceInfo
	resp.Decode(t, &info)
	return info
}

func (a *pushAPI) subscribers(t *testing.T, query string) subscribersV1 {
	t.Helper()
	resp := getAs(t, a.url+"/nacos/v1/ns/service/subscribers?"+query, "curl/8")
	if resp.Code != http.StatusOK {
		t.Fatalf("subscribers: %d %s", resp.Code, resp.Body)
	}
	var out subscribersV1
	resp.Decode(t, &out)
	return out
}

func register(t *testing.T, h http.Handler, service string, port int) {
	t.Helper()
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/instance",
		"serviceName="+service+"&ip=127.0.0.1&ephemeral=false&port="+strconv.Itoa(port))
}

// TestNacosPush_QueryRecordsAndPushesToTheSource checks that an instance-list query
// with udpPort records its client, is answered cacheMillis 10000, and that the next
// change is pushed to the query's source address, not to the clientIP it names,
// carrying what the list then answers.
func TestNacosPush_QueryRecordsAndPushesToTheSource(t *testing.T) {
	a := newPushAPI(t, "n1", nil, udppush.Options{}, false)
	register(t, a.h, "orders", 8080)
	c := nacostesting.NewPushClient(t, "127.0.0.1")
	port := int(c.Addr().Port())
	// A socket at the address the query names as its clientIP, on the same port.
	named, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: port})
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot bind 127.0.0.2: %v", err)
		}
		t.Skipf("cannot bind 127.0.0.2: %v", err)
	}
	defer named.Close()

	info := a.list(t, "serviceName=DEFAULT_GROUP@@orders&groupName=DEFAULT_GROUP&clusters=&app=shop&clientIP=127.0.0.2", port)
	if info.CacheMillis != udppush.CacheMillis || len(info.Hosts) != 1 {
		t.Fatalf("answer to a push client: cacheMillis %d, %d hosts", info.CacheMillis, len(info.Hosts))
	}
	subs := a.subscribers(t, "serviceName=orders")
	want := udppush.SubscriberInfo{AddrStr: "127.0.0.1:" + strconv.Itoa(port), Agent: nacostesting.GoAgent, App: "shop", IP: "127.0.0.1",
		NamespaceID: "public", ServiceName: "DEFAULT_GROUP@@orders"}
	if subs.Count != 1 || len(subs.Subscribers) != 1 || subs.Subscribers[0] != want {
		t.Fatalf("subscribers %+v, want %+v", subs, want)
	}

	register(t, a.h, "orders", 8081)
	r := c.Next()
	c.Ack(r)
	if r.From != a.push.LocalAddr().(*net.UDPAddr).AddrPort() {
		t.Fatalf("push from %s, want the push socket %s", r.From, a.push.LocalAddr())
	}
	now := a.list(t, "serviceName=DEFAULT_GROUP@@orders&groupName=DEFAULT_GROUP&clusters=&app=shop&clientIP=127.0.0.2", port)
	r.Info.LastRefTime, now.LastRefTime = 0, 0
	if got, want := mustJSON(t, r.Info), mustJSON(t, now); got != want {
		t.Fatalf("pushed\n %s\nlist answers\n %s", got, want)
	}
	for _, d := range a.conn.Destinations() {
		if d != c.Addr() {
			t.Fatalf("a packet went to %s; only %s may be pushed to", d, c.Addr())
		}
	}
	if err := named.SetReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if n, _, err := named.ReadFromUDP(make([]byte, 64)); err == nil {
		t.Fatalf("%d bytes arrived at the clientIP the query named", n)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestNacosPush_BadInput checks udpPort's validation and the queries that record no
// subscriber: no udpPort or 0, a client Nacos does not push to, a refused query.
func TestNacosPush_BadInput(t *testing.T) {
	a := newPushAPI(t, "n1", nil, udppush.Options{}, false)
	register(t, a.h, "orders", 8080)
	c := nacostesting.NewPushClient(t, "127.0.0.1")
	port := strconv.Itoa(int(c.Addr().Port()))
	base := a.url + "/nacos/v1/ns/instance/list?serviceName=orders&clientIP=127.0.0.2"

	for _, bad := range []string{"70000", "65536", "-1", "abc", "1.5"} {
		resp := getAs(t, base+"&udpPort="+bad, nacostesting.GoAgent)
		if resp.Code != http.StatusBadRequest || !strings.HasPrefix(string(resp.Body), "caused: ") || !strings.Contains(string(resp.Body), "udpPort") {
			t.Errorf("udpPort=%s: %d %q, want 400 caused: ... udpPort", bad, resp.Code, resp.Body)
		}
	}
	for _, tt := range []struct {
		name, query, agent string
		status             int
	}{
		{"no udpPort", "", nacostesting.GoAgent, 200},
		{"udpPort 0 (the Java client's reads without a subscription)", "&udpPort=0", "Nacos-Java-Client:v1.4.2", 200},
		{"a client Nacos does not push to", "&udpPort=" + port, "curl/8.5.0", 200},
		{"no User-Agent", "&udpPort=" + port, "", 200},
		{"bad consistency", "&udpPort=" + port + "&consistency=bogus", nacostesting.GoAgent, 400},
		{"bad healthyOnly", "&udpPort=" + port + "&healthyOnly=maybe", nacostesting.GoAgent, 400},
	} {
		resp := getAs(t, base+tt.query, tt.agent)
		if resp.Code != tt.status {
			t.Errorf("%s: %d %s", tt.name, resp.Code, resp.Body)
			continue
		}
		if tt.status == 200 {
			var info nacos.ServiceInfo
			resp.Decode(t, &info)
			if info.CacheMillis != nacos.CacheMillis {
				t.Errorf("%s: cacheMillis %d, want %d", tt.name, info.CacheMillis, nacos.CacheMillis)
			}
		}
	}
	resp := getAs(t, a.url+"/nacos/v1/ns/instance/list?udpPort="+port, nacostesting.GoAgent)
	if resp.Code != http.StatusBadRequest {
		t.Errorf("no serviceName: %d %s", resp.Code, resp.Body)
	}
	// v2 lists take no udpPort: it is ignored there.
	if resp := getAs(t, a.url+"/nacos/v2/ns/instance/list?serviceName=orders&udpPort=70000", nacostesting.GoAgent); resp.Code != http.StatusOK {
		t.Errorf("v2 with udpPort=70000: %d %s", resp.Code, resp.Body)
	}
	if resp := getAs(t, a.url+"/nacos/v2/ns/instance/list?serviceName=orders&udpPort="+port, nacostesting.GoAgent); resp.Code != http.StatusOK {
		t.Errorf("v2 with udpPort: %d %s", resp.Code, resp.Body)
	}
	if n := a.push.Count(); n != 0 {
		t.Fatalf("%d subscribers recorded, want none: %+v", n, a.push.Subscribers(model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders"}))
	}
	// Nacos reads the agent from Client-Version when there is no User-Agent.
	req, _ := http.NewRequest(http.MethodGet, base+"&udpPort="+port, nil)
	req.Header.Set("User-Agent", "")
	req.Header.Set("Client-Version", "Nacos-Java-Client:v1.4.2")
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = hr.Body.Close()
	if subs := a.subscribers(t, "serviceName=orders"); subs.Count != 1 || subs.Subscribers[0].Agent != "Nacos-Java-Client:v1.4.2" {
		t.Fatalf("a client named by Client-Version: %+v", subs)
	}
	// A client cannot ask for the push cacheMillis without being recorded.
	req, _ = http.NewRequest(http.MethodGet, base, nil)
	req.Header.Set(headerNacosPush, "1")
	req.Header.Set("User-Agent", nacostesting.GoAgent)
	hr, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Body.Close()
	b, _ := io.ReadAll(hr.Body)
	if !strings.Contains(string(b), `"cacheMillis":1000,`) {
		t.Fatalf("a query with the internal header: %s", b)
	}
}

// TestNacosPush_FollowerRecordsAndPushesFromItsState checks that the node a client
// queries records it and pushes from its own state, while the read is forwarded to the
// leader, which records nothing but answers the push cacheMillis.
func TestNacosPush_FollowerRecordsAndPushesFromItsState(t *testing.T) {
	leader := newPushAPI(t, "n1", nil, udppush.Options{}, false)
	nacostesting.SeedOrders(t, leader.h)
	leaderMember := &model.Member{ID: "n1", RaftAddr: "127.0.0.1:7848", HTTPAddr: strings.TrimPrefix(leader.url, "http://")}
	leader.node.SetKnownLeader(leaderMember)

	follower := newPushAPI(t, "n2", leaderMember, udppush.Options{}, false)
	follower.node.SetLeading(true)
	nacostesting.SeedOrders(t, follower.h) // the follower's copy of the state
	follower.node.SetLeading(false)

	c := nacostesting.NewPushClient(t, "127.0.0.1")
	resp := getAs(t, follower.url+"/nacos/v1/ns/instance/list?serviceName=orders&udpPort="+strconv.Itoa(int(c.Addr().Port())), nacostesting.GoAgent)
	var info nacos.ServiceInfo
	resp.Decode(t, &info)
	if resp.Code != http.StatusOK || resp.Header.Get(api.HeaderServedBy) != "n1" || info.CacheMillis != udppush.CacheMillis {
		t.Fatalf("forwarded list: %d served by %q, cacheMillis %d", resp.Code, resp.Header.Get(api.HeaderServedBy), info.CacheMillis)
	}
	if n := leader.subscribers(t, "serviceName=orders").Count; n != 0 {
		t.Fatalf("the leader recorded %d subscribers of a forwarded query", n)
	}
	if s := follower.subscribers(t, "serviceName=orders"); s.Count != 1 || s.Subscribers[0].IP != "127.0.0.1" {
		t.Fatalf("the follower's subscribers: %+v", s)
	}
	// A change the follower applies is pushed from the follower.
	follower.node.SetLeading(true)
	register(t, follower.h, "orders", 9999)
	r := c.Next()
	if r.From != follower.push.LocalAddr().(*net.UDPAddr).AddrPort() || len(r.Info.Hosts) != 4 {
		t.Fatalf("push from %s (follower %s, leader %s) with %d hosts", r.From, follower.push.LocalAddr(), leader.push.LocalAddr(), len(r.Info.Hosts))
	}
	if d := leader.conn.Destinations(); len(d) != 0 {
		t.Fatalf("the leader pushed to %v", d)
	}
}

// TestNacosPush_UnackedClientPollsAgain checks that a client whose pushes go
// unacknowledged is answered the poll cacheMillis until a push is acknowledged.
func TestNacosPush_UnackedClientPollsAgain(t *testing.T) {
	a := newPushAPI(t, "n1", nil, udppush.Options{Retries: 1}, true)
	register(t, a.h, "orders", 8080)
	c := nacostesting.NewPushClient(t, "127.0.0.1")
	port := int(c.Addr().Port())
	if info := a.list(t, "serviceName=orders", port); info.CacheMillis != udppush.CacheMillis {
		t.Fatalf("cacheMillis %d", info.CacheMillis)
	}
	register(t, a.h, "orders", 8081)
	c.Next()
	a.advance(t, time.Second)
	c.Next() // the one resend
	a.advance(t, time.Second)
	if info := a.list(t, "serviceName=orders", port); info.CacheMillis != nacos.CacheMillis {
		t.Fatalf("after an unacknowledged push: cacheMillis %d, want %d", info.CacheMillis, nacos.CacheMillis)
	}
	register(t, a.h, "orders", 8082)
	c.Ack(c.Next())
	wait.For(t, 10*time.Second, "the ack", func() bool { return nacostesting.Counter(t, a.reg, "roster_nacos_push_acked_total") == 1 })
	if info := a.list(t, "serviceName=orders", port); info.CacheMillis != udppush.CacheMillis {
		t.Fatalf("after an acknowledged push: cacheMillis %d", info.CacheMillis)
	}
}

// TestNacosPush_Subscribers checks the subscriber list's shape, paging and refusals.
func TestNacosPush_Subscribers(t *testing.T) {
	a := newPushAPI(t, "n1", nil, udppush.Options{}, false)
	register(t, a.h, "orders", 8080)
	var ports []int
	for range 3 {
		c := nacostesting.NewPushClient(t, "127.0.0.1")
		ports = append(ports, int(c.Addr().Port()))
		a.list(t, "serviceName=orders&app=a"+strconv.Itoa(len(ports)), ports[len(ports)-1])
	}
	c := nacostesting.NewPushClient(t, "127.0.0.1")
	a.list(t, "serviceName=g1@@other", int(c.Addr().Port()))

	all := a.subscribers(t, "serviceName=orders")
	if all.Count != 3 || len(all.Subscribers) != 3 {
		t.Fatalf("subscribers %+v", all)
	}
	for i := 1; i < 3; i++ {
		if all.Subscribers[i-1].AddrStr >= all.Subscribers[i].AddrStr && len(all.Subscribers[i-1].AddrStr) == len(all.Subscribers[i].AddrStr) {
			t.Fatalf("not ordered by address: %+v", all.Subscribers)
		}
	}
	for _, tt := range []struct {
		query string
		count int
		page  []udppush.SubscriberInfo
	}{
		{"serviceName=orders&pageNo=2&pageSize=2", 3, all.Subscribers[2:]},
		{"serviceName=orders&pageNo=1&pageSize=2", 3, all.Subscribers[:2]},
		{"serviceName=orders&pageNo=3&pageSize=2", 3, nil},
		{"serviceName=orders&pageNo=2147483648&pageSize=1", 3, nil},
		{"serviceName=orders&pageNo=9223372036854775807&pageSize=0", 3, nil},
		{"serviceName=orders&pageNo=1&pageSize=9223372036854775807", 3, all.Subscribers},
		{"serviceName=orders&pageSize=0", 3, nil},
		{"serviceName=DEFAULT_GROUP@@orders&aggregation=false", 3, all.Subscribers},
		{"serviceName=orders&groupName=DEFAULT_GROUP&namespaceId=public", 3, all.Subscribers},
		{"serviceName=other&groupName=g1", 1, nil},
		{"serviceName=orders&namespaceId=dev", 0, nil},
		{"serviceName=nothing", 0, nil},
	} {
		got := a.subscribers(t, tt.query)
		if got.Count != tt.count || got.Subscribers == nil || (tt.page != nil && mustJSON(t, got.Subscribers) != mustJSON(t, tt.page)) ||
			(tt.page == nil && tt.count != 1 && len(got.Subscribers) != 0) {
			t.Errorf("%s: %+v, want count %d page %+v", tt.query, got, tt.count, tt.page)
		}
	}
	for _, tt := range []struct {
		query string
		code  int
	}{
		{"", http.StatusBadRequest},
		{"serviceName=orders&pageNo=x", http.StatusBadRequest},
		{"serviceName=orders&pageSize=1.5", http.StatusBadRequest},
		{"serviceName=orders&pageSize=-1", http.StatusBadRequest},
		{"serviceName=orders&pageNo=2147483649&pageSize=1", http.StatusBadRequest},
		{"serviceName=orders&pageNo=9223372036854775807&pageSize=9223372036854775807", http.StatusBadRequest},
		{"serviceName=orders&aggregation=maybe", http.StatusBadRequest},
		{"serviceName=a@@b&groupName=c", http.StatusBadRequest},
	} {
		if resp := getAs(t, a.url+"/nacos/v1/ns/service/subscribers?"+tt.query, "curl/8"); resp.Code != tt.code || !strings.HasPrefix(string(resp.Body), "caused: ") {
			t.Errorf("%s: %d %s, want %d", tt.query, resp.Code, resp.Body, tt.code)
		}
	}
	// Without a fan-out nothing is recorded and the list is empty.
	h, _, _ := newStoreAPI(t)
	resp := nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/service/subscribers?serviceName=orders", "", http.StatusOK)
	if string(resp.Body) != `{"count":0,"subscribers":[]}`+"\n" {
		t.Fatalf("without pushes: %s", resp.Body)
	}
}

// TestNacosPush_Switches checks the switches say pushes are on.
func TestNacosPush_Switches(t *testing.T) {
	a := newPushAPI(t, "n1", nil, udppush.Options{}, false)
	var sw switches
	nacostesting.MustNacos(t, a.h, http.MethodGet, "/nacos/v1/ns/operator/switches", "", http.StatusOK).Decode(t, &sw)
	if !sw.PushEnabled || sw.DefaultPushCacheMillis != udppush.CacheMillis || sw.DefaultCacheMillis != nacos.CacheMillis {
		t.Fatalf("switches %+v", sw)
	}
}

// TestNacosPush_NoPushWithoutFanout checks a node without a fan-out answers push
// queries as plain polls.
func TestNacosPush_NoPushWithoutFanout(t *testing.T) {
	h, _, _ := newStoreAPI(t)
	register(t, h, "orders", 8080)
	req := newRequest(t, http.MethodGet, "/nacos/v1/ns/instance/list?serviceName=orders&udpPort=5000", "")
	req.RemoteAddr = "127.0.0.1:40000"
	req.Header.Set("User-Agent", nacostesting.GoAgent)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var info nacos.ServiceInfo
	if err := json.Unmarshal(rec.Body.Bytes(), &info); err != nil || info.CacheMillis != nacos.CacheMillis {
		t.Fatalf("%d %s (%v)", rec.Code, rec.Body, err)
	}
	if h.(*API).push != nil {
		t.Fatal("a pusher without a fan-out")
	}
}

// TestNacosPush_FloodOfClusterListsIsCapped checks the reflection the caps bound: 300
// list queries from one client address and udpPort, each with its own cluster list,
// record udppush.DefaultMaxPerPort subscribers, and a change then sends that port at most
// that many datagrams per round (resends included, all within the change's byte
// budget), where it sent one per query and resends before. A query naming a system
// port is answered as a poll, recorded nowhere, counted, and that port gets nothing.
func TestNacosPush_FloodOfClusterListsIsCapped(t *testing.T) {
	a := newPushAPI(t, "n1", nil, udppush.Options{}, true)
	register(t, a.h, "orders", 8080)
	c := nacostesting.NewPushClient(t, "127.0.0.1")
	port := int(c.Addr().Port())
	const queries = 300
	for i := range queries {
		a.list(t, "serviceName=orders&clusters=DEFAULT,c"+strconv.Itoa(i), port)
	}
	if got := a.push.Count(); got != udppush.DefaultMaxPerPort {
		t.Fatalf("%d subscribers recorded, want the per-port cap %d", got, udppush.DefaultMaxPerPort)
	}
	if got := nacostesting.Counter(t, a.reg, "roster_nacos_push_subscribers_refused_total", "reason", "per_port"); got != queries-udppush.DefaultMaxPerPort {
		t.Fatalf("refused{per_port} = %v, want %d", got, queries-udppush.DefaultMaxPerPort)
	}
	// A system port: answered (as a poll), not recorded, counted.
	resp := getAs(t, a.url+"/nacos/v1/ns/instance/list?serviceName=orders&udpPort=999", nacostesting.GoAgent)
	var info nacos.ServiceInfo
	if resp.Code != http.StatusOK {
		t.Fatalf("udpPort=999: %d %s", resp.Code, resp.Body)
	}
	if resp.Decode(t, &info); info.CacheMillis != nacos.CacheMillis || len(info.Hosts) != 1 {
		t.Fatalf("udpPort=999: cacheMillis %d, %d hosts", info.CacheMillis, len(info.Hosts))
	}
	if got := nacostesting.Counter(t, a.reg, "roster_nacos_push_subscribers_refused_total", "reason", "low_port"); got != 1 {
		t.Fatalf("refused{low_port} = %v, want 1", got)
	}
	if got := a.push.Count(); got != udppush.DefaultMaxPerPort {
		t.Fatalf("%d subscribers after the udpPort=999 query", got)
	}

	// The client reads every datagram that arrives.
	var mu sync.Mutex
	gotPackets, gotBytes := 0, 0
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, _, err := c.Conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			mu.Lock()
			gotPackets, gotBytes = gotPackets+1, gotBytes+n
			mu.Unlock()
		}
	}()
	register(t, a.h, "orders", 8081)
	sent := func() float64 { return nacostesting.Counter(t, a.reg, "roster_nacos_push_sent_total") }
	wait.For(t, 10*time.Second, "the change's pushes", func() bool {
		return sent()+nacostesting.Counter(t, a.reg, "roster_nacos_push_failed_total", "reason", "budget") == udppush.DefaultMaxPerPort
	})
	conn := a.conn
	// Each round is read before the next is sent, so that the client's socket buffer
	// holds one round at most.
	drained := func() {
		wait.For(t, 10*time.Second, "the client to read what was sent", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return gotPackets == len(conn.Destinations())
		})
	}
	drained()
	// Nothing acks: every push is resent udppush.DefaultRetries times, then given up.
	for range udppush.DefaultRetries + 1 {
		a.advance(t, udppush.DefaultRetryInterval)
		drained()
	}
	written, writtenBytes := len(conn.Destinations()), conn.SentBytes()
	if limit := udppush.DefaultMaxPerPort * (1 + udppush.DefaultRetries); written > limit || writtenBytes > udppush.DefaultChangeBudget {
		t.Fatalf("one change sent %d datagrams, %d bytes; want at most %d and %d", written, writtenBytes, limit, udppush.DefaultChangeBudget)
	}
	for _, d := range conn.Destinations() {
		if d != c.Addr() {
			t.Fatalf("a push went to %s", d)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if gotPackets != written || gotBytes != writtenBytes {
		t.Fatalf("the client read %d datagrams, %d bytes; %d, %d were sent", gotPackets, gotBytes, written, writtenBytes)
	}
	t.Logf("300 queries, one change: %d datagrams, %d bytes to the client's port", gotPackets, gotBytes)
}
