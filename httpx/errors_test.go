package httpx

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"syscall"
	"testing"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// TestClassify_MapsEveryErrorKind checks the single error → status mapping.
func TestClassify_MapsEveryErrorKind(t *testing.T) {
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
		{"cas mismatch", wrap(&model.CASError{What: "x", Expected: 3, Current: 4}), 409, api.CodeCASMismatch, ""},
		{"max bytes", wrap(&http.MaxBytesError{Limit: 1}), 413, api.CodeTooLarge, ""},
		{"too large", wrap(ErrBodyTooLarge), 413, api.CodeTooLarge, ""},
		{"media type", wrap(ErrUnsupportedMedia), 415, api.CodeUnsupportedMedia, ""},
		{"method", ErrMethodNotAllowed, 405, api.CodeMethodNotAllowed, ""},
		{"route", ErrRouteNotFound, 404, api.CodeNotFound, ""},
		{"no leader (own)", wrap(ErrNoLeader), 503, api.CodeNoLeader, ""},
		{"no leader (consensus)", wrap(raftnode.ErrNoLeader), 503, api.CodeNoLeader, ""},
		{"not leader (consensus)", wrap(raftnode.ErrNotLeader), 503, api.CodeNotLeader, ""},
		{"not leader (own)", wrap(ErrNotLeader), 503, api.CodeNotLeader, ""},
		{"leadership lost (consensus)", wrap(raftnode.ErrLeadershipLost), 503, api.CodeUnavailable, ""},
		{"shutdown (consensus)", wrap(raftnode.ErrShutdown), 503, api.CodeUnavailable, ""},
		{"store closed", wrap(store.ErrClosed), 503, api.CodeUnavailable, ""},
		{"proxy failure", wrap(ErrUnavailable), 503, api.CodeUnavailable, ""},
		{"cancelled", wrap(context.Canceled), 503, api.CodeUnavailable, ""},
		{"timeout (consensus)", wrap(raftnode.ErrTimeout), 504, api.CodeTimeout, ""},
		{"timeout (registry)", wrap(registry.ErrTimeout), 504, api.CodeTimeout, ""},
		{"no leader (registry)", wrap(registry.ErrNoLeader), 503, api.CodeNoLeader, ""},
		{"outcome unknown (registry)", wrap(registry.ErrUnavailable), 503, api.CodeUnavailable, ""},
		{"timeout (context)", wrap(context.DeadlineExceeded), 504, api.CodeTimeout, ""},
		{"leader's disk", wrap(&raftnode.DiskError{Op: "cannot write the Raft log", Err: syscall.ENOSPC}), 503, api.CodeStorage, ""},
		{"corrupt", wrap(store.ErrCorrupt), 500, api.CodeInternal, ""},
		{"anything else", errors.New("boom"), 500, api.CodeInternal, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, code, field := Classify(tc.err)
			if status != tc.status || code != tc.code || field != tc.field {
				t.Fatalf("Classify(%v) = %d %q %q, want %d %q %q", tc.err, status, code, field, tc.status, tc.code, tc.field)
			}
		})
	}
}

// Message cuts every file path in an error to its last element.
func TestMessage_NamesNoServerPath(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"plain", errors.New("boom"), "boom"},
		{"path error", fmt.Errorf("save: %w", &fs.PathError{Op: "write", Path: "/var/lib/roster/state.db", Err: syscall.ENOSPC}),
			"save: write state.db: no space left on device"},
		{"link error", &os.LinkError{Op: "rename", Old: "/data/x/tmp-1", New: "/data/x/state.db", Err: syscall.EXDEV},
			"rename tmp-1 state.db: invalid cross-device link"},
		{"two paths", errors.Join(&fs.PathError{Op: "open", Path: "/a/b/c", Err: fs.ErrNotExist}, &fs.PathError{Op: "sync", Path: "/d/e", Err: syscall.EIO}),
			"open c: file does not exist\nsync e: input/output error"},
		{"relative name", &fs.PathError{Op: "open", Path: "meta.json", Err: fs.ErrNotExist}, "open meta.json: file does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Message(tc.err); got != tc.want {
				t.Fatalf("Message(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}
