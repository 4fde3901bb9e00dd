package httpapi

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/store"
)

// parseReadOptions parses ?consistency= (default linearizable), ?index= and ?wait=
// (bounded by Config.MaxWait).
func (s *server) parseReadOptions(r *http.Request) (httpx.ReadOptions, error) {
	return httpx.ParseReadOptions(r, api.ConsistencyLinearizable, s.cfg.MaxWait)
}

// defaultReadOptions are the options of a read without parameters.
func (s *server) defaultReadOptions() httpx.ReadOptions {
	return httpx.ReadOptions{Mode: api.ConsistencyLinearizable, Wait: s.cfg.MaxWait}
}

// readRoute parses the read options (400 when invalid) and serves the read here unless
// it needs the leader and the registry cannot reach it itself (httpx.ReadsHere).
func (s *server) readRoute(next http.Handler) http.Handler { return s.readRouteOf(false)(next) }

// leaderStateRoute is readRoute for a read of what only the leader knows besides the
// replicated state (the members' progress and last contact): unless stale, it is served
// by the leader, forwarded there from a follower.
func (s *server) leaderStateRoute(next http.Handler) http.Handler { return s.readRouteOf(true)(next) }

func (s *server) readRouteOf(leaderState bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler { return s.readRouteAt(leaderState, next) }
}

func (s *server) readRouteAt(leaderState bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wantsStream(r) && streamable(r) {
			// Streams are served from this node's state, never forwarded; the
			// handler checks their parameters.
			next.ServeHTTP(w, r)
			return
		}
		o, err := s.parseReadOptions(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		r = httpx.WithReadOptions(r, o)
		if o.Mode == api.ConsistencyStale || s.node.IsLeader() || (!leaderState && httpx.ReadsHere(s.reg, o)) {
			next.ServeHTTP(w, r)
			return
		}
		if o.Blocking {
			s.fwd.ForwardBlocking(w, r, o, next, s.writeError)
			return
		}
		s.fwd.Forward(w, r, next, s.writeError)
	})
}

// readValue is s.read for a fetch that also returns the value read: it returns the
// index and the value of the fetch that served the request.
func readValue[T any](s *server, w http.ResponseWriter, r *http.Request, fetch func(ws *store.WatchSet) (uint64, T, error)) (uint64, T, error) {
	var v T
	idx, err := s.read(w, r, func(ws *store.WatchSet) (uint64, error) {
		i, got, err := fetch(ws)
		v = got
		return i, err
	})
	return idx, v, err
}

// readValueIn is readValue of namespace ns's data: the registry checks read access to
// ns, the namespace fetch reads.
func readValueIn[T any](s *server, w http.ResponseWriter, r *http.Request, ns string, fetch func(ws *store.WatchSet) (uint64, T, error)) (uint64, T, error) {
	var v T
	idx, err := s.readIn(w, r, ns, func(ws *store.WatchSet) (uint64, error) {
		i, got, err := fetch(ws)
		v = got
		return i, err
	})
	return idx, v, err
}

// readIn is read of namespace ns's data (registry.ReadOptions.Namespace).
func (s *server) readIn(w http.ResponseWriter, r *http.Request, ns string, fn func(ws *store.WatchSet) (uint64, error)) (uint64, error) {
	return httpx.ReadIn(w, r, s.reg, s.node, s.defaultReadOptions(), ns, fn)
}

// read runs fn through the registry under the request's consistency and blocking
// options and sets the read headers. fn keeps what it read in its closure; the last
// run's data is what the handler answers with.
func (s *server) read(w http.ResponseWriter, r *http.Request, fn func(ws *store.WatchSet) (uint64, error)) (uint64, error) {
	return httpx.Read(w, r, s.reg, s.node, s.defaultReadOptions(), fn)
}

// streamable reports whether the route serves streams (the instance list and the
// service list).
func streamable(r *http.Request) bool {
	p := chi.RouteContext(r.Context()).RoutePattern()
	return strings.HasSuffix(p, "/services/{service}/instances") || strings.HasSuffix(p, "/{ns}/services")
}
