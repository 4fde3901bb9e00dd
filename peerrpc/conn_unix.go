//go:build linux || darwin || freebsd || netbsd || openbsd

package peerrpc

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether idle connection c may not carry another request: the
// server closed it (its end of file is waiting to be read) or sent something while it
// was idle, which a server does only when it closes (TLS's close_notify): a request
// written on it could be lost unread, an outcome the caller could not know. It peeks at
// the socket without blocking and without consuming anything.
func peerClosed(c net.Conn) bool {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case rerr == nil:
			closed = true // end of file (n == 0), or data an idle connection never gets
		case rerr != nil && !errors.Is(rerr, syscall.EAGAIN) && !errors.Is(rerr, syscall.EWOULDBLOCK) && !errors.Is(rerr, syscall.EINTR):
			closed = true // reset
		}
		return true // never wait
	})
	return closed || err != nil
}

// isReset reports whether err is a connection reset by the peer.
func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }
