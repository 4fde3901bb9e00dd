package httpx

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/registry"
)

// ReadOptions are the query parameters every read accepts.
type ReadOptions struct {
	// Mode is linearizable, leader or stale.
	Mode string
	// Blocking is set by ?index=: wait until the data read has an index > Index.
	Blocking bool
	Index    uint64
	// Wait bounds a blocking query (before jitter).
	Wait time.Duration
}

// Registry returns the options as the registry takes them.
func (o ReadOptions) Registry() registry.ReadOptions {
	return registry.ReadOptions{Consistency: registry.Consistency(o.Mode), Blocking: o.Blocking, MinIndex: o.Index, Wait: o.Wait}
}

type readOptionsKey struct{}

// ParseReadOptions parses ?consistency= (default mode), ?index= and ?wait=. Invalid
// values are 400s naming the parameter. A wait above maxWait is lowered to it; a wait
// without an index is checked but has no effect.
func ParseReadOptions(r *http.Request, mode string, maxWait time.Duration) (ReadOptions, error) {
	q := r.URL.Query()
	o := ReadOptions{Mode: mode, Wait: maxWait}
	if q.Has("consistency") {
		switch m := q.Get("consistency"); m {
		case api.ConsistencyLinearizable, api.ConsistencyLeader, api.ConsistencyStale:
			o.Mode = m
		default:
			return o, Invalid("consistency", "must be linearizable, leader or stale, got %q", m)
		}
	}
	if q.Has("index") {
		v := q.Get("index")
		idx, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return o, Invalid("index", "must be a non-negative integer, got %q", v)
		}
		o.Blocking, o.Index = true, idx
	}
	if q.Has("wait") {
		v := q.Get("wait")
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return o, Invalid("wait", "must be a positive duration such as 30s, got %q", v)
		}
		o.Wait = min(d, maxWait)
	}
	return o, nil
}

// WithReadOptions returns r carrying o, for the handler and for Forward's timeout.
func WithReadOptions(r *http.Request, o ReadOptions) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), readOptionsKey{}, o))
}

// ReadOptionsOf returns the options WithReadOptions attached, or def.
func ReadOptionsOf(r *http.Request, def ReadOptions) ReadOptions {
	if o, ok := r.Context().Value(readOptionsKey{}).(ReadOptions); ok {
		return o
	}
	return def
}

// LeaderInfo is what the read headers report about this node's view of the leader.
type LeaderInfo interface {
	KnownLeader() bool
	// LastContact is the time since this node last heard from the leader (0 on the
	// leader, negative if it never did).
	LastContact() time.Duration
}

// SetLeaderHeaders sets X-Roster-Consistency, -Known-Leader and -Last-Contact (in
// milliseconds; -1 when this node never heard from a leader).
func SetLeaderHeaders(w http.ResponseWriter, n LeaderInfo, mode string) {
	h := w.Header()
	h.Set(api.HeaderConsistency, mode)
	h.Set(api.HeaderKnownLeader, strconv.FormatBool(n.KnownLeader()))
	lc := int64(-1)
	if d := n.LastContact(); d >= 0 {
		lc = d.Milliseconds()
	}
	h.Set(api.HeaderLastContact, strconv.FormatInt(lc, 10))
}

// SetIndex sets X-Roster-Index.
func SetIndex(w http.ResponseWriter, idx uint64) {
	w.Header().Set(api.HeaderIndex, strconv.FormatUint(idx, 10))
}

// Read runs fn through reg under the request's read options (WithReadOptions, else
// def) and sets the read headers: X-Roster-Consistency, -Known-Leader, -Last-Contact
// and, on success, X-Roster-Index.
func Read(w http.ResponseWriter, r *http.Request, reg *registry.Registry, n LeaderInfo, def ReadOptions,
	fn func(ws *registry.WatchSet) (uint64, error)) (uint64, error) {
	return ReadIn(w, r, reg, n, def, "", fn)
}

// ReadIn is Read of namespace ns's data (ns "": none): the registry checks read access
// to the namespace fn reads (registry.ReadOptions.Namespace), whatever the route's
// permission named, as well as the route's.
func ReadIn(w http.ResponseWriter, r *http.Request, reg *registry.Registry, n LeaderInfo, def ReadOptions, ns string,
	fn func(ws *registry.WatchSet) (uint64, error)) (uint64, error) {
	o := ReadOptionsOf(r, def)
	SetLeaderHeaders(w, n, o.Mode)
	ro := o.Registry()
	ro.Permission = PermissionOf(r)
	ro.Namespace = ns
	idx, err := reg.Read(r.Context(), ro, fn)
	if err != nil {
		if errors.Is(err, registry.ErrTooManyWatchers) {
			w.Header().Set("Retry-After", strconv.Itoa(registry.WatchRetryAfter))
		}
		return 0, err
	}
	SetIndex(w, idx)
	return idx, nil
}
