package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/rosterhq/roster/api"
)

// APIError is a non-2xx answer of the server. Code, Message and Field come from the
// body {"error":{...}}; a body of another shape leaves Code empty and puts its first
// line (or the status text) in Message.
type APIError struct {
	Status  int
	Code    string
	Message string
	Field   string
}

// Error is "field: message (status code)", the field omitted when there is none or when
// the message already starts with it.
func (e *APIError) Error() string {
	var b strings.Builder
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Field != "" && !strings.HasPrefix(msg, e.Field+":") {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(msg)
	if e.Code != "" {
		fmt.Fprintf(&b, " (%d %s)", e.Status, e.Code)
	} else {
		fmt.Fprintf(&b, " (%d)", e.Status)
	}
	return b.String()
}

// IsNotFound reports whether err is an APIError saying the resource does not exist.
func IsNotFound(err error) bool {
	var e *APIError
	return errors.As(err, &e) && (e.Code == api.CodeNotFound || (e.Code == "" && e.Status == http.StatusNotFound))
}

// IsConflict reports whether err is an APIError saying the current state forbids the write.
func IsConflict(err error) bool {
	var e *APIError
	return errors.As(err, &e) && (e.Code == api.CodeConflict || (e.Code == "" && e.Status == http.StatusConflict))
}

// IsCASMismatch reports whether err is an APIError saying a conditional write (?cas=N)
// found the object at another index, or absent, and changed nothing.
func IsCASMismatch(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == api.CodeCASMismatch
}

// IsUnauthenticated reports whether err is an APIError saying the request needs a
// valid token (ACLs are on and none, or an unknown one, was presented).
func IsUnauthenticated(err error) bool {
	var e *APIError
	return errors.As(err, &e) && (e.Code == api.CodeUnauthenticated || (e.Code == "" && e.Status == http.StatusUnauthorized))
}

// IsPermissionDenied reports whether err is an APIError saying the token lacks a
// permission the request needs.
func IsPermissionDenied(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == api.CodePermissionDenied
}

// IsNoLeader reports whether err is an APIError saying the cluster has no leader right now
// (a retry may succeed).
func IsNoLeader(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == api.CodeNoLeader
}

// decodeError turns an error response into an *APIError.
func decodeError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return errorFromBody(resp.StatusCode, raw)
}

// errorFromBody builds the *APIError of a response with the given status and body.
func errorFromBody(status int, raw []byte) *APIError {
	e := &APIError{Status: status}
	var body api.ErrorBody
	if json.Unmarshal(raw, &body) == nil && (body.Error.Code != "" || body.Error.Message != "") {
		e.Code, e.Message, e.Field = body.Error.Code, body.Error.Message, body.Error.Field
		return e
	}
	text := strings.TrimSpace(string(raw))
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = strings.TrimSpace(text[:i])
	}
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	if text == "" {
		text = http.StatusText(status)
	}
	e.Message = text
	return e
}
