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
