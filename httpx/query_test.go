package httpx

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
)

// TestCheckQuery refuses what url.ParseQuery refuses or would drop, and text that is
// not UTF-8, naming the parameter when it can.
func TestCheckQuery(t *testing.T) {
	for _, tc := range []struct{ query, field string }{
		{"", ""},
		{"a=1&b=&c&&d=%41%20+", ""},
		{"name=%C3%A9%F0%9F%98%80", ""},
		{"x=%zz", "x"},
		{"x=1&cas=%zz0", "cas"},
		{"x=%", "x"},
		{"%zz=1", "query"},
		{"a=1;b=2", "query"},
		{"a=1&b=2;", "query"},
		{"x=%FF", "x"},
		{"x=%ED%A0%80", "x"},
		{"%FF=1", "query"},
		{"=%zz", "query"},
	} {
		err := CheckQuery(tc.query)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.query, err)
			}
			continue
		}
		var ve *model.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%q: %v, want a validation error naming %q", tc.query, err, tc.field)
		}
	}
}

// TestStrictQuery_RefusesBeforeTheHandler checks the middleware answers a malformed
// query through the API's error writer and never runs the handler.
func TestStrictQuery_RefusesBeforeTheHandler(t *testing.T) {
	ran := false
	h := StrictQuery(func(w http.ResponseWriter, _ *http.Request, err error) {
		status, _, field := Classify(err)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, field)
	})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/x?cas=%zz", nil))
	if rec.Code != http.StatusBadRequest || rec.Body.String() != "cas" || ran {
		t.Fatalf("%d %q, handler ran %v", rec.Code, rec.Body, ran)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/x?cas=0", nil))
	if rec.Code != http.StatusOK || !ran {
		t.Fatalf("%d, handler ran %v", rec.Code, ran)
	}
}

// TestPageOffset refuses a page whose offset overflows or passes MaxPageOffset.
func TestPageOffset(t *testing.T) {
	const maxInt = int(^uint(0) >> 1)
	for _, tc := range []struct {
		page, size, off int
		ok              bool
	}{
		{1, 100, 0, true},
		{3, 100, 200, true},
		{1, maxInt, 0, true},
		{maxInt, 0, 0, true},
		{MaxPageOffset + 1, 1, MaxPageOffset, true},
		{MaxPageOffset + 2, 1, 0, false},
		{4611686018427387905, 1000, 0, false}, // (page-1)*size wraps around to 0
		{maxInt, maxInt, 0, false},
		{2, maxInt, 0, false},
		{0, 10, 0, false},
		{-1, 10, 0, false},
	} {
		off, err := PageOffset("page", tc.page, tc.size)
		var ve *model.ValidationError
		switch {
		case tc.ok && (err != nil || off != tc.off):
			t.Errorf("page %d size %d: %d %v, want %d", tc.page, tc.size, off, err, tc.off)
		case !tc.ok && (!errors.As(err, &ve) || ve.Field != "page"):
			t.Errorf("page %d size %d: %d %v, want a refusal naming page", tc.page, tc.size, off, err)
		}
	}
}

// fixedLeader is a follower that knows the leader at addr.
type fixedLeader struct{ addr string }

func (n fixedLeader) IsLeader() bool { return false }
func (n fixedLeader) Leader() (model.Member, bool) {
	return model.Member{ID: "leader", HTTPAddr: n.addr}, true
}

// TestForward_KeepsTheRawQuery checks a forwarded request reaches the leader with its
// query string byte for byte: httputil.ReverseProxy drops the parameters it cannot
// parse, which made a follower forward a request other than the one it received.
func TestForward_KeepsTheRawQuery(t *testing.T) {
	got := make(chan string, 1)
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.RawQuery
	}))
	t.Cleanup(leader.Close)
	met, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewForwarder(ForwarderConfig{Node: fixedLeader{addr: strings.TrimPrefix(leader.URL, "http://")}, NodeID: "follower",
		Metrics: met, RequestTimeout: 5 * time.Second, LeaderHold: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.CloseIdleConnections)
	const raw = "cas=%zz0&a=1;b=2&c=%FF&d=ok"
	rec := httptest.NewRecorder()
	f.Forward(rec, httptest.NewRequest(http.MethodPut, "/x?"+raw, nil), nil, func(_ http.ResponseWriter, _ *http.Request, err error) {
		t.Errorf("forwarding failed: %v", err)
	})
	if q := <-got; q != raw {
		t.Fatalf("the leader got ?%s, the follower ?%s", q, raw)
	}
}

// TestForwardBlocking_ParksOnlyAfterCatchingUpWithForwardedWrites checks a blocking
// read parked on a follower first waits until the follower has applied the writes it
// forwarded: otherwise a client that wrote through it finds its own write missing
// there, and its blocking query returns at once.
func TestForwardBlocking_ParksOnlyAfterCatchingUpWithForwardedWrites(t *testing.T) {
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.HeaderIndex, "42")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(leader.Close)
	met, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var caughtUpTo atomic.Uint64
	f, err := NewForwarder(ForwarderConfig{Node: fixedLeader{addr: strings.TrimPrefix(leader.URL, "http://")}, NodeID: "follower",
		Metrics: met, RequestTimeout: 5 * time.Second, LeaderHold: time.Second,
		CatchUp: func(_ context.Context, min uint64) error { caughtUpTo.Store(min); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.CloseIdleConnections)
	fail := func(_ http.ResponseWriter, _ *http.Request, err error) { t.Errorf("forwarding failed: %v", err) }
	// A write forwarded through this node, acknowledged at 42.
	f.Forward(httptest.NewRecorder(), httptest.NewRequest(http.MethodPut, "/x", nil), nil, fail)
	if f.LastWriteIndex() != 42 {
		t.Fatalf("last forwarded write %d, want 42", f.LastWriteIndex())
	}
	var sawCatchUp uint64
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sawCatchUp == 0 {
			sawCatchUp = caughtUpTo.Load() // the parked run, before the forward
		}
		w.WriteHeader(http.StatusOK)
	})
	o := ReadOptions{Mode: api.ConsistencyLinearizable, Blocking: true, Index: 42, Wait: time.Second}
	req := httptest.NewRequest(http.MethodGet, "/x?index=42&wait=1s", nil)
	f.ForwardBlocking(httptest.NewRecorder(), WithReadOptions(req, o), o, local, fail)
	if sawCatchUp != 42 {
		t.Fatalf("the parked read ran after catching up to %d, want 42", sawCatchUp)
	}
}
