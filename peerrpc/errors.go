package peerrpc

import (
	"context"
	"errors"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// The leader's answer carries its registry's error as data, and the forwarding node
// rebuilds an error that errors.Is and errors.As see as the leader's: the surfaces
// render a forwarded write's refusal exactly as a local one.

// wireError is an error on the wire: its text, the names of the sentinels it matches
// and the typed errors the surfaces read fields of.
type wireError struct {
	Message    string
	Sentinels  []string
	Validation *model.ValidationError
	CAS        *model.CASError
	Denied     *acl.DeniedError
	Upgrade    *raftnode.UpgradeRequiredError
}

// sentinels are the errors the surfaces classify by, by wire name. A name may stand for
// several errors of one meaning (the consensus layer's and the registry's not-leader).
var sentinels = []struct {
	name string
	errs []error
}{
	{"invalid", []error{model.ErrInvalid}},
	{"not_found", []error{model.ErrNotFound}},
	{"conflict", []error{model.ErrConflict}},
	{"cas_mismatch", []error{model.ErrCASMismatch}},
	{"unauthenticated", []error{acl.ErrUnauthenticated}},
	{"not_bootstrapped", []error{acl.ErrNotBootstrapped}},
	{"permission_denied", []error{acl.ErrPermissionDenied}},
	{"acl_mismatch", []error{acl.ErrMismatch}},
	{"no_leader", []error{registry.ErrNoLeader, raftnode.ErrNoLeader}},
	{"unavailable", []error{registry.ErrUnavailable}},
	{"not_leader", []error{registry.ErrNotLeader, raftnode.ErrNotLeader}},
	{"leadership_lost", []error{raftnode.ErrLeadershipLost}},
	{"timeout", []error{raftnode.ErrTimeout, registry.ErrTimeout}},
	{"shutdown", []error{raftnode.ErrShutdown}},
	{"storage", []error{raftnode.ErrStorage}},
	{"upgrade_required", []error{raftnode.ErrUpgradeRequired}},
	{"cluster_mismatch", []error{raftnode.ErrClusterMismatch}},
	{"state_mismatch", []error{registry.ErrStateMismatch}},
	{"too_many_watchers", []error{registry.ErrTooManyWatchers}},
	{"store_closed", []error{store.ErrClosed}},
	{"deadline", []error{context.DeadlineExceeded}},
	{"canceled", []error{context.Canceled}},
}

// encodeError is err as the wire carries it (nil for nil).
func encodeError(err error) *wireError {
	if err == nil {
		return nil
	}
	w := &wireError{Message: err.Error()}
	for _, s := range sentinels {
		for _, e := range s.errs {
			if errors.Is(err, e) {
				w.Sentinels = append(w.Sentinels, s.name)
				break
			}
		}
	}
	var ve *model.ValidationError
	if errors.As(err, &ve) {
		w.Validation = ve
	}
	var cas *model.CASError
	if errors.As(err, &cas) {
		w.CAS = cas
	}
	var de *acl.DeniedError
	if errors.As(err, &de) {
		w.Denied = de
	}
	var up *raftnode.UpgradeRequiredError
	if errors.As(err, &up) {
		w.Upgrade = up
	}
	return w
}

// decode rebuilds the error (nil for nil).
func (w *wireError) decode() error {
	if w == nil {
		return nil
	}
	e := &remoteError{msg: w.Message}
	for _, name := range w.Sentinels {
		for _, s := range sentinels {
			if s.name == name {
				e.wrapped = append(e.wrapped, s.errs...)
			}
		}
	}
	if w.Validation != nil {
		e.wrapped = append(e.wrapped, w.Validation)
	}
	if w.CAS != nil {
		e.wrapped = append(e.wrapped, w.CAS)
	}
	if w.Denied != nil {
		e.wrapped = append(e.wrapped, w.Denied)
	}
	if w.Upgrade != nil {
		e.wrapped = append(e.wrapped, w.Upgrade)
	}
	return &registry.Answered{Err: e}
}

// remoteError is an error the leader answered: its text, matching what it matched.
type remoteError struct {
	msg     string
	wrapped []error
}

func (e *remoteError) Error() string { return e.msg }

// Unwrap returns the sentinels and typed errors the leader's error matched.
func (e *remoteError) Unwrap() []error { return e.wrapped }
