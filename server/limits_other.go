//go:build !(linux || darwin || freebsd || openbsd || netbsd)

package server

import "github.com/rosterhq/roster/nacos/grpcapi"

// DefaultMaxWatchers is 4,096 where the process's file limit cannot be read.
func DefaultMaxWatchers() int { return 4096 }

// RaiseFileLimit does nothing where the process's file limit cannot be read.
func RaiseFileLimit() uint64 { return 0 }

// DefaultMaxGRPCTransports is grpcapi.DefaultMaxConnections where the process's file
// limit cannot be read.
func DefaultMaxGRPCTransports() int { return grpcapi.DefaultMaxConnections }
