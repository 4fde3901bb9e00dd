package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fsm"
)

// benchNode is a leader whose Apply acknowledges every command without keeping it.
type benchNode struct{ *fakeNode }

func (benchNode) Apply(context.Context, fsm.Command) (uint64, error) { return 100, nil }

// BenchmarkACLChecks is the cost of a request's access checks through the whole router
// with ACLs on and a token: a register (route check, body, the registry's write check,
// an Apply that does nothing) and a stale instance list (route check, the registry's
// read check, the cached encoded view). Run on two revisions to compare their checks
// (docs/benchmarks.md).
func BenchmarkACLChecks(b *testing.B) {
	a := newACLAPIOn(b, benchNode{newLeaderNode("n1")})
	body := []byte(`{"weight":2,"metadata":{"version":"v1"}}`)
	b.Run("register", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodPut, "/v1/namespaces/public/groups/DEFAULT_GROUP/services/svc/instances/127.0.0.1:2", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(api.HeaderToken, a.writer)
			w := &discardWriter{header: http.Header{}}
			a.h.ServeHTTP(w, req)
			if w.code != 0 && w.code != http.StatusOK {
				b.Fatalf("register: %d", w.code)
			}
		}
	})
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodGet, "/v1/namespaces/public/groups/DEFAULT_GROUP/services/svc/instances?consistency=stale", nil)
			req.Header.Set(api.HeaderToken, a.reader)
			w := &discardWriter{header: http.Header{}}
			a.h.ServeHTTP(w, req)
			if w.code != 0 && w.code != http.StatusOK {
				b.Fatalf("read: %d", w.code)
			}
		}
	})
}

// BenchmarkDecodePathParams is what decodePathParams adds to a request of a route with
// five path parameters: nothing but a check for a path in the default escaping (every
// client's, unless it encodes letters), one decoding per parameter otherwise.
func BenchmarkDecodePathParams(b *testing.B) {
	s := &server{}
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	h := s.decodePathParams(next)
	for _, tc := range []struct{ name, raw string }{
		{"plain", ""},
		{"encoded", "/v1/namespaces/s%65cret/groups/DEFAULT_GROUP/services/svc/clusters/DEFAULT/instances/127.0.0.1:1"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/v1/namespaces/secret/groups/DEFAULT_GROUP/services/svc/clusters/DEFAULT/instances/127.0.0.1:1", nil)
			req.URL.RawPath = tc.raw
			rctx := chi.NewRouteContext()
			req = req.WithContext(context.WithValue(req.Context(), chi.RouteCtxKey, rctx))
			values := []string{"s%65cret", "DEFAULT_GROUP", "svc", "DEFAULT", "127.0.0.1:1"}
			b.ReportAllocs()
			for b.Loop() {
				rctx.URLParams.Keys = append(rctx.URLParams.Keys[:0], "ns", "group", "service", "cluster", "addr")
				rctx.URLParams.Values = append(rctx.URLParams.Values[:0], values...)
				h.ServeHTTP(nil, req)
			}
		})
	}
}
