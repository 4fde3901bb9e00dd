package httpapi

import (
	"errors"
	"net/http"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
)

// writeError answers err as an api.ErrorBody with the status httpx.Classify gives it. A
// 503 because this node is not the leader carries X-Roster-Not-Leader so that a
// forwarding follower can retry at the new leader; a cas_mismatch carries the object's
// current index, and an upgrade_in_progress the servers to upgrade first.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code, field := httpx.Classify(err)
	msg := httpx.Message(err)
	var ve *model.ValidationError
	if errors.As(err, &ve) {
		msg = ve.Message
	}
	if code == api.CodeNotLeader || code == api.CodeNoLeader {
		w.Header().Set(api.HeaderNotLeader, "true")
	}
	switch {
	case status == http.StatusInternalServerError:
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	case status >= 500:
		s.log.WarnContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	body := api.Error{Code: code, Message: msg, Field: field}
	var cas *model.CASError
	if errors.As(err, &cas) {
		cur := cas.Current
		body.Index = &cur
	}
	var up *raftnode.UpgradeRequiredError
	if errors.As(err, &up) {
		body.Nodes = wireList(up.Servers, wireBuild)
	}
	writeJSON(w, status, api.ErrorBody{Error: body})
}

// notFound answers an unknown route.
func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, httpx.RouteNotFound(r))
}
