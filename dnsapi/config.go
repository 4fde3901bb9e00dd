package dnsapi

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Defaults of a node's DNS interface.
const (
	// DefaultAddr is the address `roster server` and `roster dev` serve DNS on.
	DefaultAddr = "127.0.0.1:8600"
	// DefaultDomain is the zone Roster answers for.
	DefaultDomain = "roster."
	// DefaultTTL is the TTL of every record answered.
	DefaultTTL = 5 * time.Second
	// DefaultMaxAnswers caps the records of one answer section.
	DefaultMaxAnswers = 64
	// DefaultMaxClients bounds the rate limiter's table of client addresses.
	DefaultMaxClients = 10000
	// DefaultMaxTCPConns bounds the TCP connections served at once.
	DefaultMaxTCPConns = 256
	// MaxAnswersLimit is the largest MaxAnswers accepted.
	MaxAnswersLimit = 4096
	// maxUDPResponse is the largest UDP response sent, whatever a client's EDNS0
	// buffer size says: the size the server advertises (udpReadSize, the DNS Flag Day
	// 2020 figure), so that a small query spoofed from a victim's address gets at most
	// some 1.2 KiB back (a larger answer sets TC; the client asks again over TCP).
	maxUDPResponse = udpReadSize
	// udpReadSize is the receive buffer of a UDP query, advertised in EDNS0 answers.
	udpReadSize = 1232
)

// Config configures a node's DNS interface. Zero values take the defaults, except
// Addr (empty: no DNS) and RateLimit (0: no limit).
type Config struct {
	// Addr is the UDP and TCP address to serve on (host:port; port 0 picks a free port,
	// the same for both). Empty disables DNS.
	Addr string
	// Domain is the zone answered (default "roster."). Names outside it are REFUSED.
	Domain string
	// TTL is the TTL of every record answered (default 5s; rounded down to whole
	// seconds, so below 1s it is 0: never cached).
	TTL time.Duration
	// NegativeTTL is the SOA minimum, how long resolvers cache NXDOMAIN and NODATA
	// answers (default: TTL).
	NegativeTTL time.Duration
	// MaxAnswers caps the records of one answer (default 64): a service with more
	// qualifying instances is answered with a random subset of that size.
	MaxAnswers int
	// RateLimit is the queries per second each client address may send (IPv6 clients
	// are counted per /64); 0 means no limit. Queries over it are answered REFUSED.
	RateLimit float64
	// RateBurst is how many queries a client may send at once before RateLimit applies
	// (default: one second's worth, at least 1).
	RateBurst int
	// MaxClients bounds the table of client addresses the rate limiter tracks
	// (default 10000); past it, clients it has no room for share one bucket.
	MaxClients int
	// MaxTCPConns bounds the TCP connections served at once (default 256).
	MaxTCPConns int
	// MaxStale, when positive, makes a follower that has not heard from the leader for
	// longer answer SERVFAIL instead of its stale state. 0: always answer.
	MaxStale time.Duration
}

// Validate checks the configuration without binding anything.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults fills the zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return c, fmt.Errorf("dns-addr: %w", err)
	}
	if c.Domain == "" {
		c.Domain = DefaultDomain
	}
	d, err := normalizeDomain(c.Domain)
	if err != nil {
		return c, err
	}
	c.Domain = d
	if c.TTL < 0 || c.NegativeTTL < 0 || c.MaxStale < 0 {
		return c, errors.New("dns: TTL, negative TTL and max stale must not be negative")
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.NegativeTTL == 0 {
		c.NegativeTTL = c.TTL
	}
	if c.TTL > math.MaxInt32*time.Second || c.NegativeTTL > math.MaxInt32*time.Second {
		return c, errors.New("dns: TTL too large")
	}
	switch {
	case c.MaxAnswers == 0:
		c.MaxAnswers = DefaultMaxAnswers
	case c.MaxAnswers < 0 || c.MaxAnswers > MaxAnswersLimit:
		return c, fmt.Errorf("dns-max-answers: must be between 1 and %d, got %d", MaxAnswersLimit, c.MaxAnswers)
	}
	if c.RateLimit < 0 || math.IsNaN(c.RateLimit) || math.IsInf(c.RateLimit, 0) {
		return c, fmt.Errorf("dns-rate-limit: must be a non-negative number, got %v", c.RateLimit)
	}
	if c.RateBurst < 0 {
		return c, fmt.Errorf("dns-rate-burst: must not be negative, got %d", c.RateBurst)
	}
	if c.RateBurst == 0 {
		c.RateBurst = max(1, int(math.Ceil(min(c.RateLimit, math.MaxInt32))))
	}
	if c.MaxClients < 0 || c.MaxTCPConns < 0 {
		return c, errors.New("dns: MaxClients and MaxTCPConns must not be negative")
	}
	if c.MaxClients == 0 {
		c.MaxClients = DefaultMaxClients
	}
	if c.MaxTCPConns == 0 {
		c.MaxTCPConns = DefaultMaxTCPConns
	}
	return c, nil
}

// normalizeDomain returns the domain in canonical form (lower case, fully qualified).
// The root is refused: Roster must never claim names it does not own.
func normalizeDomain(d string) (string, error) {
	d = dns.CanonicalName(strings.TrimSpace(d))
	if _, ok := dns.IsDomainName(d); !ok || d == "." {
		return "", fmt.Errorf("dns-domain: %q is not a domain name below the root", d)
	}
	return d, nil
}
