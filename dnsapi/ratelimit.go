package dnsapi

import (
	"net/netip"
	"sync"
	"time"
)

// limiter is a token bucket per client address: rate tokens a second, at most burst
// of them; a query takes one. IPv6 clients are counted per /64, since one host
// usually holds a whole /64.
//
// The table holds at most max clients. When it is full, buckets that have refilled to
// the burst are forgotten (a new bucket is full too, so nothing changes for them), at
// most once per sweepEvery; clients that still find no room share one overflow bucket,
// so a flood from many addresses is limited as a whole and memory stays bounded.
type limiter struct {
	rate  float64 // tokens per second
	burst float64
	max   int
	now   func() time.Time

	mu        sync.Mutex
	clients   map[netip.Addr]bucket
	overflow  bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

// sweepEvery is how often a full table is swept for idle clients at most.
const sweepEvery = time.Second

func newLimiter(rate float64, burst, maxClients int, now func() time.Time) *limiter {
	if now == nil {
		now = time.Now
	}
	return &limiter{
		rate: rate, burst: float64(burst), max: maxClients, now: now,
		clients:  make(map[netip.Addr]bucket),
		overflow: bucket{tokens: float64(burst)},
	}
}

// clientKey is the table key of a client address.
func clientKey(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return a
}

// allow takes a token from the client's bucket and reports whether there was one.
func (l *limiter) allow(client netip.Addr) bool {
	if l == nil {
		return true
	}
	key := clientKey(client)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.clients[key]
	if !ok {
		if len(l.clients) >= l.max {
			l.sweep(now)
		}
		if len(l.clients) >= l.max {
			return l.overflow.take(now, l.rate, l.burst)
		}
		b = bucket{tokens: l.burst, last: now}
	}
	allowed := b.take(now, l.rate, l.burst)
	l.clients[key] = b
	return allowed
}

// sweep forgets the clients whose bucket has refilled, at most once per sweepEvery.
func (l *limiter) sweep(now time.Time) {
	if !l.lastSweep.IsZero() && now.Sub(l.lastSweep) < sweepEvery {
		return
	}
	l.lastSweep = now
	for k, b := range l.clients {
		if b.refilled(now, l.rate) >= l.burst {
			delete(l.clients, k)
		}
	}
}

// size is the number of clients in the table.
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}

func (b *bucket) refilled(now time.Time, rate float64) float64 {
	if el := now.Sub(b.last); el > 0 {
		return b.tokens + el.Seconds()*rate
	}
	return b.tokens
}

func (b *bucket) take(now time.Time, rate, burst float64) bool {
	b.tokens = min(b.refilled(now, rate), burst)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	return false
}
