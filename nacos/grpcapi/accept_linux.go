package grpcapi

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"syscall"
)

// rawAccept accepts the next connection within the bounds on a TCP listener's socket
// directly: a connection refused is closed (with a reset) as soon as accept(2) returns
// it, before it becomes a Go connection — no registration with the poller, no socket
// options, no allocation — so that a flood of refused connections costs the node little
// more than the kernel's work. ok is false when the listener is not a TCP one (Accept
// then takes the portable path).
//
// A listener's own raw connection allows no reads, so the accepts go through a
// duplicate of its descriptor, an os.File the runtime's poller waits on; Close closes
// both.
func (l *guardListener) rawAccept() (c net.Conn, err error, ok bool) {
	l.rawOnce.Do(func() {
		tl, isTCP := l.Listener.(*net.TCPListener)
		if !isTCP {
			return
		}
		f, err := tl.File()
		if err != nil {
			return
		}
		rc, err := f.SyscallConn()
		if err != nil {
			_ = f.Close()
			return
		}
		l.rawFile, l.rawConn = f, rc
	})
	rc := l.rawConn
	if rc == nil {
		return nil, nil, false
	}
	for {
		var nfd int
		var gc *connGuard
		var aerr error
		err := rc.Read(func(fd uintptr) bool {
			for {
				var sa syscall.Sockaddr
				nfd, sa, aerr = syscall.Accept4(int(fd), syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
				switch {
				case errors.Is(aerr, syscall.EAGAIN):
					return false // wait until the socket is readable
				case errors.Is(aerr, syscall.EINTR), errors.Is(aerr, syscall.ECONNABORTED):
					continue
				case aerr != nil:
					return true
				}
				if gc = l.admitFrom(sockaddrIP(sa)); gc != nil {
					return true
				}
				_ = syscall.SetsockoptLinger(nfd, syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 0})
				_ = syscall.Close(nfd)
			}
		})
		if err != nil {
			return nil, err, true
		}
		if aerr != nil {
			return nil, &net.OpError{Op: "accept", Net: "tcp", Source: l.Addr(), Err: os.NewSyscallError("accept4", aerr)}, true
		}
		conn, err := fdConn(nfd)
		if err != nil {
			gc.release()
			continue // the connection was gone already
		}
		l.bind(gc, conn)
		return gc, nil, true
	}
}

// fdConn makes an accepted socket a Go TCP connection with the options net's own
// accept gives it: no Nagle delay, keepalives after 15 s idle.
func fdConn(nfd int) (net.Conn, error) {
	f := os.NewFile(uintptr(nfd), "grpc")
	c, err := net.FileConn(f) // a duplicate of the descriptor
	_ = f.Close()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
		_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true})
	}
	return c, nil
}

func sockaddrIP(sa syscall.Sockaddr) netip.Addr {
	switch sa := sa.(type) {
	case *syscall.SockaddrInet4:
		return netip.AddrFrom4(sa.Addr)
	case *syscall.SockaddrInet6:
		return netip.AddrFrom16(sa.Addr).Unmap()
	}
	return netip.Addr{}
}
