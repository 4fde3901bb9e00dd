package store

import (
	"errors"
	"fmt"

	"github.com/rosterhq/roster/model"
)

// Errors of the store itself. Refusals of a write wrap the domain sentinels of the
// model package (model.ErrInvalid, model.ErrNotFound, model.ErrConflict, ErrCASMismatch).
var (
	// ErrCorrupt marks a state file that cannot be read as Roster state.
	ErrCorrupt = errors.New("corrupt state")
	// ErrClosed is returned by a store that was closed (a case of model.ErrUnavailable).
	ErrClosed = model.Sentinel("store closed", model.ErrUnavailable)
	// ErrNewerSchema marks a state file written by a newer Roster, in a schema this build
	// does not read. It is not ErrCorrupt: such a file is refused and left untouched,
	// never moved aside or rebuilt.
	ErrNewerSchema = errors.New("state file written by a newer Roster")
)

// notFound says what was not found; it matches model.ErrNotFound with errors.Is.
func notFound(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), model.ErrNotFound)
}

func conflict(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), model.ErrConflict)
}
