package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// TestListInstances_CachedBodyMatchesUncachedRead checks the instance list served from
// the read cache after every kind of change: for each filter the body must be byte for
// byte what encoding a read of the file gives, and X-Roster-Index its index.
func TestListInstances_CachedBodyMatchesUncachedRead(t *testing.T) {
	h, st, _ := newStoreAPI(t)
	reg := prometheus.NewRegistry()
	if err := st.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	const svc = "/v1/namespaces/dev/groups/g1/services/pay"
	key := model.ServiceKey{Namespace: "dev", Group: "g1", Service: "pay"}
	filters := []string{"", "?healthy=true", "?healthy=false", "?cluster=blue", "?cluster=blue,DEFAULT&healthy=true", "?cluster=DEFAULT,blue&healthy=true"}

	check := func(step string) {
		t.Helper()
		for _, q := range filters {
			for range 2 { // a miss, then a hit
				resp := mustDo(t, h, http.MethodGet, svc+"/instances"+q, nil, 200)
				req := httptest.NewRequest(http.MethodGet, svc+"/instances"+q, nil)
				f, err := parseInstanceFilter(req)
				if err != nil {
					t.Fatal(err)
				}
				idx, v, err := st.UncachedServiceView(nil, key)
				if err != nil {
					t.Fatal(err)
				}
				want, err := encodeJSON(instancesResponse(idx, v, f))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(resp.Body, want) {
					t.Fatalf("%s: GET instances%s =\n%s\nuncached read gives\n%s", step, q, resp.Body, want)
				}
				if got := resp.Header.Get(api.HeaderIndex); got != strconv.FormatUint(idx, 10) {
					t.Fatalf("%s: %s %s, want %d", step, api.HeaderIndex, got, idx)
				}
			}
		}
	}

	mustDo(t, h, http.MethodPut, svc+"/instances/127.101.0.1:80", nil, 200)
	check("register")
	mustDo(t, h, http.MethodPut, svc+"/instances/127.101.0.2:80", `{"cluster":"blue","metadata":{"v":"1"}}`, 200)
	check("register in a new cluster")
	mustDo(t, h, http.MethodPatch, svc+"/instances/127.101.0.2:80", `{"weight":3,"enabled":false}`, 200)
	check("update")
	mustDo(t, h, http.MethodPut, svc+"/clusters/blue", `{"healthCheck":{"type":"NONE"}}`, 200)
	check("cluster")
	mustDo(t, h, http.MethodPut, svc+"/instances/127.101.0.2:80/health", `{"healthy":false}`, 200)
	check("health")
	mustDo(t, h, http.MethodPut, svc, `{"protectThreshold":0.9}`, 200)
	check("service")
	mustDo(t, h, http.MethodDelete, svc+"/instances/127.101.0.1:80", nil, 200)
	check("deregister")

	hits := readCacheMetric(t, reg, "roster_read_cache_hits_total", "encoded")
	if hits < float64(7*len(filters)) {
		t.Fatalf("%v encoded hits, want at least one per filter and step", hits)
	}
}

// readCacheMetric returns the value of one layer's series of a read cache counter.
func readCacheMetric(t *testing.T, reg *prometheus.Registry, name, layer string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == layer {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{layer=%q}", name, layer)
	return 0
}

// BenchmarkListInstances serves the instance list of a 10- and a 100-instance service,
// stale reads, through the read cache (every request after the first hits the encoded
// layer) and with the cache off. The body goes to a writer that drops it.
func BenchmarkListInstances(b *testing.B) {
	for _, n := range []int{10, 100} {
		for _, cached := range []bool{true, false} {
			name := fmt.Sprintf("instances=%d/cached=%v", n, cached)
			b.Run(name, func(b *testing.B) {
				size := int64(0)
				if !cached {
					size = -1
				}
				st, err := store.Open(b.TempDir()+"/state.db", store.Options{NoSync: true, ReadCacheSize: size})
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = st.Close() }()
				for i := range n {
					in := model.Instance{Namespace: "dev", Group: "g1", Service: "pay", IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), Port: 8080,
						Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true,
						Metadata: map[string]string{"version": "v1.2.3", "zone": "eu-west-1a"}}
					if err := st.RegisterInstance(uint64(i+1), in); err != nil {
						b.Fatal(err)
					}
				}
				h, err := New(testConfig(newLeaderNode("n1"), st))
				if err != nil {
					b.Fatal(err)
				}
				req := httptest.NewRequest(http.MethodGet, "/v1/namespaces/dev/groups/g1/services/pay/instances?stale", nil)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				var resp api.InstancesResponse
				if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || len(resp.Instances) != n {
					b.Fatalf("%d instances, %v: %s", len(resp.Instances), err, rec.Body)
				}
				b.ReportAllocs()
				for b.Loop() {
					w := &discardWriter{header: http.Header{}}
					h.ServeHTTP(w, req)
					if w.code != 200 {
						b.Fatal(w.code)
					}
				}
			})
		}
	}
}

// discardWriter is a ResponseWriter that drops the body, as a socket's buffer takes
// it, so that a benchmark measures the handler, not a recorder's growing buffer.
type discardWriter struct {
	header http.Header
	code   int
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *discardWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}
