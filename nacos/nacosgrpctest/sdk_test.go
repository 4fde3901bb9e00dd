package nacosgrpctest

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server/servertest"
)

// newClient is a nacos-sdk-go v2 naming client of the given nodes, as an application
// would configure it: the HTTP port for persistent writes, the gRPC port for the rest.
func newClient(t *testing.T, nodes ...*servertest.Node) naming_client.INamingClient {
	t.Helper()
	return newClientWith(t, nil, nodes...)
}

// newClientWith is newClient with opts added to the client configuration.
func newClientWith(t *testing.T, opts []constant.ClientOption, nodes ...*servertest.Node) naming_client.INamingClient {
	t.Helper()
	var sc []constant.ServerConfig
	for _, nd := range nodes {
		host, hp := splitPort(t, nd.HTTPAddr)
		_, gp := splitPort(t, nd.GRPCAddr)
		sc = append(sc, constant.ServerConfig{IpAddr: host, Port: hp, GrpcPort: gp, ContextPath: "/nacos", Scheme: "http"})
	}
	cc := constant.NewClientConfig(append([]constant.ClientOption{
		constant.WithTimeoutMs(5000),
		constant.WithNotLoadCacheAtStart(true),
		constant.WithCacheDir(t.TempDir()),
		constant.WithLogDir(t.TempDir()),
		constant.WithLogLevel("error"),
	}, opts...)...)
	client, err := clients.NewNamingClient(vo.NacosClientParam{ClientConfig: cc, ServerConfigs: sc})
	if err != nil {
		t.Fatalf("nacos-sdk-go v2 naming client: %v", err)
	}
	t.Cleanup(client.CloseClient)
	return client
}

func splitPort(t *testing.T, addr string) (string, uint64) {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.ParseUint(p, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return host, port
}

// callbacks collects a subscription's callbacks.
type callbacks chan []model.Instance

func newCallbacks() callbacks { return make(callbacks, 64) }

func (c callbacks) fn(services []model.Instance, err error) {
	if err == nil {
		c <- services
	}
}

// await waits for a callback whose list satisfies ok.
func (c callbacks) await(t *testing.T, what string, ok func([]model.Instance) bool) []model.Instance {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case list := <-c:
			if ok(list) {
				return list
			}
		case <-deadline:
			t.Fatalf("no subscribe callback with %s within 15s", what)
		}
	}
}

// byPort indexes a list by port.
func byPort(list []model.Instance) map[int]model.Instance {
	out := map[int]model.Instance{}
	for _, in := range list {
		out[int(in.Port)] = in
	}
	return out
}

func ports(list []model.Instance) []int {
	var out []int
	for _, in := range list {
		out = append(out, int(in.Port))
	}
	sort.Ints(out)
	return out
}

func samePorts(list []model.Instance, want ...int) bool {
	got := ports(list)
	sort.Ints(want)
	return fmt.Sprint(got) == fmt.Sprint(want)
}

// TestNacosSDKv2_ThroughAFollower drives a 3-node cluster with the real nacos-sdk-go v2
// through one follower: persistent writes (HTTP, forwarded to the leader), every read
// call (gRPC), and subscribe callbacks for a registration, an update, a health change
// found by the leader's probe and a deregistration.
func TestNacosSDKv2_ThroughAFollower(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts(), servertest.WithGRPC())
	leader := c.MustLeader()
	f := c.Nodes[c.Followers()[0]]
	client := newClient(t, f)
	const svc, group = "orders", "g1"
	b1, b2, b3 := newBackend(t), newBackend(t), newBackend(t)
	register := func(b *backend, cluster string, weight float64, meta map[string]string) {
		t.Helper()
		ok, err := client.RegisterInstance(vo.RegisterInstanceParam{
			Ip: "127.0.0.1", Port: uint64(b.Port()), ServiceName: svc, GroupName: group, ClusterName: cluster,
			Weight: weight, Enable: true, Healthy: true, Ephemeral: false, Metadata: meta,
		})
		if !ok || err != nil {
			t.Fatalf("RegisterInstance %d: %v %v", b.Port(), ok, err)
		}
	}
	// Probe c1 every second and take one failure as down, so that the probe test is quick.
	_, err := c.Nodes[leader].Client().UpsertCluster(context.Background(), "public", group, svc, "c1",
		api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "TCP", Interval: "1s", Timeout: "500ms", Rise: 1, Fall: 1}})
	if err != nil {
		t.Fatalf("cluster c1: %v", err)
	}
	register(b1, "c1", 2, map[string]string{"zone": "a"})
	register(b2, "c2", 3, map[string]string{"zone": "b"})

	// Every read call is served over gRPC by the follower.
	svcInfo, err := client.GetService(vo.GetServiceParam{ServiceName: svc, GroupName: group})
	if err != nil || svcInfo.Name != svc || svcInfo.GroupName != group || len(svcInfo.Hosts) != 2 {
		t.Fatalf("GetService: %v %+v", err, svcInfo)
	}
	all, err := client.SelectAllInstances(vo.SelectAllInstancesParam{ServiceName: svc, GroupName: group})
	if err != nil || !samePorts(all, b1.Port(), b2.Port()) {
		t.Fatalf("SelectAllInstances: %v %+v", err, all)
	}
	got := byPort(all)
	if in := got[b1.Port()]; in.Weight != 2 || in.ClusterName != "c1" || in.Metadata["zone"] != "a" || in.Ephemeral || !in.Healthy || !in.Enable ||
		in.ServiceName != group+"@@"+svc || in.InstanceId == "" {
		t.Fatalf("instance as the SDK sees it: %+v", in)
	}
	inC2, err := client.SelectAllInstances(vo.SelectAllInstancesParam{ServiceName: svc, GroupName: group, Clusters: []string{"c2"}})
	if err != nil || !samePorts(inC2, b2.Port()) {
		t.Fatalf("SelectAllInstances of c2: %v %+v", err, inC2)
	}
	healthy, err := client.SelectInstances(vo.SelectInstancesParam{ServiceName: svc, GroupName: group, HealthyOnly: true})
	if err != nil || !samePorts(healthy, b1.Port(), b2.Port()) {
		t.Fatalf("SelectInstances healthy: %v %+v", err, healthy)
	}
	one, err := client.SelectOneHealthyInstance(vo.SelectOneHealthInstanceParam{ServiceName: svc, GroupName: group})
	if err != nil || (int(one.Port) != b1.Port() && int(one.Port) != b2.Port()) {
		t.Fatalf("SelectOneHealthyInstance: %v %+v", err, one)
	}
	list, err := client.GetAllServicesInfo(vo.GetAllServiceInfoParam{GroupName: group, PageNo: 1, PageSize: 10})
	if err != nil || list.Count != 1 || len(list.Doms) != 1 || list.Doms[0] != svc {
		t.Fatalf("GetAllServicesInfo: %v %+v", err, list)
	}

	// Subscribe: every change arrives as a callback.
	cb := newCallbacks()
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: svc, GroupName: group, SubscribeCallback: cb.fn}); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	register(b3, "c2", 1, nil)
	cb.await(t, "the third instance", func(l []model.Instance) bool { return samePorts(l, b1.Port(), b2.Port(), b3.Port()) })

	// An update (the SDK re-registers).
	ok, err := client.UpdateInstance(vo.UpdateInstanceParam{Ip: "127.0.0.1", Port: uint64(b2.Port()), ServiceName: svc, GroupName: group,
		ClusterName: "c2", Weight: 7, Enable: true, Ephemeral: false, Metadata: map[string]string{"zone": "b"}})
	if !ok || err != nil {
		t.Fatalf("UpdateInstance: %v %v", ok, err)
	}
	cb.await(t, "the new weight", func(l []model.Instance) bool { return byPort(l)[b2.Port()].Weight == 7 })

	// The leader's probe finds b1 down once its listener closes.
	b1.Close()
	cb.await(t, "b1 unhealthy", func(l []model.Instance) bool {
		in, ok := byPort(l)[b1.Port()]
		return ok && !in.Healthy
	})

	ok, err = client.DeregisterInstance(vo.DeregisterInstanceParam{Ip: "127.0.0.1", Port: uint64(b3.Port()), ServiceName: svc, GroupName: group, Cluster: "c2", Ephemeral: false})
	if !ok || err != nil {
		t.Fatalf("DeregisterInstance: %v %v", ok, err)
	}
	cb.await(t, "b3 gone", func(l []model.Instance) bool { return samePorts(l, b1.Port(), b2.Port()) })
}

// TestNacosSDKv2_UnsubscribeStopsCallbacks: after Unsubscribe a client gets no more
// callbacks, while another client still subscribed does.
func TestNacosSDKv2_UnsubscribeStopsCallbacks(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts(), servertest.WithGRPC())
	c.MustLeader()
	f := c.Nodes[c.Followers()[0]]
	quitter, stayer := newClient(t, f), newClient(t, f)
	const svc = "unsub"
	b1, b2, b3 := newBackend(t), newBackend(t), newBackend(t)
	noneCluster(t, c, svc)
	register(t, stayer, svc, b1)
	cbQuit, cbStay := newCallbacks(), newCallbacks()
	quitParam := &vo.SubscribeParam{ServiceName: svc, SubscribeCallback: cbQuit.fn}
	if err := quitter.Subscribe(quitParam); err != nil {
		t.Fatal(err)
	}
	if err := stayer.Subscribe(&vo.SubscribeParam{ServiceName: svc, SubscribeCallback: cbStay.fn}); err != nil {
		t.Fatal(err)
	}
	register(t, stayer, svc, b2)
	cbQuit.await(t, "the second instance", func(l []model.Instance) bool { return samePorts(l, b1.Port(), b2.Port()) })
	cbStay.await(t, "the second instance", func(l []model.Instance) bool { return samePorts(l, b1.Port(), b2.Port()) })

	if err := quitter.Unsubscribe(quitParam); err != nil {
		t.Fatalf("Unsubscribe: %v", err)
	}
	wait.For(t, 10*time.Second, "the unsubscription to reach the node", func() bool {
		return metric(t, f.HTTPAddr, "roster_nacos_grpc_subscriptions") == 1
	})
	register(t, stayer, svc, b3)
	cbStay.await(t, "the third instance", func(l []model.Instance) bool { return samePorts(l, b1.Port(), b2.Port(), b3.Port()) })
	select {
	case l := <-cbQuit:
		t.Fatalf("a callback after Unsubscribe: %v", ports(l))
	default:
	}
}

// TestNacosSDKv2_ReconnectsAfterItsNodeRestarts: the node a subscribed client talks to
// restarts; the client reconnects, subscribes again and keeps receiving pushes.
func TestNacosSDKv2_ReconnectsAfterItsNodeRestarts(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts(), servertest.WithGRPC())
	leader := c.MustLeader()
	fi := c.Followers()[0]
	client := newClient(t, c.Nodes[fi])
	writer := newClient(t, c.Nodes[leader])
	const svc = "restart"
	b1, b2 := newBackend(t), newBackend(t)
	noneCluster(t, c, svc)
	register(t, writer, svc, b1)
	cb := newCallbacks()
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: svc, SubscribeCallback: cb.fn}); err != nil {
		t.Fatal(err)
	}
	c.Stop(fi)
	c.Start(fi)
	wait.For(t, 30*time.Second, "the client to subscribe again on the restarted node", func() bool {
		return metric(t, c.Nodes[fi].HTTPAddr, "roster_nacos_grpc_subscriptions") == 1
	})
	register(t, writer, svc, b2)
	cb.await(t, "the instance registered after the restart", func(l []model.Instance) bool { return samePorts(l, b1.Port(), b2.Port()) })
}

// TestNacosSDKv2_EphemeralRefusedWithoutRetryStorm: an ephemeral registration goes
// over gRPC, is refused with the typed response, and the SDK gives up instead of
// re-sending it in a loop.
func TestNacosSDKv2_EphemeralRefusedWithoutRetryStorm(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts(), servertest.WithGRPC())
	c.MustLeader()
	f := c.Nodes[c.Followers()[0]]
	client := newClient(t, f)
	b := newBackend(t)
	ok, err := client.RegisterInstance(vo.RegisterInstanceParam{Ip: "127.0.0.1", Port: uint64(b.Port()), ServiceName: "eph",
		Weight: 1, Enable: true, Healthy: true, Ephemeral: true})
	if ok {
		t.Fatalf("ephemeral registration accepted (err %v)", err)
	}
	requests := func() float64 {
		return metric(t, f.HTTPAddr, "roster_nacos_grpc_requests_total", "type", "InstanceRequest", "result", "failure")
	}
	first := requests()
	// The SDK's redo task (every 3 s) and its health check (after 5 s without a request)
	// run meanwhile; a client in the redo loop sends dozens of requests by the time its
	// next health check arrives.
	start := metric(t, f.HTTPAddr, "roster_nacos_grpc_requests_total", "type", "HealthCheckRequest", "result", "success")
	wait.For(t, 30*time.Second, "the client's next health check", func() bool {
		return metric(t, f.HTTPAddr, "roster_nacos_grpc_requests_total", "type", "HealthCheckRequest", "result", "success") > start
	})
	if n := requests(); first < 1 || n > 3 {
		t.Fatalf("InstanceRequests refused: %v at the call, %v some seconds later; want at least 1 and at most 3", first, n)
	}
	if _, list, err := c.Nodes[0].Server.Store().Instances(nil, key("eph")); err == nil && len(list) > 0 {
		t.Fatalf("the ephemeral registration was written: %+v", list)
	}
}
