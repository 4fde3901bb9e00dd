package nacostest

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/clients"
	"github.com/nacos-group/nacos-sdk-go/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/common/constant"
	"github.com/nacos-group/nacos-sdk-go/common/http_agent"
	"github.com/nacos-group/nacos-sdk-go/common/security"
	"github.com/nacos-group/nacos-sdk-go/model"
	"github.com/nacos-group/nacos-sdk-go/util"
	"github.com/nacos-group/nacos-sdk-go/vo"

	rmodel "github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos/udppush"
)

// sdkDir is a directory for a Nacos SDK client's cache or logs. The v1 SDK cannot stop
// its background writers, which may still write after a test ends, so the directory is
// removed on a best-effort basis rather than by t.TempDir (whose cleanup fails the test
// when a file appears while it removes the directory).
func sdkDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "nacos-sdk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// sdkConfig is the configuration a nacos-sdk-go v1 application would use against addr.
func sdkConfig(t *testing.T, addr string, cacheDir, logDir string) (constant.ClientConfig, []constant.ServerConfig) {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.ParseUint(p, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	cc := constant.ClientConfig{
		TimeoutMs:           5000,
		NotLoadCacheAtStart: true,
		CacheDir:            cacheDir,
		LogDir:              logDir,
		LogLevel:            "error",
		// With a username the SDK logs in at start (POST /nacos/v1/auth/users/login).
		Username: "nacos",
		Password: "nacos",
	}
	return cc, []constant.ServerConfig{{IpAddr: host, Port: port, ContextPath: "/nacos"}}
}

// TestNacosSDK_PersistentInstances drives a 3-node Roster cluster with the real
// nacos-sdk-go v1 naming client, pointed at a follower so that every write and default
// read is forwarded to the leader.
func TestNacosSDK_PersistentInstances(t *testing.T) {
	cacheDir, logDir := sdkDir(t), sdkDir(t)
	c, leader := newCluster(t, 3)
	follower := c.Followers()[0]
	cc, sc := sdkConfig(t, c.Nodes[follower].HTTPAddr, cacheDir, logDir)
	client, err := clients.CreateNamingClient(map[string]interface{}{
		constant.KEY_CLIENT_CONFIG:  cc,
		constant.KEY_SERVER_CONFIGS: sc,
	})
	if err != nil {
		t.Fatalf("create naming client: %v", err)
	}
	key := rmodel.ServiceKey{Namespace: "public", Group: "g1", Service: "orders"}
	register := func(b *backend, cluster string, ephemeral bool) (bool, error) {
		return client.RegisterInstance(vo.RegisterInstanceParam{
			Ip: "127.0.0.1", Port: uint64(b.Port()), ServiceName: "orders", GroupName: "g1", ClusterName: cluster,
			Weight: 1, Enable: true, Healthy: true, Ephemeral: ephemeral, Metadata: map[string]string{"v": "1"},
		})
	}
	b1, b2, b3, b4 := newBackend(t), newBackend(t), newBackend(t), newBackend(t)

	for _, b := range []*backend{b1, b2} {
		if ok, err := register(b, "", false); !ok || err != nil {
			t.Fatalf("register persistent instance: %v %v", ok, err)
		}
	}
	if got := instances(t, c, leader, key); len(got) != 2 {
		t.Fatalf("leader has %d instances", len(got))
	}

	all, err := client.SelectAllInstances(vo.SelectAllInstancesParam{ServiceName: "orders", GroupName: "g1"})
	if err != nil || len(all) != 2 {
		t.Fatalf("SelectAllInstances: %v %+v", err, all)
	}
	for _, in := range all {
		if in.Ephemeral || !in.Enable || !in.Healthy || in.Weight != 1 || in.Metadata["v"] != "1" ||
			in.ServiceName != "g1@@orders" || in.ClusterName != "DEFAULT" || in.InstanceId == "" {
			t.Fatalf("instance as the SDK sees it: %+v", in)
		}
	}
	svc, err := client.GetService(vo.GetServiceParam{ServiceName: "orders", GroupName: "g1"})
	if err != nil || svc.Name != "g1@@orders" || len(svc.Hosts) != 2 || svc.CacheMillis != udppush.CacheMillis {
		t.Fatalf("GetService: %v %+v", err, svc)
	}
	list, err := client.GetAllServicesInfo(vo.GetAllServiceInfoParam{GroupName: "g1", PageNo: 1, PageSize: 10})
	if err != nil || list.Count != 1 || len(list.Doms) != 1 || list.Doms[0] != "orders" {
		t.Fatalf("GetAllServicesInfo: %v %+v", err, list)
	}

	// An ephemeral registration fails loudly and writes nothing.
	c.WaitSettled() // the leader's own writes (identity, member records) are done
	before := lastIndex(c, leader)
	if ok, err := register(b3, "", true); ok || err == nil {
		t.Fatalf("ephemeral registration accepted: %v %v", ok, err)
	}
	if got := instances(t, c, leader, key); len(got) != 2 {
		t.Fatalf("ephemeral registration left %d instances", len(got))
	}
	if after := lastIndex(c, leader); after != before {
		t.Fatalf("ephemeral registration moved the Raft log from %d to %d", before, after)
	}

	// Subscribe, then see a change (pushed; TestNacosSDK_PushBeforeAnyPoll checks how).
	changes := make(chan []model.SubscribeService, 16)
	err = client.Subscribe(&vo.SubscribeParam{ServiceName: "orders", GroupName: "g1",
		SubscribeCallback: func(services []model.SubscribeService, err error) {
			if err == nil {
				changes <- services
			}
		}})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	if ok, err := register(b3, "", false); !ok || err != nil {
		t.Fatalf("register third instance: %v %v", ok, err)
	}
	deadline := time.After(10 * time.Second)
	for seen := false; !seen; {
		select {
		case services := <-changes:
			seen = len(services) == 3
		case <-deadline:
			t.Fatal("the subscriber saw no change within 10s")
		}
	}

	// Healthy-only selection: an instance of a NONE cluster set unhealthy by hand.
	base := "http://" + c.Nodes[follower].HTTPAddr + "/nacos/v1/ns"
	if r := call(t, "PUT", base+"/cluster", `serviceName=orders&groupName=g1&clusterName=manual&healthChecker={"type":"NONE"}`); r.body != "ok" {
		t.Fatalf("PUT cluster: %d %s", r.status, r.body)
	}
	if ok, err := register(b4, "manual", false); !ok || err != nil {
		t.Fatalf("register into manual: %v %v", ok, err)
	}
	health := "serviceName=g1@@orders&ip=127.0.0.1&port=" + strconv.Itoa(b4.Port()) + "&healthy=false"
	if r := call(t, "PUT", base+"/health/instance", health); r.body != "ok" {
		t.Fatalf("PUT health: %d %s", r.status, r.body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitFor(t, ctx, "the SDK to see the unhealthy instance", func() bool {
		healthy, err := client.SelectInstances(vo.SelectInstancesParam{ServiceName: "orders", GroupName: "g1", HealthyOnly: true})
		if err != nil || !samePorts(healthy, b1, b2, b3) {
			return false
		}
		// nacos-sdk-go v1 quirk: HealthyOnly=false selects the unhealthy ones.
		unhealthy, err := client.SelectInstances(vo.SelectInstancesParam{ServiceName: "orders", GroupName: "g1", HealthyOnly: false})
		return err == nil && samePorts(unhealthy, b4)
	})
	one, err := client.SelectOneHealthyInstance(vo.SelectOneHealthInstanceParam{ServiceName: "orders", GroupName: "g1"})
	if err != nil || one.Port == uint64(b4.Port()) {
		t.Fatalf("SelectOneHealthyInstance: %v %+v", err, one)
	}

	// Deregistration removes the persistent instance, with ephemeral=false and, unlike
	// Nacos, with ephemeral=true too.
	for _, d := range []struct {
		b         *backend
		ephemeral bool
	}{{b1, false}, {b2, true}} {
		ok, err := client.DeregisterInstance(vo.DeregisterInstanceParam{Ip: "127.0.0.1", Port: uint64(d.b.Port()),
			ServiceName: "orders", GroupName: "g1", Ephemeral: d.ephemeral})
		if !ok || err != nil {
			t.Fatalf("DeregisterInstance (ephemeral=%v): %v %v", d.ephemeral, ok, err)
		}
	}
	var ports []int
	for _, in := range instances(t, c, leader, key) {
		ports = append(ports, in.Port)
	}
	sort.Ints(ports)
	want := []int{b3.Port(), b4.Port()}
	sort.Ints(want)
	if len(ports) != 2 || ports[0] != want[0] || ports[1] != want[1] {
		t.Fatalf("after deregistration: ports %v, want %v", ports, want)
	}
}

// samePorts reports whether list holds exactly the backends' ports.
func samePorts(list []model.Instance, bs ...*backend) bool {
	if len(list) != len(bs) {
		return false
	}
	want := map[uint64]bool{}
	for _, b := range bs {
		want[uint64(b.Port())] = true
	}
	for _, in := range list {
		if !want[in.Port] {
			return false
		}
	}
	return true
}

// TestNacosSDK_LoginAndHealth checks the SDK's own auth client accepts Roster's login
// answer (nacos-sdk-go v1 parses accessToken and tokenTtl) and its server health check
// (operator/metrics status) says UP.
func TestNacosSDK_LoginAndHealth(t *testing.T) {
	cacheDir, logDir := sdkDir(t), sdkDir(t)
	c, _ := newCluster(t, 1)
	cc, sc := sdkConfig(t, c.Nodes[0].HTTPAddr, cacheDir, logDir)
	// Creating a naming client initialises the SDK's logger, which the proxy needs.
	if _, err := clients.CreateNamingClient(map[string]interface{}{
		constant.KEY_CLIENT_CONFIG: cc, constant.KEY_SERVER_CONFIGS: sc,
	}); err != nil {
		t.Fatal(err)
	}
	sc[0].Scheme = constant.DEFAULT_SERVER_SCHEME
	auth := security.NewAuthClient(cc, sc, &http_agent.HttpAgent{})
	ok, err := auth.Login()
	if !ok || err != nil {
		t.Fatalf("SDK login: %v %v", ok, err)
	}
	if tok := auth.GetAccessToken(); tok != "" {
		t.Fatalf("token %q, want none", tok)
	}
	proxy, err := naming_client.NewNamingProxy(cc, sc, &http_agent.HttpAgent{})
	if err != nil {
		t.Fatal(err)
	}
	if !proxy.ServerHealthy() {
		t.Fatal("the SDK finds the server unhealthy")
	}
}

// metric sums the samples of a Prometheus metric on a node's /metrics whose labels
// include every one of labels (`name="value"`).
func metric(t *testing.T, httpAddr, name string, labels ...string) float64 {
	t.Helper()
	r := call(t, "GET", "http://"+httpAddr+"/metrics", "")
	sum := 0.0
	for _, line := range strings.Split(r.body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// listQueries is how many instance-list queries a node has served (or forwarded).
func listQueries(t *testing.T, httpAddr string) float64 {
	t.Helper()
	return metric(t, httpAddr, "roster_http_requests_total", `route="/nacos/v1/ns/instance/list"`)
}

// TestNacosSDK_PushBeforeAnyPoll subscribes the real nacos-sdk-go v1 client through a
// follower and through the leader of a 3-node cluster and deregisters an instance: each
// SDK's cache and callback see the change with no instance-list query served in
// between, so it came by UDP push (the SDK, answered cacheMillis 10000, polls only ten
// seconds after its last update). The subscribers are recorded on the node each SDK
// talks to, at the loopback address it queried from, not at the LAN address the SDK
// names as its clientIP.
func TestNacosSDK_PushBeforeAnyPoll(t *testing.T) {
	c, leader := newCluster(t, 3)
	follower := c.Followers()[0]
	leaderAddr, followerAddr := c.Nodes[leader].HTTPAddr, c.Nodes[follower].HTTPAddr
	b1, b2 := newBackend(t), newBackend(t)
	for _, b := range []*backend{b1, b2} {
		form := "serviceName=orders&groupName=g1&ip=127.0.0.1&ephemeral=false&port=" + strconv.Itoa(b.Port())
		if r := call(t, "POST", "http://"+leaderAddr+"/nacos/v1/ns/instance", form); r.body != "ok" {
			t.Fatalf("register: %d %s", r.status, r.body)
		}
	}

	type sdk struct {
		name    string
		addr    string
		client  naming_client.INamingClient
		changes chan []model.SubscribeService
	}
	sdks := []*sdk{{name: "via the follower", addr: followerAddr}, {name: "via the leader", addr: leaderAddr}}
	for _, s := range sdks {
		cc, sc := sdkConfig(t, s.addr, sdkDir(t), sdkDir(t))
		var err error
		if s.client, err = clients.CreateNamingClient(map[string]interface{}{
			constant.KEY_CLIENT_CONFIG: cc, constant.KEY_SERVER_CONFIGS: sc,
		}); err != nil {
			t.Fatal(err)
		}
		s.changes = make(chan []model.SubscribeService, 16)
		ch := s.changes
		if err := s.client.Subscribe(&vo.SubscribeParam{ServiceName: "orders", GroupName: "g1",
			SubscribeCallback: func(services []model.SubscribeService, err error) {
				if err == nil {
					ch <- services
				}
			}}); err != nil {
			t.Fatalf("%s: Subscribe: %v", s.name, err)
		}
		if got := <-s.changes; len(got) != 2 { // the first callback comes within Subscribe
			t.Fatalf("%s: first callback %+v", s.name, got)
		}
	}
	before := map[string]float64{leaderAddr: listQueries(t, leaderAddr), followerAddr: listQueries(t, followerAddr)}

	form := "serviceName=orders&groupName=g1&ip=127.0.0.1&ephemeral=false&port=" + strconv.Itoa(b2.Port())
	if r := call(t, "DELETE", "http://"+leaderAddr+"/nacos/v1/ns/instance", form); r.body != "ok" {
		t.Fatalf("deregister: %d %s", r.status, r.body)
	}
	for _, s := range sdks {
		deadline := time.After(30 * time.Second)
		for seen := false; !seen; {
			select {
			case got := <-s.changes:
				seen = len(got) == 1 && got[0].Port == uint64(b1.Port())
			case <-deadline:
				t.Fatalf("%s: the SDK saw no change within 30s", s.name)
			}
		}
		svc, err := s.client.GetService(vo.GetServiceParam{ServiceName: "orders", GroupName: "g1"})
		if err != nil || len(svc.Hosts) != 1 || svc.CacheMillis != udppush.CacheMillis {
			t.Fatalf("%s: the SDK's cache: %v %+v", s.name, err, svc)
		}
	}
	for addr, n := range before {
		if after := listQueries(t, addr); after != n {
			t.Fatalf("node %s served %v instance-list queries between the change and the SDKs seeing it: a poll, not a push",
				addr, after-n)
		}
	}

	for _, tt := range []struct {
		name, addr string
	}{{"follower", followerAddr}, {"leader", leaderAddr}} {
		if acked := metric(t, tt.addr, "roster_nacos_push_acked_total"); acked < 1 {
			t.Errorf("%s: %v pushes acknowledged", tt.name, acked)
		}
		r := call(t, "GET", "http://"+tt.addr+"/nacos/v1/ns/service/subscribers?serviceName=orders&groupName=g1", "")
		var subs struct {
			Count       int `json:"count"`
			Subscribers []struct {
				AddrStr, Agent, IP, ServiceName string
			} `json:"subscribers"`
		}
		if err := json.Unmarshal([]byte(r.body), &subs); err != nil {
			t.Fatalf("%s subscribers %q: %v", tt.name, r.body, err)
		}
		// Each node records the one SDK that queries it directly, never the forwarded one.
		if subs.Count != 1 || subs.Subscribers[0].IP != "127.0.0.1" || !strings.HasPrefix(subs.Subscribers[0].AddrStr, "127.0.0.1:") ||
			subs.Subscribers[0].Agent != constant.CLIENT_VERSION || subs.Subscribers[0].ServiceName != "g1@@orders" {
			t.Errorf("%s: subscribers %s", tt.name, r.body)
		}
		if lan := util.LocalIP(); lan != "" && strings.Contains(r.body, `"`+lan) {
			t.Errorf("%s: the SDK's clientIP %s was recorded as a push address: %s", tt.name, lan, r.body)
		}
	}
}
