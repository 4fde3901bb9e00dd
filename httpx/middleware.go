package httpx

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/rosterhq/roster/api"
)

// Recoverer answers a panicking handler through fail with a 500
// (http.ErrAbortHandler passes through).
func Recoverer(log *slog.Logger, fail ErrorWriter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						panic(v)
					}
					log.ErrorContext(r.Context(), "handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v)
					fail(w, r, fmt.Errorf("internal error: %v", v))
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// ServedBy names this node on every response (X-Roster-Served-By).
func ServedBy(id string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(api.HeaderServedBy, id)
			next.ServeHTTP(w, r)
		})
	}
}

// MethodNotAllowed answers a known route with a method it does not serve: it lists the
// methods mux serves on the path in the Allow header and answers ErrMethodNotAllowed
// through fail.
func MethodNotAllowed(mux *chi.Mux, fail ErrorWriter) http.HandlerFunc {
	methods := []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete}
	return func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.RawPath
		if path == "" {
			path = r.URL.Path
		}
		for _, m := range methods {
			if mux.Match(chi.NewRouteContext(), m, path) {
				w.Header().Add("Allow", m)
			}
		}
		fail(w, r, fmt.Errorf("%w: %s %s", ErrMethodNotAllowed, r.Method, r.URL.Path))
	}
}
