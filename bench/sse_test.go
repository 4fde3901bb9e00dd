package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptedSSE serves a fixed answer to every request.
func scriptedSSE(t *testing.T, status int, ctype, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/status/leader" {
			http.Error(w, "not used", http.StatusInternalServerError)
			return
		}
		if got := r.Header.Get("Accept"); got != "text/event-stream" {
			t.Errorf("Accept %q", got)
		}
		if r.URL.RawQuery != "" {
			t.Errorf("query %q: the SSE watch takes no consistency or index", r.URL.RawQuery)
		}
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRosterSSEWatch_ScriptedStreams(t *testing.T) {
	inst := func(idx int) string { return fmt.Sprintf(`{"service":{"name":"s"},"index":%d,"instances":[]}`, idx) }
	cases := []struct {
		name    string
		status  int
		ctype   string
		body    string
		want    []uint64
		wantErr string
	}{
		{name: "events then end of stream", status: 200, ctype: "text/event-stream",
			body: "id: 3\nevent: instances\ndata: " + inst(3) + "\n\n: keep-alive\n\nid: 5\nevent: instances\ndata: " + inst(5) + "\n\n",
			want: []uint64{3, 5}, wantErr: "ended by the server after 2 events"},
		{name: "CRLF, charset, retry and JSON over several data lines", status: 200, ctype: "text/event-stream; charset=utf-8",
			body: "retry: 2000\r\nid: 9\r\nevent: instances\r\ndata: {\"index\":\r\ndata: 9,\r\ndata: \"instances\":[]}\r\n\r\n",
			want: []uint64{9}, wantErr: "after 1 events"},
		{name: "not_found is a state at its index", status: 200, ctype: "text/event-stream",
			body: "id: 4\nevent: not_found\ndata: {\"error\":{\"code\":\"not_found\",\"message\":\"no\"}}\n\nid: 6\nevent: instances\ndata: " + inst(6) + "\n\n",
			want: []uint64{4, 6}, wantErr: "after 2 events"},
		{name: "id and data index disagree", status: 200, ctype: "text/event-stream",
			body:    "id: 8\nevent: instances\ndata: " + inst(7) + "\n\n",
			wantErr: "id 8 but data index 7"},
		{name: "id missing", status: 200, ctype: "text/event-stream",
			body:    "event: instances\ndata: " + inst(7) + "\n\n",
			wantErr: `id "" is not an index`},
		{name: "data without index", status: 200, ctype: "text/event-stream",
			body:    "id: 2\nevent: instances\ndata: {\"instances\":[]}\n\n",
			wantErr: "data has no index"},
		{name: "broken JSON", status: 200, ctype: "text/event-stream",
			body:    "id: 2\nevent: instances\ndata: {\"index\":2\n\n",
			wantErr: "decode data"},
		{name: "unexpected event type", status: 200, ctype: "text/event-stream",
			body:    "id: 2\ndata: " + inst(2) + "\n\n",
			wantErr: `unexpected event type "message"`},
		{name: "server without the SSE watch answers JSON", status: 200, ctype: "application/json",
			body:    inst(3),
			wantErr: "answered 200 with application/json"},
		{name: "server refuses the Accept header", status: 406, ctype: "application/json",
			body:    `{"error":{"code":"not_acceptable"}}`,
			wantErr: "answered 406"},
		{name: "other refusals carry their status", status: 503, ctype: "application/json",
			body:    `{"error":{"code":"unavailable"}}`,
			wantErr: "http 503"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := scriptedSSE(t, tc.status, tc.ctype, tc.body)
			c := mustNewClient(t, ClientConfig{System: SystemRoster, Endpoints: []string{srv.URL},
				WriteTarget: TargetAll, ReadTarget: TargetAll, WatchTransport: WatchSSE})
			var got []uint64
			err := c.Watch(testCtx(t), 0, "s", Stale, func(i uint64, _ time.Time) { got = append(got, i) })
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("seen %v, want %v", got, tc.want)
			}
			noSSE := tc.status == 406 || (tc.status == 200 && tc.ctype == "application/json")
			if noSSE != errors.Is(err, errNoSSE) || noSSE != strings.Contains(err.Error(), "--watch-transport blocking") {
				t.Errorf("err %v: want it to say the server lacks the SSE watch: %v", err, noSSE)
			}
		})
	}
}

func TestRosterSSEWatch_RejectsModesOtherThanStale(t *testing.T) {
	srv := newFakeRoster(t, newFakeStore())
	c := mustNewClient(t, ClientConfig{System: SystemRoster, Endpoints: []string{srv.URL}})
	for _, m := range []string{Linearizable, Leader} {
		err := c.Watch(testCtx(t), 0, "s", m, func(uint64, time.Time) { t.Error("seen called") })
		if !errors.Is(err, errSSEStale) {
			t.Errorf("%s: err %v", m, err)
		}
	}
	cfg := SuiteConfig{Client: ClientConfig{System: SystemRoster, Endpoints: []string{srv.URL}},
		Workloads: []string{WorkloadWatch}, Consistencies: []string{Stale, Linearizable}, Concurrency: []int{1}, Duration: time.Second}
	if err := cfg.Validate(); !errors.Is(err, errSSEStale) {
		t.Errorf("suite with a linearizable SSE watch: %v", err)
	}
	cfg.Client.WatchTransport = WatchBlocking
	if err := cfg.Validate(); err != nil {
		t.Errorf("suite with a linearizable blocking watch: %v", err)
	}
	cfg.Client.WatchTransport = "poll"
	if err := cfg.Validate(); err == nil {
		t.Error("unknown watch transport accepted")
	}
}

// TestRosterSSEWatch_FollowsChangesInEveryStreamShape runs the client against a fake
// server that streams real changes, in every shape of the format.
func TestRosterSSEWatch_FollowsChangesInEveryStreamShape(t *testing.T) {
	for name, o := range map[string]fakeSSE{
		"plain": {}, "crlf": {crlf: true}, "pretty": {pretty: true}, "crlf pretty retry": {crlf: true, pretty: true, retry: 3000},
	} {
		t.Run(name, func(t *testing.T) {
			st := newFakeStore()
			srv := newFakeRosterSSE(t, st, o)
			c := mustNewClient(t, ClientConfig{System: SystemRoster, Endpoints: []string{srv.URL}})
			ctx := testCtx(t)
			seen := make(chan uint64, 16)
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- c.Watch(wctx, 0, "orders", Stale, func(i uint64, _ time.Time) { seen <- i }) }()
			recv := func() uint64 {
				select {
				case i := <-seen:
					return i
				case err := <-done:
					t.Fatalf("watch ended: %v", err)
				case <-ctx.Done():
					t.Fatal("no event")
				}
				return 0
			}
			// The service does not exist yet: a not_found state at the store's index.
			if got := recv(); got != 1 {
				t.Fatalf("first state %d, want the not_found index 1", got)
			}
			k := InstanceKey{Service: "orders", IP: "127.100.0.1", Port: 8080}
			for gen := uint64(1); gen <= 3; gen++ {
				idx, err := c.Register(ctx, 0, k, gen)
				if err != nil {
					t.Fatal(err)
				}
				if got := recv(); got != idx {
					t.Fatalf("saw %d, want %d", got, idx)
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("watch returned %v after cancel", err)
			}
		})
	}
}

// TestRosterSSEWatch_OneStreamPerWatcherOverEveryEndpoint checks that N concurrent
// watchers with --read-target all are N connections, spread evenly over the endpoints.
func TestRosterSSEWatch_OneStreamPerWatcherOverEveryEndpoint(t *testing.T) {
	const perEndpoint = 7
	st := newFakeStore()
	st.put("orders", "127.100.0.1:80", []byte("{}"))
	var counts []*streamCount
	var eps []string
	for i := 0; i < 3; i++ {
		sc := newStreamCount()
		counts = append(counts, sc)
		eps = append(eps, newFakeRosterSSE(t, st, fakeSSE{streams: sc}).URL)
	}
	c := mustNewClient(t, ClientConfig{System: SystemRoster, Endpoints: eps, WriteTarget: TargetAll, ReadTarget: TargetAll, MaxConns: 2})
	ctx, cancel := context.WithCancel(testCtx(t))
	var wg sync.WaitGroup
	for w := 0; w < perEndpoint*len(eps); w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			if err := c.Watch(ctx, w, "orders", Stale, func(uint64, time.Time) {}); err != nil {
				t.Errorf("watcher %d: %v", w, err)
			}
		}(w)
	}
	for i, sc := range counts {
		for {
			open, ch := sc.snapshot()
			if len(open) == perEndpoint {
				for addr, n := range open {
					if n != 1 {
						t.Errorf("endpoint %d: %d streams on one connection %s", i, n, addr)
					}
				}
				break
			}
			if len(open) > perEndpoint {
				t.Fatalf("endpoint %d: %d connections, want %d", i, len(open), perEndpoint)
			}
			select {
			case <-ch:
			case <-ctx.Done():
				t.Fatalf("endpoint %d: %d streams open, want %d", i, len(open), perEndpoint)
			}
		}
	}
	cancel()
	wg.Wait()
}
