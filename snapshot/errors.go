package snapshot

import (
	"errors"
	"fmt"
)

// ErrInvalidArchive marks input that is not an intact Roster snapshot archive of a
// supported format version. Every such error is a *FormatError; errors.Is(err,
// ErrInvalidArchive) is true for all of them and for no other error of this package,
// so the HTTP layer can answer 400 for exactly these.
var ErrInvalidArchive = errors.New("invalid snapshot archive")

// FormatError says what is wrong with an archive. It matches ErrInvalidArchive with
// errors.Is, and also Err when Err is set.
type FormatError struct {
	// Member is the archive member the problem is in: "meta.json", "state.db",
	// "SHA256SUMS", or the name of a member that does not belong in an archive.
	// It is empty when the problem is in the gzip or tar container itself.
	Member string
	// Reason says what is wrong, in words meant for an operator.
	Reason string
	// Err is the underlying cause when there is one (for example the error of
	// ReadOptions.Check), else nil.
	Err error
}

// Error returns "invalid snapshot archive: <member>: <reason>", or
// "invalid snapshot archive: <reason>" when Member is empty.
func (e *FormatError) Error() string {
	if e.Member == "" {
		return fmt.Sprintf("%v: %s", ErrInvalidArchive, e.Reason)
	}
	return fmt.Sprintf("%v: %s: %s", ErrInvalidArchive, e.Member, e.Reason)
}

// Unwrap returns ErrInvalidArchive and, when set, Err.
func (e *FormatError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidArchive}
	}
	return []error{ErrInvalidArchive, e.Err}
}

func invalid(member, format string, args ...any) *FormatError {
	return &FormatError{Member: member, Reason: fmt.Sprintf(format, args...)}
}
