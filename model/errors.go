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
)

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
