package healthcheck

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rosterhq/roster/internal/testnet"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"golang.org/x/net/dns/dnsmessage"
)

func mustPolicy(t *testing.T, allow, deny string) Policy {
	t.Helper()
	p, err := ParsePolicy(allow, deny)
	if err != nil {
		t.Fatalf("ParsePolicy(%q, %q): %v", allow, deny, err)
	}
	return p
}

func TestPolicy_AllowDeny(t *testing.T) {
	tests := []struct {
		name, allow, deny string
		addr              string
		want              bool
	}{
		{"default allows a private address", "", "", "10.1.2.3", true},
		{"default allows loopback", "", "", "127.0.0.1", true},
		{"default denies cloud metadata", "", "", "169.254.169.254", false},
		{"default denies this-network", "", "", "0.0.0.0", false},
		{"default denies IPv4 multicast", "", "", "224.0.0.251", false},
		{"default denies IPv6 link-local", "", "", "fe80::1", false},
		{"default denies IPv6 link-local with a zone", "", "", "fe80::1%eth0", false},
		{"default denies IPv6 multicast", "", "", "ff02::1", false},
		{"default allows a global IPv6 address", "", "", "2001:db8::1", true},
		{"default denies IPv4-mapped metadata", "", "", "::ffff:169.254.169.254", false},
		{"loopback-only allows 127.x", LoopbackOnly, "", "127.45.6.7", true},
		{"loopback-only allows ::1", LoopbackOnly, "", "::1", true},
		{"loopback-only refuses a private address", LoopbackOnly, "", "10.0.0.3", false},
		{"loopback-only refuses IPv6 global", LoopbackOnly, "", "2001:db8::1", false},
		{"loopback-only allows IPv4-mapped loopback", LoopbackOnly, "", "::ffff:127.0.0.1", true},
		{"deny wins over allow", LoopbackOnly, "127.0.0.2/32", "127.0.0.2", false},
		{"deny of one address leaves its neighbour", LoopbackOnly, "127.0.0.2/32", "127.0.0.3", true},
		{"a bare address is a /32", "", "192.0.2.7", "192.0.2.7", false},
		{"a bare address denies only itself", "", "192.0.2.7", "192.0.2.8", true},
		{"deny none allows link-local", "", "none", "169.254.169.254", true},
		{"an explicit deny list replaces the default", "", "10.0.0.0/8", "169.254.169.254", true},
		{"an explicit deny list applies", "", "10.0.0.0/8", "10.9.9.9", false},
		{"IPv6 allow range", "2001:db8::/32", "", "2001:db8:1::5", true},
		{"IPv6 allow range excludes IPv4", "2001:db8::/32", "", "192.0.2.1", false},
		{"unmasked prefix is masked", "127.0.0.1/8", "none", "127.9.9.9", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPolicy(t, tt.allow, tt.deny)
			if got := p.Allowed(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Fatalf("Allowed(%s) under %s = %v, want %v", tt.addr, p, got, tt.want)
			}
		})
	}
}

func TestPolicy_ZeroIsDefault(t *testing.T) {
	var p Policy
	if !p.IsZero() || p.Allowed(netip.MustParseAddr("169.254.169.254")) || !p.Allowed(netip.MustParseAddr("10.0.0.1")) {
		t.Fatalf("zero policy %s: want the default deny list", p)
	}
	if got := strings.Join(p.Deny(), ","); got != DefaultProbeDeny {
		t.Fatalf("Deny() = %s, want %s", got, DefaultProbeDeny)
	}
	if len(p.Allow()) != 0 || p.Allow() == nil {
		t.Fatalf("Allow() = %#v, want an empty list", p.Allow())
	}
}

func TestParsePolicy_RejectsBadRanges(t *testing.T) {
	for _, tc := range []struct{ allow, deny string }{
		{"10.0.0.0/33", ""}, {"not-an-ip", ""}, {"", "127.0.0.0/8,bogus"}, {"localhost", ""}, {"", "1.2.3.4/x"},
	} {
		_, err := ParsePolicy(tc.allow, tc.deny)
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ParsePolicy(%q, %q) = %v, want ErrInvalidConfig", tc.allow, tc.deny, err)
		}
	}
}

// countingListener accepts on 127.0.0.1 and counts connections.
func countingListener(t *testing.T, network, addr string) (net.Listener, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("listen %s %s: %v", network, addr, err)
		}
		t.Skipf("listen %s %s (no such loopback here?): %v", network, addr, err)
	}
	var n atomic.Int64
	testnet.Serve(ln, &n)
	t.Cleanup(func() { _ = ln.Close() })
	return ln, &n
}

func tcpSpec() *spec {
	return newSpec(model.HealthCheck{Type: model.CheckTCP, Interval: model.Duration(time.Second), Timeout: model.Duration(time.Second), Rise: 1, Fall: 1})
}

func TestChecker_DeniedLiteralIsNeverDialed(t *testing.T) {
	ln, accepts := countingListener(t, "tcp", "127.0.0.1:0")
	var dials atomic.Int64
	c := mustNewChecker(t, Config{
		Policy: mustPolicy(t, LoopbackOnly, "127.0.0.1/32"),
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, address)
		},
	})
	o := c.probe(context.Background(), tcpSpec(), ln.Addr().String(), "")
	if o.ok || o.class != OutcomeDenied || o.err != "address 127.0.0.1 is outside the probe policy" {
		t.Fatalf("outcome %+v: want denied", o)
	}
	if dials.Load() != 0 || accepts.Load() != 0 {
		t.Fatalf("dials %d, accepts %d: a denied address must not be dialed", dials.Load(), accepts.Load())
	}
}

func TestPolicyDialer_DeniesNameResolvingIntoDeniedRange(t *testing.T) {
	// localhost resolves to loopback addresses only; denying all of loopback must refuse
	// it in the Control hook, before any connect.
	ln, accepts := countingListener(t, "tcp", "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	c := mustNewChecker(t, Config{Policy: mustPolicy(t, "", "127.0.0.0/8,::1/128")})
	o := c.probe(context.Background(), tcpSpec(), net.JoinHostPort("localhost", port), "")
	if o.ok || o.class != OutcomeDenied || !strings.HasSuffix(o.err, "is outside the probe policy") {
		t.Fatalf("outcome %+v: want denied", o)
	}
	if accepts.Load() != 0 {
		t.Fatalf("%d connections accepted from a denied probe", accepts.Load())
	}
	// The same name under a policy that allows loopback connects.
	c = mustNewChecker(t, Config{Policy: mustPolicy(t, LoopbackOnly, "")})
	if o := c.probe(context.Background(), tcpSpec(), net.JoinHostPort("localhost", port), ""); !o.ok {
		t.Fatalf("allowed name: %+v", o)
	}
}

// fakeDNS answers A queries for one name with whatever addr() returns at that moment,
// over in-memory connections handed to a net.Resolver.
type fakeDNS struct {
	mu      sync.Mutex
	addr    netip.Addr
	queries int
}

func (f *fakeDNS) set(a string) {
	f.mu.Lock()
	f.addr = netip.MustParseAddr(a)
	f.mu.Unlock()
}

func (f *fakeDNS) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		client, server := net.Pipe()
		go f.serve(server)
		return client, nil
	}}
}

// serve answers one query. A net.Pipe is not a PacketConn, so the resolver frames
// messages as over TCP: a two-byte length, then the message.
func (f *fakeDNS) serve(conn net.Conn) {
	defer conn.Close()
	var l [2]byte
	if _, err := io.ReadFull(conn, l[:]); err != nil {
		return
	}
	buf := make([]byte, int(l[0])<<8|int(l[1]))
	if _, err := io.ReadFull(conn, buf); err != nil {
		return
	}
	var p dnsmessage.Parser
	h, err := p.Start(buf)
	if err != nil {
		return
	}
	q, err := p.Question()
	if err != nil {
		return
	}
	f.mu.Lock()
	a := f.addr
	f.queries++
	f.mu.Unlock()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionAvailable: true})
	b.EnableCompression()
	_ = b.StartQuestions()
	_ = b.Question(q)
	_ = b.StartAnswers()
	rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}
	if q.Type == dnsmessage.TypeA && a.Is4() {
		_ = b.AResource(rh, dnsmessage.AResource{A: a.As4()})
	}
	msg, err := b.Finish()
	if err != nil {
		return
	}
	_, _ = conn.Write(append([]byte{byte(len(msg) >> 8), byte(len(msg))}, msg...))
}

func TestPolicyDialer_ChecksEveryResolution(t *testing.T) {
	ln, accepts := countingListener(t, "tcp", "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	dns := &fakeDNS{}
	dns.set("127.0.0.1")
	policy := mustPolicy(t, LoopbackOnly, "127.0.0.2/32")
	c := mustNewChecker(t, Config{Policy: policy, Dial: policy.dialer(dns.resolver())})
	target := net.JoinHostPort("db.roster.test", port)

	if o := c.probe(context.Background(), tcpSpec(), target, ""); !o.ok {
		t.Fatalf("first resolution (127.0.0.1): %+v", o)
	}
	wait.For(t, 5*time.Second, "the allowed probe's connection accepted", func() bool { return accepts.Load() == 1 })
	// The name now re-resolves into a denied address: refused, nothing dialed.
	dns.set("127.0.0.2")
	o := c.probe(context.Background(), tcpSpec(), target, "")
	if o.ok || o.class != OutcomeDenied || o.err != "address 127.0.0.2 is outside the probe policy" {
		t.Fatalf("second resolution (127.0.0.2): %+v, want denied", o)
	}
	// And into an address outside the allow list.
	dns.set("192.0.2.10")
	o = c.probe(context.Background(), tcpSpec(), target, "")
	if o.class != OutcomeDenied || o.err != "address 192.0.2.10 is outside the probe policy" {
		t.Fatalf("third resolution (192.0.2.10): %+v, want denied", o)
	}
	if accepts.Load() != 1 {
		t.Fatalf("accepts = %d: denied probes reached the listener", accepts.Load())
	}
	if dns.queries < 3 {
		t.Fatalf("%d DNS queries: every probe must resolve again", dns.queries)
	}
}

func TestPolicyDialer_IPv6(t *testing.T) {
	ln, accepts := countingListener(t, "tcp6", "[::1]:0")
	p := mustPolicy(t, "", "::1/128")
	c := mustNewChecker(t, Config{Policy: p})
	o := c.probe(context.Background(), tcpSpec(), ln.Addr().String(), "")
	if o.class != OutcomeDenied || o.err != "address ::1 is outside the probe policy" {
		t.Fatalf("outcome %+v: want denied", o)
	}
	// Past the literal check too: the Control hook refuses what the dialer resolved.
	if _, err := p.Dialer()(context.Background(), "tcp", ln.Addr().String()); !IsDenied(err) {
		t.Fatalf("Dialer() on a denied IPv6 address: %v", err)
	}
	if accepts.Load() != 0 {
		t.Fatalf("%d connections accepted", accepts.Load())
	}
	c = mustNewChecker(t, Config{Policy: mustPolicy(t, LoopbackOnly, "")})
	if o := c.probe(context.Background(), tcpSpec(), ln.Addr().String(), ""); !o.ok {
		t.Fatalf("allowed ::1: %+v", o)
	}
}

func TestPolicy_StringAndLists(t *testing.T) {
	p := mustPolicy(t, "127.0.0.0/8, ::1/128", "127.0.0.9")
	if got := p.String(); got != "allow=127.0.0.0/8,::1/128 deny=127.0.0.9/32" {
		t.Fatalf("String() = %s", got)
	}
	if got := mustPolicy(t, "", "none").String(); got != "allow=all deny=none" {
		t.Fatalf("String() = %s", got)
	}
}
