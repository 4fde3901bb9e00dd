package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
)

func TestReadStream_Parses(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string // "event id data"
	}{
		{"lf", "id: 3\nevent: instances\ndata: {\"index\":3}\n\n", []string{"instances 3 {\"index\":3}"}},
		{"crlf", "id: 4\r\nevent: instances\r\ndata: x\r\n\r\n", []string{"instances 4 x"}},
		{"cr", "id: 5\revent: not_found\rdata: y\r\r", []string{"not_found 5 y"}},
		{"multi-line data", "event: e\ndata: a\ndata: b\n\n", []string{"e 0 a\nb"}},
		{"comments and retry", ": keep-alive\n\nretry: 100\nid: 7\nevent: e\ndata: z\n\n: keep-alive\n\n", []string{"e 7 z"}},
		{"id persists", "id: 9\nevent: e\ndata: 1\n\nevent: e\ndata: 2\n\n", []string{"e 9 1", "e 9 2"}},
		{"no space after colon", "id:10\nevent:e\ndata:q\n\n", []string{"e 10 q"}},
		{"default event", "data: m\n\n", []string{"message 0 m"}},
		{"incomplete last event", "id: 1\nevent: e\ndata: 1\n\nid: 2\nevent: e\ndata: 2\n", []string{"e 1 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			last, _, err := readStream(strings.NewReader(c.in), 0, func(ev sseEvent) (uint64, error) {
				got = append(got, fmt.Sprintf("%s %d %s", ev.event, ev.id, ev.data))
				return ev.id, nil
			})
			if !errors.Is(err, io.EOF) {
				t.Fatalf("err %v, want EOF", err)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("events %q, want %q", got, c.want)
			}
			if len(got) > 0 && last == 0 && strings.Contains(c.in, "id:") {
				t.Fatalf("last index not tracked")
			}
		})
	}
}

// fakeStreamServer serves a stream of instance events; each connection gets the events
// after the Last-Event-ID it sent, then is cut when drop is set.
type fakeStreamServer struct {
	mu      sync.Mutex
	lastIDs []string
	events  []uint64
	cut     bool
}

func (f *fakeStreamServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Accept") != api.MediaEventStream {
		http.Error(w, "want a stream", http.StatusNotAcceptable)
		return
	}
	f.mu.Lock()
	f.lastIDs = append(f.lastIDs, r.Header.Get(api.HeaderLastEventID))
	events, cut := f.events, f.cut
	f.mu.Unlock()
	w.Header().Set("Content-Type", api.MediaEventStream)
	var from uint64
	fmt.Sscan(r.Header.Get(api.HeaderLastEventID), &from)
	for _, idx := range events {
		if idx <= from {
			continue
		}
		fmt.Fprintf(w, "id: %d\nevent: instances\ndata: {\"index\":%d,\"instances\":[]}\n\n", idx, idx)
	}
	w.(http.Flusher).Flush()
	if cut {
		return // the stream ends: the client must reconnect
	}
	<-r.Context().Done()
}

func TestWatchInstances_ReconnectsWithLastEventID(t *testing.T) {
	f := &fakeStreamServer{events: []uint64{5, 6}, cut: true}
	srv := httptest.NewServer(f)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := New(srv.URL).WatchInstances(ctx, "public", "DEFAULT_GROUP", "orders",
		WatchOptions{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	recv := func() InstancesEvent {
		select {
		case ev := <-ch:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
		}
		return InstancesEvent{}
	}
	if a, b := recv(), recv(); a.Index != 5 || b.Index != 6 {
		t.Fatalf("events %d, %d; want 5, 6", a.Index, b.Index)
	}
	f.mu.Lock()
	f.events = append(f.events, 7)
	f.cut = false
	f.mu.Unlock()
	if ev := recv(); ev.Index != 7 || ev.Err != nil {
		t.Fatalf("after reconnecting: %+v, want index 7", ev)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.lastIDs) < 2 || f.lastIDs[0] != "" || f.lastIDs[len(f.lastIDs)-1] != "6" {
		t.Fatalf("Last-Event-ID headers %q: want none first, then 6", f.lastIDs)
	}
}

func TestWatchInstances_RefusedRequestIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"code":"invalid_argument","message":"bad","field":"healthy"}}`)
	}))
	defer srv.Close()
	_, err := New(srv.URL).WatchInstances(context.Background(), "public", "DEFAULT_GROUP", "orders", WatchOptions{})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Field != "healthy" {
		t.Fatalf("err %v, want the API error naming healthy", err)
	}
}

func TestWatchInstances_FallsBackToTheNextAddress(t *testing.T) {
	f := &fakeStreamServer{events: []uint64{3}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadAddr := dead.URL
	dead.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := New(deadAddr).WatchInstances(ctx, "public", "DEFAULT_GROUP", "orders", WatchOptions{Fallback: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Index != 3 || ev.Node != srv.URL {
			t.Fatalf("event %+v, want index 3 from %s", ev, srv.URL)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	cancel()
	for range ch {
	}
}
