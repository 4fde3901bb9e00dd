//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package peerrpc

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed cannot peek at a socket here: an idle connection counts as open.
func peerClosed(net.Conn) bool { return false }

// isReset reports whether err is a connection reset by the peer.
func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }
