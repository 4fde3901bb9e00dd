package model

import (
	"errors"
	"fmt"
)

// Domain sentinel errors: every refusal of a write wraps one of them, so callers map
// them to status codes with errors.Is.
var (
	// ErrInvalid marks input that breaks a validation rule; the error is a *ValidationError.
	ErrInvalid = errors.New("invalid input")
	// ErrNotFound marks a namespace, service, cluster or instance that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict marks a write that the current state forbids, such as deleting a
	// service that still has instances.
	ErrConflict = errors.New("conflict")
	// ErrCASMismatch marks a conditional write whose condition did not hold; the error
	// is a *CASError carrying the current index.
	ErrCASMismatch = errors.New("cas mismatch")
)

// The outcomes of reaching the leader and its log: one vocabulary for every layer. The
// consensus layer's errors (raftnode) and the store's wrap these, the registry answers
// in them (registry.ErrNotLeader and the rest are these values), and the surfaces
// render them, none of them knowing the layers below the registry.
var (
	// ErrNotLeader: the request must be served by the leader and this node is not it;
	// nothing was written, so it may be sent to the leader.
	ErrNotLeader = errors.New("not the leader")
	// ErrNoLeader: no leader is known or could be reached; nothing was written. Errors
	// that wrap it also wrap ErrNotLeader.
	ErrNoLeader = Sentinel("no leader", ErrNotLeader)
	// ErrUnavailable: the request could not be served now (the leader was lost while it
	// ran, the node is stopping, or no answer came): a write's outcome is unknown.
	ErrUnavailable = errors.New("unavailable")
	// ErrTimeout: the request did not finish before its deadline; a write handed to the
	// consensus layer may still be committed.
	ErrTimeout = errors.New("timed out")
	// ErrStorage: the leader could not write the entry to its own log; not applied.
	ErrStorage = errors.New("cannot write to the node's storage")
	// ErrUpgradeRequired: a server of the cluster runs a release that cannot apply the
	// write; nothing was written.
	ErrUpgradeRequired = errors.New("upgrade in progress")
)

// Sentinel returns a sentinel error with its own text that also matches parent with
// errors.Is: a layer's more precise error of one of the vocabulary's outcomes.
func Sentinel(text string, parent error) error { return &sentinel{text: text, parent: parent} }

type sentinel struct {
	text   string
	parent error
}

func (e *sentinel) Error() string { return e.text }

// Unwrap returns the outcome the sentinel is a case of.
func (e *sentinel) Unwrap() error { return e.parent }

// CASError is a conditional write refused because the object's modify index was not the
// expected one (Expected 0: the object had to be absent). Current is the object's
// modify index, 0 when it does not exist. It matches ErrCASMismatch with errors.Is.
type CASError struct {
	What     string // the object, for the message
	Expected uint64
	Current  uint64
}

func (e *CASError) Error() string {
	switch {
	case e.Expected == 0:
		return fmt.Sprintf("%s already exists (modify index %d)", e.What, e.Current)
	case e.Current == 0:
		return fmt.Sprintf("%s does not exist (expected modify index %d)", e.What, e.Expected)
	default:
		return fmt.Sprintf("%s has modify index %d, not %d", e.What, e.Current, e.Expected)
	}
}

// Is makes errors.Is(err, ErrCASMismatch) true.
func (e *CASError) Is(target error) bool { return target == ErrCASMismatch }

// ValidationError names the offending field. It matches ErrInvalid with errors.Is.
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Message) }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Invalid returns a *ValidationError for field.
func Invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}
