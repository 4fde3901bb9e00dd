package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/registry"
)

// Errors the HTTP layer raises itself. Each maps to one status code in Classify.
var (
	// ErrUnsupportedMedia: a request body of a content type the route does not read (415).
	ErrUnsupportedMedia = errors.New("unsupported content type")
	// ErrNotAcceptable: a response type (Accept) the route cannot produce (406).
	ErrNotAcceptable = errors.New("not acceptable")
	// ErrBodyTooLarge: a request body over the route's limit (413).
	ErrBodyTooLarge = errors.New("request body too large")
	// ErrMethodNotAllowed: the route exists but not with this method (405).
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrRouteNotFound: no route matches the path (404).
	ErrRouteNotFound = errors.New("no such route")
	// ErrNoLeader: no leader became known within the hold timeout (503 no_leader).
	ErrNoLeader = registry.ErrNoLeader
	// ErrNotLeader: this node is not the leader and may not forward the request (503).
	ErrNotLeader = registry.ErrNotLeader
	// ErrUnavailable: the leader could not be reached (503).
	ErrUnavailable = registry.ErrUnavailable
)

// Invalid is a 400 naming the offending field.
func Invalid(field, format string, args ...any) error {
	return model.Invalid(field, format, args...)
}

// IsNotLeader reports whether err says the request was not applied because this node is
// not the leader or knows none; such a request may be sent on to the leader.
func IsNotLeader(err error) bool { return errors.Is(err, registry.ErrNotLeader) }

// Classify maps an error to its status, its api error code and the field it names. It
// is the only place that decides a status code from an error; the Nacos API maps the
// same classes onto its own result codes.
func Classify(err error) (status int, code, field string) {
	var ve *model.ValidationError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ve):
		return http.StatusBadRequest, api.CodeInvalid, ve.Field
	case errors.Is(err, model.ErrInvalid):
		return http.StatusBadRequest, api.CodeInvalid, ""
	case errors.As(err, &mbe), errors.Is(err, ErrBodyTooLarge):
		return http.StatusRequestEntityTooLarge, api.CodeTooLarge, ""
	case errors.Is(err, ErrRequestTimeout):
		return http.StatusRequestTimeout, api.CodeRequestTimeout, ""
	case errors.Is(err, registry.ErrTooManyWatchers):
		return http.StatusTooManyRequests, api.CodeTooManyRequests, ""
	case errors.Is(err, registry.ErrStateMismatch):
		return http.StatusServiceUnavailable, api.CodeStateMismatch, ""
	case errors.Is(err, ErrCrossOrigin):
		return http.StatusForbidden, api.CodeForbidden, ""
	case errors.Is(err, ErrUnsupportedMedia):
		return http.StatusUnsupportedMediaType, api.CodeUnsupportedMedia, ""
	case errors.Is(err, ErrNotAcceptable):
		return http.StatusNotAcceptable, api.CodeNotAcceptable, ""
	case errors.Is(err, ErrMethodNotAllowed):
		return http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, ""
	case errors.Is(err, ErrRouteNotFound), errors.Is(err, model.ErrNotFound):
		return http.StatusNotFound, api.CodeNotFound, ""
	case errors.Is(err, model.ErrCASMismatch):
		return http.StatusConflict, api.CodeCASMismatch, ""
	case errors.Is(err, model.ErrConflict):
		return http.StatusConflict, api.CodeConflict, ""
	case errors.Is(err, acl.ErrUnauthenticated), errors.Is(err, acl.ErrNotBootstrapped):
		return http.StatusUnauthorized, api.CodeUnauthenticated, ""
	case errors.Is(err, acl.ErrPermissionDenied):
		return http.StatusForbidden, api.CodePermissionDenied, ""
	case errors.Is(err, acl.ErrMismatch):
		return http.StatusServiceUnavailable, api.CodeACLMismatch, ""
	case errors.Is(err, model.ErrStorage):
		return http.StatusServiceUnavailable, api.CodeStorage, ""
	case errors.Is(err, model.ErrUpgradeRequired):
		return http.StatusServiceUnavailable, api.CodeUpgradeInProgress, ""
	case errors.Is(err, registry.ErrNoLeader):
		return http.StatusServiceUnavailable, api.CodeNoLeader, ""
	case IsNotLeader(err):
		return http.StatusServiceUnavailable, api.CodeNotLeader, ""
	case errors.Is(err, registry.ErrUnavailable), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, api.CodeUnavailable, ""
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, registry.ErrTimeout):
		return http.StatusGatewayTimeout, api.CodeTimeout, ""
	default:
		return http.StatusInternalServerError, api.CodeInternal, ""
	}
}

// Message is err's text for a client: every file path of an *fs.PathError or
// *os.LinkError in err is cut to its last element, so no answer tells where a server
// keeps its files.
func Message(err error) string {
	msg := err.Error()
	var walk func(error)
	walk = func(e error) {
		switch x := e.(type) {
		case nil:
			return
		case *fs.PathError:
			msg = cutPath(msg, x.Path)
		case *os.LinkError:
			msg = cutPath(cutPath(msg, x.Old), x.New)
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return msg
}

func cutPath(msg, path string) string {
	if path == "" || filepath.Base(path) == path {
		return msg
	}
	return strings.ReplaceAll(msg, path, filepath.Base(path))
}

// WriteJSON writes v as the JSON body with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	setJSONHeaders(w)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// EncodeJSON returns the body WriteJSON writes for v, to be written by WriteJSONBytes.
func EncodeJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// WriteJSONBytes writes body, encoded by EncodeJSON, with the given status.
func WriteJSONBytes(w http.ResponseWriter, status int, body []byte) {
	setJSONHeaders(w)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func setJSONHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

// RouteNotFound is the error of a path no route matches.
func RouteNotFound(r *http.Request) error {
	return fmt.Errorf("%w: %s %s", ErrRouteNotFound, r.Method, r.URL.Path)
}
