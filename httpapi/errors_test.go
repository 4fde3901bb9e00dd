package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
)

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
		{raftnode.ErrLeadershipLost, 503, api.CodeUnavailable},
		{raftnode.ErrTimeout, 504, api.CodeTimeout},
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
