package testnet

import (
	"net"
	"testing"
	"time"

	"github.com/rosterhq/roster/internal/wait"
)

// dialOK reports whether a connection to addr is accepted.
func dialOK(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// A Backend accepts while open, refuses once closed, accepts again on the same address
// after Reopen, and counts what it accepted.
func TestBackend_CloseAndReopen(t *testing.T) {
	b := New(t, "127.0.0.1")
	if b.Port() == 0 {
		t.Fatalf("no port in %q", b.Addr())
	}
	if !dialOK(b.Addr()) {
		t.Fatal("an open backend refused a connection")
	}
	wait.For(t, 5*time.Second, "the accept counted", func() bool { return b.Accepts() == 1 })
	b.Close()
	if dialOK(b.Addr()) {
		t.Fatal("a closed backend accepted a connection")
	}
	b.Reopen()
	if !dialOK(b.Addr()) {
		t.Fatal("a reopened backend refused a connection")
	}
	wait.For(t, 5*time.Second, "both accepts counted", func() bool { return b.Accepts() == 2 })
	again := At(t, "127.0.0.1:0")
	if again.Port() == 0 || !dialOK(again.Addr()) {
		t.Fatalf("At on port 0 does not listen on a port of its own (%s)", again.Addr())
	}
}
