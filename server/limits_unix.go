//go:build linux || darwin || freebsd || openbsd || netbsd

package server

import (
	"golang.org/x/sys/unix"
)

// DefaultMaxWatchers is the default bound on the blocking queries and streams a node
// holds at once: each takes a file descriptor (its connection), so the bound leaves 1,024
// of the process's soft limit for everything else — Raft's connections, the leader's
// probes, clients that do not watch — and is at most 100,000 (an idle stream costs about
// 13 KiB, so 100,000 take some 1.3 GiB). With the soft limit unknown it is 4,096.
func DefaultMaxWatchers() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 4096
	}
	return int(min(max(int64(rl.Cur)-1024, 64), 100_000))
}
