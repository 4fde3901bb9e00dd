package openapi

import (
	"net/http"
	"strings"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/nacos"
)

// isV2 reports whether r is a /nacos/v2/ request (envelope answers).
func isV2(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/nacos/v2/") }

// writeNacosError answers err in the request's Nacos shape.
func (s *API) writeNacosError(w http.ResponseWriter, r *http.Request, err error, res nacos.Resource) {
	ne := nacos.Classify(err, res)
	if ne.NotLeader {
		w.Header().Set(api.HeaderNotLeader, "true")
	}
	switch {
	case ne.Status == http.StatusInternalServerError:
		s.log.ErrorContext(r.Context(), "nacos request failed", "method", r.Method, "path", r.URL.Path, "status", ne.Status, "err", err)
	case ne.Status >= 500:
		s.log.WarnContext(r.Context(), "nacos request failed", "method", r.Method, "path", r.URL.Path, "status", ne.Status, "err", err)
	}
	if isV2(r) {
		writeJSON(w, ne.Status, nacos.Result{Code: ne.Code, Message: nacos.Message(ne.Code), Data: ne.Msg})
		return
	}
	if ne.Auth {
		writeJSON(w, ne.Status, springErrorBody{
			Timestamp: time.Now().UTC().Format(springTimestamp), Status: ne.Status,
			Error: http.StatusText(ne.Status), Message: ne.Msg, Path: r.URL.Path,
		})
		return
	}
	writeText(w, ne.Status, "caused: "+ne.Msg+";")
}

// springErrorBody is the answer of Spring Boot's error controller, which Nacos's
// AuthFilter sends every refusal through (HttpServletResponse.sendError(403, message),
// with server.error.include-message=ALWAYS in Nacos's application.properties): the
// shape Nacos clients print when a v1 request is refused for want of a token or a right.
type springErrorBody struct {
	Timestamp string `json:"timestamp"`
	Status    int    `json:"status"`
	Error     string `json:"error"`
	Message   string `json:"message"`
	Path      string `json:"path"`
}

// springTimestamp is how Spring Boot 2's Jackson writes the error's timestamp.
const springTimestamp = "2006-01-02T15:04:05.000-07:00"

// writeNacosOK answers a success: v2 wraps data in the envelope; v1 writes a string as
// plain text ("ok") and anything else as bare JSON.
func writeNacosOK(w http.ResponseWriter, r *http.Request, data any) {
	if isV2(r) {
		writeJSON(w, http.StatusOK, nacos.Result{Code: nacos.CodeSuccess, Message: nacos.Message(nacos.CodeSuccess), Data: data})
		return
	}
	if text, ok := data.(string); ok {
		writeText(w, http.StatusOK, text)
		return
	}
	writeJSON(w, http.StatusOK, data)
}

// writeText writes a plain-text body.
func writeText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(text))
}
