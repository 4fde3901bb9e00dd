package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// TestClassify_MapsEveryErrorKind checks the single error → status mapping.
func TestClassify_MapsEveryErrorKind(t *testing.T) {
	s := &server{cfg: Config{Errors: testErrors()}}
	wrap := func(err error) error { return fmt.Errorf("apply: %w", err) }
	tests := []struct {
		name   string
		err    error
		status int
		code   string
		field  string
	}{
		{"validation", wrap(&model.ValidationError{Field: "weight", Message: "bad"}), 400, api.CodeInvalid, "weight"},
		{"invalid sentinel", wrap(model.ErrInvalid), 400, api.CodeInvalid, ""},
		{"not found", wrap(model.ErrNotFound), 404, api.CodeNotFound, ""},
		{"conflict", wrap(model.ErrConflict), 409, api.CodeConflict, ""},
		{"max bytes", wrap(&http.MaxBytesError{Limit: 1}), 413, api.CodeTooLarge, ""},
		{"too large", wrap(errBodyTooLarge), 413, api.CodeTooLarge, ""},
		{"media type", wrap(errUnsupportedMedia), 415, api.CodeUnsupportedMedia, ""},
		{"method", errMethodNotAllowed, 405, api.CodeMethodNotAllowed, ""},
		{"route", errRouteNotFound, 404, api.CodeNotFound, ""},
		{"no leader (own)", wrap(errNoLeader), 503, api.CodeNoLeader, ""},
		{"no leader (consensus)", wrap(errTestNoLeader), 503, api.CodeNoLeader, ""},
		{"not leader (consensus)", wrap(errTestNotLeader), 503, api.CodeNotLeader, ""},
		{"not leader (raft)", wrap(raft.ErrNotLeader), 503, api.CodeNotLeader, ""},
		{"not leader (own)", wrap(errNotLeader), 503, api.CodeNotLeader, ""},
		{"leadership lost (consensus)", wrap(errTestLeadershipLost), 503, api.CodeUnavailable, ""},
		{"leadership lost (raft)", wrap(raft.ErrLeadershipLost), 503, api.CodeUnavailable, ""},
		{"shutdown (consensus)", wrap(errTestShutdown), 503, api.CodeUnavailable, ""},
		{"shutdown (raft)", wrap(raft.ErrRaftShutdown), 503, api.CodeUnavailable, ""},
		{"store closed", wrap(store.ErrClosed), 503, api.CodeUnavailable, ""},
		{"proxy failure", wrap(errUnavailable), 503, api.CodeUnavailable, ""},
		{"cancelled", wrap(context.Canceled), 503, api.CodeUnavailable, ""},
		{"timeout (consensus)", wrap(errTestTimeout), 504, api.CodeTimeout, ""},
		{"timeout (context)", wrap(context.DeadlineExceeded), 504, api.CodeTimeout, ""},
		{"timeout (raft)", wrap(raft.ErrEnqueueTimeout), 504, api.CodeTimeout, ""},
		{"corrupt", wrap(store.ErrCorrupt), 500, api.CodeInternal, ""},
		{"anything else", errors.New("boom"), 500, api.CodeInternal, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, code, field := s.classify(tc.err)
			if status != tc.status || code != tc.code || field != tc.field {
				t.Fatalf("classify(%v) = %d %q %q, want %d %q %q", tc.err, status, code, field, tc.status, tc.code, tc.field)
			}
		})
	}
}

// TestClassify_NilSentinelsMatchNothing checks unset Config.Errors fields do not match.
func TestClassify_NilSentinelsMatchNothing(t *testing.T) {
	s := &server{}
	if status, _, _ := s.classify(errTestNotLeader); status != 500 {
		t.Fatalf("status %d", status)
	}
}

// TestWriteError_AnswersDomainErrorsFromApply checks the errors Apply returns reach the
// client with their status and the error body.
func TestWriteError_AnswersDomainErrorsFromApply(t *testing.T) {
	tests := []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("service has instances: %w", model.ErrConflict), 409, api.CodeConflict},
		{fmt.Errorf("no instance: %w", model.ErrNotFound), 404, api.CodeNotFound},
		{errTestLeadershipLost, 503, api.CodeUnavailable},
		{errTestTimeout, 504, api.CodeTimeout},
		{errors.New("disk on fire"), 500, api.CodeInternal},
	}
	for _, tc := range tests {
		node := newLeaderNode("n1")
		node.applyFn = func(_ fsmType, _ any) (uint64, error) { return 0, tc.err }
		h := mustNew(t, testConfig(node, seededReader()))
		resp := do(t, h, http.MethodDelete, svcPath, nil)
		if resp.Code != tc.status || resp.errorBody(t).Code != tc.code {
			t.Fatalf("%v: %d %s", tc.err, resp.Code, resp.Body)
		}
		if resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
		}
	}
}
