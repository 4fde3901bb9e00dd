package dnsapi

import (
	"encoding/hex"
	"net/netip"

	"github.com/miekg/dns"

	"github.com/rosterhq/roster/model"
)

// The names Roster answers, under the configured domain D (default "roster."):
//
//	<service>.svc.D                                  public / DEFAULT_GROUP, every cluster
//	<cluster>.<service>.svc.D                        public / DEFAULT_GROUP, one cluster
//	<service>.<group>.<namespace>.svc.D              every cluster
//	<cluster>.<service>.<group>.<namespace>.svc.D    one cluster
//	<hex>.addr.D                                     an SRV target: 8 hex digits for an
//	                                                 IPv4 address, 32 for an IPv6 one
//
// The number of labels before "svc" tells the forms apart, so no name is ambiguous: 1
// and 3 name a service, 2 and 4 put a cluster in front of one. A label is one DNS
// label, never split at a dot: a service or group whose name contains '.' is written
// with the dot escaped (orders\.db.svc.roster.), which few stub resolvers can send.

// nameKind says what a query name denotes.
type nameKind uint8

const (
	// nameOutside: not under the domain (REFUSED: Roster never recurses).
	nameOutside nameKind = iota
	// nameNone: under the domain, but no such name can exist (NXDOMAIN).
	nameNone
	// nameApex: the domain itself (its SOA).
	nameApex
	// nameEmpty: svc.D or addr.D, names with nothing but names below them (NODATA).
	nameEmpty
	// nameService: a service, maybe restricted to one cluster.
	nameService
	// nameAddr: <hex>.addr.D, which decodes to an address.
	nameAddr
)

// parsedName is what a query name denotes. Labels keep the case they were asked in.
type parsedName struct {
	kind nameKind
	// hasService: key (and cluster) name a service that may exist. A nameService
	// without it can only be a parent (below).
	hasService bool
	key        model.ServiceKey // nameService
	cluster    string           // nameService: "" for every cluster
	addr       netip.Addr       // nameAddr
	// For the one- and two-label forms: the name is also the parent of long-form
	// names in namespace parentNS (one label) or group parentGroup of namespace
	// parentNS (two labels). When no service answers to it but such names exist, it is
	// an empty non-terminal (NODATA), not NXDOMAIN.
	parentNS, parentGroup string
}

// Labels of the two subtrees under the domain.
const (
	svcLabel  = "svc"
	addrLabel = "addr"
)

// parseName parses a query name (presentation format, as the DNS library unpacked it)
// under the domain whose labels, in lower case, are domain.
func parseName(qname string, domain []string) parsedName {
	labels, ok := splitLabels(qname)
	if !ok || len(labels) < len(domain) {
		return parsedName{kind: nameOutside}
	}
	rest := len(labels) - len(domain)
	for i, d := range domain {
		if !equalFold(labels[rest+i], d) {
			return parsedName{kind: nameOutside}
		}
	}
	labels = labels[:rest]
	if len(labels) == 0 {
		return parsedName{kind: nameApex}
	}
	last := labels[len(labels)-1]
	labels = labels[:len(labels)-1]
	switch {
	case equalFold(last, svcLabel):
		return parseService(labels)
	case equalFold(last, addrLabel):
		switch len(labels) {
		case 0:
			return parsedName{kind: nameEmpty}
		case 1:
			if a, ok := decodeAddr(labels[0]); ok {
				return parsedName{kind: nameAddr, addr: a}
			}
		}
	}
	return parsedName{kind: nameNone}
}

// parseService parses the labels before "svc".
func parseService(l []string) parsedName {
	var p parsedName
	switch len(l) {
	case 0:
		return parsedName{kind: nameEmpty}
	case 1:
		p.key = model.ServiceKey{Namespace: model.DefaultNamespace, Group: model.DefaultGroup, Service: l[0]}
		if model.ValidateNamespace(l[0]) == nil {
			p.parentNS = l[0]
		}
	case 2:
		p.cluster = l[0]
		p.key = model.ServiceKey{Namespace: model.DefaultNamespace, Group: model.DefaultGroup, Service: l[1]}
		if model.ValidateGroup(l[0]) == nil && model.ValidateNamespace(l[1]) == nil {
			p.parentNS, p.parentGroup = l[1], l[0]
		}
	case 3:
		p.key = model.ServiceKey{Namespace: l[2], Group: l[1], Service: l[0]}
	case 4:
		p.cluster = l[0]
		p.key = model.ServiceKey{Namespace: l[3], Group: l[2], Service: l[1]}
	default:
		return parsedName{kind: nameNone}
	}
	p.hasService = model.ValidateServiceKey(p.key) == nil && (p.cluster == "" || model.ValidateClusterName(p.cluster) == nil)
	if !p.hasService {
		// No service can have this name, but it may still be a parent of some.
		if p.parentNS == "" {
			return parsedName{kind: nameNone}
		}
		p.key, p.cluster = model.ServiceKey{}, ""
	}
	p.kind = nameService
	return p
}

// splitLabels returns the labels of a domain name as raw bytes (escapes such as \. and
// \065 decoded), leftmost first, without the root.
func splitLabels(name string) ([]string, bool) {
	var buf [256]byte
	n, err := dns.PackDomainName(dns.Fqdn(name), buf[:], 0, nil, false)
	if err != nil {
		return nil, false
	}
	labels := make([]string, 0, 8)
	for off := 0; off < n; {
		l := int(buf[off])
		if l == 0 {
			break
		}
		if off+1+l > n {
			return nil, false
		}
		labels = append(labels, string(buf[off+1:off+1+l]))
		off += 1 + l
	}
	return labels, true
}

// equalFold compares two labels the way DNS does: ASCII letters case-insensitively,
// every other byte exactly (RFC 4343).
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerASCII(a[i]) != lowerASCII(b[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// foldASCII lowers the ASCII letters of s.
func foldASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				b[j] = lowerASCII(b[j])
			}
			return string(b)
		}
	}
	return s
}

// decodeAddr decodes the first label of an address name: 8 hex digits are an IPv4
// address, 32 an IPv6 one.
func decodeAddr(label string) (netip.Addr, bool) {
	if len(label) != 8 && len(label) != 32 {
		return netip.Addr{}, false
	}
	b, err := hex.DecodeString(label)
	if err != nil {
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(b)
	return a, ok
}

// addrName is the SRV target name of an IP address under domain (canonical form).
func addrName(a netip.Addr, domain string) string {
	b := a.AsSlice()
	return hex.EncodeToString(b) + "." + addrLabel + "." + domain
}
