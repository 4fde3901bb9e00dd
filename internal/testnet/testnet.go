// Package testnet holds the TCP stand-ins Roster's tests and benchmarks point instances
// at: a listener that accepts every connection and closes it at once, so that a TCP
// health probe of it succeeds while it is open and is refused once it is closed.
package testnet

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rosterhq/roster/internal/wait"
)

// Serve accepts connections on ln and closes each at once, counting them in accepts
// (nil: not counted), until ln is closed. It returns at once.
func Serve(ln net.Listener, accepts *atomic.Int64) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if accepts != nil {
				accepts.Add(1)
			}
			_ = c.Close()
		}
	}()
}

// Backend is an accept-and-close listener on one address that can be closed and
// opened again: an instance whose TCP probes fail and pass on demand.
type Backend struct {
	t       testing.TB
	addr    string
	accepts atomic.Int64

	mu sync.Mutex
	ln net.Listener
}

// New opens a Backend on a port of ip ("127.0.0.1", "::1") that the system chooses.
// It is closed when the test ends.
func New(t testing.TB, ip string) *Backend {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	b := &Backend{t: t}
	b.serve(ln)
	t.Cleanup(b.Close)
	return b
}

// At opens a Backend on addr (host:port; port 0: one the system chooses, kept by
// Reopen), waiting while the address is still taken. It is closed when the test ends.
func At(t testing.TB, addr string) *Backend {
	t.Helper()
	b := &Backend{t: t, addr: addr}
	b.Reopen()
	t.Cleanup(b.Close)
	return b
}

func (b *Backend) serve(ln net.Listener) {
	b.mu.Lock()
	b.ln = ln
	if a := ln.Addr().String(); a != b.addr {
		b.addr = a // the port the system chose: Reopen keeps it
	}
	b.mu.Unlock()
	Serve(ln, &b.accepts)
}

// Addr is the backend's host:port.
func (b *Backend) Addr() string { return b.addr }

// Port is the backend's port.
func (b *Backend) Port() int {
	_, p, _ := net.SplitHostPort(b.addr)
	n, _ := strconv.Atoi(p)
	return n
}

// Accepts is the number of connections accepted so far.
func (b *Backend) Accepts() int64 { return b.accepts.Load() }

// Close stops listening: connections are refused until Reopen.
func (b *Backend) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ln != nil {
		_ = b.ln.Close()
		b.ln = nil
	}
}

// Reopen listens on the backend's address again (nothing when it is open), waiting up
// to 5 s while the address is still taken.
func (b *Backend) Reopen() {
	b.t.Helper()
	b.mu.Lock()
	open := b.ln != nil
	b.mu.Unlock()
	if open {
		return
	}
	var ln net.Listener
	wait.For(b.t, 5*time.Second, "listening again on "+b.addr, func() bool {
		var err error
		ln, err = net.Listen("tcp", b.addr)
		return err == nil
	})
	b.serve(ln)
}
