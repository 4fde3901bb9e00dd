package httpapi

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
)

func ptr[T any](v T) *T { return &v }

// TestRoutes_WritesApplyTheCommand checks every write route's happy path: 200 with the
// applied index in body and header, and exactly the expected command applied.
func TestRoutes_WritesApplyTheCommand(t *testing.T) {
	ref := model.InstanceRef{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", IP: "127.100.0.1", Port: 8080}
	key := ref.ServiceKey()
	tests := []struct {
		name     string
		method   string
		path     string
		body     any
		wantType fsm.MessageType
		wantMsg  any
	}{
		{"put namespace", http.MethodPut, "/v1/namespaces/dev", `{"name":"Dev","description":"development"}`,
			fsm.UpsertNamespaceType, fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "dev", Name: "Dev", Description: "development"}}},
		{"put namespace empty body names it after its id", http.MethodPut, "/v1/namespaces/dev", nil,
			fsm.UpsertNamespaceType, fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "dev", Name: "dev"}}},
		{"delete namespace", http.MethodDelete, "/v1/namespaces/dev", nil,
			fsm.DeleteNamespaceType, fsm.DeleteNamespaceRequest{ID: "dev"}},
		{"put service", http.MethodPut, svcPath, `{"protectThreshold":0.5,"metadata":{"team":"a"}}`,
			fsm.UpsertServiceType, fsm.UpsertServiceRequest{Service: model.Service{Namespace: "public", Group: "DEFAULT_GROUP",
				Name: "orders", ProtectThreshold: 0.5, Metadata: map[string]string{"team": "a"}}}},
		{"delete service", http.MethodDelete, svcPath, nil,
			fsm.DeleteServiceType, fsm.DeleteServiceRequest{Key: key}},
		{"put cluster full spec", http.MethodPut, svcPath + "/clusters/web",
			`{"healthCheck":{"type":"HTTP","port":0,"path":"/health","headers":{"X-A":"b"},"expectedStatus":[200],"interval":"5s","timeout":"2s","rise":2,"fall":3},"metadata":{"k":"v"}}`,
			fsm.UpsertClusterType, fsm.UpsertClusterRequest{Cluster: model.Cluster{Namespace: "public", Group: "DEFAULT_GROUP",
				Service: "orders", Name: "web", Metadata: map[string]string{"k": "v"}, HealthCheck: model.HealthCheck{
					Type: model.CheckHTTP, Path: "/health", Headers: map[string]string{"X-A": "b"}, ExpectedStatus: []int{200},
					Interval: model.Duration(5 * time.Second), Timeout: model.Duration(2 * time.Second), Rise: 2, Fall: 3}}}},
		{"put cluster defaults", http.MethodPut, svcPath + "/clusters/web", `{"healthCheck":{"type":"http","interval":"10s"}}`,
			fsm.UpsertClusterType, fsm.UpsertClusterRequest{Cluster: model.Cluster{Namespace: "public", Group: "DEFAULT_GROUP",
				Service: "orders", Name: "web", HealthCheck: model.HealthCheck{Type: model.CheckHTTP, Path: "/",
					Interval: model.Duration(10 * time.Second), Timeout: model.Duration(2 * time.Second), Rise: 2, Fall: 3}}}},
		{"put cluster without spec", http.MethodPut, svcPath + "/clusters/web", `{}`,
			fsm.UpsertClusterType, fsm.UpsertClusterRequest{Cluster: model.Cluster{Namespace: "public", Group: "DEFAULT_GROUP",
				Service: "orders", Name: "web", HealthCheck: model.DefaultHealthCheck()}}},
		{"put instance defaults", http.MethodPut, instPath, `{}`,
			fsm.RegisterInstanceType, fsm.RegisterInstanceRequest{Instance: model.Instance{Namespace: "public", Group: "DEFAULT_GROUP",
				Service: "orders", IP: "127.100.0.1", Port: 8080, Cluster: "DEFAULT", Weight: 1, Enabled: true, Healthy: true}}},
		{"put instance fields", http.MethodPut, instPath, `{"cluster":"web","weight":2.5,"enabled":false,"healthy":false,"metadata":{"v":"1"}}`,
			fsm.RegisterInstanceType, fsm.RegisterInstanceRequest{Instance: model.Instance{Namespace: "public", Group: "DEFAULT_GROUP",
				Service: "orders", IP: "127.100.0.1", Port: 8080, Cluster: "web", Weight: 2.5, Enabled: false, Healthy: false,
				Metadata: map[string]string{"v": "1"}}}},
		{"put instance ipv6", http.MethodPut, svcPath + "/instances/[::1]:8080", `{}`,
			fsm.RegisterInstanceType, fsm.RegisterInstanceRequest{Instance: model.Instance{Namespace: "public", Group: "DEFAULT_GROUP",
				Service: "orders", IP: "::1", Port: 8080, Cluster: "DEFAULT", Weight: 1, Enabled: true, Healthy: true}}},
		{"put instance ipv6 escaped", http.MethodPut, svcPath + "/instances/%5B::1%5D:8080", `{}`,
			fsm.RegisterInstanceType, fsm.RegisterInstanceRequest{Instance: model.Instance{Namespace: "public", Group: "DEFAULT_GROUP",
				Service: "orders", IP: "::1", Port: 8080, Cluster: "DEFAULT", Weight: 1, Enabled: true, Healthy: true}}},
		{"put instance hostname", http.MethodPut, svcPath + "/instances/db-1.internal:5432", `{}`,
			fsm.RegisterInstanceType, fsm.RegisterInstanceRequest{Instance: model.Instance{Namespace: "public", Group: "DEFAULT_GROUP",
				Service: "orders", IP: "db-1.internal", Port: 5432, Cluster: "DEFAULT", Weight: 1, Enabled: true, Healthy: true}}},
		{"patch instance", http.MethodPatch, instPath, `{"enabled":false,"weight":3}`,
			fsm.UpdateInstanceType, fsm.UpdateInstanceRequest{Ref: ref, Patch: model.InstancePatch{Enabled: ptr(false), Weight: ptr(3.0)}}},
		{"patch instance metadata and cluster", http.MethodPatch, instPath, `{"cluster":"web","metadata":{}}`,
			fsm.UpdateInstanceType, fsm.UpdateInstanceRequest{Ref: ref, Patch: model.InstancePatch{Cluster: ptr("web"), Metadata: ptr(map[string]string{})}}},
		{"delete instance", http.MethodDelete, instPath, nil,
			fsm.DeregisterInstanceType, fsm.DeregisterInstanceRequest{Ref: ref}},
		{"put health", http.MethodPut, instPath + "/health", `{"healthy":false}`,
			fsm.SetHealthManualAtType, fsm.SetHealthManualAtRequest{Ref: ref, Healthy: false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := newLeaderNode("n1")
			h := mustNew(t, testConfig(node, seededReader()))
			resp := do(t, h, tc.method, tc.path, tc.body)
			if resp.Code != http.StatusOK {
				t.Fatalf("status %d, body %s", resp.Code, resp.Body)
			}
			var wr api.WriteResult
			resp.decode(t, &wr)
			if wr.Index != 101 || resp.Header.Get(api.HeaderIndex) != "101" {
				t.Fatalf("index %d, header %q; want 101", wr.Index, resp.Header.Get(api.HeaderIndex))
			}
			calls := node.calls()
			if len(calls) != 1 {
				t.Fatalf("%d applies, want 1", len(calls))
			}
			msg := calls[0].Msg
			if m, ok := msg.(fsm.SetHealthManualAtRequest); ok {
				// The leader's clock: checked, then left out of the comparison.
				if since := time.Since(time.UnixMilli(m.At)); since < 0 || since > time.Minute {
					t.Fatalf("SetHealthManualAt carries At %d, not the leader's clock now", m.At)
				}
				m.At = 0
				msg = m
			}
			if calls[0].Type != tc.wantType || !reflect.DeepEqual(msg, tc.wantMsg) {
				t.Fatalf("applied %v %#v\nwant    %v %#v", calls[0].Type, calls[0].Msg, tc.wantType, tc.wantMsg)
			}
			if got := resp.Header.Get(api.HeaderServedBy); got != "n1" {
				t.Fatalf("served by %q", got)
			}
		})
	}
}

// TestRoutes_ClusterOperations checks join, member removal and leadership transfer.
func TestRoutes_ClusterOperations(t *testing.T) {
	node := newLeaderNode("n1")
	h := mustNew(t, testConfig(node, seededReader()))
	join := api.JoinRequest{ID: "n2", RaftAddr: "127.100.0.2:7848", HTTPAddr: "127.100.0.2:8848", NonVoter: true}
	if resp := do(t, h, http.MethodPost, "/v1/cluster/join", join); resp.Code != http.StatusOK {
		t.Fatalf("join: %d %s", resp.Code, resp.Body)
	}
	if resp := do(t, h, http.MethodDelete, "/v1/cluster/members/n3", nil); resp.Code != http.StatusOK {
		t.Fatalf("remove: %d %s", resp.Code, resp.Body)
	}
	resp := do(t, h, http.MethodPost, "/v1/cluster/leadership-transfer?id=n2", nil)
	if resp.Code != http.StatusOK || resp.Header.Get(api.HeaderIndex) != "10" {
		t.Fatalf("transfer: %d %v %s", resp.Code, resp.Header, resp.Body)
	}
	if resp := do(t, h, http.MethodPost, "/v1/cluster/leadership-transfer", nil); resp.Code != http.StatusOK {
		t.Fatalf("transfer to any: %d %s", resp.Code, resp.Body)
	}
	node.mu.Lock()
	defer node.mu.Unlock()
	want := raftnode.JoinRequest{ID: join.ID, RaftAddr: join.RaftAddr, HTTPAddr: join.HTTPAddr, NonVoter: join.NonVoter}
	if !reflect.DeepEqual(node.joins, []raftnode.JoinRequest{want}) || !reflect.DeepEqual(node.removed, []string{"n3"}) ||
		!reflect.DeepEqual(node.transfers, []string{"n2", ""}) {
		t.Fatalf("joins %v removed %v transfers %v", node.joins, node.removed, node.transfers)
	}
}

// TestRoutes_Reads checks every read route's happy path, its body and its headers.
func TestRoutes_Reads(t *testing.T) {
	node := newLeaderNode("n1")
	node.members = []api.Member{{ID: "n1", RaftAddr: "127.0.0.1:7848", HTTPAddr: "127.0.0.1:8848", Voter: true, Leader: true}}
	h := mustNew(t, testConfig(node, seededReader()))

	check := func(t *testing.T, path string, out any) response {
		t.Helper()
		resp := do(t, h, http.MethodGet, path, nil)
		if resp.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.Code, resp.Body)
		}
		for hdr, want := range map[string]string{
			api.HeaderIndex: "10", api.HeaderConsistency: "linearizable", api.HeaderKnownLeader: "true",
			api.HeaderLastContact: "0", api.HeaderServedBy: "n1",
		} {
			if got := resp.Header.Get(hdr); got != want {
				t.Fatalf("GET %s: header %s = %q, want %q", path, hdr, got, want)
			}
		}
		resp.decode(t, out)
		return resp
	}
	t.Run("namespaces", func(t *testing.T) {
		var out api.NamespacesResponse
		check(t, "/v1/namespaces", &out)
		if out.Index != 10 || len(out.Namespaces) != 1 || out.Namespaces[0].ID != "public" {
			t.Fatalf("%+v", out)
		}
	})
	t.Run("namespace", func(t *testing.T) {
		var out api.NamespaceResponse
		check(t, "/v1/namespaces/public", &out)
		if out.Namespace.ID != "public" {
			t.Fatalf("%+v", out)
		}
	})
	t.Run("services", func(t *testing.T) {
		var out api.ServicesResponse
		check(t, "/v1/namespaces/public/services?group=DEFAULT_GROUP", &out)
		if out.Page != 1 || out.Size != DefaultPageSize || out.Total != 1 || out.Services[0].Name != "orders" || out.Namespace != "public" {
			t.Fatalf("%+v", out)
		}
	})
	t.Run("services paged", func(t *testing.T) {
		var out api.ServicesResponse
		check(t, "/v1/namespaces/public/services?page=2&size=1000", &out)
		if out.Page != 2 || out.Size != 1000 || out.Total != 1 || out.Services == nil || len(out.Services) != 0 {
			t.Fatalf("%+v", out)
		}
	})
	t.Run("service", func(t *testing.T) {
		var out api.ServiceResponse
		check(t, svcPath, &out)
		if out.Service.Name != "orders" || len(out.Clusters) != 2 || out.InstanceCount != 4 || out.HealthyCount != 3 {
			t.Fatalf("%+v", out)
		}
	})
	t.Run("clusters", func(t *testing.T) {
		var out api.ClustersResponse
		check(t, svcPath+"/clusters", &out)
		if len(out.Clusters) != 2 {
			t.Fatalf("%+v", out)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		var out api.ClusterResponse
		check(t, svcPath+"/clusters/manual", &out)
		if out.Cluster.Name != "manual" || out.Cluster.HealthCheck.Type != api.CheckNone {
			t.Fatalf("%+v", out)
		}
	})
	t.Run("instances", func(t *testing.T) {
		var out api.InstancesResponse
		check(t, svcPath+"/instances", &out)
		if len(out.Instances) != 4 || out.Service.Name != "orders" || out.Instances[0].InstanceID != "127.100.0.1#8080#DEFAULT#DEFAULT_GROUP@@orders" {
			t.Fatalf("%+v", out)
		}
	})
	t.Run("instance", func(t *testing.T) {
		var out api.InstanceResponse
		check(t, instPath, &out)
		if out.Instance.IP != "127.100.0.1" || out.Instance.Port != 8080 || out.Instance.InstanceID == "" {
			t.Fatalf("%+v", out)
		}
	})
	t.Run("instance ipv6", func(t *testing.T) {
		for _, p := range []string{"/instances/[::1]:9090", "/instances/%5B::1%5D:9090", "/instances/%5b%3A%3A1%5d%3A9090"} {
			var out api.InstanceResponse
			check(t, svcPath+p, &out)
			if out.Instance.IP != "::1" || out.Instance.Port != 9090 {
				t.Fatalf("%s: %+v", p, out)
			}
		}
	})
	t.Run("members", func(t *testing.T) {
		var out api.MembersResponse
		check(t, "/v1/cluster/members", &out)
		if out.Index != 10 || len(out.Members) != 1 || !out.Members[0].Leader {
			t.Fatalf("%+v", out)
		}
	})
	node.mu.Lock()
	reads := node.consistentReads
	node.mu.Unlock()
	if reads < 12 {
		t.Fatalf("%d consistent reads, want one per read", reads)
	}
}

// TestRoutes_Status checks /v1/status/leader and /v1/status/ready on a node with and
// without a leader.
func TestRoutes_Status(t *testing.T) {
	leader := model.Member{ID: "n1", RaftAddr: "127.100.0.1:7848", HTTPAddr: "127.100.0.1:8848"}
	h := mustNew(t, testConfig(newFollowerNode("n2", &leader), seededReader()))
	resp := do(t, h, http.MethodGet, "/v1/status/leader", nil)
	var l api.Leader
	resp.decode(t, &l)
	if resp.Code != http.StatusOK || l != (api.Leader{ID: "n1", RaftAddr: "127.100.0.1:7848", HTTPAddr: "127.100.0.1:8848"}) {
		t.Fatalf("%d %+v", resp.Code, l)
	}
	if resp.Header.Get(api.HeaderLastContact) != "42" || resp.Header.Get(api.HeaderKnownLeader) != "true" {
		t.Fatalf("headers %v", resp.Header)
	}
	resp = do(t, h, http.MethodGet, "/v1/status/ready", nil)
	var rd api.Ready
	resp.decode(t, &rd)
	if resp.Code != http.StatusOK || !rd.Ready || rd.Leader != "n1" {
		t.Fatalf("%d %+v", resp.Code, rd)
	}

	h = mustNew(t, testConfig(newFollowerNode("n2", nil), seededReader()))
	resp = do(t, h, http.MethodGet, "/v1/status/leader", nil)
	if resp.Code != http.StatusServiceUnavailable || resp.errorBody(t).Code != api.CodeNoLeader {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
	if resp.Header.Get(api.HeaderLastContact) != "-1" || resp.Header.Get(api.HeaderKnownLeader) != "false" {
		t.Fatalf("headers %v", resp.Header)
	}
	resp = do(t, h, http.MethodGet, "/v1/status/ready", nil)
	rd = api.Ready{}
	resp.decode(t, &rd)
	if resp.Code != http.StatusServiceUnavailable || rd.Ready || rd.Reason == "" {
		t.Fatalf("%d %+v", resp.Code, rd)
	}
}

// TestRoutes_NotFoundAndNotAllowed checks unknown routes (404) and methods (405) answer JSON.
func TestRoutes_NotFoundAndNotAllowed(t *testing.T) {
	node := newLeaderNode("n1")
	h := mustNew(t, testConfig(node, seededReader()))
	resp := do(t, h, http.MethodGet, "/v1/nope", nil)
	if resp.Code != http.StatusNotFound || resp.errorBody(t).Code != api.CodeNotFound {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
	resp = do(t, h, http.MethodPost, "/v1/namespaces/public", `{}`)
	if resp.Code != http.StatusMethodNotAllowed || resp.errorBody(t).Code != api.CodeMethodNotAllowed {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
	allow := strings.Join(resp.Header.Values("Allow"), ",")
	if allow != "GET,PUT,DELETE" {
		t.Fatalf("Allow %q", allow)
	}
	resp = do(t, h, http.MethodPatch, "/v1/namespaces", `{}`)
	if resp.Code != http.StatusMethodNotAllowed {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
	if n := len(node.calls()); n != 0 {
		t.Fatalf("%d applies", n)
	}
}

// TestRoutes_UnknownThingsAre404 checks that a read of something missing is a JSON 404.
func TestRoutes_UnknownThingsAre404(t *testing.T) {
	h := mustNew(t, testConfig(newLeaderNode("n1"), seededReader()))
	for _, p := range []string{
		"/v1/namespaces/nope",
		"/v1/namespaces/public/groups/DEFAULT_GROUP/services/nope",
		"/v1/namespaces/public/groups/DEFAULT_GROUP/services/nope/instances",
		"/v1/namespaces/public/groups/DEFAULT_GROUP/services/nope/clusters",
		svcPath + "/clusters/nope",
		svcPath + "/instances/127.109.9.9:1",
	} {
		resp := do(t, h, http.MethodGet, p, nil)
		if resp.Code != http.StatusNotFound || resp.errorBody(t).Code != api.CodeNotFound {
			t.Fatalf("GET %s: %d %s", p, resp.Code, resp.Body)
		}
	}
}

// TestRoutes_Metrics checks /metrics counts requests by route pattern and status and
// observes latency.
func TestRoutes_Metrics(t *testing.T) {
	h := mustNew(t, testConfig(newLeaderNode("n1"), seededReader()))
	do(t, h, http.MethodGet, svcPath, nil)
	do(t, h, http.MethodGet, "/v1/namespaces/nope", nil)
	resp := do(t, h, http.MethodGet, "/metrics", nil)
	if resp.Code != http.StatusOK {
		t.Fatalf("%d", resp.Code)
	}
	body := string(resp.Body)
	for _, want := range []string{
		`roster_http_requests_total{code="200",method="GET",route="/v1/namespaces/{ns}/groups/{group}/services/{service}"} 1`,
		`roster_http_requests_total{code="404",method="GET",route="/v1/namespaces/{ns}"} 1`,
		`roster_http_request_duration_seconds_count{method="GET",route="/v1/namespaces/{ns}/groups/{group}/services/{service}"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("metrics lack %s:\n%s", want, body)
		}
	}
}

// TestNew_SharedRegistry checks two handlers can share one registry.
func TestNew_SharedRegistry(t *testing.T) {
	cfg := testConfig(newLeaderNode("n1"), seededReader())
	mustNew(t, cfg)
	mustNew(t, cfg)
	if _, err := New(Config{Node: newLeaderNode("n1")}); err == nil {
		t.Fatal("New without a store succeeded")
	}
	if _, err := New(Config{Store: seededReader()}); err == nil {
		t.Fatal("New without a node succeeded")
	}
	if _, err := New(Config{Store: seededReader(), Node: newLeaderNode("n1")}); err == nil {
		t.Fatal("New without a registry succeeded")
	}
}
