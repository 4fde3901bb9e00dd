package grpcapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/rosterhq/roster/internal/grpcflood"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/nacos/nacospb"
)

// flood runs attacks against e and stops them at the end of the test.
type flood struct {
	t      *testing.T
	target grpcflood.Target
	ctx    context.Context
	wg     sync.WaitGroup
	mu     sync.Mutex
	// closed counts the attack connections the server ended.
	closed int
}

func newFlood(t *testing.T, e *grpcEnv) *flood {
	ctx, cancel := context.WithCancel(context.Background())
	f := &flood{t: t, target: grpcflood.Target{Addr: e.addr}, ctx: ctx}
	t.Cleanup(func() { cancel(); f.wg.Wait() })
	return f
}

func (f *flood) serverClosed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// idle opens n connections from from that send HTTP/2's preface and nothing else.
func (f *flood) idle(from netip.Addr, n int) {
	for range n {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			if closed, err := f.target.Idle(f.ctx, from); closed || err != nil {
				f.mu.Lock()
				f.closed++
				f.mu.Unlock()
			}
		}()
	}
}

func gauge(e *grpcEnv) int { return int(testutil.ToFloat64(e.g.m.transports)) }

func refusedFor(e *grpcEnv, reason string) int {
	return int(testutil.ToFloat64(e.g.m.transportsRefused.WithLabelValues(reason)))
}

func closedFor(e *grpcEnv, reason string) int {
	return int(testutil.ToFloat64(e.g.m.transportsClosed.WithLabelValues(reason)))
}

// TestGRPC_ConnectionBounds: the connections of one source address, those not yet
// trusted and all of them are bounded; a connection beyond a bound is closed as soon as
// it is accepted, and a registered client (trusted: ACLs are off) keeps working.
func TestGRPC_ConnectionBounds(t *testing.T) {
	e := newGRPCEnv(t, func(c *Config) { c.MaxConnsPerIP, c.MaxUntrusted = 3, 5 })
	legit := e.connect(false) // from 127.0.0.1: registered, so trusted
	f := newFlood(t, e)
	f.idle(grpcflood.Loopback(0), 5)
	wait.For(t, 10*time.Second, "2 of 5 connections from one address refused", func() bool {
		return refusedFor(e, rpcRefusedPerIP) == 2 && f.serverClosed() == 2 && gauge(e) == 4
	})
	// A trusted connection does not count against the untrusted bound: 2 more fit.
	f.idle(grpcflood.Loopback(1), 3)
	wait.For(t, 10*time.Second, "the untrusted bound (5) to refuse one", func() bool {
		return refusedFor(e, rpcRefusedUntrusted) == 1 && f.serverClosed() == 3 && gauge(e) == 6
	})
	typ, m := legit.call(rpcHealthCheckRequest, map[string]any{})
	result(t, typ, m, rpcHealthCheckResponse, 200, 0)

	all := newGRPCEnv(t, func(c *Config) { c.MaxTransports = 3 })
	g := newFlood(t, all)
	g.idle(grpcflood.Loopback(0), 2)
	g.idle(grpcflood.Loopback(1), 2)
	wait.For(t, 10*time.Second, "the total bound (3) to refuse one", func() bool {
		return refusedFor(all, rpcRefusedTotal) == 1 && g.serverClosed() == 1 && gauge(all) == 3
	})
}

// TestGRPC_SetupTimeout: a connection that sends HTTP/2's preface and no
// ConnectionSetupRequest is closed after SetupTimeout; a registered one is not.
func TestGRPC_SetupTimeout(t *testing.T) {
	e := newGRPCEnv(t, func(c *Config) { c.SetupTimeout, c.EjectInterval = 300*time.Millisecond, 50*time.Millisecond })
	legit := e.connect(false)
	f := newFlood(t, e)
	f.idle(grpcflood.Loopback(0), 3)
	wait.For(t, 10*time.Second, "the idle connections to be closed", func() bool {
		return f.serverClosed() == 3 && closedFor(e, rpcClosedSetupTimeout) == 3
	})
	wait.For(t, 5*time.Second, "their counts to go", func() bool { return gauge(e) == 1 })
	typ, m := legit.call(rpcHealthCheckRequest, map[string]any{})
	result(t, typ, m, rpcHealthCheckResponse, 200, 0)
}

// TestGRPC_UnauthenticatedMessageLimit: before its setup a connection may send only
// small messages (a larger one closes it); once registered and trusted (ACLs off) it
// may send up to gRPC's limit.
func TestGRPC_UnauthenticatedMessageLimit(t *testing.T) {
	e := newGRPCEnv(t, nil)
	big := []byte(`{"module":"internal","x":"` + strings.Repeat("x", 100<<10) + `"}`)
	c := e.dial()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := callPayload(ctx, c, rpcServerCheckRequest, big); status.Code(err) != codes.Unavailable {
		t.Fatalf("a 100 KiB message before the setup: %v, want the connection closed (Unavailable)", err)
	}
	if got := closedFor(e, rpcClosedTooLarge); got != 1 {
		t.Fatalf("message_too_large closes: %d, want 1", got)
	}
	legit := e.connect(false)
	typ, m := legit.callRaw(rpcServiceListRequest, append([]byte(`{"pageNo":1,"pageSize":10,"x":"`), append([]byte(strings.Repeat("x", 200<<10)), `"}`...)...))
	result(t, typ, m, rpcServiceListResponse, 200, 0)
}

// TestGRPC_UnauthenticatedMemoryBounded: streams of large messages sent, but for their
// last byte, before any registration or token, are not buffered: each connection is
// closed at its first message's length prefix, and the heap stays far below what the
// attack tried to make the server hold (before the bounds, gRPC granted the window of
// every message and buffered every byte sent, for as long as the attacker held on).
func TestGRPC_UnauthenticatedMemoryBounded(t *testing.T) {
	e := newGRPCEnv(t, nil)
	var sent atomic.Int64
	target := grpcflood.Target{Addr: e.addr, Sent: &sent}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	const conns, streams, size = 8, 4, 1 << 20 // under the limit of trusted connections
	const attempted = conns * streams * size
	before := heap()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var closed atomic.Int32
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, byServer, err := target.Hold(ctx, grpcflood.Loopback(i), streams, size); byServer || err != nil {
				closed.Add(1)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	wait.For(t, 30*time.Second, "the attack to be cut off or to have sent 90% of its bytes", func() bool {
		return closed.Load() == conns || sent.Load() >= attempted*9/10
	})
	growth := int64(heap()) - int64(before)
	t.Logf("sent %d KiB of %d MiB attempted; heap growth %d KiB; %d of %d connections closed by the server",
		sent.Load()>>10, attempted>>20, growth>>10, closed.Load(), conns)
	if growth > attempted/4 {
		t.Fatalf("heap grew by %d MiB while %d MiB were held unauthenticated: the server buffered them", growth>>20, attempted>>20)
	}
	if closed.Load() != conns {
		t.Fatalf("%d of %d connections closed by the server", closed.Load(), conns)
	}
	if got := closedFor(e, rpcClosedTooLarge); got != conns {
		t.Fatalf("message_too_large closes: %d, want %d", got, conns)
	}
}

// callPayload sends a unary request of the raw body and returns gRPC's error.
func callPayload(ctx context.Context, c *rpcClient, typ string, body []byte) (*nacospb.Payload, error) {
	return nacospb.Call(ctx, c.cc, &nacospb.Payload{Metadata: &nacospb.Metadata{Type: typ}, Body: &anypb.Any{Value: body}})
}

// TestGRPC_UntrustedPhaseWithACLs: with ACLs on, a registered connection stays
// untrusted until a request presents a token that authenticates: until then a message
// over UntrustedMessageBytes closes it, and it is closed AuthTimeout after its setup;
// once a request authenticated, larger messages pass and no timeout applies.
func TestGRPC_UntrustedPhaseWithACLs(t *testing.T) {
	e, tok := newACLEnv(t, func(c *Config) {
		c.AuthTimeout, c.EjectInterval = 500*time.Millisecond, 50*time.Millisecond
	})
	list := func(pad int) map[string]any {
		return naming("", map[string]any{"pageNo": 1, "pageSize": 10, "pad": strings.Repeat("x", pad)})
	}
	// Unauthenticated: a small message is answered (403), a large one closes the
	// connection.
	anon := e.connect(false)
	typ, m := anon.callAs("", rpcServiceListRequest, list(10))
	result(t, typ, m, rpcServiceListResponse, 500, 403)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, _ := json.Marshal(list(100 << 10))
	if _, err := callPayload(ctx, anon, rpcServiceListRequest, b); status.Code(err) != codes.Unavailable {
		t.Fatalf("a 100 KiB message before any token: %v, want the connection closed", err)
	}
	// The server ends the session after the client saw the close: wait, so that the
	// next connect counts its own registration.
	wait.For(t, 5*time.Second, "the closed session to be unregistered", func() bool { return e.g.Connections() == 0 })
	// Authenticated: the same message is served, and the connection outlives AuthTimeout.
	authed := e.connect(false)
	typ, m = authed.callAs(tok.Reader.Secret, rpcServiceListRequest, list(10))
	result(t, typ, m, rpcServiceListResponse, 200, 0)
	typ, m = authed.callAs(tok.Reader.Secret, rpcServiceListRequest, list(100<<10))
	result(t, typ, m, rpcServiceListResponse, 200, 0)
	// Registered but never authenticated: closed after AuthTimeout.
	idle := e.connect(false)
	wait.For(t, 10*time.Second, "the unauthenticated session to be closed", func() bool {
		return closedFor(e, rpcClosedAuthTimeout) >= 1
	})
	// Its client reconnects on a new transport, which is not registered (a call sent
	// before the client saw the close would fail on the old one).
	idle.ended(10 * time.Second)
	typ, m = idle.call(rpcHealthCheckRequest, map[string]any{})
	result(t, typ, m, rpcErrorResponse, 500, 301)
	typ, m = authed.callAs(tok.Reader.Secret, rpcHealthCheckRequest, map[string]any{})
	result(t, typ, m, rpcHealthCheckResponse, 200, 0)
}

// untrustedNow is the listener's count of untrusted connections.
func untrustedNow(e *grpcEnv) int {
	l := e.g.ln.Load()
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.untrusted
}

// TestGRPC_UntrustedPerSource: a source may hold at most MaxUntrustedPerIP connections
// not yet trusted, far below its bound on all connections; another source still gets
// in, and a trusted connection of the source does not count.
func TestGRPC_UntrustedPerSource(t *testing.T) {
	e := newGRPCEnv(t, func(c *Config) { c.MaxUntrustedPerIP = 3 })
	f := newFlood(t, e)
	f.idle(grpcflood.Loopback(0), 5)
	wait.For(t, 10*time.Second, "2 of 5 untrusted connections from one address refused", func() bool {
		return refusedFor(e, rpcRefusedUntrustedPerIP) == 2 && f.serverClosed() == 2 && gauge(e) == 3
	})
	f.idle(grpcflood.Loopback(1), 1)
	wait.For(t, 10*time.Second, "another address's connection", func() bool { return gauge(e) == 4 })
	// 127.0.0.1: a registered connection (trusted, ACLs off) and then 3 untrusted.
	legit := e.connect(false)
	f.idle(netip.MustParseAddr("127.0.0.1"), 3)
	wait.For(t, 10*time.Second, "3 untrusted connections beside a trusted one", func() bool { return gauge(e) == 8 })
	if got := refusedFor(e, rpcRefusedUntrustedPerIP); got != 2 {
		t.Fatalf("untrusted_per_ip refusals: %d, want 2", got)
	}
	typ, m := legit.call(rpcHealthCheckRequest, map[string]any{})
	result(t, typ, m, rpcHealthCheckResponse, 200, 0)
}

// TestGRPC_AcceptRatePerSource: a source's accepts take tokens of its bucket (a burst,
// then a rate); beyond it connections are closed at accept, closing the accepted ones
// gives no tokens back, and another source has its own bucket.
func TestGRPC_AcceptRatePerSource(t *testing.T) {
	e := newGRPCEnv(t, func(c *Config) {
		c.AcceptBurstPerIP, c.AcceptRatePerIP = 3, 1e-6 // no refill within the test
		c.SetupTimeout, c.EjectInterval = 200*time.Millisecond, 50*time.Millisecond
	})
	f := newFlood(t, e)
	f.idle(grpcflood.Loopback(0), 5)
	wait.For(t, 10*time.Second, "2 of 5 connections refused by the rate", func() bool {
		return refusedFor(e, rpcRefusedRate) == 2
	})
	wait.For(t, 10*time.Second, "the 3 accepted to be closed (no setup)", func() bool {
		return closedFor(e, rpcClosedSetupTimeout) == 3 && gauge(e) == 0
	})
	f.idle(grpcflood.Loopback(0), 1)
	wait.For(t, 10*time.Second, "the source's next connection refused: its tokens are spent", func() bool {
		return refusedFor(e, rpcRefusedRate) == 3
	})
	f.idle(grpcflood.Loopback(1), 1)
	wait.For(t, 10*time.Second, "another source's connection accepted", func() bool { return gauge(e) == 1 })
	if got := refusedFor(e, rpcRefusedRate); got != 3 {
		t.Fatalf("rate refusals: %d, want 3", got)
	}
}

// TestGRPC_UntrustedFairShare: once the node-wide untrusted bound is full, a source
// holding fewer untrusted connections than another takes the oldest of that other's,
// until they hold as many (then it is refused).
func TestGRPC_UntrustedFairShare(t *testing.T) {
	e := newGRPCEnv(t, func(c *Config) { c.MaxUntrusted, c.MaxUntrustedPerIP = 4, 8 })
	f := newFlood(t, e)
	a, b := grpcflood.Loopback(0), grpcflood.Loopback(1)
	f.idle(a, 4)
	wait.For(t, 10*time.Second, "a to hold every untrusted slot", func() bool { return untrustedNow(e) == 4 })
	for i, want := range []struct{ evicted, refused int }{{1, 0}, {2, 0}, {2, 1}} {
		f.idle(b, 1)
		wait.For(t, 10*time.Second, fmt.Sprintf("b's connection %d: %d evicted, %d refused", i+1, want.evicted, want.refused), func() bool {
			return closedFor(e, rpcClosedEvicted) == want.evicted && refusedFor(e, rpcRefusedUntrusted) == want.refused &&
				f.serverClosed() == want.evicted+want.refused && gauge(e) == 4
		})
	}
}

// TestGRPC_CleanSourceUnderAFlood: 30 sources flooding, reconnecting as soon as they
// are cut off, fill the node-wide untrusted bound; a client from a clean address still
// connects and is served, at the expense of the oldest connections of the sources
// holding the most.
func TestGRPC_CleanSourceUnderAFlood(t *testing.T) {
	const sources = 30
	e := newGRPCEnv(t, func(c *Config) { c.MaxUntrusted, c.MaxUntrustedPerIP = 2*sources, 8 })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	target := grpcflood.Target{Addr: e.addr}
	for i := range sources {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					_, _ = target.Idle(ctx, grpcflood.Loopback(i))
				}
			}()
		}
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	wait.For(t, 20*time.Second, "the flood to fill the untrusted bound", func() bool {
		return untrustedNow(e) == 2*sources && refusedFor(e, rpcRefusedUntrusted) > 0
	})
	for range 3 {
		legit := e.connect(false) // from 127.0.0.1
		typ, m := legit.call(rpcHealthCheckRequest, map[string]any{})
		result(t, typ, m, rpcHealthCheckResponse, 200, 0)
		_ = legit.cc.Close()
	}
	if closedFor(e, rpcClosedEvicted) == 0 {
		t.Fatal("no flooding connection evicted for the clean source")
	}
}

// TestGRPC_AcceptPaths: the listener's bounds hold on both of its accept paths — on a
// TCP listener's socket directly (Linux) and through any net.Listener — and a refused
// connection is closed at once, before the server reads or writes a byte.
func TestGRPC_AcceptPaths(t *testing.T) {
	e := newGRPCEnv(t, func(c *Config) { c.MaxUntrustedPerIP = 2 })
	for _, tc := range []struct {
		name string
		wrap func(net.Listener) net.Listener
	}{
		{"tcp", func(ln net.Listener) net.Listener { return ln }},
		{"any", func(ln net.Listener) net.Listener { return struct{ net.Listener }{ln} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			gl := newGuardListener(e.g, tc.wrap(ln))
			accepted := make(chan net.Conn, 3)
			go func() {
				for {
					c, err := gl.Accept()
					if err != nil {
						close(accepted)
						return
					}
					accepted <- c
				}
			}()
			before := refusedFor(e, rpcRefusedUntrustedPerIP)
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: grpcflood.Loopback(0).AsSlice()}}
			var conns []net.Conn
			for range 2 {
				c, err := d.Dial("tcp", ln.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
				if c := <-accepted; c == nil {
					t.Fatal("the listener stopped")
				} else {
					defer c.Close()
				}
			}
			// The third is reset by the server: at once (the dial itself may see it), or
			// its read ends without a byte.
			if c, err := d.Dial("tcp", ln.Addr().String()); err == nil {
				conns = append(conns, c)
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("the refused connection: read %d, %v; want it closed", n, err)
				}
			} else if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("the refused connection's dial: %v, want it reset or closed", err)
			}
			if got := refusedFor(e, rpcRefusedUntrustedPerIP) - before; got != 1 {
				t.Fatalf("untrusted_per_ip refusals: %d, want 1", got)
			}
			for _, c := range conns {
				_ = c.Close()
			}
			if err := gl.Close(); err != nil {
				t.Fatal(err)
			}
			for range accepted { // Accept returns once the listener is closed
			}
		})
	}
}

// TestGRPC_SourceOf: the per-source bounds count an IPv4 address (v4-mapped too) on
// its own and an IPv6 address by its /64.
func TestGRPC_SourceOf(t *testing.T) {
	for _, tc := range []struct{ ip, want string }{
		{"127.0.0.2", "127.0.0.2"},
		{"::ffff:127.1.2.3", "127.1.2.3"},
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::"},
		{"2001:db8:1:2:bbbb::9", "2001:db8:1:2::"},
		{"2001:db8:1:3::1", "2001:db8:1:3::"},
		{"::1", "::"},
	} {
		if got := sourceOf(netip.MustParseAddr(tc.ip).Unmap()); got != netip.MustParseAddr(tc.want) {
			t.Errorf("sourceOf(%s) = %s, want %s", tc.ip, got, tc.want)
		}
	}
}
