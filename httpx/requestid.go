package httpx

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/registry"
)

// HeaderRequestID carries a request's id: a client may send one, every answer has one,
// and a request forwarded to the leader carries it there.
const HeaderRequestID = "X-Request-Id"

// MaxRequestIDLen is the longest request id taken from a client.
const MaxRequestIDLen = 64

// LogKeyRequestID is the log attribute of a request's id.
const LogKeyRequestID = "request_id"

// WithRequestID returns ctx carrying request id id: the registry's, which a write or a
// read the registry hands to the leader takes along.
func WithRequestID(ctx context.Context, id string) context.Context {
	return registry.WithRequestID(ctx, id)
}

// RequestIDOf is the request id ctx carries ("" when none).
func RequestIDOf(ctx context.Context) string { return registry.RequestID(ctx) }

// ValidRequestID reports whether a client's request id can be kept: 1 to
// MaxRequestIDLen characters of A-Z, a-z, 0-9, '.', '_' and '-'.
func ValidRequestID(id string) bool {
	if id == "" || len(id) > MaxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// NewRequestID returns a fresh random request id (26 characters).
func NewRequestID() string { return rand.Text() }

// RequestIDs gives every request an id: the client's X-Request-Id when ValidRequestID
// accepts it, a new one otherwise. The id is set on the answer's X-Request-Id, carried
// by the request's context (RequestIDOf; the Forwarder sends it on to the leader), and
// added to every log line written with that context through a logger whose handler is
// wrapped by RequestIDLogs. With log at debug level, each request is also logged when
// it ends (method, path, status, duration).
func RequestIDs(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get(HeaderRequestID)
			if !ValidRequestID(id) {
				id = NewRequestID()
			}
			w.Header().Set(HeaderRequestID, id)
			ctx := WithRequestID(r.Context(), id)
			r = r.WithContext(ctx)
			if !log.Enabled(ctx, slog.LevelDebug) {
				next.ServeHTTP(w, r)
				return
			}
			start := time.Now()
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			defer func() {
				status := ww.Status()
				if status == 0 {
					status = http.StatusOK
				}
				args := []any{"method", r.Method, "path", r.URL.Path, "status", status,
					"duration_ms", float64(time.Since(start).Microseconds()) / 1000, "remote", r.RemoteAddr}
				if by := r.Header.Get(api.HeaderForwardedBy); by != "" {
					args = append(args, "forwarded_by", by)
				}
				log.DebugContext(ctx, "http request", args...)
			}()
			next.ServeHTTP(ww, r)
		})
	}
}

// RequestIDLogs wraps h so that every record logged with a context that carries a
// request id (the …Context methods of slog.Logger) gets a request_id attribute.
// Wrapping a handler twice adds the attribute once.
func RequestIDLogs(h slog.Handler) slog.Handler {
	if _, ok := h.(requestIDHandler); ok {
		return h
	}
	return requestIDHandler{h}
}

type requestIDHandler struct{ next slog.Handler }

func (h requestIDHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h requestIDHandler) Handle(ctx context.Context, rec slog.Record) error {
	if id := RequestIDOf(ctx); id != "" {
		rec.AddAttrs(slog.String(LogKeyRequestID, id))
	}
	return h.next.Handle(ctx, rec)
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.next.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.next.WithGroup(name)}
}
