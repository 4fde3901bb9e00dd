package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// Errors the API raises itself. Each maps to one status code in classify.
var (
	// errUnsupportedMedia: a request body that is not application/json (415).
	errUnsupportedMedia = errors.New("unsupported content type")
	// errBodyTooLarge: a request body over Config.MaxBodyBytes (413).
	errBodyTooLarge = errors.New("request body too large")
	// errMethodNotAllowed: the route exists but not with this method (405).
	errMethodNotAllowed = errors.New("method not allowed")
	// errRouteNotFound: no route matches the path (404).
	errRouteNotFound = errors.New("no such route")
	// errNoLeader: no leader became known within the hold timeout (503 no_leader).
	errNoLeader = errors.New("no leader")
	// errNotLeader: this node is not the leader and may not forward the request (503).
	errNotLeader = errors.New("not the leader")
	// errUnavailable: the leader could not be reached (503).
	errUnavailable = errors.New("unavailable")
)

// invalid is a 400 naming the offending field.
func invalid(field, format string, args ...any) error {
	return &model.ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// isNotLeader reports whether err says the request was not applied because this node
// is not the leader or knows none; such a request may be sent on to the leader.
func (s *server) isNotLeader(err error) bool {
	e := s.cfg.Errors
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, errNotLeader) ||
		isSentinel(err, e.NotLeader) || isSentinel(err, e.NoLeader)
}

func isSentinel(err, target error) bool { return target != nil && errors.Is(err, target) }

// classify maps an error to its status, code and field. It is the only place that
// decides a status code from an error.
func (s *server) classify(err error) (int, string, string) {
	e := s.cfg.Errors
	var ve *model.ValidationError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ve):
		return http.StatusBadRequest, api.CodeInvalid, ve.Field
	case errors.Is(err, model.ErrInvalid):
		return http.StatusBadRequest, api.CodeInvalid, ""
	case errors.As(err, &mbe), errors.Is(err, errBodyTooLarge):
		return http.StatusRequestEntityTooLarge, api.CodeTooLarge, ""
	case errors.Is(err, errUnsupportedMedia):
		return http.StatusUnsupportedMediaType, api.CodeUnsupportedMedia, ""
	case errors.Is(err, errMethodNotAllowed):
		return http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, ""
	case errors.Is(err, errRouteNotFound), errors.Is(err, model.ErrNotFound):
		return http.StatusNotFound, api.CodeNotFound, ""
	case errors.Is(err, model.ErrCASMismatch):
		return http.StatusConflict, api.CodeCASMismatch, ""
	case errors.Is(err, model.ErrConflict):
		return http.StatusConflict, api.CodeConflict, ""
	case errors.Is(err, errNoLeader), isSentinel(err, e.NoLeader):
		return http.StatusServiceUnavailable, api.CodeNoLeader, ""
	case s.isNotLeader(err):
		return http.StatusServiceUnavailable, api.CodeNotLeader, ""
	case errors.Is(err, errUnavailable), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrRaftShutdown), errors.Is(err, raft.ErrLeadershipTransferInProgress),
		errors.Is(err, store.ErrClosed), errors.Is(err, context.Canceled),
		isSentinel(err, e.LeadershipLost), isSentinel(err, e.Shutdown):
		return http.StatusServiceUnavailable, api.CodeUnavailable, ""
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, raft.ErrEnqueueTimeout),
		isSentinel(err, e.Timeout):
		return http.StatusGatewayTimeout, api.CodeTimeout, ""
	default:
		return http.StatusInternalServerError, api.CodeInternal, ""
	}
}

// writeError answers err as an api.ErrorBody with the status classify gives it. A 503
// because this node is not the leader carries X-Roster-Not-Leader so that a forwarding
// follower can retry at the new leader.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code, field := s.classify(err)
	msg := err.Error()
	var ve *model.ValidationError
	if errors.As(err, &ve) {
		msg = ve.Message
	}
	if code == api.CodeNotLeader || code == api.CodeNoLeader {
		w.Header().Set(api.HeaderNotLeader, "true")
	}
	switch {
	case status == http.StatusInternalServerError:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	case status >= 500:
		s.log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	body := api.Error{Code: code, Message: msg, Field: field}
	var cas *model.CASError
	if errors.As(err, &cas) {
		cur := cas.Current
		body.Index = &cur
	}
	writeJSON(w, status, api.ErrorBody{Error: body})
}

// writeJSON writes v as the JSON body with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// notFound answers an unknown route.
func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, fmt.Errorf("%w: %s %s", errRouteNotFound, r.Method, r.URL.Path))
}

// methodNotAllowed answers a known route with a method it does not serve, listing the
// allowed methods in the Allow header.
func (s *server) methodNotAllowed(mux *chi.Mux) http.HandlerFunc {
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
		s.writeError(w, r, fmt.Errorf("%w: %s %s", errMethodNotAllowed, r.Method, r.URL.Path))
	}
}

// recoverer answers a panicking handler with a JSON 500 (http.ErrAbortHandler passes through).
func (s *server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v)
				s.writeError(w, r, fmt.Errorf("internal error: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// servedBy names this node on every response.
func (s *server) servedBy(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.HeaderServedBy, s.id)
		next.ServeHTTP(w, r)
	})
}
