package nacosgrpctest

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server/servertest"
)

// loginWorks reports whether a Nacos login with the token's accessor id and secret
// succeeds on the node at httpAddr (it knows the token).
func loginWorks(t *testing.T, httpAddr string, tok api.ACLToken) bool {
	t.Helper()
	resp, err := http.PostForm("http://"+httpAddr+"/nacos/v1/auth/users/login",
		url.Values{"username": {tok.AccessorID}, "password": {tok.SecretID}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TestNacosSDKv2_ACL drives a 3-node cluster with ACLs through one follower with the
// real nacos-sdk-go v2, configured with Username (a token's accessor id) and Password
// (its secret) and nothing else: the SDK logs in over HTTP, registers persistent
// instances over HTTP with the accessToken parameter, and discovers and subscribes over
// gRPC with the accessToken header; every change reaches its subscribe callback. A
// client with a wrong password can neither register, nor read, nor subscribe.
func TestNacosSDKv2_ACL(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts(), servertest.WithGRPC(), servertest.WithACL())
	leader := c.MustLeader()
	f := c.Nodes[c.Followers()[0]]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mgmt, err := client.New(f.HTTPAddr).ACLBootstrap(ctx)
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	admin := client.New(c.Nodes[leader].HTTPAddr, client.WithToken(mgmt.SecretID))
	app, err := admin.CreateToken(ctx, api.ACLTokenRequest{Description: "orders app", Rules: api.ACLRules{Namespaces: map[string]string{"public": "write"}}})
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the follower to know the app's token", func() bool { return loginWorks(t, f.HTTPAddr, app) })
	const svc = "acl-orders"
	if _, err := admin.UpsertCluster(ctx, "public", "DEFAULT_GROUP", svc, "DEFAULT",
		api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}); err != nil {
		t.Fatal(err)
	}
	b1, b2 := newBackend(t), newBackend(t)

	cl := newClientWith(t, []constant.ClientOption{constant.WithUsername(app.AccessorID), constant.WithPassword(app.SecretID)}, f)
	register(t, cl, svc, b1)
	all, err := cl.SelectAllInstances(vo.SelectAllInstancesParam{ServiceName: svc})
	if err != nil || !samePorts(all, b1.Port()) {
		t.Fatalf("SelectAllInstances: %v %+v", err, all)
	}
	cb := newCallbacks()
	if err := cl.Subscribe(&vo.SubscribeParam{ServiceName: svc, SubscribeCallback: cb.fn}); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	register(t, cl, svc, b2)
	cb.await(t, "the second instance", func(l []model.Instance) bool { return samePorts(l, b1.Port(), b2.Port()) })
	ok, err := cl.DeregisterInstance(vo.DeregisterInstanceParam{Ip: "127.0.0.1", Port: uint64(b1.Port()), ServiceName: svc, Ephemeral: false})
	if !ok || err != nil {
		t.Fatalf("DeregisterInstance: %v %v", ok, err)
	}
	cb.await(t, "the first instance gone", func(l []model.Instance) bool { return samePorts(l, b2.Port()) })
	subs := metric(t, f.HTTPAddr, "roster_nacos_grpc_subscriptions")
	if subs < 1 {
		t.Fatalf("%v subscriptions on the follower", subs)
	}

	// A wrong password: the SDK's login fails, and so does everything after it.
	bad := newClientWith(t, []constant.ClientOption{constant.WithUsername(app.AccessorID),
		constant.WithPassword("00000000-0000-4000-8000-000000000000")}, f)
	b3 := newBackend(t)
	ok, err = bad.RegisterInstance(vo.RegisterInstanceParam{Ip: "127.0.0.1", Port: uint64(b3.Port()), ServiceName: svc,
		Weight: 1, Enable: true, Healthy: true, Ephemeral: false})
	if ok || err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("RegisterInstance with a wrong password: %v %v, want a 403", ok, err)
	}
	if list, err := bad.SelectAllInstances(vo.SelectAllInstancesParam{ServiceName: svc}); len(list) != 0 {
		t.Fatalf("SelectAllInstances with a wrong password: %v %+v", err, list)
	}
	if err := bad.Subscribe(&vo.SubscribeParam{ServiceName: svc, SubscribeCallback: newCallbacks().fn}); err != nil {
		t.Logf("Subscribe with a wrong password: %v", err)
	}
	if got := metric(t, f.HTTPAddr, "roster_nacos_grpc_subscriptions"); got != subs {
		t.Fatalf("subscriptions went from %v to %v with a wrong password", subs, got)
	}
	res, _, err := admin.Instances(ctx, "public", "DEFAULT_GROUP", svc, client.InstancesQuery{})
	if err != nil || len(res.Instances) != 1 || res.Instances[0].Port != b2.Port() {
		t.Fatalf("instances after the wrong password's attempts: %v %+v", err, res)
	}
}
