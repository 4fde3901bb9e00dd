//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package main

import "os"

// isTerminal reports whether f is a terminal. On this platform it always reports
// false, so no progress is shown.
func isTerminal(f *os.File) bool { return false }
