package store

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the store returns wraps one of them, so callers map
// them to HTTP status codes with errors.Is.
var (
	// ErrInvalid marks input that breaks a validation rule; the error is a *ValidationError.
	ErrInvalid = errors.New("invalid input")
	// ErrNotFound marks a namespace, service, cluster or instance that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict marks a write that the current state forbids, such as deleting a
	// service that still has instances.
	ErrConflict = errors.New("conflict")
	// ErrCorrupt marks a state file that cannot be read as Roster state.
	ErrCorrupt = errors.New("corrupt state")
	// ErrClosed is returned by a store that was closed.
	ErrClosed = errors.New("store closed")
)

// ValidationError names the offending field. It matches ErrInvalid with errors.Is.
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Message) }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// NotFoundError says what was not found. It matches ErrNotFound with errors.Is.
func notFound(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrNotFound)
}

func conflict(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrConflict)
}
