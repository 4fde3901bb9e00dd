package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
)

// DefaultProbeDeny is the deny list of a Policy built without one: link-local
// addresses (where cloud metadata services answer, 169.254.169.254), "this network",
// and multicast, for IPv4 and IPv6.
const DefaultProbeDeny = "169.254.0.0/16,fe80::/10,0.0.0.0/8,224.0.0.0/4,ff00::/8"

// LoopbackOnly is the allow list that confines probes to this machine; tests and
// benchmarks run their nodes with it.
const LoopbackOnly = "127.0.0.0/8,::1/128"

// Policy decides which addresses the prober may connect to: an address is probed only
// if it is in an allowed range and in no denied one. The zero Policy is the default
// one: every address except those of DefaultProbeDeny. A Policy is immutable.
//
// The decision is made on the address actually dialed, after DNS resolution, in the
// dialer's Control hook, so a name that resolves (or later re-resolves) into a denied
// range is refused too, and a refused probe sends no packet.
type Policy struct {
	set   bool           // false: the zero Policy, which means the default
	allow []netip.Prefix // empty: every address
	deny  []netip.Prefix
}

// defaultDeny is DefaultProbeDeny parsed.
var defaultDeny = func() []netip.Prefix {
	ps, err := parsePrefixes(DefaultProbeDeny)
	if err != nil {
		panic(err)
	}
	return ps
}()

// IsZero reports whether p is the zero Policy (the default one), as opposed to one
// built by NewPolicy or ParsePolicy, even with the same ranges.
func (p Policy) IsZero() bool { return !p.set }

// ranges returns the allowed and denied ranges in force.
func (p Policy) ranges() (allow, deny []netip.Prefix) {
	if !p.set {
		return nil, defaultDeny
	}
	return p.allow, p.deny
}

// ParsePolicy builds a Policy from comma-separated CIDR lists. An empty allow list
// allows every address; an empty deny string takes DefaultProbeDeny, and "none" denies
// nothing. A bare address is taken as a single-address prefix (/32 or /128).
func ParsePolicy(allow, deny string) (Policy, error) {
	a, err := parsePrefixes(allow)
	if err != nil {
		return Policy{}, fmt.Errorf("%w: probe allow list: %v", ErrInvalidConfig, err)
	}
	if strings.TrimSpace(deny) == "" {
		deny = DefaultProbeDeny
	}
	var d []netip.Prefix
	if !strings.EqualFold(strings.TrimSpace(deny), "none") {
		if d, err = parsePrefixes(deny); err != nil {
			return Policy{}, fmt.Errorf("%w: probe deny list: %v", ErrInvalidConfig, err)
		}
	}
	return NewPolicy(a, d), nil
}

// NewPolicy returns the Policy of the given ranges (nil allow: every address).
func NewPolicy(allow, deny []netip.Prefix) Policy {
	norm := func(ps []netip.Prefix) []netip.Prefix {
		out := make([]netip.Prefix, 0, len(ps))
		for _, p := range ps {
			out = append(out, p.Masked())
		}
		return out
	}
	return Policy{set: true, allow: norm(allow), deny: norm(deny)}
}

func parsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR range or an IP address", f)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR range", f)
		}
		out = append(out, p)
	}
	return out, nil
}

// Allowed reports whether addr may be probed. IPv4-mapped IPv6 addresses are judged
// as the IPv4 address they carry; an address with a zone is judged without it.
func (p Policy) Allowed(addr netip.Addr) bool {
	addr = addr.Unmap().WithZone("")
	if !addr.IsValid() {
		return false
	}
	allow, deny := p.ranges()
	in := func(r netip.Prefix) bool { return r.Contains(addr) }
	if len(allow) > 0 && !slices.ContainsFunc(allow, in) {
		return false
	}
	return !slices.ContainsFunc(deny, in)
}

// Allow and Deny return the policy's ranges as strings (Allow empty: every address).
func (p Policy) Allow() []string {
	a, _ := p.ranges()
	return prefixStrings(a)
}

// Deny returns the denied ranges as strings.
func (p Policy) Deny() []string {
	_, d := p.ranges()
	return prefixStrings(d)
}

// String describes the policy for logs.
func (p Policy) String() string {
	allow := "all"
	if a := p.Allow(); len(a) > 0 {
		allow = strings.Join(a, ",")
	}
	deny := "none"
	if d := p.Deny(); len(d) > 0 {
		deny = strings.Join(d, ",")
	}
	return "allow=" + allow + " deny=" + deny
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// DeniedError is the error of a probe the policy refused before any packet was sent.
type DeniedError struct {
	Addr netip.Addr
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("address %s is outside the probe policy", e.Addr)
}

// Check returns a *DeniedError when the IP of address ("ip:port", as a dialer's
// Control hook receives it) is not allowed. An address that is not an IP literal is
// refused: a Control hook only ever sees resolved addresses.
func (p Policy) Check(address string) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("probe policy: %q is not an IP address", host)
	}
	if !p.Allowed(a) {
		return &DeniedError{Addr: a.Unmap().WithZone("")}
	}
	return nil
}

// DialFunc opens a probe connection.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Dialer returns a dialer that enforces the policy on every address it connects to,
// after name resolution: net.Dialer calls the Control hook for each resolved address,
// before the socket connects, so a refused address never sees a packet. TCP keep-alive
// is off (a probe connection lives for one check).
func (p Policy) Dialer() DialFunc { return p.dialer(nil) }

// dialer is Dialer with a resolver (nil: the default one).
func (p Policy) dialer(r *net.Resolver) DialFunc {
	d := &net.Dialer{
		Resolver:  r,
		KeepAlive: -1,
		Control: func(_, address string, _ syscall.RawConn) error {
			return p.Check(address)
		},
	}
	return d.DialContext
}

// IsDenied reports whether err comes from the probe policy.
func IsDenied(err error) bool {
	var d *DeniedError
	return errors.As(err, &d)
}
