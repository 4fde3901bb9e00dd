//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package snapshot

import "os"

// IsTerminal reports whether f is a terminal. On this platform it always reports
// false, so no progress is shown.
func IsTerminal(f *os.File) bool { return false }
