package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fanout"
	"github.com/rosterhq/roster/internal/wait"
)

const watchSvc = "/v1/namespaces/public/groups/DEFAULT_GROUP/services/orders"

// watchEnv is the API over a real store and FSM with a fan-out hub, behind a real
// HTTP server (streams need a real connection).
type watchEnv struct {
	t   *testing.T
	h   http.Handler
	srv *httptest.Server
	hub *fanout.Hub
	api *server
}

func newWatchEnv(t *testing.T, keepAlive time.Duration) *watchEnv {
	t.Helper()
	return newWatchEnvWith(t, func(c *Config) { c.KeepAlive = keepAlive })
}

// newWatchEnvWith is newWatchEnv with the API's configuration changed by mod.
func newWatchEnvWith(t *testing.T, mod func(*Config)) *watchEnv {
	t.Helper()
	st := mustNewStore(t)
	node := newStoreNode(t, st)
	hub, err := fanout.New(st, fanout.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hub.Close)
	cfg := testConfig(node, st)
	cfg.Watch = hub
	mod(&cfg)
	h := mustNew(t, cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &watchEnv{t: t, h: h, srv: srv, hub: hub, api: h.(*server)}
}

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	id, event, data string
	comment         bool
}

// stream is an open event stream.
type stream struct {
	t      *testing.T
	resp   *http.Response
	events chan sseEvent
	cancel context.CancelFunc
}

func (e *watchEnv) open(path string, header http.Header) *stream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Accept", api.MediaEventStream)
	for k, vs := range header {
		req.Header[k] = vs
	}
	client := e.srv.Client()
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	s := &stream{t: e.t, resp: resp, events: make(chan sseEvent, 64), cancel: cancel}
	e.t.Cleanup(s.close)
	if resp.StatusCode == http.StatusOK {
		go s.read()
	}
	return s
}

func (s *stream) close() {
	s.cancel()
	_ = s.resp.Body.Close()
}

// read parses the body: one sseEvent per blank-line-terminated block, comments apart.
func (s *stream) read() {
	defer close(s.events)
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev != (sseEvent{}) {
				s.events <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
			s.events <- sseEvent{comment: true, data: strings.TrimSpace(line[1:])}
		default:
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "id":
				ev.id = v
			case "event":
				ev.event = v
			case "data":
				ev.data += v
			}
		}
	}
}

// next returns the next event that is not a comment.
func (s *stream) next() sseEvent {
	s.t.Helper()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				s.t.Fatal("stream ended")
			}
			if !ev.comment {
				return ev
			}
		case <-time.After(10 * time.Second):
			s.t.Fatal("no event within 10s")
		}
	}
}

// nextInstances returns the next event, which must be an instances event.
func (s *stream) nextInstances() api.InstancesResponse {
	s.t.Helper()
	ev := s.next()
	if ev.event != api.EventInstances {
		s.t.Fatalf("event %q (%s), want %q", ev.event, ev.data, api.EventInstances)
	}
	var r api.InstancesResponse
	if err := json.Unmarshal([]byte(ev.data), &r); err != nil {
		s.t.Fatalf("event data %q: %v", ev.data, err)
	}
	if ev.id != jsonIndex(r.Index) {
		s.t.Fatalf("event id %q, JSON index %d", ev.id, r.Index)
	}
	return r
}

func jsonIndex(i uint64) string { b, _ := json.Marshal(i); return string(b) }

func (e *watchEnv) put(path, body string) uint64 {
	e.t.Helper()
	var wr api.WriteResult
	mustDo(e.t, e.h, http.MethodPut, path, body, 200).decode(e.t, &wr)
	return wr.Index
}

func TestWatch_InstancesStream(t *testing.T) {
	e := newWatchEnv(t, 0)
	idx := e.put(watchSvc+"/instances/127.0.0.1:8001", `{}`)
	s := e.open(watchSvc+"/instances", nil)
	if ct := s.resp.Header.Get("Content-Type"); s.resp.StatusCode != 200 || ct != api.MediaEventStream {
		t.Fatalf("status %d content type %q", s.resp.StatusCode, ct)
	}
	if got := s.resp.Header.Get(api.HeaderConsistency); got != api.ConsistencyStale {
		t.Fatalf("consistency header %q, want stale", got)
	}
	if got := s.resp.Header.Get(api.HeaderIndex); got != jsonIndex(idx) {
		t.Fatalf("index header %q, want %d", got, idx)
	}
	if s.resp.Header.Get(api.HeaderKnownLeader) == "" {
		t.Fatal("no known-leader header")
	}
	first := s.nextInstances()
	if first.Index != idx || len(first.Instances) != 1 {
		t.Fatalf("first event: index %d, %d instances; want %d, 1", first.Index, len(first.Instances), idx)
	}
	idx = e.put(watchSvc+"/instances/127.0.0.1:8002", `{}`)
	got := s.nextInstances()
	if got.Index != idx || len(got.Instances) != 2 {
		t.Fatalf("after a registration: index %d, %d instances; want %d, 2", got.Index, len(got.Instances), idx)
	}
	mustDo(t, e.h, http.MethodDelete, watchSvc+"/instances/127.0.0.1:8001", nil, 200)
	if got := s.nextInstances(); len(got.Instances) != 1 || got.Instances[0].Port != 8002 {
		t.Fatalf("after a deregistration: %+v", got.Instances)
	}
	if n := testutil.ToFloat64(e.api.streams.open); n != 1 {
		t.Fatalf("open streams gauge = %v, want 1", n)
	}
	s.close()
	// The stream is counted as a request once it ended, but its duration is not a latency.
	route := `route="/v1/namespaces/{ns}/groups/{group}/services/{service}/instances"`
	var metrics string
	wait.For(t, 10*time.Second, "the stream to be counted", func() bool {
		metrics = string(mustDo(t, e.h, http.MethodGet, "/metrics", nil, 200).Body)
		return strings.Contains(metrics, `roster_http_requests_total{code="200",method="GET",`+route)
	})
	for _, l := range strings.Split(metrics, "\n") {
		if strings.Contains(l, route) && strings.HasPrefix(l, "roster_http_request_duration_seconds_count") {
			t.Fatalf("the stream was observed as a request latency: %s", l)
		}
	}
}

func TestWatch_FiltersHideWhatTheyExclude(t *testing.T) {
	e := newWatchEnv(t, 0)
	e.put(watchSvc+"/clusters/a", `{"healthCheck":{"type":"NONE"}}`)
	e.put(watchSvc+"/clusters/b", `{"healthCheck":{"type":"NONE"}}`)
	e.put(watchSvc+"/instances/127.0.0.1:8001", `{"cluster":"a"}`)
	e.put(watchSvc+"/instances/127.0.0.1:8002", `{"cluster":"a"}`)
	s := e.open(watchSvc+"/instances?cluster=a&healthy=true", nil)
	if first := s.nextInstances(); len(first.Instances) != 2 {
		t.Fatalf("first event has %d instances, want 2", len(first.Instances))
	}
	// A change in cluster b is invisible to this filter: no event.
	e.put(watchSvc+"/instances/127.0.0.1:9001", `{"cluster":"b"}`)
	// An instance of cluster a going unhealthy leaves the healthy view: an event without it.
	idx := e.put(watchSvc+"/instances/127.0.0.1:8001/health", `{"healthy":false}`)
	got := s.nextInstances()
	if got.Index != idx || len(got.Instances) != 1 || got.Instances[0].Port != 8002 {
		t.Fatalf("after 8001 went unhealthy: index %d (want %d), instances %+v", got.Index, idx, got.Instances)
	}
}

func TestWatch_NotFoundThenCreated(t *testing.T) {
	e := newWatchEnv(t, 0)
	s := e.open(watchSvc+"/instances", nil)
	ev := s.next()
	if ev.event != api.EventNotFound {
		t.Fatalf("first event %q, want %q", ev.event, api.EventNotFound)
	}
	var body api.ErrorBody
	if err := json.Unmarshal([]byte(ev.data), &body); err != nil || body.Error.Code != api.CodeNotFound {
		t.Fatalf("not_found data %q: %v", ev.data, err)
	}
	idx := e.put(watchSvc+"/instances/127.0.0.1:8001", `{}`)
	if got := s.nextInstances(); got.Index != idx || len(got.Instances) != 1 {
		t.Fatalf("after creation: index %d instances %d", got.Index, len(got.Instances))
	}
}

func TestWatch_LastEventIDResumes(t *testing.T) {
	e := newWatchEnv(t, 0)
	idx := e.put(watchSvc+"/instances/127.0.0.1:8001", `{}`)
	// Nothing changed since the client's last event: the first event is the next change.
	s := e.open(watchSvc+"/instances", http.Header{api.HeaderLastEventID: {jsonIndex(idx)}})
	next := e.put(watchSvc+"/instances/127.0.0.1:8002", `{}`)
	if got := s.nextInstances(); got.Index != next {
		t.Fatalf("resumed stream's first event at %d, want the change at %d", got.Index, next)
	}
	// Something changed since: the current state at once.
	s2 := e.open(watchSvc+"/instances", http.Header{api.HeaderLastEventID: {jsonIndex(idx)}})
	if got := s2.nextInstances(); got.Index != next || len(got.Instances) != 2 {
		t.Fatalf("stream resumed from %d got index %d with %d instances, want %d with 2", idx, got.Index, len(got.Instances), next)
	}
}

func TestWatch_KeepAlive(t *testing.T) {
	e := newWatchEnv(t, 20*time.Millisecond)
	e.put(watchSvc+"/instances/127.0.0.1:8001", `{}`)
	s := e.open(watchSvc+"/instances", nil)
	s.nextInstances()
	select {
	case ev := <-s.events:
		if !ev.comment || ev.data != "keep-alive" {
			t.Fatalf("got %+v, want a keep-alive comment", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no keep-alive comment")
	}
}

func TestWatch_ServicesStream(t *testing.T) {
	e := newWatchEnv(t, 0)
	e.put(watchSvc+"/instances/127.0.0.1:8001", `{}`)
	s := e.open("/v1/namespaces/public/services", nil)
	read := func() api.ServicesResponse {
		ev := s.next()
		if ev.event != api.EventServices {
			t.Fatalf("event %q, want services", ev.event)
		}
		var r api.ServicesResponse
		if err := json.Unmarshal([]byte(ev.data), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := read(); r.Total != 1 {
		t.Fatalf("first list total %d", r.Total)
	}
	idx := e.put("/v1/namespaces/public/groups/DEFAULT_GROUP/services/payments/instances/127.0.0.1:9001", `{}`)
	if r := read(); r.Total != 2 || r.Index != idx {
		t.Fatalf("after a new service: total %d index %d (want 2, %d)", r.Total, r.Index, idx)
	}
}

func TestWatch_EndsWhenTheHubCloses(t *testing.T) {
	e := newWatchEnv(t, 0)
	s := e.open(watchSvc+"/instances", nil)
	s.next()
	e.hub.Close()
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("stream still open after the hub closed")
		}
	}
}

func TestWatch_BadInput(t *testing.T) {
	e := newWatchEnv(t, 0)
	cases := []struct {
		name, path string
		header     http.Header
		status     int
		field      string
	}{
		{"index", watchSvc + "/instances?index=3", nil, 400, "index"},
		{"wait", watchSvc + "/instances?wait=1s", nil, 400, "wait"},
		{"consistency", watchSvc + "/instances?consistency=linearizable", nil, 400, "consistency"},
		{"healthy", watchSvc + "/instances?healthy=maybe", nil, 400, "healthy"},
		{"last event id", watchSvc + "/instances", http.Header{api.HeaderLastEventID: {"x"}}, 400, api.HeaderLastEventID},
		{"page", "/v1/namespaces/public/services?page=0", nil, 400, "page"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := e.open(c.path, c.header)
			if s.resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", s.resp.StatusCode, c.status)
			}
			var body api.ErrorBody
			raw, _ := io.ReadAll(s.resp.Body)
			if err := json.Unmarshal(raw, &body); err != nil || body.Error.Field != c.field {
				t.Fatalf("body %s: field %q, want %q", raw, body.Error.Field, c.field)
			}
		})
	}
}

func TestWatch_NoHubIsNotAcceptable(t *testing.T) {
	h, _, _ := newStoreAPI(t)
	req := httptest.NewRequest(http.MethodGet, watchSvc+"/instances", nil)
	req.Header.Set("Accept", api.MediaEventStream)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotAcceptable || !strings.Contains(rec.Body.String(), api.CodeNotAcceptable) {
		t.Fatalf("%d %s, want 406 not_acceptable", rec.Code, rec.Body)
	}
}

func TestWantsStream(t *testing.T) {
	cases := map[string]bool{
		"":                  false,
		"application/json":  false,
		"text/event-stream": true,
		"application/json, text/event-stream;q=0.5": true,
		"text/event-stream;q=0":                     false,
		"text/*":                                    false,
	}
	for accept, want := range cases {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		if got := wantsStream(r); got != want {
			t.Errorf("Accept %q: %v, want %v", accept, got, want)
		}
	}
}
