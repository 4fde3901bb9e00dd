package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"syscall"

	"github.com/rosterhq/roster/internal/diskstat"
)

// DefaultMinFree is the free space a restore leaves on the file system of the Raft log
// and state, by default: 512 MiB, or an eighth of the file system when that is less
// (CheckSpace applies the cap to this value only; a reserve set to anything else is
// kept as given). It is headroom for the log and the state file, which keep growing
// while a restore runs and afterwards, and for the Raft snapshots a node takes on its
// own.
const DefaultMinFree = 512 << 20

// defaultReserveShare caps the default reserve at 1/defaultReserveShare of the file
// system, so that a small disk (a 1 GiB volume) can still take in a small archive.
const defaultReserveShare = 8

// ErrNoSpace marks a refusal for lack of disk space: the archive may be fine, but the
// node cannot take in its state without eating into the space it keeps free. The error
// says how much is needed and how much is available, never where.
var ErrNoSpace = errors.New("not enough free disk space")

// freeSpace returns the space of the file system of dir. Tests replace it.
var freeSpace = diskstat.Of

// CheckSpace returns an error matching ErrNoSpace unless the file system of dir has at
// least need bytes available beyond reserve (DefaultMinFree: beyond an eighth of the
// file system's size, when that is less). The error names neither dir nor any other path:
// it may be answered to a client. On a platform where free space cannot be measured it
// returns nil.
func CheckSpace(dir string, need, reserve int64) error {
	if dir == "" {
		dir = os.TempDir()
	}
	u, err := freeSpace(dir)
	switch {
	case errors.Is(err, diskstat.ErrUnsupported):
		return nil
	case err != nil:
		return localError("checking free disk space", err)
	}
	free, total := toInt64(u.Free), toInt64(u.Total)
	if reserve == DefaultMinFree {
		reserve = min(reserve, total/defaultReserveShare)
	}
	if need <= free-reserve {
		return nil
	}
	return &spaceError{need: need, free: free, reserve: reserve}
}

func toInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// spaceError is the ErrNoSpace of CheckSpace.
type spaceError struct {
	need, free, reserve int64
}

func (e *spaceError) Error() string {
	return fmt.Sprintf("snapshot: %v: %d bytes are needed, and the file system has %d bytes free of which %d are kept in reserve",
		ErrNoSpace, e.need, e.free, e.reserve)
}

func (e *spaceError) Unwrap() error { return ErrNoSpace }

// fileError is a failure of a local file operation described without the file's path:
// its message may be answered to whoever sent the archive, and the server's paths are
// none of their business. The original error stays in the chain for errors.Is and
// errors.As; a full disk also matches ErrNoSpace.
type fileError struct {
	msg string
	err error
}

func (e *fileError) Error() string { return e.msg }

func (e *fileError) Unwrap() []error {
	if errors.Is(e.err, syscall.ENOSPC) {
		return []error{e.err, ErrNoSpace}
	}
	return []error{e.err}
}

// localError wraps err, from an operation on a local file, as "snapshot: <what>:
// <cause>" where cause is the error without the path it names.
func localError(what string, err error) error {
	cause := err
	var pe *fs.PathError
	var le *os.LinkError
	var se *os.SyscallError
	switch {
	case errors.As(err, &pe):
		cause = pe.Err
	case errors.As(err, &le):
		cause = le.Err
	case errors.As(err, &se):
		cause = se.Err
	}
	return &fileError{msg: fmt.Sprintf("snapshot: %s: %v", what, cause), err: err}
}

// mulAdd returns a*b+c for non-negative operands, saturated at math.MaxInt64.
func mulAdd(a, b, c int64) int64 {
	if a != 0 && b > (math.MaxInt64-c)/a {
		return math.MaxInt64
	}
	return a*b + c
}
