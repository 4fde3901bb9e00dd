package httpx

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/rosterhq/roster/api"
)

// ForwardBlocking serves a blocking read that the leader must answer without holding
// a connection to the leader while it waits: next first runs here against this node's
// own state (stale, its answer discarded) until the data read changes past the query's
// index or the wait ends, and only then is the read forwarded, no longer blocking. A
// follower's parked queries thus cost it a goroutine each and the leader nothing, where
// each used to hold a follower→leader connection for up to the whole wait.
func (f *Forwarder) ForwardBlocking(w http.ResponseWriter, r *http.Request, o ReadOptions, next http.Handler, fail ErrorWriter) {
	// The local state must hold the writes this node forwarded: a client that wrote
	// through this node and then waits for a change past the index it was answered
	// would otherwise find its own write missing here (a read that fails at once, not
	// parked). When the node cannot catch up, the read goes to the leader unparked.
	caughtUp := true
	if f.cfg.CatchUp != nil {
		ctx, cancel := context.WithTimeout(r.Context(), max(f.cfg.RequestTimeout, time.Second))
		caughtUp = f.cfg.CatchUp(ctx, f.LastWriteIndex()) == nil
		cancel()
	}
	if r.Context().Err() != nil {
		return
	}
	if caughtUp {
		local := o
		local.Mode = api.ConsistencyStale
		parked := &discardResponse{h: http.Header{}}
		next.ServeHTTP(parked, WithReadOptions(r, local))
		if r.Context().Err() != nil {
			return
		}
		if parked.status == http.StatusTooManyRequests {
			// No place to wait here: the client retries later, as it would at the leader.
			for _, k := range []string{"Retry-After", "Content-Type"} {
				if v := parked.h.Get(k); v != "" {
					w.Header().Set(k, v)
				}
			}
			w.WriteHeader(parked.status)
			_, _ = w.Write(parked.body)
			return
		}
	}
	q := r.URL.Query()
	q.Del("index")
	q.Del("wait")
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = q.Encode()
	r2.RequestURI = ""
	o.Blocking, o.Index = false, 0
	f.Forward(w, WithReadOptions(r2, o), next, fail)
}

// discardResponse is the answer of a parked read: only its status is kept, and the
// body of a refusal (small).
type discardResponse struct {
	h      http.Header
	status int
	body   []byte
}

func (d *discardResponse) Header() http.Header { return d.h }

func (d *discardResponse) Write(b []byte) (int, error) {
	if d.status == 0 {
		d.status = http.StatusOK
	}
	if d.status >= 400 && len(d.body) < 4096 {
		d.body = append(d.body, b[:min(len(b), 4096-len(d.body))]...)
	}
	return io.Discard.Write(b)
}

func (d *discardResponse) WriteHeader(status int) {
	if d.status == 0 {
		d.status = status
	}
}
