package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
)

// seen is what the fake server received.
type seen struct {
	method      string
	path        string // as sent on the wire (escaped)
	decodedPath string
	query       url.Values
	body        string
	contentType string
}

// fakeAPI is an httptest server that records each request and answers one canned response.
type fakeAPI struct {
	*httptest.Server
	mu     sync.Mutex
	got    []seen
	status int
	header map[string]string
	resp   string
	conns  int // connections accepted
}

func newFakeAPI(t *testing.T, status int, header map[string]string, resp string) *fakeAPI {
	t.Helper()
	f := &fakeAPI{status: status, header: header, resp: resp}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.got = append(f.got, seen{
			method:      r.Method,
			path:        strings.SplitN(r.RequestURI, "?", 2)[0],
			decodedPath: r.URL.Path,
			query:       r.URL.Query(),
			body:        string(b),
			contentType: r.Header.Get("Content-Type"),
		})
		for k, v := range f.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		_, _ = io.WriteString(w, f.resp)
	}))
	f.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.mu.Lock()
			f.conns++
			f.mu.Unlock()
		}
	}
	f.Start()
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.got...)
}

func (f *fakeAPI) client(opts ...Option) *Client { return New(f.Listener.Addr().String(), opts...) }

func ptr[T any](v T) *T { return &v }

// defaultHealthCheck is the spec the server gives a cluster created implicitly.
func defaultHealthCheck() api.HealthCheck {
	return api.HealthCheck{Type: api.CheckTCP, Interval: api.Duration(5 * time.Second), Timeout: api.Duration(2 * time.Second), Rise: 2, Fall: 3}
}

// jsonEqual compares two JSON documents semantically.
func jsonEqual(t *testing.T, got, want string) bool {
	t.Helper()
	if got == "" || want == "" {
		return got == want
	}
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("request body %q is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("expected body %q is not JSON: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

const svcPath = "/v1/namespaces/public/groups/DEFAULT_GROUP/services/orders"

type routeCase struct {
	name   string
	call   func(ctx context.Context, c *Client) (any, error)
	method string
	path   string
	query  url.Values
	body   string
	header map[string]string
	resp   string
	want   any
}

func routeCases() []routeCase {
	return []routeCase{
		{
			name: "UpsertNamespace",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.UpsertNamespace(ctx, "dev", api.NamespaceRequest{Name: "Dev", Description: "dev env"})
			},
			method: "PUT", path: "/v1/namespaces/dev",
			body: `{"name":"Dev","description":"dev env"}`,
			resp: `{"index":7}`, want: uint64(7),
		},
		{
			name: "DeleteNamespace index from header",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.DeleteNamespace(ctx, "dev")
			},
			method: "DELETE", path: "/v1/namespaces/dev",
			header: map[string]string{api.HeaderIndex: "8"},
			resp:   `{}`, want: uint64(8),
		},
		{
			name: "Namespace",
			call: func(ctx context.Context, c *Client) (any, error) {
				r, _, err := c.Namespace(ctx, "dev", QueryOptions{Consistency: api.ConsistencyStale})
				return r, err
			},
			method: "GET", path: "/v1/namespaces/dev",
			query: url.Values{"consistency": {"stale"}},
			resp:  `{"index":3,"namespace":{"id":"dev","name":"Dev","description":"","createIndex":2,"modifyIndex":3}}`,
			want:  api.NamespaceResponse{Index: 3, Namespace: api.Namespace{ID: "dev", Name: "Dev", CreateIndex: 2, ModifyIndex: 3}},
		},
		{
			name: "Namespaces blocking",
			call: func(ctx context.Context, c *Client) (any, error) {
				r, _, err := c.Namespaces(ctx, QueryOptions{WaitIndex: 5, WaitTime: 10 * time.Second})
				return r, err
			},
			method: "GET", path: "/v1/namespaces",
			query: url.Values{"index": {"5"}, "wait": {"10s"}},
			resp:  `{"index":6,"namespaces":[{"id":"public","name":"public"}]}`,
			want:  api.NamespacesResponse{Index: 6, Namespaces: []api.Namespace{{ID: "public", Name: "public"}}},
		},
		{
			name: "Services page",
			call: func(ctx context.Context, c *Client) (any, error) {
				r, _, err := c.Services(ctx, "dev", ServicesQuery{Group: "g1", Name: "ord", Page: 2, Size: 10})
				return r, err
			},
			method: "GET", path: "/v1/namespaces/dev/services",
			query: url.Values{"group": {"g1"}, "name": {"ord"}, "page": {"2"}, "size": {"10"}},
			resp:  `{"index":9,"namespace":"dev","page":2,"size":10,"total":11,"services":[{"namespace":"dev","group":"g1","name":"a","protectThreshold":0.5}]}`,
			want: api.ServicesResponse{Index: 9, Namespace: "dev", Page: 2, Size: 10, Total: 11,
				Services: []api.ServiceSummary{{Service: api.Service{Namespace: "dev", Group: "g1", Name: "a", ProtectThreshold: 0.5}}}},
		},
		{
			name: "Services default namespace",
			call: func(ctx context.Context, c *Client) (any, error) {
				r, _, err := c.Services(ctx, "", ServicesQuery{})
				return r, err
			},
			method: "GET", path: "/v1/namespaces/public/services",
			resp: `{"index":1,"namespace":"public","services":[]}`,
			want: api.ServicesResponse{Index: 1, Namespace: "public", Services: []api.ServiceSummary{}},
		},
		{
			name: "UpsertService",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.UpsertService(ctx, "", "", "orders", api.ServiceRequest{ProtectThreshold: ptr(0.5), Metadata: map[string]string{"team": "a"}})
			},
			method: "PUT", path: svcPath,
			body: `{"protectThreshold":0.5,"metadata":{"team":"a"}}`,
			resp: `{"index":11}`, want: uint64(11),
		},
		{
			name: "Service",
			call: func(ctx context.Context, c *Client) (any, error) {
				r, _, err := c.Service(ctx, "public", "DEFAULT_GROUP", "orders", QueryOptions{Consistency: "leader"})
				return r, err
			},
			method: "GET", path: svcPath,
			query: url.Values{"consistency": {"leader"}},
			resp:  `{"index":12,"service":{"namespace":"public","group":"DEFAULT_GROUP","name":"orders"},"clusters":[{"name":"DEFAULT","healthCheck":{"type":"TCP","port":0,"interval":"5s","timeout":"2s","rise":2,"fall":3}}],"instanceCount":3,"healthyCount":2}`,
			want: api.ServiceResponse{Index: 12,
				Service:       api.Service{Namespace: "public", Group: "DEFAULT_GROUP", Name: "orders"},
				Clusters:      []api.Cluster{{Name: "DEFAULT", HealthCheck: defaultHealthCheck()}},
				InstanceCount: 3, HealthyCount: 2},
		},
		{
			name: "DeleteService",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.DeleteService(ctx, "public", "g.1:x", "orders")
			},
			method: "DELETE", path: "/v1/namespaces/public/groups/g.1:x/services/orders",
			resp: `{"index":13}`, want: uint64(13),
		},
		{
			name: "UpsertCluster",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.UpsertCluster(ctx, "", "", "orders", "east", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "HTTP", Path: "/health", Interval: "10s"}})
			},
			method: "PUT", path: svcPath + "/clusters/east",
			body: `{"healthCheck":{"type":"HTTP","path":"/health","interval":"10s"}}`,
			resp: `{"index":14}`, want: uint64(14),
		},
		{
			name: "UpsertClusterIf absent",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.UpsertClusterIf(ctx, "", "", "orders", "east", 0, api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}})
			},
			method: "PUT", path: svcPath + "/clusters/east",
			query: url.Values{"cas": {"0"}},
			body:  `{"healthCheck":{"type":"NONE"}}`,
			resp:  `{"index":14}`, want: uint64(14),
		},
		{
			name: "Cluster",
			call: func(ctx context.Context, c *Client) (any, error) {
				r, _, err := c.Cluster(ctx, "", "", "orders", "east", QueryOptions{})
				return r, err
			},
			method: "GET", path: svcPath + "/clusters/east",
			resp: `{"index":15,"cluster":{"name":"east","healthCheck":{"type":"NONE","port":0,"interval":"5s","timeout":"2s","rise":2,"fall":3}}}`,
			want: api.ClusterResponse{Index: 15, Cluster: api.Cluster{Name: "east", HealthCheck: func() api.HealthCheck {
				h := defaultHealthCheck()
				h.Type = api.CheckNone
				return h
			}()}},
		},
		{
			name: "Clusters",
			call: func(ctx context.Context, c *Client) (any, error) {
				r, _, err := c.Clusters(ctx, "", "", "orders", QueryOptions{})
				return r, err
			},
			method: "GET", path: svcPath + "/clusters",
			resp: `{"index":16,"clusters":[{"name":"DEFAULT"},{"name":"east"}]}`,
			want: api.ClustersResponse{Index: 16, Clusters: []api.Cluster{{Name: "DEFAULT"}, {Name: "east"}}},
		},
		{
			name: "RegisterInstance",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.RegisterInstance(ctx, "", "", "orders", "127.100.0.1", 8080, api.InstanceRequest{
					Cluster: ptr("east"), Weight: ptr(2.0), Enabled: ptr(true), Metadata: map[string]string{"v": "1"}})
			},
			method: "PUT", path: svcPath + "/instances/127.100.0.1:8080",
			body: `{"cluster":"east","weight":2,"enabled":true,"metadata":{"v":"1"}}`,
			resp: `{"index":17}`, want: uint64(17),
		},
		{
			name: "RegisterInstance IPv6",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.RegisterInstance(ctx, "", "", "orders", "::1", 8080, api.InstanceRequest{})
			},
			method: "PUT", path: svcPath + "/instances/%5B::1%5D:8080",
			body: `{}`,
			resp: `{"index":18}`, want: uint64(18),
		},
		{
			name: "UpdateInstance",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.UpdateInstance(ctx, "", "", "orders", "127.100.0.1", 8080, api.InstanceRequest{Enabled: ptr(false)})
			},
			method: "PATCH", path: svcPath + "/instances/127.100.0.1:8080",
			body: `{"enabled":false}`,
			resp: `{"index":19}`, want: uint64(19),
		},
		{
			name: "UpdateInstance empty metadata removes every key",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.UpdateInstance(ctx, "", "", "orders", "127.100.0.1", 8080, api.InstanceRequest{Metadata: map[string]string{}})
			},
			method: "PATCH", path: svcPath + "/instances/127.100.0.1:8080",
			body: `{"metadata":{}}`,
			resp: `{"index":19}`, want: uint64(19),
		},
		{
			name: "UpdateInstanceIf",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.UpdateInstanceIf(ctx, "dev", "g", "orders", "127.100.0.1", 8080, 41, api.InstanceRequest{
					Weight: ptr(3.0), Metadata: map[string]string{"v": "2"}})
			},
			method: "PATCH", path: "/v1/namespaces/dev/groups/g/services/orders/instances/127.100.0.1:8080",
			query: url.Values{"cas": {"41"}},
			body:  `{"weight":3,"metadata":{"v":"2"}}`,
			resp:  `{"index":42}`, want: uint64(42),
		},
		{
			name: "DeregisterInstance",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.DeregisterInstance(ctx, "", "", "orders", "fe80::1", 9)
			},
			method: "DELETE", path: svcPath + "/instances/%5Bfe80::1%5D:9",
			resp: `{"index":20}`, want: uint64(20),
		},
		{
			name: "SetInstanceHealth",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.SetInstanceHealth(ctx, "", "", "orders", "127.100.0.1", 8080, false)
			},
			method: "PUT", path: svcPath + "/instances/127.100.0.1:8080/health",
			body: `{"healthy":false}`,
			resp: `{"index":21}`, want: uint64(21),
		},
		{
			name: "Instance",
			call: func(ctx context.Context, c *Client) (any, error) {
				r, _, err := c.Instance(ctx, "", "", "orders", "127.100.0.1", 8080, QueryOptions{})
				return r, err
			},
			method: "GET", path: svcPath + "/instances/127.100.0.1:8080",
			resp: `{"index":22,"instance":{"ip":"127.100.0.1","port":8080,"cluster":"DEFAULT","weight":1,"enabled":true,"healthy":true,"instanceId":"127.100.0.1#8080#DEFAULT#DEFAULT_GROUP@@orders"}}`,
			want: api.InstanceResponse{Index: 22, Instance: api.Instance{
				IP: "127.100.0.1", Port: 8080, Cluster: "DEFAULT", Weight: 1, Enabled: true, Healthy: true,
				InstanceID: "127.100.0.1#8080#DEFAULT#DEFAULT_GROUP@@orders"}},
		},
		{
			name: "Instances filtered blocking",
			call: func(ctx context.Context, c *Client) (any, error) {
				r, _, err := c.Instances(ctx, "", "", "orders", InstancesQuery{
					QueryOptions: QueryOptions{Consistency: "leader", WaitIndex: 42, WaitTime: 30 * time.Second},
					HealthyOnly:  true, Clusters: []string{"a", "b"}})
				return r, err
			},
			method: "GET", path: svcPath + "/instances",
			query: url.Values{"healthy": {"true"}, "cluster": {"a,b"}, "consistency": {"leader"}, "index": {"42"}, "wait": {"30s"}},
			resp:  `{"service":{"name":"orders"},"index":43,"protectThresholdReached":true,"instances":[{"ip":"::1","port":80,"instanceId":"x"}]}`,
			want: api.InstancesResponse{Service: api.Service{Name: "orders"}, Index: 43, ProtectThresholdReached: true,
				Instances: []api.Instance{{IP: "::1", Port: 80, InstanceID: "x"}}},
		},
		{
			name: "Leader",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Leader(ctx)
			},
			method: "GET", path: "/v1/status/leader",
			resp: `{"id":"n1","raftAddr":"127.100.0.1:7848","httpAddr":"127.100.0.1:8848"}`,
			want: api.Leader{ID: "n1", RaftAddr: "127.100.0.1:7848", HTTPAddr: "127.100.0.1:8848"},
		},
		{
			name: "Members",
			call: func(ctx context.Context, c *Client) (any, error) {
				r, _, err := c.Members(ctx, QueryOptions{Consistency: api.ConsistencyStale})
				return r, err
			},
			method: "GET", path: "/v1/cluster/members",
			query: url.Values{"consistency": {"stale"}},
			resp:  `{"index":4,"members":[{"id":"n1","raftAddr":"a:1","httpAddr":"a:2","voter":true,"leader":true,"lastContactMillis":0},{"id":"n2","voter":false,"lastContactMillis":-1}]}`,
			want: api.MembersResponse{Index: 4, Members: []api.Member{
				{ID: "n1", RaftAddr: "a:1", HTTPAddr: "a:2", Voter: true, Leader: true},
				{ID: "n2", LastContactMillis: -1}}},
		},
		{
			name: "Join",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Join(ctx, api.JoinRequest{ID: "n3", RaftAddr: "127.100.0.3:7848", HTTPAddr: "127.100.0.3:8848", NonVoter: true})
			},
			method: "POST", path: "/v1/cluster/join",
			body: `{"id":"n3","raftAddr":"127.100.0.3:7848","httpAddr":"127.100.0.3:8848","nonVoter":true}`,
			resp: `{"index":30}`, want: uint64(30),
		},
		{
			name: "RemoveMember",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.RemoveMember(ctx, "n3")
			},
			method: "DELETE", path: "/v1/cluster/members/n3",
			resp: `{"index":31}`, want: uint64(31),
		},
		{
			name: "TransferLeadership to id",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.TransferLeadership(ctx, "n2")
			},
			method: "POST", path: "/v1/cluster/leadership-transfer",
			query: url.Values{"id": {"n2"}},
			resp:  `{"index":32}`,
		},
		{
			name: "TransferLeadership to any",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.TransferLeadership(ctx, "")
			},
			method: "POST", path: "/v1/cluster/leadership-transfer",
		},
	}
}

func TestClient_Routes(t *testing.T) {
	for _, tc := range routeCases() {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t, http.StatusOK, tc.header, tc.resp)
			got, err := tc.call(context.Background(), f.client())
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("server saw %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.method != tc.method || r.path != tc.path {
				t.Errorf("request = %s %s, want %s %s", r.method, r.path, tc.method, tc.path)
			}
			wantQuery := tc.query
			if wantQuery == nil {
				wantQuery = url.Values{}
			}
			if !reflect.DeepEqual(r.query, wantQuery) {
				t.Errorf("query = %v, want %v", r.query, wantQuery)
			}
			if !jsonEqual(t, r.body, tc.body) {
				t.Errorf("body = %s, want %s", r.body, tc.body)
			}
			if tc.body != "" && r.contentType != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", r.contentType)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("result = %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestClient_IPv6PathDecodesToBracketedAddr(t *testing.T) {
	f := newFakeAPI(t, http.StatusOK, nil, `{"index":1}`)
	if _, err := f.client().DeregisterInstance(context.Background(), "ns-1", "g", "svc", "2001:db8::7", 443); err != nil {
		t.Fatal(err)
	}
	want := "/v1/namespaces/ns-1/groups/g/services/svc/instances/[2001:db8::7]:443"
	if got := f.requests()[0].decodedPath; got != want {
		t.Fatalf("server decoded path %q, want %q", got, want)
	}
}

func TestClient_PathSegmentsAreEscaped(t *testing.T) {
	f := newFakeAPI(t, http.StatusOK, nil, `{"index":1}`)
	if _, err := f.client().UpsertService(context.Background(), "public", "g", "a/b c", api.ServiceRequest{}); err != nil {
		t.Fatal(err)
	}
	if got, want := f.requests()[0].path, "/v1/namespaces/public/groups/g/services/a%2Fb%20c"; got != want {
		t.Fatalf("path %q, want %q", got, want)
	}
}

func TestClient_Meta(t *testing.T) {
	f := newFakeAPI(t, http.StatusOK, map[string]string{
		api.HeaderIndex:       "77",
		api.HeaderKnownLeader: "true",
		api.HeaderLastContact: "1500",
	}, `{"index":77,"instances":[]}`)
	_, meta, err := f.client().Instances(context.Background(), "", "", "orders", InstancesQuery{QueryOptions: QueryOptions{Consistency: api.ConsistencyStale}})
	if err != nil {
		t.Fatal(err)
	}
	want := Meta{Index: 77, KnownLeader: true, LastContact: 1500 * time.Millisecond}
	if meta != want {
		t.Fatalf("meta = %+v, want %+v", meta, want)
	}
}

func TestClient_APIErrorFromErrorBody(t *testing.T) {
	cases := []struct {
		name         string
		status       int
		body         string
		want         APIError
		text         string
		notFound     bool
		conflict     bool
		noLeader     bool
		call         func(c *Client) error
		wantReqCount int
	}{
		{
			name: "validation names the field", status: 400,
			body: `{"error":{"code":"invalid_argument","message":"must be at most 10000","field":"weight"}}`,
			want: APIError{Status: 400, Code: api.CodeInvalid, Message: "must be at most 10000", Field: "weight"},
			text: "weight: must be at most 10000 (400 invalid_argument)",
		},
		{
			name: "field already in message", status: 400,
			body: `{"error":{"code":"invalid_argument","message":"port: out of range","field":"port"}}`,
			want: APIError{Status: 400, Code: api.CodeInvalid, Message: "port: out of range", Field: "port"},
			text: "port: out of range (400 invalid_argument)",
		},
		{
			name: "not found", status: 404,
			body:     `{"error":{"code":"not_found","message":"instance 127.100.0.1:80 not found"}}`,
			want:     APIError{Status: 404, Code: api.CodeNotFound, Message: "instance 127.100.0.1:80 not found"},
			text:     "instance 127.100.0.1:80 not found (404 not_found)",
			notFound: true,
		},
		{
			name: "conflict", status: 409,
			body:     `{"error":{"code":"conflict","message":"service has instances"}}`,
			want:     APIError{Status: 409, Code: api.CodeConflict, Message: "service has instances"},
			text:     "service has instances (409 conflict)",
			conflict: true,
		},
		{
			name: "no leader", status: 503,
			body:     `{"error":{"code":"no_leader","message":"no leader"}}`,
			want:     APIError{Status: 503, Code: api.CodeNoLeader, Message: "no leader"},
			text:     "no leader (503 no_leader)",
			noLeader: true,
		},
		{
			name: "plain text body", status: 502,
			body: "<html>bad gateway</html>\nmore",
			want: APIError{Status: 502, Message: "<html>bad gateway</html>"},
			text: "<html>bad gateway</html> (502)",
		},
		{
			name: "empty 404 body", status: 404,
			want:     APIError{Status: 404, Message: "Not Found"},
			text:     "Not Found (404)",
			notFound: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t, tc.status, nil, tc.body)
			_, err := f.client().RegisterInstance(context.Background(), "", "", "orders", "127.100.0.1", 80, api.InstanceRequest{})
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v (%T), want *APIError", err, err)
			}
			if *ae != tc.want {
				t.Errorf("APIError = %+v, want %+v", *ae, tc.want)
			}
			if err.Error() != tc.text {
				t.Errorf("Error() = %q, want %q", err.Error(), tc.text)
			}
			if IsNotFound(err) != tc.notFound || IsConflict(err) != tc.conflict || IsNoLeader(err) != tc.noLeader {
				t.Errorf("IsNotFound/IsConflict/IsNoLeader = %v/%v/%v, want %v/%v/%v",
					IsNotFound(err), IsConflict(err), IsNoLeader(err), tc.notFound, tc.conflict, tc.noLeader)
			}
		})
	}
}

func TestClient_IsCASMismatch(t *testing.T) {
	f := newFakeAPI(t, http.StatusConflict, nil, `{"error":{"code":"cas_mismatch","message":"cluster east is at index 9","index":9}}`)
	_, err := f.client().UpsertClusterIf(context.Background(), "", "", "orders", "east", 7, api.ClusterRequest{})
	if !IsCASMismatch(err) || IsConflict(err) {
		t.Fatalf("err = %v: want IsCASMismatch (and not the plain conflict)", err)
	}
	if IsCASMismatch(&APIError{Status: http.StatusConflict, Code: api.CodeConflict}) || IsCASMismatch(errors.New("cas_mismatch")) {
		t.Fatal("IsCASMismatch matched another error")
	}
}

func TestClient_ErrorHelpersRejectOtherErrors(t *testing.T) {
	for _, err := range []error{nil, errors.New("not found"), context.Canceled} {
		if IsNotFound(err) || IsConflict(err) || IsNoLeader(err) {
			t.Errorf("helpers matched %v", err)
		}
	}
}

func TestClient_Ready(t *testing.T) {
	cases := []struct {
		name    string
		status  int
		body    string
		want    api.Ready
		wantErr bool
	}{
		{"ready", 200, `{"ready":true,"leader":"n1","appliedIndex":10,"commitIndex":10}`,
			api.Ready{Ready: true, Leader: "n1", AppliedIndex: 10, CommitIndex: 10}, false},
		{"not ready", 503, `{"ready":false,"appliedIndex":3,"commitIndex":9,"reason":"catching up"}`,
			api.Ready{AppliedIndex: 3, CommitIndex: 9, Reason: "catching up"}, false},
		{"503 error body", 503, `{"error":{"code":"unavailable","message":"shutting down"}}`, api.Ready{}, true},
		{"500", 500, `{"error":{"code":"internal","message":"boom"}}`, api.Ready{}, true},
		{"200 without readiness", 200, `{}`, api.Ready{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t, tc.status, nil, tc.body)
			got, err := f.client().Ready(context.Background())
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("Ready = %+v, want %+v", got, tc.want)
			}
			if r := f.requests(); len(r) != 1 || r[0].method != "GET" || r[0].path != "/v1/status/ready" {
				t.Errorf("requests = %+v", r)
			}
		})
	}
}

func TestNew_AddressForms(t *testing.T) {
	cases := []struct {
		addr, want string
		bad        bool
	}{
		{addr: "127.0.0.1:8848", want: "http://127.0.0.1:8848"},
		{addr: "[::1]:8848", want: "http://[::1]:8848"},
		{addr: "http://roster:8848/", want: "http://roster:8848"},
		{addr: "https://roster.example/prefix/", want: "https://roster.example/prefix"},
		{addr: "", bad: true},
		{addr: "ftp://x:1", bad: true},
		{addr: "http://", bad: true},
	}
	for _, tc := range cases {
		c := New(tc.addr)
		if tc.bad {
			if c.Addr() != "" {
				t.Errorf("New(%q).Addr() = %q, want unusable", tc.addr, c.Addr())
			}
			if _, err := c.Leader(context.Background()); err == nil {
				t.Errorf("New(%q): call succeeded, want the address error", tc.addr)
			}
			continue
		}
		if c.Addr() != tc.want {
			t.Errorf("New(%q).Addr() = %q, want %q", tc.addr, c.Addr(), tc.want)
		}
	}
}

func TestClient_URLPrefixIsKept(t *testing.T) {
	f := newFakeAPI(t, http.StatusOK, nil, `{"id":"n1"}`)
	c := New(f.URL + "/roster/")
	if _, err := c.Leader(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.requests()[0].path; got != "/roster/v1/status/leader" {
		t.Fatalf("path %q", got)
	}
}

func TestClient_EmptyNamesFailWithoutRequest(t *testing.T) {
	f := newFakeAPI(t, http.StatusOK, nil, `{"index":1}`)
	c := f.client()
	ctx := context.Background()
	checks := map[string]error{}
	_, checks["service"] = c.RegisterInstance(ctx, "", "", "", "127.100.0.1", 80, api.InstanceRequest{})
	_, checks["ip"] = c.RegisterInstance(ctx, "", "", "svc", "", 80, api.InstanceRequest{})
	_, checks["port"] = c.RegisterInstance(ctx, "", "", "svc", "127.100.0.1", 0, api.InstanceRequest{})
	_, _, checks["cluster"] = c.Cluster(ctx, "", "", "svc", "", QueryOptions{})
	_, checks["id"] = c.RemoveMember(ctx, "")
	for name, err := range checks {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err = %v, want an error naming %s", name, err, name)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("server saw %d requests, want 0", n)
	}
}

// deadlineRecorder records the deadline of each request's context.
type deadlineRecorder struct {
	mu        sync.Mutex
	deadlines []time.Duration
	next      http.RoundTripper
}

func (d *deadlineRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	dl, ok := r.Context().Deadline()
	d.mu.Lock()
	if ok {
		d.deadlines = append(d.deadlines, time.Until(dl))
	} else {
		d.deadlines = append(d.deadlines, -1)
	}
	d.mu.Unlock()
	return d.next.RoundTrip(r)
}

func TestClient_BlockingQueryGetsWaitOnTopOfTimeout(t *testing.T) {
	f := newFakeAPI(t, http.StatusOK, nil, `{"index":1}`)
	rec := &deadlineRecorder{next: http.DefaultTransport}
	c := f.client(WithTimeout(2*time.Second), WithHTTPClient(&http.Client{Transport: rec}))
	ctx := context.Background()
	if _, _, err := c.Instances(ctx, "", "", "svc", InstancesQuery{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Instances(ctx, "", "", "svc", InstancesQuery{QueryOptions: QueryOptions{WaitIndex: 1, WaitTime: 40 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if d := rec.deadlines[0]; d <= 0 || d > 2*time.Second {
		t.Errorf("plain read deadline in %v, want ≤ 2s", d)
	}
	if d := rec.deadlines[1]; d < 42*time.Second || d > 47*time.Second {
		t.Errorf("blocking read deadline in %v, want 2s + 40s + jitter room", d)
	}
}

func TestClient_TimeoutCutsSlowRequest(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	c := New(srv.URL, WithTimeout(50*time.Millisecond))
	_, err := c.Leader(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
}

func TestClient_ReusesConnections(t *testing.T) {
	f := newFakeAPI(t, http.StatusOK, nil, `{"index":1,"instances":[]}`)
	c := f.client()
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if _, _, err := c.Instances(ctx, "", "", "svc", InstancesQuery{}); err != nil {
			t.Fatal(err)
		}
	}
	// Error responses must leave the connection reusable too.
	f.mu.Lock()
	f.status, f.resp = http.StatusNotFound, `{"error":{"code":"not_found","message":"x"}}`
	f.mu.Unlock()
	for i := 0; i < 3; i++ {
		if _, err := c.DeregisterInstance(ctx, "", "", "svc", "127.100.0.1", 80); !IsNotFound(err) {
			t.Fatalf("err = %v", err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns != 1 {
		t.Fatalf("opened %d connections for 8 sequential requests, want 1", f.conns)
	}
}
