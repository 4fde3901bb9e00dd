package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// readOptions are the query parameters every read accepts.
type readOptions struct {
	// mode is linearizable, leader or stale.
	mode string
	// blocking is set by ?index=: wait until the data read has an index > index.
	blocking bool
	index    uint64
	// wait bounds a blocking query (before jitter).
	wait time.Duration
}

type readOptionsKey struct{}

// parseReadOptions parses ?consistency= (default linearizable), ?index= and ?wait=.
// Invalid values are 400s naming the parameter. A wait above Config.MaxWait is lowered
// to it; a wait without an index is checked but has no effect.
func (s *server) parseReadOptions(r *http.Request) (readOptions, error) {
	q := r.URL.Query()
	o := readOptions{mode: api.ConsistencyLinearizable, wait: s.cfg.MaxWait}
	if q.Has("consistency") {
		switch m := q.Get("consistency"); m {
		case api.ConsistencyLinearizable, api.ConsistencyLeader, api.ConsistencyStale:
			o.mode = m
		default:
			return o, invalid("consistency", "must be linearizable, leader or stale, got %q", m)
		}
	}
	if q.Has("index") {
		v := q.Get("index")
		idx, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return o, invalid("index", "must be a non-negative integer, got %q", v)
		}
		o.blocking, o.index = true, idx
	}
	if q.Has("wait") {
		v := q.Get("wait")
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return o, invalid("wait", "must be a positive duration such as 30s, got %q", v)
		}
		o.wait = min(d, s.cfg.MaxWait)
	}
	return o, nil
}

// readOpts returns the options readRoute parsed, or the defaults.
func (s *server) readOpts(r *http.Request) readOptions {
	if o, ok := r.Context().Value(readOptionsKey{}).(readOptions); ok {
		return o
	}
	return readOptions{mode: api.ConsistencyLinearizable, wait: s.cfg.MaxWait}
}

// readRoute parses the read options (400 when invalid) and sends reads that need the
// leader (linearizable, leader) to it when this node is a follower.
func (s *server) readRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o, err := s.parseReadOptions(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), readOptionsKey{}, o))
		if o.mode == api.ConsistencyStale || s.node.IsLeader() {
			next.ServeHTTP(w, r)
			return
		}
		s.forward(w, r, next)
	})
}

// read runs fn under the request's consistency and blocking options and sets the read
// headers. fn keeps what it read in its closure; the last run's data is what the
// handler answers with.
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

func (s *server) read(w http.ResponseWriter, r *http.Request, fn func(ws *store.WatchSet) (uint64, error)) (uint64, error) {
	o := s.readOpts(r)
	s.setLeaderHeaders(w, o.mode)
	idx, err := s.reg.Read(r.Context(), registry.ReadOptions{
		Consistency: registry.Consistency(o.mode), Blocking: o.blocking, MinIndex: o.index, Wait: o.wait,
	}, fn)
	if err != nil {
		return 0, err
	}
	setIndex(w, idx)
	return idx, nil
}

// setLeaderHeaders sets X-Roster-Consistency, -Known-Leader and -Last-Contact (in
// milliseconds; -1 when this node never heard from a leader).
func (s *server) setLeaderHeaders(w http.ResponseWriter, mode string) {
	h := w.Header()
	h.Set(api.HeaderConsistency, mode)
	h.Set(api.HeaderKnownLeader, strconv.FormatBool(s.node.KnownLeader()))
	lc := int64(-1) // never heard from a leader
	if d := s.node.LastContact(); d >= 0 {
		lc = d.Milliseconds()
	}
	h.Set(api.HeaderLastContact, strconv.FormatInt(lc, 10))
}

// setIndex sets X-Roster-Index.
func setIndex(w http.ResponseWriter, idx uint64) {
	w.Header().Set(api.HeaderIndex, strconv.FormatUint(idx, 10))
}
