package dnsapi

import (
	"net/netip"
	"testing"
	"time"
)

// clock is a manual time source.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestLimiter_TokenBucketPerClient(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	l := newLimiter(10, 3, 100, c.now)
	a, b := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	for i := range 3 {
		if !l.allow(a) {
			t.Fatalf("query %d within the burst refused", i+1)
		}
	}
	if l.allow(a) {
		t.Fatal("query past the burst allowed")
	}
	if !l.allow(b) {
		t.Fatal("another client is limited by the first one's bucket")
	}
	c.advance(100 * time.Millisecond) // one token at 10/s
	if !l.allow(a) || l.allow(a) {
		t.Fatal("after 100ms at 10/s exactly one more query is allowed")
	}
	c.advance(time.Hour) // refills to the burst, never past it
	for i := range 3 {
		if !l.allow(a) {
			t.Fatalf("query %d after a refill refused", i+1)
		}
	}
	if l.allow(a) {
		t.Fatal("a bucket refilled past its burst")
	}
}

func TestLimiter_IPv6PerSlash64AndMappedIPv4(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	l := newLimiter(1, 1, 100, c.now)
	if !l.allow(netip.MustParseAddr("fd00::1")) {
		t.Fatal("first query refused")
	}
	if l.allow(netip.MustParseAddr("fd00::ffff:2")) {
		t.Fatal("an address of the same /64 has a bucket of its own")
	}
	if !l.allow(netip.MustParseAddr("fd00:0:0:1::1")) {
		t.Fatal("another /64 shares the bucket")
	}
	if !l.allow(netip.MustParseAddr("127.0.0.1")) || l.allow(netip.MustParseAddr("::ffff:127.0.0.1")) {
		t.Fatal("an IPv4-mapped address is not the IPv4 client")
	}
}

func TestLimiter_TableIsBounded(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	const maxClients = 50
	l := newLimiter(1, 2, maxClients, c.now)
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 1, byte(i >> 8), byte(i)}) }
	for i := range 10 * maxClients {
		l.allow(addr(i))
		if n := l.size(); n > maxClients {
			t.Fatalf("table holds %d clients, bound %d", n, maxClients)
		}
	}
	// Clients beyond the table share the overflow bucket: burst 2 for all of them.
	c.advance(500 * time.Millisecond) // not long enough for a sweep to free anything
	allowed := 0
	for i := 20 * maxClients; i < 21*maxClients; i++ {
		if l.allow(addr(i)) {
			allowed++
		}
	}
	if allowed > 3 {
		t.Fatalf("%d new clients allowed with a full table, want the overflow bucket's few", allowed)
	}
	// Once the tracked clients' buckets have refilled, a sweep makes room again.
	c.advance(10 * time.Second)
	if !l.allow(addr(30 * maxClients)) {
		t.Fatal("a new client refused after the table's clients went idle")
	}
	if n := l.size(); n != 1 {
		t.Fatalf("table holds %d clients after the sweep, want 1", n)
	}
}

func TestLimiter_NilAllowsEverything(t *testing.T) {
	var l *limiter
	if !l.allow(netip.MustParseAddr("127.0.0.1")) {
		t.Fatal("no limiter must allow")
	}
}
