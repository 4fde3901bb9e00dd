package httpapi

import (
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/store"
)

func mustNewStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{NoSync: true, Logger: discardLogger()})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newStoreNode is a leader whose Apply encodes the command and applies it through the
// real FSM on st, as Raft would on commit.
func newStoreNode(t *testing.T, st *store.Store) *fakeNode {
	t.Helper()
	f := fsm.New(st, discardLogger())
	node := newLeaderNode("n1")
	var mu sync.Mutex
	var index uint64
	node.applyFn = func(typ fsm.MessageType, msg any) (uint64, error) {
		data, err := fsm.Encode(msg.(fsm.Command))
		if err != nil {
			t.Errorf("encode %v: %v", typ, err)
			return 0, err
		}
		mu.Lock()
		defer mu.Unlock()
		index++
		res := f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}).(*fsm.Result)
		return res.Index, res.Err
	}
	return node
}

// newStoreAPI is the API over a real store with a leader applying through the real FSM.
func newStoreAPI(t *testing.T) (http.Handler, *store.Store, *fakeNode) {
	t.Helper()
	st := mustNewStore(t)
	node := newStoreNode(t, st)
	return mustNew(t, testConfig(node, st)), st, node
}

// mustDo sends a request and checks its status.
func mustDo(t *testing.T, h http.Handler, method, path string, body any, want int) response {
	t.Helper()
	resp := do(t, h, method, path, body)
	if resp.Code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.Code, resp.Body, want)
	}
	return resp
}

// TestEndToEnd_Lifecycle drives every route against the real store and FSM.
func TestEndToEnd_Lifecycle(t *testing.T) {
	h, st, _ := newStoreAPI(t)
	const (
		svc  = "/v1/namespaces/dev/groups/g1/services/pay"
		inst = svc + "/instances/127.101.0.1:80"
		v6   = svc + "/instances/%5Bfe80::1%5D:80"
	)
	mustDo(t, h, http.MethodPut, "/v1/namespaces/dev", `{"name":"Development","description":"d"}`, 200)
	var ns api.NamespaceResponse
	mustDo(t, h, http.MethodGet, "/v1/namespaces/dev", nil, 200).decode(t, &ns)
	if ns.Namespace.Name != "Development" || ns.Namespace.Description != "d" {
		t.Fatalf("%+v", ns)
	}
	var nsl api.NamespacesResponse
	mustDo(t, h, http.MethodGet, "/v1/namespaces", nil, 200).decode(t, &nsl)
	if len(nsl.Namespaces) != 2 {
		t.Fatalf("%+v", nsl)
	}

	mustDo(t, h, http.MethodPut, svc, `{"protectThreshold":0.2,"metadata":{"owner":"x"}}`, 200)
	mustDo(t, h, http.MethodPut, svc+"/clusters/probe",
		`{"healthCheck":{"type":"HTTP","path":"/ping","expectedStatus":[200,204],"interval":"3s","timeout":"1s","rise":1,"fall":2}}`, 200)
	mustDo(t, h, http.MethodPut, svc+"/clusters/manual", `{"healthCheck":{"type":"NONE"},"metadata":{"zone":"a"}}`, 200)
	var cl api.ClusterResponse
	mustDo(t, h, http.MethodGet, svc+"/clusters/probe", nil, 200).decode(t, &cl)
	want := api.HealthCheck{Type: api.CheckHTTP, Path: "/ping", ExpectedStatus: []int{200, 204},
		Interval: api.Duration(3 * time.Second), Timeout: api.Duration(time.Second), Rise: 1, Fall: 2, Confirm: "majority"}
	if !reflect.DeepEqual(cl.Cluster.HealthCheck, want) {
		t.Fatalf("health check %+v", cl.Cluster.HealthCheck)
	}

	put := mustDo(t, h, http.MethodPut, inst, `{"cluster":"manual","weight":5,"metadata":{"v":"1"}}`, 200)
	mustDo(t, h, http.MethodPut, v6, `{"cluster":"probe","healthy":false}`, 200)
	var wr api.WriteResult
	put.decode(t, &wr)
	if wr.Index == 0 || put.Header.Get(api.HeaderIndex) != fmt.Sprint(wr.Index) {
		t.Fatalf("write result %+v header %q", wr, put.Header.Get(api.HeaderIndex))
	}
	var in api.InstanceResponse
	mustDo(t, h, http.MethodGet, inst, nil, 200).decode(t, &in)
	if in.Instance.Weight != 5 || in.Instance.Cluster != "manual" || !in.Instance.Healthy ||
		in.Instance.InstanceID != "127.101.0.1#80#manual#g1@@pay" {
		t.Fatalf("%+v", in)
	}
	mustDo(t, h, http.MethodGet, svc+"/instances/[fe80::1]:80", nil, 200).decode(t, &in)
	if in.Instance.IP != "fe80::1" || in.Instance.Healthy {
		t.Fatalf("%+v", in)
	}

	// PATCH changes only what is present; 404 when missing.
	mustDo(t, h, http.MethodPatch, inst, `{"enabled":false}`, 200)
	mustDo(t, h, http.MethodGet, inst, nil, 200).decode(t, &in)
	if in.Instance.Enabled || in.Instance.Weight != 5 || in.Instance.Metadata["v"] != "1" {
		t.Fatalf("after patch %+v", in)
	}
	mustDo(t, h, http.MethodPatch, svc+"/instances/127.101.0.9:80", `{"enabled":true}`, 404)

	// Health by API: only on NONE clusters.
	mustDo(t, h, http.MethodPut, inst+"/health", `{"healthy":false}`, 200)
	mustDo(t, h, http.MethodPut, v6+"/health", `{"healthy":true}`, 409)
	mustDo(t, h, http.MethodPut, svc+"/instances/127.101.0.9:80/health", `{"healthy":true}`, 404)
	// A re-registration keeps the stored health.
	mustDo(t, h, http.MethodPut, inst, `{"cluster":"manual","healthy":true}`, 200)
	mustDo(t, h, http.MethodGet, inst, nil, 200).decode(t, &in)
	if in.Instance.Healthy || !in.Instance.Enabled {
		t.Fatalf("after re-registration %+v", in)
	}

	var sv api.ServiceResponse
	mustDo(t, h, http.MethodGet, svc, nil, 200).decode(t, &sv)
	if sv.Service.ProtectThreshold != 0.2 || sv.InstanceCount != 2 || sv.HealthyCount != 0 || len(sv.Clusters) != 2 {
		t.Fatalf("%+v", sv)
	}
	var cls api.ClustersResponse
	mustDo(t, h, http.MethodGet, svc+"/clusters", nil, 200).decode(t, &cls)
	if len(cls.Clusters) != 2 {
		t.Fatalf("%+v", cls)
	}

	// Conflicts while things exist.
	mustDo(t, h, http.MethodDelete, svc, nil, 409)
	mustDo(t, h, http.MethodDelete, "/v1/namespaces/dev", nil, 409)
	mustDo(t, h, http.MethodDelete, inst, nil, 200)
	mustDo(t, h, http.MethodDelete, inst, nil, 404)
	mustDo(t, h, http.MethodDelete, v6, nil, 200)
	mustDo(t, h, http.MethodDelete, svc, nil, 200)
	mustDo(t, h, http.MethodGet, svc, nil, 404)
	mustDo(t, h, http.MethodGet, svc+"/instances", nil, 404)
	mustDo(t, h, http.MethodDelete, "/v1/namespaces/dev", nil, 200)
	mustDo(t, h, http.MethodGet, "/v1/namespaces/dev/services", nil, 404)

	state, err := st.Dump()
	if err != nil {
		t.Fatal(err)
	}
	if len(state.Services) != 0 || len(state.Instances) != 0 || len(state.Namespaces) != 1 {
		t.Fatalf("state %+v", state)
	}
}

// TestEndToEnd_ServicesPaging checks ?page and ?size and the group filter over the store.
func TestEndToEnd_ServicesPaging(t *testing.T) {
	h, _, _ := newStoreAPI(t)
	for i := range 5 {
		mustDo(t, h, http.MethodPut, fmt.Sprintf("/v1/namespaces/public/groups/g%d/services/s%d", i%2, i), `{}`, 200)
	}
	var out api.ServicesResponse
	mustDo(t, h, http.MethodGet, "/v1/namespaces/public/services?page=2&size=2", nil, 200).decode(t, &out)
	if out.Total != 5 || out.Page != 2 || out.Size != 2 || len(out.Services) != 2 {
		t.Fatalf("%+v", out)
	}
	mustDo(t, h, http.MethodGet, "/v1/namespaces/public/services?group=g1", nil, 200).decode(t, &out)
	if out.Total != 2 || len(out.Services) != 2 || out.Services[0].Group != "g1" {
		t.Fatalf("%+v", out)
	}
	mustDo(t, h, http.MethodGet, "/v1/namespaces/public/services?page=9", nil, 200).decode(t, &out)
	if out.Total != 5 || len(out.Services) != 0 {
		t.Fatalf("%+v", out)
	}
}

// TestEndToEnd_ProtectThreshold checks the threshold over the real store: a healthy-only
// query returns every enabled instance once healthy/total ≤ threshold.
func TestEndToEnd_ProtectThreshold(t *testing.T) {
	h, _, _ := newStoreAPI(t)
	const svc = "/v1/namespaces/public/groups/DEFAULT_GROUP/services/api"
	mustDo(t, h, http.MethodPut, svc, `{"protectThreshold":0.5}`, 200)
	mustDo(t, h, http.MethodPut, svc+"/clusters/m", `{"healthCheck":{"type":"NONE"}}`, 200)
	for i := 1; i <= 4; i++ {
		mustDo(t, h, http.MethodPut, fmt.Sprintf("%s/instances/127.100.0.%d:80", svc, i), `{"cluster":"m"}`, 200)
	}
	mustDo(t, h, http.MethodPut, svc+"/instances/127.100.0.5:80", `{"cluster":"m","enabled":false}`, 200)
	get := func() api.InstancesResponse {
		var out api.InstancesResponse
		mustDo(t, h, http.MethodGet, svc+"/instances?healthy=true", nil, 200).decode(t, &out)
		return out
	}
	if out := get(); len(out.Instances) != 4 || out.ProtectThresholdReached {
		t.Fatalf("all healthy: %v %v", addrs(out.Instances), out.ProtectThresholdReached)
	}
	mustDo(t, h, http.MethodPut, svc+"/instances/127.100.0.1:80/health", `{"healthy":false}`, 200)
	if out := get(); len(out.Instances) != 3 || out.ProtectThresholdReached {
		t.Fatalf("3/4 healthy: %v %v", addrs(out.Instances), out.ProtectThresholdReached)
	}
	mustDo(t, h, http.MethodPut, svc+"/instances/127.100.0.2:80/health", `{"healthy":false}`, 200)
	out := get()
	if len(out.Instances) != 4 || !out.ProtectThresholdReached {
		t.Fatalf("2/4 healthy: %v %v", addrs(out.Instances), out.ProtectThresholdReached)
	}
	unhealthy := 0
	for _, in := range out.Instances {
		if !in.Enabled {
			t.Fatalf("disabled instance %s returned", in.Addr())
		}
		if !in.Healthy {
			unhealthy++
		}
	}
	if unhealthy != 2 {
		t.Fatalf("%d instances report unhealthy, want their true state (2)", unhealthy)
	}
	var all api.InstancesResponse
	mustDo(t, h, http.MethodGet, svc+"/instances", nil, 200).decode(t, &all)
	// Without a filter every instance is listed; the flag still reports the threshold.
	if len(all.Instances) != 5 || !all.ProtectThresholdReached {
		t.Fatalf("no filter: %v reached=%v", addrs(all.Instances), all.ProtectThresholdReached)
	}
}

// TestEndToEnd_InvalidInputNeverReachesTheLog checks that refused requests leave the
// store's applied index untouched.
func TestEndToEnd_InvalidInputNeverReachesTheLog(t *testing.T) {
	h, st, node := newStoreAPI(t)
	before := st.AppliedIndex()
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPut, instPath, `{"weight":-1}`},
		{http.MethodPut, svcPath, `{"protectThreshold":2}`},
		{http.MethodPut, svcPath + "/clusters/c", `{"healthCheck":{"rise":0,"fall":99}}`},
		{http.MethodPut, "/v1/namespaces/bad!", `{}`},
		{http.MethodPut, instPath, `{"unknown":1}`},
	} {
		mustDo(t, h, c.method, c.path, c.body, 400)
	}
	if st.AppliedIndex() != before || len(node.calls()) != 0 {
		t.Fatalf("applied index moved from %d to %d", before, st.AppliedIndex())
	}
}
