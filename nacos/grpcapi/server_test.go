package grpcapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/rosterhq/roster/fanout"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/nacos/internal/nacostesting"
	"github.com/rosterhq/roster/nacos/nacospb"
	"github.com/rosterhq/roster/nacos/openapi"
	"github.com/rosterhq/roster/store"
)

// grpcEnv is a Nacos API over a real store with the gRPC server in front, on loopback.
type grpcEnv struct {
	t    testing.TB
	h    http.Handler
	st   *store.Store
	node *nacostesting.Node
	hub  *fanout.Hub
	g    *Server
	reg  *prometheus.Registry
	addr string
}

func newGRPCEnv(t testing.TB, mod func(*Config)) *grpcEnv {
	t.Helper()
	return newGRPCEnvWith(t, nil, mod)
}

// newGRPCEnvWith is newGRPCEnv with api (nil: none) adjusting the Nacos API's
// configuration (its registry, say) and mod the server's.
func newGRPCEnvWith(t testing.TB, api func(*store.Store, *openapi.Config), mod func(*Config)) *grpcEnv {
	t.Helper()
	env := nacostesting.NewEnv(t, "n1", nil)
	acfg := openapi.Config{NodeID: "n1", Store: env.Store, Node: env.Node, Registry: env.Registry, Forwarder: env.Forwarder,
		Metrics: env.Metrics, Logger: slog.New(slog.DiscardHandler)}
	if api != nil {
		api(env.Store, &acfg)
	}
	h, err := openapi.New(acfg)
	if err != nil {
		t.Fatal(err)
	}
	hub, err := fanout.New(env.Store, fanout.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := Config{Registry: acfg.Registry, API: h, Store: env.Store, Watch: hub, HTTPAddr: "127.0.0.1:8848", Registerer: reg}
	if mod != nil {
		mod(&cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		g.Shutdown(ctx)
		hub.Close()
	})
	return &grpcEnv{t: t, h: h, st: env.Store, node: env.Node, hub: hub, g: g, reg: reg, addr: ln.Addr().String()}
}

// newACLEnv is newGRPCEnv with ACLs on and bootstrapped, and the tokens it starts with.
func newACLEnv(t testing.TB, mod func(*Config)) (*grpcEnv, nacostesting.Tokens) {
	t.Helper()
	e := newGRPCEnvWith(t, func(st *store.Store, cfg *openapi.Config) {
		cfg.Registry = nacostesting.NewRegistry(t, st, cfg.Node.(*nacostesting.Node), true)
	}, mod)
	return e, nacostesting.BootstrapTokens(t, e.node)
}

// rpcClient is a hand-driven Nacos gRPC client.
type rpcClient struct {
	t      testing.TB
	cc     *grpc.ClientConn
	stream *nacospb.ClientBiStream
	// requests receives what the server sends on the stream.
	requests chan *nacospb.Payload
	sendMu   sync.Mutex
}

// dial connects without registering.
func (e *grpcEnv) dial() *rpcClient {
	e.t.Helper()
	cc, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cc.Close() })
	return &rpcClient{t: e.t, cc: cc, requests: make(chan *nacospb.Payload, 64)}
}

// connect dials, opens the stream and registers with a ConnectionSetupRequest (with an
// ability table when negotiate), as an SDK does.
func (e *grpcEnv) connect(negotiate bool) *rpcClient {
	e.t.Helper()
	c := e.dial()
	if typ, _ := c.call(rpcServerCheckRequest, map[string]any{"module": "internal"}); typ != rpcServerCheckResponse {
		e.t.Fatalf("server check answered %s", typ)
	}
	before := e.g.Connections()
	c.open(negotiate)
	wait.For(e.t, 5*time.Second, "the connection to register", func() bool { return e.g.Connections() > before })
	return c
}

// open opens the stream and sends the setup.
func (c *rpcClient) open(negotiate bool) {
	c.t.Helper()
	st, err := nacospb.OpenBiStream(context.Background(), c.cc)
	if err != nil {
		c.t.Fatal(err)
	}
	c.stream = st
	go func() {
		for {
			p, err := st.Recv()
			if err != nil {
				close(c.requests)
				return
			}
			c.requests <- p
		}
	}()
	setup := map[string]any{"module": "internal", "clientVersion": "Nacos-Go-Client:v2.3.2", "tenant": "",
		"labels": map[string]string{"module": "naming", "source": "sdk"}}
	if negotiate {
		setup["abilityTable"] = map[string]bool{}
	}
	c.send(rpcConnectionSetupRequest, setup)
}

// send writes a payload on the stream.
func (c *rpcClient) send(typ string, body any) {
	c.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if err := c.stream.Send(&nacospb.Payload{Metadata: &nacospb.Metadata{Type: typ, ClientIp: "192.0.2.7"}, Body: &anypb.Any{Value: b}}); err != nil {
		c.t.Fatalf("send %s: %v", typ, err)
	}
}

// call sends a unary request and decodes the answer.
func (c *rpcClient) call(typ string, body any) (string, map[string]any) {
	c.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.callRaw(typ, b)
}

func (c *rpcClient) callRaw(typ string, body []byte) (string, map[string]any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := nacospb.Call(ctx, c.cc, &nacospb.Payload{Metadata: &nacospb.Metadata{Type: typ}, Body: &anypb.Any{Value: body}})
	if err != nil {
		c.t.Fatalf("%s: %v", typ, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out.GetBody().GetValue(), &m); err != nil {
		c.t.Fatalf("%s answered %q: %v", typ, out.GetBody().GetValue(), err)
	}
	return out.GetMetadata().GetType(), m
}

// next returns the next server request of type typ on the stream (others are skipped).
func (c *rpcClient) next(typ string, within time.Duration) map[string]any {
	c.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case p, ok := <-c.requests:
			if !ok {
				c.t.Fatalf("stream ended while waiting for %s", typ)
			}
			if p.GetMetadata().GetType() != typ {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal(p.GetBody().GetValue(), &m); err != nil {
				c.t.Fatalf("%s: %v", typ, err)
			}
			return m
		case <-deadline:
			c.t.Fatalf("no %s within %s", typ, within)
		}
	}
}

// ended waits until the client's stream has ended (its transport was closed and the
// client saw it), so that the next call goes out on a new transport.
func (c *rpcClient) ended(within time.Duration) {
	c.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case _, ok := <-c.requests:
			if !ok {
				return
			}
		case <-deadline:
			c.t.Fatalf("the stream did not end within %s", within)
		}
	}
}

// none checks that no request of type typ arrives within d.
func (c *rpcClient) none(typ string, d time.Duration) {
	c.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case p, ok := <-c.requests:
			if !ok {
				return
			}
			if p.GetMetadata().GetType() == typ {
				c.t.Fatalf("unexpected %s: %s", typ, p.GetBody().GetValue())
			}
		case <-deadline:
			return
		}
	}
}

// ack answers a server request with resultCode code.
func (c *rpcClient) ack(typ string, req map[string]any, code int) {
	c.t.Helper()
	c.send(typ, map[string]any{"resultCode": code, "errorCode": 0, "success": code == 200, "message": "", "requestId": req["requestId"]})
}

// result checks an answer's type and codes.
func result(t *testing.T, gotType string, m map[string]any, wantType string, resultCode, errorCode int) {
	t.Helper()
	if gotType != wantType || num(m["resultCode"]) != resultCode || num(m["errorCode"]) != errorCode {
		t.Fatalf("answer %s %v, want %s with resultCode %d errorCode %d", gotType, m, wantType, resultCode, errorCode)
	}
	if _, ok := m["success"]; !ok {
		t.Fatalf("answer %s lacks success: %v", gotType, m)
	}
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// hostsOf lists "ip:port healthy" of a serviceInfo's hosts.
func hostsOf(t testing.TB, info any) []string {
	t.Helper()
	m, ok := info.(map[string]any)
	if !ok {
		t.Fatalf("serviceInfo %v", info)
	}
	var out []string
	hosts, _ := m["hosts"].([]any)
	for _, h := range hosts {
		hm := h.(map[string]any)
		out = append(out, model.JoinAddr(hm["ip"].(string), num(hm["port"]))+map[bool]string{true: " up", false: " down"}[hm["healthy"].(bool)])
	}
	return out
}

func naming(service string, extra map[string]any) map[string]any {
	m := map[string]any{"module": "naming", "namespace": "public", "groupName": "DEFAULT_GROUP", "serviceName": service, "requestId": ""}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func TestAddrFor(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{":8848", ":9848"},
		{"127.0.0.1:8848", "127.0.0.1:9848"},
		{"[::1]:8850", "[::1]:9850"},
		{"0.0.0.0:64535", "0.0.0.0:65535"},
		{"127.0.0.1:64536", ""},
		{"127.0.0.1:0", ""},
		{"no-port", ""},
	} {
		if got := AddrFor(tc.in); got != tc.want {
			t.Errorf("AddrFor(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestGRPC_ServerCheckAndSetup: a transport gets a connection id at once; naming
// requests need the setup first (301); a setup with an ability table is answered with the
// server's abilities, one without (the Go SDK's) is not.
func TestGRPC_ServerCheckAndSetup(t *testing.T) {
	e := newGRPCEnv(t, nil)
	c := e.dial()
	typ, m := c.call(rpcServerCheckRequest, map[string]any{"module": "internal"})
	result(t, typ, m, rpcServerCheckResponse, 200, 0)
	if id, _ := m["connectionId"].(string); !regexp.MustCompile(`^\d{13}_127\.0\.0\.1_\d+$`).MatchString(id) || m["supportAbilityNegotiation"] != true {
		t.Fatalf("server check: %v", m)
	}
	typ, m = c.call(rpcSubscribeServiceRequest, naming("orders", map[string]any{"subscribe": true}))
	result(t, typ, m, rpcErrorResponse, 500, 301)
	if m["message"] != "Connection is unregistered." {
		t.Fatalf("unregistered answer: %v", m)
	}

	c.open(true)
	ack := c.next(rpcSetupAckRequest, 5*time.Second)
	if tbl, _ := ack["abilityTable"].(map[string]any); tbl["supportPersistentInstanceByGrpc"] != true {
		t.Fatalf("setup ack: %v", ack)
	}
	wait.For(t, 5*time.Second, "the connection to register", func() bool { return e.g.Connections() == 1 })
	typ, m = c.call(rpcHealthCheckRequest, map[string]any{"module": "internal"})
	result(t, typ, m, rpcHealthCheckResponse, 200, 0)

	goStyle := e.connect(false)
	goStyle.none(rpcSetupAckRequest, 300*time.Millisecond)
	if got := testutil.ToFloat64(e.g.m.connections); got != 2 {
		t.Fatalf("connections gauge %v, want 2", got)
	}
	typ, m = goStyle.call(rpcServerLoaderInfoRequest, map[string]any{})
	result(t, typ, m, rpcServerLoaderInfoResponse, 200, 0)
	if lm, _ := m["loaderMetrics"].(map[string]any); m["address"] != "127.0.0.1:8848" || lm["conCount"] != "2" {
		t.Fatalf("loader info: %v", m)
	}
}

// TestGRPC_BadRequests: unknown types, bodies that are not JSON, bodies over the limit
// and messages over gRPC's limit are answered (Nacos's codes; the last by gRPC itself),
// and the connection keeps working.
func TestGRPC_BadRequests(t *testing.T) {
	e := newGRPCEnv(t, func(c *Config) { c.MaxBodyBytes = 4096 })
	c := e.connect(false)
	for _, tc := range []struct {
		name, typ string
		body      []byte
		code      int
	}{
		{"unknown type", "ConfigQueryRequest", []byte(`{}`), 302},
		{"no type", "", []byte(`{}`), 302},
		{"a response as a request", rpcInstanceResponse, []byte(`{}`), 302},
		{"not JSON", rpcSubscribeServiceRequest, []byte(`{"serviceName":`), 502},
		{"JSON of the wrong shape", rpcServiceListRequest, []byte(`{"pageNo":"one"}`), 502},
		{"a JSON array", rpcServiceQueryRequest, []byte(`[1,2]`), 502},
		{"over the body limit", rpcSubscribeServiceRequest, []byte(`{"serviceName":"` + strings.Repeat("x", 5000) + `"}`), 400},
	} {
		typ, m := c.callRaw(tc.typ, tc.body)
		if typ != rpcErrorResponse || num(m["errorCode"]) != tc.code || num(m["resultCode"]) != 500 || m["message"] == "" {
			t.Errorf("%s: %s %v, want ErrorResponse %d", tc.name, typ, m, tc.code)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	huge := &nacospb.Payload{Metadata: &nacospb.Metadata{Type: rpcSubscribeServiceRequest}, Body: &anypb.Any{Value: make([]byte, DefaultMaxMessageBytes+1)}}
	if _, err := nacospb.Call(ctx, c.cc, huge); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a message over %d bytes: %v, want ResourceExhausted", DefaultMaxMessageBytes, err)
	}
	typ, m := c.call(rpcHealthCheckRequest, map[string]any{})
	result(t, typ, m, rpcHealthCheckResponse, 200, 0)
	if got := testutil.ToFloat64(e.g.m.requests.WithLabelValues("other", "error")); got != 3 {
		t.Fatalf("requests of unknown types counted %v, want 3", got)
	}
}

// TestGRPC_Reads: subscribe, query and list answer Nacos 2.x's shapes: the plain service
// name, the clusters echoed, enabled instances only, the protect threshold, healthy-only
// queries, and parameter checks answered with the request's own type.
func TestGRPC_Reads(t *testing.T) {
	e := newGRPCEnv(t, nil)
	nacostesting.SeedOrders(t, e.h)
	c := e.connect(false)

	typ, m := c.call(rpcSubscribeServiceRequest, naming("orders", map[string]any{"subscribe": true, "clusters": ""}))
	result(t, typ, m, rpcSubscribeServiceResponse, 200, 0)
	info := m["serviceInfo"].(map[string]any)
	if info["name"] != "orders" || info["groupName"] != "DEFAULT_GROUP" || info["clusters"] != "" || num(info["cacheMillis"]) != 10000 ||
		num(info["lastRefTime"]) <= 0 || info["valid"] != true || info["reachProtectionThreshold"] != false {
		t.Fatalf("serviceInfo: %v", info)
	}
	if got := strings.Join(hostsOf(t, info), ","); got != "127.100.0.1:8080 up,127.100.0.2:8080 down,[::1]:9090 up" {
		t.Fatalf("hosts: %s", got)
	}
	h := info["hosts"].([]any)[0].(map[string]any)
	if h["serviceName"] != "DEFAULT_GROUP@@orders" || h["ephemeral"] != false || h["instanceId"] != "127.100.0.1#8080#DEFAULT#DEFAULT_GROUP@@orders" {
		t.Fatalf("host: %v", h)
	}

	typ, m = c.call(rpcServiceQueryRequest, naming("orders", map[string]any{"cluster": "DEFAULT", "healthyOnly": true}))
	result(t, typ, m, rpcQueryServiceResponse, 200, 0)
	if got := strings.Join(hostsOf(t, m["serviceInfo"]), ","); got != "127.100.0.1:8080 up" || m["serviceInfo"].(map[string]any)["clusters"] != "DEFAULT" {
		t.Fatalf("healthy DEFAULT hosts: %s (%v)", got, m["serviceInfo"])
	}
	typ, m = c.call(rpcServiceQueryRequest, naming("missing", nil))
	result(t, typ, m, rpcQueryServiceResponse, 200, 0)
	if hosts := hostsOf(t, m["serviceInfo"]); len(hosts) != 0 {
		t.Fatalf("a missing service has hosts %v", hosts)
	}

	// Every enabled instance unhealthy: the protect threshold shows them all healthy.
	nacostesting.MustOK(t, e.h, http.MethodPut, "/nacos/v1/ns/cluster", `serviceName=orders&clusterName=DEFAULT&healthChecker={"type":"NONE"}`)
	nacostesting.MustOK(t, e.h, http.MethodPut, "/nacos/v1/ns/health/instance", "serviceName=orders&ip=127.100.0.1&port=8080&healthy=false")
	typ, m = c.call(rpcServiceQueryRequest, naming("orders", map[string]any{"cluster": "DEFAULT"}))
	result(t, typ, m, rpcQueryServiceResponse, 200, 0)
	if got := strings.Join(hostsOf(t, m["serviceInfo"]), ","); got != "127.100.0.1:8080 up,127.100.0.2:8080 up" || m["serviceInfo"].(map[string]any)["reachProtectionThreshold"] != true {
		t.Fatalf("threshold reached: %s %v", got, m["serviceInfo"])
	}

	for _, p := range []map[string]any{
		naming("", map[string]any{"subscribe": true}),
		naming("bad name!", map[string]any{"subscribe": true}),
		naming("orders", map[string]any{"subscribe": true, "clusters": "ok,bad cluster"}),
		naming("orders", map[string]any{"subscribe": true, "groupName": "other", "serviceName": "g@@orders"}),
	} {
		typ, m = c.call(rpcSubscribeServiceRequest, p)
		result(t, typ, m, rpcSubscribeServiceResponse, 500, 400)
		if msg, _ := m["message"].(string); !strings.HasPrefix(msg, "Param check invalid:") {
			t.Fatalf("param check message %q", msg)
		}
	}

	nacostesting.MustOK(t, e.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=payments&ip=127.100.0.9&port=1&ephemeral=false")
	nacostesting.MustOK(t, e.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=other@@ledger&ip=127.100.0.9&port=1&ephemeral=false")
	typ, m = c.call(rpcServiceListRequest, naming("", map[string]any{"pageNo": 1, "pageSize": 10, "selector": ""}))
	result(t, typ, m, rpcServiceListResponse, 200, 0)
	if num(m["count"]) != 2 || len(m["serviceNames"].([]any)) != 2 {
		t.Fatalf("service list: %v", m)
	}
	typ, m = c.call(rpcServiceListRequest, naming("", map[string]any{"pageNo": 2, "pageSize": 1}))
	result(t, typ, m, rpcServiceListResponse, 200, 0)
	if names := m["serviceNames"].([]any); num(m["count"]) != 2 || len(names) != 1 || names[0] != "payments" {
		t.Fatalf("second page of one: %v", m)
	}
	typ, m = c.call(rpcServiceListRequest, map[string]any{"namespace": "public", "groupName": "other", "pageNo": 1, "pageSize": 10})
	result(t, typ, m, rpcServiceListResponse, 200, 0)
	if names := m["serviceNames"].([]any); len(names) != 1 || names[0] != "ledger" {
		t.Fatalf("group other: %v", m)
	}
	typ, m = c.call(rpcServiceListRequest, map[string]any{"namespace": "nowhere", "pageNo": 1, "pageSize": 10})
	result(t, typ, m, rpcServiceListResponse, 200, 0)
	if num(m["count"]) != 0 || len(m["serviceNames"].([]any)) != 0 {
		t.Fatalf("a namespace without services: %v", m)
	}
	typ, m = c.call(rpcServiceListRequest, map[string]any{"pageSize": -1})
	result(t, typ, m, rpcServiceListResponse, 500, 400)
	// A page number below 1 is the first page, as Nacos computes it.
	typ, m = c.call(rpcServiceListRequest, naming("", map[string]any{"pageNo": 0, "pageSize": 10}))
	result(t, typ, m, rpcServiceListResponse, 200, 0)
	if num(m["count"]) != 2 || len(m["serviceNames"].([]any)) != 2 {
		t.Fatalf("pageNo 0: %v", m)
	}
}

// TestGRPC_InstanceRequests: ephemeral registrations are refused with the typed
// response and write nothing; persistent ones go through the Open API's validation;
// deregistration removes the persistent instance whichever request carries it.
func TestGRPC_InstanceRequests(t *testing.T) {
	e := newGRPCEnv(t, nil)
	c := e.connect(true)
	inst := func(ip string, port int, extra map[string]any) map[string]any {
		m := map[string]any{"ip": ip, "port": port, "weight": 1.0, "healthy": true, "enabled": true, "ephemeral": true, "clusterName": "c1", "metadata": map[string]string{}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	ref := model.InstanceRef{Namespace: "public", Group: "g1", Service: "orders", IP: "127.100.0.1", Port: 8080}
	body := func(typ string, in map[string]any) map[string]any {
		return map[string]any{"module": "naming", "namespace": "public", "groupName": "g1", "serviceName": "orders", "type": typ, "instance": in}
	}

	typ, m := c.call(rpcInstanceRequest, body("registerInstance", inst("127.100.0.1", 8080, nil)))
	result(t, typ, m, rpcInstanceResponse, 500, 400)
	if msg := m["message"].(string); !strings.Contains(msg, "Current service g1@@orders is persistent service, can't register ephemeral instance") {
		t.Fatalf("ephemeral refusal: %q", msg)
	}
	typ, m = c.call(rpcBatchInstanceRequest, map[string]any{"module": "naming", "namespace": "public", "groupName": "g1", "serviceName": "orders",
		"type": "batchRegisterInstance", "instances": []any{inst("127.100.0.1", 8080, nil)}})
	result(t, typ, m, rpcBatchInstanceResponse, 500, 400)
	if _, _, err := e.st.Instance(nil, ref); err == nil {
		t.Fatal("an ephemeral registration was written")
	}

	typ, m = c.call(rpcPersistentInstanceRequest, body("registerInstance", inst("127.100.0.1", 8080, map[string]any{"weight": 3.5, "metadata": map[string]string{"zone": "a"}})))
	result(t, typ, m, rpcInstanceResponse, 200, 0)
	got := nacostesting.MustInstance(t, e.st, ref)
	if got.Weight != 3.5 || got.Cluster != "c1" || got.Metadata["zone"] != "a" || !got.Enabled {
		t.Fatalf("registered over gRPC: %+v", got)
	}
	for _, tc := range []struct {
		name string
		in   map[string]any
		want string
	}{
		{"negative weight", inst("127.100.0.2", 8080, map[string]any{"weight": -1}), "weight"},
		{"no ip", inst("", 8080, nil), "ip"},
		{"port out of range", inst("127.100.0.2", 70000, nil), "port"},
		{"bad cluster", inst("127.100.0.2", 8080, map[string]any{"clusterName": "a b"}), "cluster"},
	} {
		typ, m = c.call(rpcPersistentInstanceRequest, body("registerInstance", tc.in))
		result(t, typ, m, rpcInstanceResponse, 500, 400)
		if msg, _ := m["message"].(string); !strings.Contains(strings.ToLower(msg), tc.want) {
			t.Errorf("%s: message %q does not name %s", tc.name, msg, tc.want)
		}
	}
	typ, m = c.call(rpcPersistentInstanceRequest, body("updateInstance", inst("127.100.0.1", 8080, nil)))
	result(t, typ, m, rpcInstanceResponse, 500, 400)
	typ, m = c.call(rpcInstanceRequest, body("patch", inst("127.100.0.1", 8080, nil)))
	result(t, typ, m, rpcInstanceResponse, 500, 400)

	// An ephemeral deregistration removes the persistent instance (Roster's rule).
	typ, m = c.call(rpcInstanceRequest, body("deregisterInstance", inst("127.100.0.1", 8080, nil)))
	result(t, typ, m, rpcInstanceResponse, 200, 0)
	if _, _, err := e.st.Instance(nil, ref); err == nil {
		t.Fatal("the instance is still registered")
	}
	typ, m = c.call(rpcPersistentInstanceRequest, body("registerInstance", inst("127.100.0.1", 8080, map[string]any{"ephemeral": false})))
	result(t, typ, m, rpcInstanceResponse, 200, 0)
	typ, m = c.call(rpcPersistentInstanceRequest, body("deregisterInstance", inst("127.100.0.1", 8080, nil)))
	result(t, typ, m, rpcInstanceResponse, 200, 0)
	if _, _, err := e.st.Instance(nil, ref); err == nil {
		t.Fatal("the instance is still registered after a persistent deregistration")
	}
}

// pushedHosts waits for the next push, acks it with code and returns it with its hosts.
func (c *rpcClient) pushed(within time.Duration, code int) (map[string]any, []string) {
	c.t.Helper()
	req := c.next(rpcNotifySubscriberRequest, within)
	c.ack("NotifySubscriberResponse", req, code)
	return req, hostsOf(c.t, req["serviceInfo"])
}

// TestGRPC_Pushes: a subscribed connection is pushed every change its clusters filter
// can see, newest lastRefTime first, and nothing for changes it cannot see.
func TestGRPC_Pushes(t *testing.T) {
	e := newGRPCEnv(t, nil)
	nacostesting.SeedOrders(t, e.h)
	c := e.connect(false)
	typ, m := c.call(rpcSubscribeServiceRequest, naming("orders", map[string]any{"subscribe": true, "clusters": "DEFAULT"}))
	result(t, typ, m, rpcSubscribeServiceResponse, 200, 0)
	last := num(m["serviceInfo"].(map[string]any)["lastRefTime"])
	// The subscription's first view equals the answer: no push.
	c.none(rpcNotifySubscriberRequest, 200*time.Millisecond)

	nacostesting.MustOK(t, e.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.4&port=8080&ephemeral=false")
	req, hosts := c.pushed(5*time.Second, 200)
	info := req["serviceInfo"].(map[string]any)
	if strings.Join(hosts, ",") != "127.100.0.1:8080 up,127.100.0.2:8080 down,127.100.0.4:8080 up" || info["clusters"] != "DEFAULT" || info["name"] != "orders" {
		t.Fatalf("push after a registration: %v", req)
	}
	if ref := num(info["lastRefTime"]); ref <= last {
		t.Fatalf("push lastRefTime %d not after the answer's %d", ref, last)
	}
	if id, _ := req["requestId"].(string); id == "" || req["module"] != "naming" {
		t.Fatalf("push envelope: %v", req)
	}

	// A change in another cluster is invisible to this filter: no push; the next visible
	// change is the next push.
	nacostesting.MustOK(t, e.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=::1&port=9091&clusterName=manual&ephemeral=false")
	nacostesting.MustOK(t, e.h, http.MethodDelete, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.4&port=8080")
	_, hosts = c.pushed(5*time.Second, 200)
	if strings.Join(hosts, ",") != "127.100.0.1:8080 up,127.100.0.2:8080 down" {
		t.Fatalf("push after a deregistration: %v", hosts)
	}
	wait.For(t, 5*time.Second, "two acked pushes", func() bool {
		return testutil.ToFloat64(e.g.m.pushes.WithLabelValues("acked")) == 2 && testutil.ToFloat64(e.g.m.pushes.WithLabelValues("sent")) == 2
	})
	if n := testutil.CollectAndCount(e.g.m.pushLatency); n != 1 {
		t.Fatalf("push latency histogram: %d series", n)
	}

	// Unsubscribed: nothing more.
	typ, m = c.call(rpcSubscribeServiceRequest, naming("orders", map[string]any{"subscribe": false, "clusters": "DEFAULT"}))
	result(t, typ, m, rpcSubscribeServiceResponse, 200, 0)
	if e.hub.Subscribers(fanout.ServiceTopic(model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders"})) != 0 {
		t.Fatal("the topic is still followed after the unsubscription")
	}
	nacostesting.MustOK(t, e.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.5&port=8080&ephemeral=false")
	c.none(rpcNotifySubscriberRequest, 300*time.Millisecond)
}

// TestGRPC_PushRetriesAndCoalesces: an unanswered push is sent again after the timeout
// and the retry delay, a failed ack too; changes made while a push is in flight become one
// push of the latest list.
func TestGRPC_PushRetriesAndCoalesces(t *testing.T) {
	e := newGRPCEnv(t, func(c *Config) { c.PushTimeout, c.PushRetryDelay = time.Second, 100*time.Millisecond })
	c := e.connect(false)
	c.call(rpcSubscribeServiceRequest, naming("orders", map[string]any{"subscribe": true}))
	nacostesting.MustOK(t, e.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.1&port=1&ephemeral=false")

	first := c.next(rpcNotifySubscriberRequest, 5*time.Second) // not answered
	again := c.next(rpcNotifySubscriberRequest, 5*time.Second)
	if again["requestId"] == first["requestId"] || strings.Join(hostsOf(t, again["serviceInfo"]), ",") != "127.100.0.1:1 up" {
		t.Fatalf("retry after a timeout: %v (first %v)", again, first)
	}
	c.ack("NotifySubscriberResponse", again, 500) // a failed ack
	third, hosts := c.pushed(5*time.Second, 200)
	if third["requestId"] == again["requestId"] || strings.Join(hosts, ",") != "127.100.0.1:1 up" {
		t.Fatalf("retry after a failed ack: %v", third)
	}
	if testutil.ToFloat64(e.g.m.pushes.WithLabelValues("timeout")) != 1 || testutil.ToFloat64(e.g.m.pushes.WithLabelValues("failed")) != 1 {
		t.Fatal("timeout and failure not counted")
	}

	// Three changes while a push is unanswered: after its ack, one push with all three.
	// The hub publishes after a write is answered, so a watch of the topic (subscribed
	// before the writes: its first update is the read it starts with) tells when the
	// fourth registration has been offered to the topic's subscribers, the pusher's
	// included; only then is the push acknowledged.
	topic := fanout.ServiceTopic(model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders"})
	watch, err := e.hub.Subscribe(topic)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	nacostesting.MustOK(t, e.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.2&port=1&ephemeral=false")
	inflight := c.next(rpcNotifySubscriberRequest, 5*time.Second)
	nacostesting.MustOK(t, e.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.3&port=1&ephemeral=false")
	nacostesting.MustOK(t, e.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.4&port=1&ephemeral=false")
	applied := e.st.AppliedIndex()
	wait.For(t, 5*time.Second, "the hub to publish the fourth registration", func() bool {
		for _, u := range watch.Next() {
			if u.Index >= applied {
				return true
			}
		}
		return false
	})
	_ = e.hub.Subscribers(topic) // returns once the publish that offered it has released the hub
	c.ack("NotifySubscriberResponse", inflight, 200)
	_, hosts = c.pushed(5*time.Second, 200)
	if strings.Join(hosts, ",") != "127.100.0.1:1 up,127.100.0.2:1 up,127.100.0.3:1 up,127.100.0.4:1 up" {
		t.Fatalf("coalesced push: %v", hosts)
	}
	c.none(rpcNotifySubscriberRequest, 500*time.Millisecond)
}

// TestGRPC_ConnectionEndDropsSubscriptions: subscriptions are the connection's and go
// with it.
func TestGRPC_ConnectionEndDropsSubscriptions(t *testing.T) {
	e := newGRPCEnv(t, nil)
	c := e.connect(false)
	for _, svc := range []string{"a", "b"} {
		c.call(rpcSubscribeServiceRequest, naming(svc, map[string]any{"subscribe": true}))
	}
	c.call(rpcSubscribeServiceRequest, naming("a", map[string]any{"subscribe": true, "clusters": "c1"}))
	if got := testutil.ToFloat64(e.g.m.subscriptions); got != 3 {
		t.Fatalf("subscriptions gauge %v, want 3", got)
	}
	_ = c.cc.Close()
	wait.For(t, 5*time.Second, "the connection's subscriptions to go", func() bool {
		return e.g.Connections() == 0 && testutil.ToFloat64(e.g.m.subscriptions) == 0 &&
			e.hub.Subscribers(fanout.ServiceTopic(model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "a"})) == 0
	})
}

// TestGRPC_ClientDetection: a connection silent for the idle timeout is sent a
// ClientDetectionRequest; one that answers stays, one that does not is unregistered.
func TestGRPC_ClientDetection(t *testing.T) {
	e := newGRPCEnv(t, func(c *Config) {
		c.IdleTimeout, c.EjectInterval, c.DetectionTimeout = 200*time.Millisecond, 50*time.Millisecond, 300*time.Millisecond
	})
	alive, silent := e.connect(false), e.connect(false)
	req := alive.next(rpcClientDetectionRequest, 5*time.Second)
	alive.ack("ClientDetectionResponse", req, 200)
	silent.next(rpcClientDetectionRequest, 5*time.Second) // never answered
	wait.For(t, 5*time.Second, "the silent connection to be closed", func() bool { return e.g.Connections() == 1 })
	typ, m := silent.call(rpcHealthCheckRequest, map[string]any{})
	result(t, typ, m, rpcErrorResponse, 500, 301)
	typ, m = alive.call(rpcHealthCheckRequest, map[string]any{})
	result(t, typ, m, rpcHealthCheckResponse, 200, 0)
	if testutil.ToFloat64(e.g.m.detections.WithLabelValues("closed")) < 1 || testutil.ToFloat64(e.g.m.detections.WithLabelValues("answered")) < 1 {
		t.Fatal("detections not counted")
	}
}

// TestGRPC_ShutdownResetsClients: a stopping node asks its clients to reconnect
// elsewhere and then answers "not running".
func TestGRPC_ShutdownResetsClients(t *testing.T) {
	e := newGRPCEnv(t, nil)
	c := e.connect(false)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		e.g.Shutdown(ctx)
	}()
	req := c.next(rpcConnectResetRequest, 5*time.Second)
	if req["module"] != "internal" || req["requestId"] == "" {
		t.Fatalf("connect reset: %v", req)
	}
	typ, m := c.call(rpcHealthCheckRequest, map[string]any{})
	result(t, typ, m, rpcErrorResponse, 500, 300)
	c.ack("ConnectResetResponse", req, 200)
	wait.For(t, 5*time.Second, "the answered reset to be counted", func() bool { return testutil.ToFloat64(e.g.m.resets) == 1 })
	// The client leaves, as an SDK does after a reset, and the server stops.
	_ = c.cc.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return")
	}
}

// TestProtectThreshold_ZeroEveryInstanceDown: with the default threshold 0 and every
// enabled instance down, the threshold is reached on every Nacos read — the v1 and v2
// instance lists and the gRPC query, with healthyOnly or not, the gRPC subscription's
// answer and its push: every enabled instance, shown healthy, reachProtectionThreshold
// true. Once one is healthy again none of them reaches it.
func TestProtectThreshold_ZeroEveryInstanceDown(t *testing.T) {
	e := newGRPCEnv(t, nil)
	nacostesting.MustOK(t, e.h, http.MethodPost, "/nacos/v1/ns/service", "serviceName=pay&protectThreshold=0")
	nacostesting.MustOK(t, e.h, http.MethodPut, "/nacos/v1/ns/cluster", `serviceName=pay&clusterName=DEFAULT&healthChecker={"type":"NONE"}`)
	for _, form := range []string{"ip=127.100.0.1&port=8080", "ip=127.100.0.2&port=8080", "ip=127.100.0.3&port=8080&enabled=false"} {
		nacostesting.MustOK(t, e.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=pay&ephemeral=false&healthy=false&"+form)
	}
	c := e.connect(false)
	typ, m := c.call(rpcSubscribeServiceRequest, naming("pay", map[string]any{"subscribe": true, "clusters": ""}))
	result(t, typ, m, rpcSubscribeServiceResponse, 200, 0)

	check := func(state, wantHosts string, wantReached bool, subscribed map[string]any) {
		t.Helper()
		type answer struct {
			hosts   string
			reached bool
		}
		got := map[string]answer{}
		for _, healthyOnly := range []bool{true, false} {
			for _, v := range []string{"v1", "v2"} {
				r := nacostesting.MustNacos(t, e.h, http.MethodGet, fmt.Sprintf("/nacos/%s/ns/instance/list?serviceName=pay&healthyOnly=%v", v, healthyOnly), "", 200)
				var info nacos.ServiceInfo
				if v == "v2" {
					_, _, data := r.Envelope(t)
					if err := json.Unmarshal(data, &info); err != nil {
						t.Fatal(err)
					}
				} else {
					r.Decode(t, &info)
				}
				var hosts []string
				for _, h := range info.Hosts {
					hosts = append(hosts, model.JoinAddr(h.IP, h.Port)+map[bool]string{true: " up", false: " down"}[h.Healthy])
				}
				got[fmt.Sprintf("%s list healthyOnly=%v", v, healthyOnly)] = answer{strings.Join(hosts, ","), info.ReachProtectionThreshold}
			}
			typ, m := c.call(rpcServiceQueryRequest, naming("pay", map[string]any{"cluster": "", "healthyOnly": healthyOnly}))
			result(t, typ, m, rpcQueryServiceResponse, 200, 0)
			got[fmt.Sprintf("gRPC query healthyOnly=%v", healthyOnly)] = answer{strings.Join(hostsOf(t, m["serviceInfo"]), ","),
				m["serviceInfo"].(map[string]any)["reachProtectionThreshold"] == true}
		}
		got["gRPC subscription"] = answer{strings.Join(hostsOf(t, subscribed), ","), subscribed["reachProtectionThreshold"] == true}
		for surface, a := range got {
			want := answer{wantHosts, wantReached}
			if !wantReached && !strings.Contains(surface, "healthyOnly=true") {
				want.hosts = "127.100.0.1:8080 down,127.100.0.2:8080 up" // the unhealthy one too
			}
			if a != want {
				t.Errorf("%s, %s: hosts %q reached=%v, want %q reached=%v", state, surface, a.hosts, a.reached, want.hosts, want.reached)
			}
		}
	}
	check("every instance down", "127.100.0.1:8080 up,127.100.0.2:8080 up", true, m["serviceInfo"].(map[string]any))

	nacostesting.MustOK(t, e.h, http.MethodPut, "/nacos/v1/ns/health/instance", "serviceName=pay&ip=127.100.0.2&port=8080&healthy=true")
	push, _ := c.pushed(5*time.Second, 200)
	check("one instance healthy", "127.100.0.2:8080 up", false, push["serviceInfo"].(map[string]any))

	nacostesting.MustOK(t, e.h, http.MethodPut, "/nacos/v1/ns/health/instance", "serviceName=pay&ip=127.100.0.2&port=8080&healthy=false")
	push, _ = c.pushed(5*time.Second, 200)
	check("every instance down again", "127.100.0.1:8080 up,127.100.0.2:8080 up", true, push["serviceInfo"].(map[string]any))
}
