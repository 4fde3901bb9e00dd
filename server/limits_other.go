//go:build !(linux || darwin || freebsd || openbsd || netbsd)

package server

// DefaultMaxWatchers is 4,096 where the process's file limit cannot be read.
func DefaultMaxWatchers() int { return 4096 }
