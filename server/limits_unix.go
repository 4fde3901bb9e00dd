//go:build linux || darwin || freebsd || openbsd || netbsd

package server

import (
	"golang.org/x/sys/unix"

	"github.com/rosterhq/roster/nacos/grpcapi"
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

// RaiseFileLimit raises the process's soft limit on open files to its hard limit (a
// node's connections are file descriptors; the soft limit is often 1,024) and returns
// the soft limit in force, 0 when unknown.
func RaiseFileLimit() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	if rl.Cur < rl.Max {
		raised := rl
		raised.Cur = rl.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &raised); err == nil {
			rl = raised
		}
	}
	if rl.Cur == unix.RLIM_INFINITY {
		return 0
	}
	return rl.Cur
}

// DefaultMaxGRPCTransports bounds the TCP connections of the Nacos gRPC port, registered
// or not: a quarter of the soft limit on open files, between 64 and
// grpcapi.DefaultMaxConnections, so that a flood of the gRPC port leaves file
// descriptors for the HTTPS API, Raft and the data files (docs/security.md). With the
// soft limit unknown it is grpcapi.DefaultMaxConnections.
func DefaultMaxGRPCTransports() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return grpcapi.DefaultMaxConnections
	}
	return int(min(max(int64(rl.Cur)/4, 64), grpcapi.DefaultMaxConnections))
}
