package openapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/nacos/internal/nacostesting"
	"github.com/rosterhq/roster/raftnode"
)

var ordersRef = model.InstanceRef{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", IP: "127.100.0.1", Port: 8080}

// TestNacosAPI_V1InstanceLifecycle drives register, read, update, patch and deregister
// through the v1 API against the real store and FSM.
func TestNacosAPI_V1InstanceLifecycle(t *testing.T) {
	h, st, node := newStoreAPI(t)

	resp := nacostesting.MustNacos(t, h, http.MethodPost, "/nacos/v1/ns/instance",
		`serviceName=orders&ip=127.100.0.1&port=8080&ephemeral=false&weight=3&metadata={"v":"1"}`, http.StatusOK)
	if string(resp.Body) != "ok" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("register answered %q (%s)", resp.Body, resp.Header.Get("Content-Type"))
	}
	if resp.Header.Get(api.HeaderIndex) == "" {
		t.Fatal("no index header on a write")
	}
	if got := node.Applied(); !reflect.DeepEqual(got, []fsm.MessageType{fsm.RegisterInstanceType}) {
		t.Fatalf("applied %v", got)
	}
	in := nacostesting.MustInstance(t, st, ordersRef)
	if in.Weight != 3 || in.Cluster != "DEFAULT" || !in.Enabled || !in.Healthy || in.Metadata["v"] != "1" {
		t.Fatalf("registered %+v", in)
	}
	// The service and its cluster were created implicitly, as by the native API.
	if _, c, err := st.Cluster(nil, ordersRef.ServiceKey(), "DEFAULT"); err != nil || !reflect.DeepEqual(c.HealthCheck, model.DefaultHealthCheck()) {
		t.Fatalf("implicit cluster %+v %v", c, err)
	}

	var detail instanceDetailV1
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/instance?serviceName=orders&ip=127.100.0.1&port=8080", "", http.StatusOK).Decode(t, &detail)
	if detail.Service != "DEFAULT_GROUP@@orders" || detail.Weight != 3 || detail.InstanceID != "127.100.0.1#8080#DEFAULT#DEFAULT_GROUP@@orders" {
		t.Fatalf("detail %+v", detail)
	}

	// PUT replaces weight, enabled and metadata (defaults for what is left out) and
	// moves the instance to the cluster given.
	nacostesting.MustOK(t, h, http.MethodPut, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.1&port=8080&enabled=false&clusterName=web")
	in = nacostesting.MustInstance(t, st, ordersRef)
	if in.Weight != 1 || in.Enabled || len(in.Metadata) != 0 || in.Cluster != "web" || !in.Healthy {
		t.Fatalf("after PUT %+v", in)
	}
	// PATCH changes only what is given; the SDK's legacy "enable" is understood.
	nacostesting.MustOK(t, h, http.MethodPatch, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.1&port=8080&enable=true&metadata=a%3D1")
	in = nacostesting.MustInstance(t, st, ordersRef)
	if in.Weight != 1 || !in.Enabled || in.Metadata["a"] != "1" || in.Cluster != "web" {
		t.Fatalf("after PATCH %+v", in)
	}

	// DELETE without ephemeral=false removes the persistent instance (Nacos would not).
	nacostesting.MustOK(t, h, http.MethodDelete, "/nacos/v1/ns/instance?serviceName=orders&ip=127.100.0.1&port=8080", "")
	if _, _, err := st.Instance(nil, ordersRef); err == nil {
		t.Fatal("instance still registered after DELETE without ephemeral")
	}
	// Deregistering again answers ok and writes nothing.
	n := len(node.Applied())
	nacostesting.MustOK(t, h, http.MethodDelete, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.1&port=8080&ephemeral=true")
	if len(node.Applied()) != n {
		t.Fatalf("a no-op deregistration applied %v", node.Applied()[n:])
	}
}

// TestNacosAPI_DeregisterIgnoresEphemeral checks DELETE removes the persistent instance
// for every value of ephemeral, absent included, with parameters in a form body.
func TestNacosAPI_DeregisterIgnoresEphemeral(t *testing.T) {
	for _, eph := range []string{"", "&ephemeral=true", "&ephemeral=false"} {
		h, st, _ := newStoreAPI(t)
		nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.1&port=8080&ephemeral=false")
		nacostesting.MustOK(t, h, http.MethodDelete, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.1&port=8080&clusterName=other"+eph)
		if _, _, err := st.Instance(nil, ordersRef); err == nil {
			t.Fatalf("ephemeral %q: instance still registered", eph)
		}
	}
}

// TestNacosAPI_V2Envelope checks v2 answers writes and reads in the envelope.
func TestNacosAPI_V2Envelope(t *testing.T) {
	h, st, _ := newStoreAPI(t)
	resp := nacostesting.MustNacos(t, h, http.MethodPost, "/nacos/v2/ns/instance",
		"serviceName=orders&groupName=g1&ip=127.100.0.1&port=8080&ephemeral=false&enabled=true", http.StatusOK)
	if string(resp.Body) != `{"code":0,"message":"success","data":"ok"}`+"\n" {
		t.Fatalf("v2 write answered %q", resp.Body)
	}
	ref := ordersRef
	ref.Group = "g1"
	nacostesting.MustInstance(t, st, ref)
	code, msg, data := nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v2/ns/instance?serviceName=orders&groupName=g1&ip=127.100.0.1&port=8080",
		"", http.StatusOK).Envelope(t)
	var d instanceDetailV2
	if err := json.Unmarshal(data, &d); err != nil || code != 0 || msg != "success" || d.ServiceName != "g1@@orders" {
		t.Fatalf("v2 detail %d %q %s (%v)", code, msg, data, err)
	}
	for _, w := range []struct{ method, form string }{
		{http.MethodPut, "serviceName=g1@@orders&ip=127.100.0.1&port=8080&weight=5"},
		{http.MethodPatch, "serviceName=g1@@orders&ip=127.100.0.1&port=8080&enabled=false"},
		{http.MethodDelete, "serviceName=orders&groupName=g1&ip=127.100.0.1&port=8080"},
	} {
		if c, _, d := nacostesting.MustNacos(t, h, w.method, "/nacos/v2/ns/instance", w.form, http.StatusOK).Envelope(t); c != 0 || string(d) != `"ok"` {
			t.Fatalf("%s: code %d data %s", w.method, c, d)
		}
	}
	if _, _, err := st.Instance(nil, ref); err == nil {
		t.Fatal("v2 DELETE left the instance")
	}
}

// TestNacosAPI_BadInputWritesNothing checks every bad request is answered in Nacos's
// shape with Nacos's status and code, and that nothing reaches the Raft log.
func TestNacosAPI_BadInputWritesNothing(t *testing.T) {
	h, st, node := newStoreAPI(t)
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.1&port=8080&ephemeral=false")
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/service", "serviceName=empty")
	applied, calls := st.AppliedIndex(), len(node.Applied())

	const inst = "serviceName=orders&ip=127.100.0.1&port=8080"
	tests := []struct {
		name   string
		method string
		path   string
		form   string
		status int
		code   int
		text   string // a part of the message
	}{
		{"missing serviceName", http.MethodPost, "instance", "ip=127.100.0.1&port=8080&ephemeral=false", 400, 10000,
			"Required parameter 'serviceName' type String is not present"},
		{"missing ip", http.MethodPost, "instance", "serviceName=orders&port=8080&ephemeral=false", 400, 10000, "'ip'"},
		{"missing port", http.MethodPost, "instance", "serviceName=orders&ip=127.100.0.2&ephemeral=false", 400, 10000, "'port'"},
		{"port out of range", http.MethodPost, "instance", "serviceName=orders&ip=127.100.0.2&port=70000&ephemeral=false", 400, 20002, "port"},
		{"port zero", http.MethodPost, "instance", "serviceName=orders&ip=127.100.0.2&port=0&ephemeral=false", 400, 20002, "port"},
		{"bad ip", http.MethodPost, "instance", "serviceName=orders&ip=not_an_ip!&port=80&ephemeral=false", 400, 20002, "ip"},
		{"weight above 10000", http.MethodPost, "instance", inst + "&weight=10001&ephemeral=false", 400, 21001,
			"The weights range from 0.0 to 10000.0"},
		{"negative weight", http.MethodPost, "instance", inst + "&weight=-0.5&ephemeral=false", 400, 21001, "weights"},
		{"bad metadata JSON", http.MethodPost, "instance", inst + `&metadata={"a":&ephemeral=false`, 400, 21002, "metadata format incorrect"},
		{"illegal service name", http.MethodPost, "instance", "serviceName=a%20b&ip=127.100.0.1&port=80&ephemeral=false", 400, 21000, "serviceName"},
		{"illegal group", http.MethodPost, "instance", inst + "&groupName=g%2F1&ephemeral=false", 400, 21000, "groupName"},
		{"illegal namespace", http.MethodPost, "instance", inst + "&namespaceId=a.b&ephemeral=false", 400, 22000, "namespaceId"},
		{"illegal cluster", http.MethodPost, "instance", inst + "&clusterName=a.b&ephemeral=false", 400, 20002, "clusterName"},
		{"group mismatch", http.MethodPost, "instance", "serviceName=g1@@orders&groupName=g2&ip=127.100.0.1&port=80&ephemeral=false",
			400, 20009, "groupName"},
		{"ephemeral by default", http.MethodPost, "instance", inst, 400, 21004,
			"Current service DEFAULT_GROUP@@orders is persistent service, can't register ephemeral instance."},
		{"ephemeral explicitly", http.MethodPost, "instance", inst + "&ephemeral=true", 400, 21004, "can't register ephemeral instance"},
		{"update of a missing instance", http.MethodPut, "instance", "serviceName=orders&ip=127.100.0.9&port=8080", 404, 21003, "not found"},
		{"update to ephemeral", http.MethodPut, "instance", inst + "&ephemeral=true", 400, 21004, "can't update ephemeral instance"},
		{"update with bad weight", http.MethodPut, "instance", inst + "&weight=20000", 400, 21001, "weights"},
		{"patch of a missing instance", http.MethodPatch, "instance", "serviceName=orders&ip=127.100.0.9&port=8080&weight=2", 404, 21003, "not found"},
		{"patch of health", http.MethodPatch, "instance", inst + "&healthy=false", 400, 20002, "healthy"},
		{"health without healthy", http.MethodPut, "health/instance", inst, 400, 21010, "'healthy'"},
		{"health on a probed cluster", http.MethodPut, "health/instance", inst + "&healthy=false", 400, 21011,
			"health check is still working"},
		{"health of a missing instance", http.MethodPut, "health", "serviceName=orders&ip=127.100.0.9&port=80&healthy=false", 404, 21003, "not found"},
		{"create an existing service", http.MethodPost, "service", "serviceName=orders", 400, 21007, "already exists"},
		{"create with a bad threshold", http.MethodPost, "service", "serviceName=new&protectThreshold=2", 400, 20002, "protectThreshold"},
		{"create with bad metadata", http.MethodPost, "service", "serviceName=new&metadata=x", 400, 21005, "metadata format incorrect"},
		{"create with a selector", http.MethodPost, "service", `serviceName=new&selector={"type":"label","expression":"x"}`, 400, 21006, "selector"},
		{"create ephemeral", http.MethodPost, "service", "serviceName=new&ephemeral=true", 400, 20002, "persistent services only"},
		{"update a missing service", http.MethodPut, "service", "serviceName=nope", 400, 21008, "not found"},
		{"delete a missing service", http.MethodDelete, "service", "serviceName=nope", 400, 21008, "not found"},
		{"delete a service with instances", http.MethodDelete, "service", "serviceName=orders", 400, 21009,
			"Service DEFAULT_GROUP@@orders is not empty, can't be delete. Please unregister instance first"},
		{"cluster without health checker", http.MethodPut, "cluster", "serviceName=orders&clusterName=web", 400, 10000, "healthChecker"},
		{"cluster without name", http.MethodPut, "cluster", `serviceName=orders&healthChecker={"type":"TCP"}`, 400, 10000, "clusterName"},
		{"cluster with a MYSQL checker without user", http.MethodPut, "cluster", `serviceName=orders&clusterName=web&healthChecker={"type":"MYSQL"}`,
			400, 20002, "user"},
		{"cluster check port missing", http.MethodPut, "cluster",
			`serviceName=orders&clusterName=web&healthChecker={"type":"TCP"}&useInstancePort4Check=false`, 400, 10000, "checkPort"},
		{"cluster check port out of range", http.MethodPut, "cluster",
			`serviceName=orders&clusterName=web&healthChecker={"type":"TCP"}&useInstancePort4Check=false&checkPort=0`, 400, 20002, "checkPort"},
		{"cluster of a missing service", http.MethodPut, "cluster", `serviceName=nope&clusterName=web&healthChecker={"type":"TCP"}`,
			400, 21008, "not found"},
		{"beat", http.MethodPut, "instance/beat", inst + `&beat={"ip":"127.100.0.1"}`, 400, 21004, "takes no heartbeats"},
		{"batch metadata", http.MethodPut, "instance/metadata/batch", `serviceName=orders&metadata={"a":"b"}`, 400, 21004, "batch"},
		{"switch change", http.MethodPut, "operator/switches", "entry=defaultInstanceEphemeral&value=true", 403, 10001, "read-only"},
		{"unknown route", http.MethodGet, "catalog/services", "", 404, 20004, "does not serve"},
		{"wrong method", http.MethodGet, "cluster", "", 405, 20002, "not allowed"},
	}
	for _, tt := range tests {
		for _, v := range []string{"v1", "v2"} {
			t.Run(v+" "+tt.name, func(t *testing.T) {
				resp := nacostesting.Do(t, h, tt.method, "/nacos/"+v+"/ns/"+tt.path, tt.form)
				if resp.Code != tt.status {
					t.Fatalf("status %d %s, want %d", resp.Code, resp.Body, tt.status)
				}
				if v == "v1" {
					body := string(resp.Body)
					if !strings.HasPrefix(body, "caused: ") || !strings.HasSuffix(body, ";") || !strings.Contains(body, tt.text) {
						t.Fatalf("v1 body %q, want caused: ...%s...;", body, tt.text)
					}
					return
				}
				code, msg, data := resp.Envelope(t)
				var detail string
				if err := json.Unmarshal(data, &detail); err != nil {
					t.Fatalf("data %s is not a string", data)
				}
				if code != tt.code || msg != nacos.Message(tt.code) || !strings.Contains(detail, tt.text) {
					t.Fatalf("v2 answered %d %q %q, want %d %q ...%s...", code, msg, detail, tt.code, nacos.Message(tt.code), tt.text)
				}
			})
		}
	}
	if got := st.AppliedIndex(); got != applied {
		t.Fatalf("applied index moved from %d to %d", applied, got)
	}
	if got := node.Applied(); len(got) != calls {
		t.Fatalf("bad input reached the log: %v", node.Applied()[calls:])
	}
}

// TestNacosAPI_JSONBodyRefused checks a body that is not a form is a 400 (20003).
func TestNacosAPI_JSONBodyRefused(t *testing.T) {
	h, _, node := newStoreAPI(t)
	req := httptest.NewRequest(http.MethodPost, "/nacos/v2/ns/instance", strings.NewReader(`{"serviceName":"orders"}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	resp := nacostesting.Response{Code: rec.Code, Body: rec.Body.Bytes()}
	if code, _, _ := resp.Envelope(t); resp.Code != http.StatusBadRequest || code != nacos.CodeMediaType {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
	if len(node.Applied()) != 0 {
		t.Fatal("applied")
	}
}

// TestNacosAPI_HealthOnNoneCluster checks manual health on a NONE cluster, and that the
// Nacos list then reproduces Nacos's protect threshold while the native API stays
// truthful.
func TestNacosAPI_HealthOnNoneCluster(t *testing.T) {
	h, st, _ := newStoreAPI(t)
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/service", "serviceName=orders")
	nacostesting.MustOK(t, h, http.MethodPut, "/nacos/v1/ns/cluster", `serviceName=orders&clusterName=manual&healthChecker={"type":"NONE"}`)
	for _, ip := range []string{"127.100.0.1", "127.100.0.2"} {
		nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&clusterName=manual&port=8080&ephemeral=false&ip="+ip)
	}
	nacostesting.MustOK(t, h, http.MethodPut, "/nacos/v1/ns/health/instance", "serviceName=orders&ip=127.100.0.1&port=8080&healthy=false")
	if in := nacostesting.MustInstance(t, st, ordersRef); in.Healthy {
		t.Fatal("health not set")
	}

	const list = "/nacos/v1/ns/instance/list?serviceName=orders"
	var info nacos.ServiceInfo
	nacostesting.MustNacos(t, h, http.MethodGet, list+"&healthyOnly=true", "", http.StatusOK).Decode(t, &info)
	if info.ReachProtectionThreshold || len(info.Hosts) != 1 || info.Hosts[0].IP != "127.100.0.2" {
		t.Fatalf("healthy only %+v", info)
	}
	nacostesting.MustNacos(t, h, http.MethodGet, list, "", http.StatusOK).Decode(t, &info)
	if len(info.Hosts) != 2 || info.Hosts[0].Healthy || !info.Hosts[1].Healthy {
		t.Fatalf("all with true health %+v", info.Hosts)
	}

	// Every instance down, threshold 0: Nacos returns them all, marked healthy.
	nacostesting.MustNacos(t, h, http.MethodPut, "/nacos/v2/ns/health/instance", "serviceName=orders&ip=127.100.0.2&port=8080&healthy=false", http.StatusOK)
	nacostesting.MustNacos(t, h, http.MethodGet, list+"&healthyOnly=true", "", http.StatusOK).Decode(t, &info)
	if !info.ReachProtectionThreshold || len(info.Hosts) != 2 || !info.Hosts[0].Healthy || !info.Hosts[1].Healthy {
		t.Fatalf("threshold reached %+v", info)
	}
	// The state keeps the truth (the native API reads it as it is).
	_, stored, err := st.Instances(nil, ordersRef.ServiceKey())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range stored {
		if in.Healthy {
			t.Fatalf("the state has %s healthy", in.Addr())
		}
	}
}

// TestNacosAPI_ServiceLifecycle checks create, update (replace), delete of services.
func TestNacosAPI_ServiceLifecycle(t *testing.T) {
	h, st, _ := newStoreAPI(t)
	key := model.ServiceKey{Namespace: "dev", Group: "g1", Service: "orders"}
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/service", "serviceName=orders&groupName=g1&namespaceId=dev&protectThreshold=0.5&metadata=a%3D1,b%3D2")
	_, svc, err := st.Service(nil, key)
	if err != nil || svc.ProtectThreshold != 0.5 || !reflect.DeepEqual(svc.Metadata, map[string]string{"a": "1", "b": "2"}) {
		t.Fatalf("created %+v %v", svc, err)
	}
	nacostesting.MustOK(t, h, http.MethodPut, "/nacos/v1/ns/service", `serviceName=g1@@orders&namespaceId=dev&metadata={"c":"3"}`)
	_, svc, _ = st.Service(nil, key)
	if svc.ProtectThreshold != 0 || !reflect.DeepEqual(svc.Metadata, map[string]string{"c": "3"}) {
		t.Fatalf("updated %+v", svc)
	}
	if c, _, d := nacostesting.MustNacos(t, h, http.MethodDelete, "/nacos/v2/ns/service", "serviceName=orders&groupName=g1&namespaceId=dev",
		http.StatusOK).Envelope(t); c != 0 || string(d) != `"ok"` {
		t.Fatalf("delete %d %s", c, d)
	}
	if _, _, err := st.Service(nil, key); err == nil {
		t.Fatal("service not deleted")
	}
}

// TestNacosAPI_ClusterMapsHealthChecker checks PUT cluster maps Nacos's checker onto
// Roster's spec: the instance's port unless useInstancePort4Check=false, the expected
// code honoured, and timings kept from the existing cluster.
func TestNacosAPI_ClusterMapsHealthChecker(t *testing.T) {
	h, st, node := newStoreAPI(t)
	key := ordersRef.ServiceKey()
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/service", "serviceName=orders")
	if _, err := node.Apply(context.Background(), fsm.UpsertClusterRequest{Cluster: model.Cluster{
		Namespace: key.Namespace, Group: key.Group, Service: key.Service, Name: "web",
		HealthCheck: model.HealthCheck{Type: model.CheckTCP, Interval: model.Duration(10 * time.Second),
			Timeout: model.Duration(3 * time.Second), Rise: 1, Fall: 5},
	}}); err != nil {
		t.Fatal(err)
	}

	nacostesting.MustOK(t, h, http.MethodPut, "/nacos/v1/ns/cluster",
		`serviceName=orders&clusterName=web&checkPort=9999&healthChecker={"type":"HTTP","path":"/health","headers":"X-A:1","expectedResponseCode":204}`)
	_, c, err := st.Cluster(nil, key, "web")
	want := model.HealthCheck{Type: model.CheckHTTP, Port: 0, Path: "/health", Headers: map[string]string{"X-A": "1"},
		ExpectedStatus: []int{204}, Interval: model.Duration(10 * time.Second), Timeout: model.Duration(3 * time.Second), Rise: 1, Fall: 5}
	if err != nil || !reflect.DeepEqual(c.HealthCheck, want) {
		t.Fatalf("web %+v %v\nwant %+v", c.HealthCheck, err, want)
	}

	nacostesting.MustOK(t, h, http.MethodPut, "/nacos/v1/ns/cluster",
		`serviceName=orders&clusterName=new&healthChecker={"type":"tcp"}&useInstancePort4Check=false&checkPort=9000&metadata={"zone":"a"}`)
	_, c, _ = st.Cluster(nil, key, "new")
	want = model.HealthCheck{Type: model.CheckTCP, Port: 9000}.WithDefaults()
	if !reflect.DeepEqual(c.HealthCheck, want) || c.Metadata["zone"] != "a" {
		t.Fatalf("new %+v", c)
	}
	nacostesting.MustOK(t, h, http.MethodPut, "/nacos/v1/ns/cluster",
		`serviceName=orders&clusterName=new&healthChecker={"type":"TCP"}&useInstancePort4Check=true&checkPort=9000`)
	if _, c, _ = st.Cluster(nil, key, "new"); c.HealthCheck.Port != 0 {
		t.Fatalf("useInstancePort4Check=true kept port %d", c.HealthCheck.Port)
	}
}

// TestNacosAPI_Operator checks switches, metrics, servers, raft leader and login.
func TestNacosAPI_Operator(t *testing.T) {
	h, _, node := newStoreAPI(t)
	node.SetMembers([]raftnode.Member{
		{ID: "n1", RaftAddr: "127.0.0.1:7848", HTTPAddr: "127.0.0.1:8848", Voter: true, Leader: true},
		{ID: "n2", RaftAddr: "127.0.0.2:7848", HTTPAddr: "127.0.0.2:8848", Voter: true},
	})
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.1&port=8080&ephemeral=false")

	var sw switches
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/operator/switches", "", http.StatusOK).Decode(t, &sw)
	if sw.DefaultInstanceEphemeral || !sw.HealthCheckEnabled || sw.DefaultCacheMillis != nacos.CacheMillis || sw.PushEnabled {
		t.Fatalf("switches %+v", sw)
	}

	var m metricsV1
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/operator/metrics", "", http.StatusOK).Decode(t, &m)
	if m.Status != "UP" || m.ServiceCount != 1 || m.InstanceCount != 1 || m.ResponsibleInstanceCount != 1 {
		t.Fatalf("metrics %+v", m)
	}
	_, _, data := nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v2/ns/operator/metrics", "", http.StatusOK).Envelope(t)
	if string(data) != `{"status":"UP"}` {
		t.Fatalf("v2 metrics %s", data)
	}
	node.SetReady(false)
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/operator/metrics", "", http.StatusOK).Decode(t, &m)
	if m.Status != "DOWN" {
		t.Fatalf("not ready but %q", m.Status)
	}

	var servers struct {
		Servers []serverEntry `json:"servers"`
	}
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/operator/servers", "", http.StatusOK).Decode(t, &servers)
	if len(servers.Servers) != 2 || servers.Servers[1].IP != "127.0.0.2" || servers.Servers[1].ServePort != 8848 ||
		servers.Servers[1].Key != "127.0.0.2:8848" || !servers.Servers[1].Alive {
		t.Fatalf("servers %+v", servers)
	}

	var leader map[string]string
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/raft/leader", "", http.StatusOK).Decode(t, &leader)
	var inner map[string]string
	if err := json.Unmarshal([]byte(leader["leader"]), &inner); err != nil || inner["ip"] != "127.0.0.1:8848" || inner["state"] != "LEADER" {
		t.Fatalf("raft leader %v (%v)", leader, err)
	}

	var login loginResponse
	nacostesting.MustNacos(t, h, http.MethodPost, "/nacos/v1/auth/users/login", "username=nacos&password=nacos", http.StatusOK).Decode(t, &login)
	if login.AccessToken != "" || login.TokenTTL != 18000 || login.GlobalAdmin || !strings.Contains(login.Message, "disabled") {
		t.Fatalf("login %+v", login)
	}
}

// TestNacosAPI_ReadsAreLeaderLocalByDefault checks Nacos reads use leader-local
// consistency unless ?consistency= asks otherwise, and writes ignore auth parameters.
func TestNacosAPI_ReadsAreLeaderLocalByDefault(t *testing.T) {
	h, _, node := newStoreAPI(t)
	nacostesting.SeedOrders(t, h)
	node.Reads() // the seeding's
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/instance/list?serviceName=orders&accessToken=abc", "", http.StatusOK)
	leader, lin := node.Reads()
	if leader != 1 || lin != 0 {
		t.Fatalf("leader reads %d, linearizable %d", leader, lin)
	}
	resp := nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/instance/list?serviceName=orders&consistency=linearizable", "", http.StatusOK)
	_, lin = node.Reads()
	if lin != 1 || resp.Header.Get(api.HeaderConsistency) != api.ConsistencyLinearizable {
		t.Fatalf("linearizable reads %d, header %q", lin, resp.Header.Get(api.HeaderConsistency))
	}
	resp = nacostesting.Do(t, h, http.MethodGet, "/nacos/v2/ns/instance/list?serviceName=orders&consistency=bogus", "")
	if code, _, _ := resp.Envelope(t); resp.Code != http.StatusBadRequest || code != nacos.CodeParameterValidate {
		t.Fatalf("bad consistency: %d %s", resp.Code, resp.Body)
	}
}

// TestNacosAPI_FollowerForwards checks a follower sends Nacos writes, form body
// included, and default reads to the leader, and serves stale reads itself.
func TestNacosAPI_FollowerForwards(t *testing.T) {
	leaderH, leaderSt, leaderNode := newStoreAPI(t)
	nacostesting.SeedOrders(t, leaderH)
	leaderSrv := httptest.NewServer(leaderH)
	t.Cleanup(leaderSrv.Close)
	leaderMember := &model.Member{ID: "n1", RaftAddr: "127.0.0.1:7848", HTTPAddr: leaderSrv.Listener.Addr().String()}
	leaderNode.SetKnownLeader(leaderMember)

	followerH, _, follower := newTestAPI(t, "n2", leaderMember)
	// The follower's own (stale) copy: the same fixture, applied to its state directly.
	follower.SetLeading(true)
	nacostesting.SeedOrders(t, followerH)
	follower.SetLeading(false)
	seeded := len(follower.Applied())
	fsrv := httptest.NewServer(followerH)
	t.Cleanup(fsrv.Close)

	resp := overHTTP(t, http.MethodDelete, fsrv.URL+"/nacos/v1/ns/instance",
		"serviceName=orders&ip=127.100.0.1&port=8080&namespaceId=public")
	if resp.Code != http.StatusOK || string(resp.Body) != "ok" || resp.Header.Get(api.HeaderServedBy) != "n1" {
		t.Fatalf("forwarded write: %d %q served by %q", resp.Code, resp.Body, resp.Header.Get(api.HeaderServedBy))
	}
	if _, _, err := leaderSt.Instance(nil, ordersRef); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("the leader still has the deregistered instance: %v", err)
	}
	if got := follower.Applied()[seeded:]; len(got) != 0 {
		t.Fatalf("the follower applied %v", got)
	}

	resp = overHTTP(t, http.MethodGet, fsrv.URL+"/nacos/v1/ns/instance/list?serviceName=orders", "")
	if resp.Code != http.StatusOK || resp.Header.Get(api.HeaderServedBy) != "n1" {
		t.Fatalf("default read: %d served by %q", resp.Code, resp.Header.Get(api.HeaderServedBy))
	}
	resp = overHTTP(t, http.MethodGet, fsrv.URL+"/nacos/v1/ns/instance/list?serviceName=orders&consistency=stale", "")
	if resp.Code != http.StatusOK || resp.Header.Get(api.HeaderServedBy) != "n2" {
		t.Fatalf("stale read: %d served by %q", resp.Code, resp.Header.Get(api.HeaderServedBy))
	}
	var info nacos.ServiceInfo
	resp.Decode(t, &info)
	if len(info.Hosts) != 3 { // the follower's copy: three enabled instances, one not yet deregistered
		t.Fatalf("stale list %+v", info.Hosts)
	}
}

// TestNacosAPI_MySQLChecker: PUT cluster maps the MYSQL checker (user, pwd, cmd), the
// service read shows the password as "***", and writing "***" back keeps it.
func TestNacosAPI_MySQLChecker(t *testing.T) {
	h, st, _ := newStoreAPI(t)
	key := ordersRef.ServiceKey()
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/service", "serviceName=orders")
	nacostesting.MustOK(t, h, http.MethodPut, "/nacos/v1/ns/cluster",
		`serviceName=orders&clusterName=db&healthChecker={"type":"MYSQL","user":"probe","pwd":"s3cret-pw","cmd":"SELECT 2"}`)
	_, c, err := st.Cluster(nil, key, "db")
	want := model.HealthCheck{Type: model.CheckMySQL, User: "probe", Password: "s3cret-pw", Query: "SELECT 2"}.WithDefaults()
	if err != nil || !reflect.DeepEqual(c.HealthCheck, want) {
		t.Fatalf("db %+v %v\nwant %+v", c.HealthCheck, err, want)
	}
	for _, path := range []string{"/nacos/v1/ns/service", "/nacos/v2/ns/service"} {
		body := string(nacostesting.MustNacos(t, h, http.MethodGet, path+"?serviceName=orders", "", http.StatusOK).Body)
		if strings.Contains(body, "s3cret-pw") || !strings.Contains(body, `"user":"probe","pwd":"***","cmd":"SELECT 2"`) {
			t.Fatalf("%s shows %s", path, body)
		}
	}
	nacostesting.MustOK(t, h, http.MethodPut, "/nacos/v1/ns/cluster",
		`serviceName=orders&clusterName=db&healthChecker={"type":"MYSQL","user":"probe","pwd":"***","cmd":"SELECT 3"}`)
	if _, c, _ = st.Cluster(nil, key, "db"); c.HealthCheck.Password != "s3cret-pw" || c.HealthCheck.Query != "SELECT 3" {
		t.Fatalf("after writing *** back: %+v", c.HealthCheck)
	}
	// "***" without a stored password is refused, naming the field.
	r := nacostesting.MustNacos(t, h, http.MethodPut, "/nacos/v1/ns/cluster",
		`serviceName=orders&clusterName=other&healthChecker={"type":"MYSQL","user":"probe","pwd":"***"}`, http.StatusBadRequest)
	if !strings.Contains(string(r.Body), "password") {
		t.Fatalf("refusal %s", r.Body)
	}
}
