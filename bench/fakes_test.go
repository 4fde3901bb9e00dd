package bench

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeStore is an in-memory registry shared by the fake servers: services of
// instances, a global index, and a channel closed on every change.
type fakeStore struct {
	mu       sync.Mutex
	index    uint64
	svcs     map[string]map[string][]byte // service → addr/key → value
	svcIndex map[string]uint64
	checks   map[string]string // service → health-check type of its DEFAULT cluster
	changed  chan struct{}
}

func newFakeStore() *fakeStore {
	return &fakeStore{index: 1, svcs: map[string]map[string][]byte{}, svcIndex: map[string]uint64{}, checks: map[string]string{}, changed: make(chan struct{})}
}

func (s *fakeStore) put(svc, key string, v []byte) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.svcs[svc] == nil {
		s.svcs[svc] = map[string][]byte{}
	}
	s.index++
	s.svcs[svc][key] = v
	s.svcIndex[svc] = s.index
	close(s.changed)
	s.changed = make(chan struct{})
	return s.index
}

func (s *fakeStore) del(svc, key string) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.svcs[svc][key]; !ok {
		return 0, false
	}
	s.index++
	delete(s.svcs[svc], key)
	s.svcIndex[svc] = s.index
	close(s.changed)
	s.changed = make(chan struct{})
	return s.index, true
}

// list returns the service's keys sorted, its index, whether it exists and the change channel.
func (s *fakeStore) list(svc string) ([]string, [][]byte, uint64, bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.svcs[svc]
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		vals[i] = m[k]
	}
	return keys, vals, s.svcIndex[svc], ok, s.changed
}

func (s *fakeStore) count(svc string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.svcs[svc])
}

// fakeSSE shapes the event streams of a fake Roster.
type fakeSSE struct {
	// off makes the server ignore Accept: text/event-stream and answer the JSON list, as
	// a server without the SSE watch does.
	off bool
	// crlf ends lines in CRLF; pretty sends indented JSON, one data line per JSON line;
	// retry, when set, sends a retry field first.
	crlf, pretty bool
	retry        int
	// maxEvents, when set, ends every stream after that many events.
	maxEvents int
	// streams, when set, counts open streams by remote address.
	streams *streamCount
}

// streamCount records the streams a fake server holds open, by remote address.
type streamCount struct {
	mu      sync.Mutex
	open    map[string]int
	total   int
	resumed int           // streams opened with Last-Event-ID
	ch      chan struct{} // closed and replaced on every change
}

func newStreamCount() *streamCount {
	return &streamCount{open: map[string]int{}, ch: make(chan struct{})}
}

func (c *streamCount) add(addr string, d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open[addr] += d
	if c.open[addr] == 0 {
		delete(c.open, addr)
	}
	if d > 0 {
		c.total++
	}
	close(c.ch)
	c.ch = make(chan struct{})
}

// snapshot returns the open streams' addresses with their counts and the change channel.
func (c *streamCount) snapshot() (map[string]int, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int, len(c.open))
	for k, v := range c.open {
		m[k] = v
	}
	return m, c.ch
}

// serveSSE streams a service's instances in the wire format of the SSE watch: the current
// state at once (unless Last-Event-ID names the current index), then one event per
// change, a keep-alive comment before each event.
func serveSSE(w http.ResponseWriter, r *http.Request, st *fakeStore, svc string, o fakeSSE) {
	if o.streams != nil {
		if r.Header.Get("Last-Event-ID") != "" {
			o.streams.mu.Lock()
			o.streams.resumed++
			o.streams.mu.Unlock()
		}
		o.streams.add(r.RemoteAddr, 1)
		defer o.streams.add(r.RemoteAddr, -1)
	}
	sent := 0
	eol := "\n"
	if o.crlf {
		eol = "\r\n"
	}
	_, _, idx, _, _ := st.list(svc)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("X-Roster-Consistency", "stale")
	w.Header().Set("X-Roster-Known-Leader", "true")
	w.Header().Set("X-Roster-Index", strconv.FormatUint(idx, 10))
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	var b strings.Builder
	if o.retry > 0 {
		fmt.Fprintf(&b, "retry: %d%s", o.retry, eol)
	}
	last, _ := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64)
	first := r.Header.Get("Last-Event-ID") == ""
	for {
		keys, _, idx, exists, ch := st.list(svc)
		if first || idx > last {
			first = false
			b.WriteString(": keep-alive" + eol)
			var typ string
			var data []byte
			if !exists {
				st.mu.Lock()
				idx = st.index
				st.mu.Unlock()
				typ = "not_found"
				data = []byte(`{"error":{"code":"not_found","message":"service ` + svc + ` not found"}}`)
			} else {
				typ = "instances"
				data = fakeInstancesJSON(keys, idx, o.pretty)
			}
			fmt.Fprintf(&b, "id: %d%sevent: %s%s", idx, eol, typ, eol)
			for _, line := range strings.Split(string(data), "\n") {
				b.WriteString("data: " + line + eol)
			}
			b.WriteString(eol)
			last = idx
			sent++
		}
		if b.Len() > 0 {
			if _, err := io.WriteString(w, b.String()); err != nil {
				return
			}
			fl.Flush()
			b.Reset()
		}
		if o.maxEvents > 0 && sent >= o.maxEvents {
			return
		}
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		}
	}
}

// fakeInstancesJSON is the instances list of the native API (the fields the bench reads).
func fakeInstancesJSON(keys []string, idx uint64, pretty bool) []byte {
	type inst struct {
		IP   string `json:"ip"`
		Port int    `json:"port"`
	}
	out := struct {
		Service   map[string]string `json:"service"`
		Index     uint64            `json:"index"`
		Reached   bool              `json:"protectThresholdReached"`
		Instances []inst            `json:"instances"`
	}{Service: map[string]string{"name": "x"}, Index: idx, Instances: []inst{}}
	for _, k := range keys {
		i := strings.LastIndexByte(k, ':')
		p, _ := strconv.Atoi(k[i+1:])
		out.Instances = append(out.Instances, inst{k[:i], p})
	}
	var b []byte
	if pretty {
		b, _ = json.MarshalIndent(out, "", "  ")
	} else {
		b, _ = json.Marshal(out)
	}
	return b
}

// newFakeRoster serves the subset of Roster's native API the bench uses, with the SSE
// watch in its plain form.
func newFakeRoster(t *testing.T, st *fakeStore) *httptest.Server {
	return newFakeRosterSSE(t, st, fakeSSE{})
}

// newFakeRosterSSE is newFakeRoster with the event streams shaped by o.
func newFakeRosterSSE(t *testing.T, st *fakeStore, o fakeSSE) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	const prefix = "/v1/namespaces/public/groups/DEFAULT_GROUP/services/"
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/status/ready" {
			w.Header().Set("X-Roster-Last-Contact", "3")
			_ = json.NewEncoder(w).Encode(map[string]any{"ready": true})
			return
		}
		if r.URL.Path == "/v1/status/leader" {
			_ = json.NewEncoder(w).Encode(map[string]string{"id": "n1", "raftAddr": "x", "httpAddr": strings.TrimPrefix(srv.URL, "http://")})
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok {
			http.NotFound(w, r)
			return
		}
		if svc, cluster, ok := strings.Cut(rest, "/clusters/"); ok && r.Method == http.MethodPut {
			var req struct {
				HealthCheck struct {
					Type string `json:"type"`
				} `json:"healthCheck"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || cluster != "DEFAULT" {
				http.Error(w, "bad cluster request", http.StatusBadRequest)
				return
			}
			st.mu.Lock()
			st.checks[svc] = req.HealthCheck.Type
			st.index++
			idx := st.index
			st.mu.Unlock()
			_ = json.NewEncoder(w).Encode(map[string]uint64{"index": idx})
			return
		}
		svc, tail, _ := strings.Cut(rest, "/instances")
		switch {
		case tail == "" && r.Method == http.MethodGet && !o.off && strings.Contains(r.Header.Get("Accept"), "text/event-stream"):
			if len(r.URL.Query()) != 0 {
				http.Error(w, `{"error":{"code":"invalid_argument"}}`, http.StatusBadRequest)
				return
			}
			serveSSE(w, r, st, svc, o)
		case tail == "" && r.Method == http.MethodGet:
			q := r.URL.Query()
			if m := q.Get("consistency"); m != "" && m != Linearizable && m != Leader && m != Stale {
				http.Error(w, `{"error":{"code":"invalid_argument"}}`, http.StatusBadRequest)
				return
			}
			var after uint64
			if v := q.Get("index"); v != "" {
				after, _ = strconv.ParseUint(v, 10, 64)
			}
			for {
				keys, _, idx, exists, ch := st.list(svc)
				if !exists {
					http.Error(w, `{"error":{"code":"not_found"}}`, http.StatusNotFound)
					return
				}
				if q.Get("index") == "" || idx > after {
					type inst struct {
						IP   string `json:"ip"`
						Port int    `json:"port"`
					}
					out := struct {
						Index     uint64 `json:"index"`
						Instances []inst `json:"instances"`
					}{Index: idx, Instances: []inst{}}
					for _, k := range keys {
						i := strings.LastIndexByte(k, ':')
						p, _ := strconv.Atoi(k[i+1:])
						out.Instances = append(out.Instances, inst{k[:i], p})
					}
					w.Header().Set("X-Roster-Index", strconv.FormatUint(idx, 10))
					w.Header().Set("X-Roster-Last-Contact", "2")
					_ = json.NewEncoder(w).Encode(out)
					return
				}
				select {
				case <-ch:
				case <-r.Context().Done():
					return
				}
			}
		case strings.HasPrefix(tail, "/") && r.Method == http.MethodPut:
			body, _ := io.ReadAll(r.Body)
			var req struct {
				Metadata map[string]string `json:"metadata"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			idx := st.put(svc, tail[1:], body)
			_ = json.NewEncoder(w).Encode(map[string]uint64{"index": idx})
		case strings.HasPrefix(tail, "/") && r.Method == http.MethodDelete:
			idx, ok := st.del(svc, tail[1:])
			if !ok {
				http.Error(w, `{"error":{"code":"not_found"}}`, http.StatusNotFound)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]uint64{"index": idx})
		default:
			http.Error(w, "bad request", http.StatusMethodNotAllowed)
		}
	})
	srv = httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// newFakeEtcd serves the subset of etcd's v3 JSON gateway the bench uses. Keys are
// grouped by the service segment of /registry/<service>/<addr>. memberID and leaderID
// are reported by /v3/maintenance/status.
func newFakeEtcd(t *testing.T, st *fakeStore, memberID, leaderID string) *httptest.Server {
	t.Helper()
	dec := func(s string) string {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Errorf("fake etcd: bad base64 %q", s)
		}
		return string(b)
	}
	split := func(key string) (string, string) {
		rest := strings.TrimPrefix(key, "/registry/")
		svc, addr, _ := strings.Cut(rest, "/")
		return svc, addr
	}
	header := func(rev uint64) map[string]string {
		return map[string]string{"member_id": memberID, "revision": strconv.FormatUint(rev, 10), "raft_term": "2"}
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
			return
		}
		str := func(k string) string { s, _ := req[k].(string); return s }
		switch r.URL.Path {
		case "/v3/maintenance/status":
			_ = json.NewEncoder(w).Encode(map[string]any{"header": header(1), "leader": leaderID, "version": "3.4.23"})
		case "/v3/kv/put":
			svc, addr := split(dec(str("key")))
			rev := st.put(svc, addr, []byte(dec(str("value"))))
			_ = json.NewEncoder(w).Encode(map[string]any{"header": header(rev)})
		case "/v3/kv/deleterange":
			svc, addr := split(dec(str("key")))
			rev, ok := st.del(svc, addr)
			if !ok {
				_ = json.NewEncoder(w).Encode(map[string]any{"header": header(rev)})
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"header": header(rev), "deleted": "1"})
		case "/v3/kv/range":
			prefix := dec(str("key"))
			if end := dec(str("range_end")); end != PrefixEnd(prefix) {
				t.Errorf("fake etcd: range_end %q for prefix %q", end, prefix)
			}
			svc, _ := split(prefix)
			keys, vals, _, _, _ := st.list(svc)
			st.mu.Lock()
			rev := st.index
			st.mu.Unlock()
			var kvs []map[string]string
			for i, k := range keys {
				kv := map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(prefix + k))}
				if req["keys_only"] != true {
					kv["value"] = base64.StdEncoding.EncodeToString(vals[i])
				}
				kvs = append(kvs, kv)
			}
			out := map[string]any{"header": header(rev)}
			if len(kvs) > 0 {
				out["kvs"] = kvs
				out["count"] = strconv.Itoa(len(kvs))
			}
			_ = json.NewEncoder(w).Encode(out)
		case "/v3/watch":
			cr, _ := req["create_request"].(map[string]any)
			key, _ := cr["key"].(string)
			svc, _ := split(dec(key))
			fl := w.(http.Flusher)
			st.mu.Lock()
			rev, last := st.index, st.svcIndex[svc]
			st.mu.Unlock()
			_ = json.NewEncoder(w).Encode(map[string]any{"result": map[string]any{"header": header(rev), "created": true}})
			fl.Flush()
			for {
				_, _, idx, _, ch := st.list(svc)
				if idx > last {
					last = idx
					ev := map[string]any{"kv": map[string]string{"mod_revision": strconv.FormatUint(idx, 10)}}
					_ = json.NewEncoder(w).Encode(map[string]any{"result": map[string]any{"header": header(idx), "events": []any{ev}}})
					fl.Flush()
				}
				select {
				case <-ch:
				case <-r.Context().Done():
					return
				}
			}
		default:
			http.NotFound(w, r)
		}
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func mustNewClient(t *testing.T, cfg ClientConfig) Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := NewClient(ctx, cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
