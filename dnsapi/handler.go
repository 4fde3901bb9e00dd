package dnsapi

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// handler builds the answer to one query. It never recurses and never answers for a
// name outside its domain.
type handler struct {
	cfg        Config
	domain     []string // the domain's labels, lower case
	ttl, negTT uint32
	cat        *catalog
	limit      *limiter             // nil: no rate limit
	staleness  func() time.Duration // this node's time since it last heard from the leader (<0: never)
	alarm      func() error         // non-nil error: this node's state is wrong, answer nothing
}

func newHandler(cfg Config, cat *catalog, staleness func() time.Duration) *handler {
	h := &handler{
		cfg:       cfg,
		ttl:       uint32(cfg.TTL / time.Second),
		negTT:     uint32(cfg.NegativeTTL / time.Second),
		cat:       cat,
		staleness: staleness,
	}
	h.domain, _ = splitLabels(cfg.Domain)
	if cfg.RateLimit > 0 {
		h.limit = newLimiter(cfg.RateLimit, cfg.RateBurst, cfg.MaxClients, nil)
	}
	return h
}

// acceptHeader is the first check of a message, on its header alone: responses are
// dropped, opcodes other than QUERY are answered NOTIMP, and a query must have one
// question, no answer or authority records and at most two additional ones (OPT and
// TSIG); anything else is answered FORMERR with the header only.
func acceptHeader(response bool, opcode, qd, an, ns, ar int) dns.MsgAcceptAction {
	switch {
	case response:
		return dns.MsgIgnore
	case opcode != dns.OpcodeQuery:
		return dns.MsgRejectNotImplemented
	case qd != 1 || an != 0 || ns != 0 || ar > 2:
		return dns.MsgReject
	}
	return dns.MsgAccept
}

// acceptFunc is acceptHeader as the DNS library calls it.
func acceptFunc(dh dns.Header) dns.MsgAcceptAction {
	const qr = 1 << 15
	return acceptHeader(dh.Bits&qr != 0, int(dh.Bits>>11)&0xF, int(dh.Qdcount), int(dh.Ancount), int(dh.Nscount), int(dh.Arcount))
}

// answer returns the response to req, a query that passed acceptHeader, from client
// over TCP (tcp) or UDP.
func (h *handler) answer(req *dns.Msg, tcp bool, client netip.Addr) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = false
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		return m
	}
	if !h.limit.allow(client) {
		m.Rcode = dns.RcodeRefused
		return m
	}
	opt, ok := ednsOf(req)
	if !ok {
		m.Rcode = dns.RcodeFormatError
		return m
	}
	if opt != nil {
		m.SetEdns0(udpReadSize, false)
		if opt.Version() != 0 {
			m.Rcode = dns.RcodeBadVers
			return m
		}
	}
	q := req.Question[0]
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		m.Rcode = dns.RcodeRefused
		return m
	}
	p := parseName(q.Name, h.domain)
	if p.kind == nameOutside {
		m.Rcode = dns.RcodeRefused
		return m
	}
	switch q.Qtype {
	case dns.TypeAXFR, dns.TypeIXFR, dns.TypeMAILA, dns.TypeMAILB:
		m.Rcode = dns.RcodeRefused
		return m
	}
	if h.alarm != nil && h.alarm() != nil {
		m.Rcode = dns.RcodeServerFailure
		return m
	}
	if h.cfg.MaxStale > 0 {
		if st := h.staleness(); st < 0 || st > h.cfg.MaxStale {
			m.Rcode = dns.RcodeServerFailure
			return m
		}
	}
	m.Authoritative = true
	if err := h.fill(m, q, p); err != nil {
		m.Authoritative = false
		m.Answer, m.Ns = nil, nil
		m.Extra = optOnly(m.Extra)
		m.Rcode = dns.RcodeServerFailure
		return m
	}
	h.truncate(m, opt, tcp)
	return m
}

// ednsOf returns the query's OPT record (nil without one); false when it has several,
// which RFC 6891 makes a format error.
func ednsOf(req *dns.Msg) (*dns.OPT, bool) {
	var opt *dns.OPT
	for _, rr := range req.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			if opt != nil {
				return nil, false
			}
			opt = o
		}
	}
	return opt, true
}

// optOnly keeps the OPT record of an additional section.
func optOnly(extra []dns.RR) []dns.RR {
	for _, rr := range extra {
		if o, ok := rr.(*dns.OPT); ok {
			return []dns.RR{o}
		}
	}
	return nil
}

// fill answers a query for a name under the domain.
func (h *handler) fill(m *dns.Msg, q dns.Question, p parsedName) error {
	switch p.kind {
	case nameNone:
		h.negative(m, dns.RcodeNameError)
	case nameEmpty:
		h.negative(m, dns.RcodeSuccess)
	case nameApex:
		if q.Qtype == dns.TypeSOA || q.Qtype == dns.TypeANY {
			m.Answer = append(m.Answer, h.soa(h.ttl))
			return nil
		}
		h.negative(m, dns.RcodeSuccess)
	case nameAddr:
		rr := h.addrRR(q.Name, p.addr)
		if q.Qtype == rr.Header().Rrtype || q.Qtype == dns.TypeANY {
			m.Answer = append(m.Answer, rr)
			return nil
		}
		h.negative(m, dns.RcodeSuccess)
	case nameService:
		return h.fillService(m, q, p)
	}
	return nil
}

func (h *handler) fillService(m *dns.Msg, q dns.Question, p parsedName) error {
	var svc *service
	if p.hasService {
		var err error
		if svc, err = h.cat.lookup(p.key); err != nil {
			return err
		}
	}
	cluster := ""
	if svc != nil && p.cluster != "" {
		c, ok := svc.findCluster(p.cluster)
		if !ok {
			svc = nil
		}
		cluster = c
	}
	if svc == nil {
		// No such service (or cluster). The short forms may still be the parent of
		// long-form names: then this is an empty non-terminal, not a missing name.
		parent := false
		if p.parentNS != "" {
			var err error
			if parent, err = h.cat.parentExists(p.parentNS, p.parentGroup); err != nil {
				return err
			}
		}
		if parent {
			h.negative(m, dns.RcodeSuccess)
		} else {
			h.negative(m, dns.RcodeNameError)
		}
		return nil
	}
	sel, _ := svc.selectInstances(cluster)
	rand.Shuffle(len(sel), func(i, j int) { sel[i], sel[j] = sel[j], sel[i] })
	switch q.Qtype {
	case dns.TypeA, dns.TypeAAAA, dns.TypeANY, dns.TypeCNAME:
		h.addressAnswers(m, q, sel)
	case dns.TypeSRV:
		h.srvAnswers(m, q, sel)
	}
	if len(m.Answer) == 0 {
		h.negative(m, dns.RcodeSuccess)
	}
	return nil
}

// addressAnswers answers A, AAAA, ANY (both) or CNAME. A service with a qualifying
// instance whose address is an IP owns address records; one whose qualifying
// instances all have DNS names is a CNAME to one of them (at random; a name owning a
// CNAME may own nothing else, and Roster never resolves the target itself).
func (h *handler) addressAnswers(m *dns.Msg, q dns.Question, sel []instance) {
	var host string
	hasIP := false
	for _, in := range sel {
		if in.addr.IsValid() {
			hasIP = true
		} else if host == "" {
			host = in.host
		}
	}
	if !hasIP {
		if host != "" {
			m.Answer = append(m.Answer, &dns.CNAME{Hdr: h.hdr(q.Name, dns.TypeCNAME), Target: host})
		}
		return
	}
	if q.Qtype == dns.TypeCNAME {
		return
	}
	for _, in := range sel {
		if len(m.Answer) >= h.cfg.MaxAnswers {
			break
		}
		if !in.addr.IsValid() {
			continue
		}
		if rr := h.addrRR(q.Name, in.addr); q.Qtype == dns.TypeANY || rr.Header().Rrtype == q.Qtype {
			m.Answer = append(m.Answer, rr)
		}
	}
}

// srvAnswers answers SRV: priority 0, the instance's weight scaled to 0..65535
// against the largest weight selected, its port, and a target per address; the
// targets of IP instances are <hex>.addr.<domain>, with their A/AAAA records in the
// additional section.
func (h *handler) srvAnswers(m *dns.Msg, q dns.Question, sel []instance) {
	if len(sel) > h.cfg.MaxAnswers {
		sel = sel[:h.cfg.MaxAnswers]
	}
	maxW := 0.0
	for _, in := range sel {
		maxW = max(maxW, in.weight)
	}
	var glued map[netip.Addr]bool
	for _, in := range sel {
		target := in.host
		if in.addr.IsValid() {
			target = addrName(in.addr, h.cfg.Domain)
			if !glued[in.addr] {
				if glued == nil {
					glued = make(map[netip.Addr]bool, len(sel))
				}
				glued[in.addr] = true
				m.Extra = append(m.Extra, h.addrRR(target, in.addr))
			}
		}
		m.Answer = append(m.Answer, &dns.SRV{
			Hdr:      h.hdr(q.Name, dns.TypeSRV),
			Priority: 0,
			Weight:   srvWeight(in.weight, maxW),
			Port:     in.port,
			Target:   target,
		})
	}
}

// srvWeight scales an instance weight to an SRV weight: round(65535·w/maxW), where
// maxW is the largest weight answered; a positive weight never scales to 0, which
// RFC 2782 reserves for "very rarely".
func srvWeight(w, maxW float64) uint16 {
	if w <= 0 || maxW <= 0 || math.IsNaN(w) {
		return 0
	}
	s := math.Round(65535 * w / maxW)
	return uint16(min(max(s, 1), 65535))
}

func (h *handler) hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: h.ttl}
}

func (h *handler) addrRR(name string, a netip.Addr) dns.RR {
	if a.Is4() {
		return &dns.A{Hdr: h.hdr(name, dns.TypeA), A: a.AsSlice()}
	}
	return &dns.AAAA{Hdr: h.hdr(name, dns.TypeAAAA), AAAA: a.AsSlice()}
}

// negative makes m an NXDOMAIN (rcode NameError) or NODATA (Success, no answer), with
// the zone's SOA in the authority section: its minimum, and its own TTL, are the
// negative TTL resolvers cache the answer for (RFC 2308).
func (h *handler) negative(m *dns.Msg, rcode int) {
	m.Rcode = rcode
	m.Answer = nil
	m.Ns = append(m.Ns[:0], h.soa(h.negTT))
}

// soa is the zone's SOA record. Its serial is the node's applied index (mod 2³²).
func (h *handler) soa(ttl uint32) dns.RR {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: h.cfg.Domain, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns:      "ns." + h.cfg.Domain,
		Mbox:    "hostmaster." + h.cfg.Domain,
		Serial:  uint32(h.cat.st.AppliedIndex()),
		Refresh: 3600,
		Retry:   600,
		Expire:  86400,
		Minttl:  h.negTT,
	}
}

// truncate fits m to what the client can take: over UDP the EDNS0 buffer size it
// advertised (512 bytes without EDNS0, at most maxUDPResponse), over TCP 64 KiB. TC is
// set when answer or authority records had to be left out (not for additional ones
// only: those the client can ask for).
func (h *handler) truncate(m *dns.Msg, opt *dns.OPT, tcp bool) {
	size := dns.MaxMsgSize
	if !tcp {
		size = dns.MinMsgSize
		if opt != nil {
			size = min(max(int(opt.UDPSize()), dns.MinMsgSize), maxUDPResponse)
		}
	}
	m.Compress = true
	if m.Len() <= size {
		return
	}
	answers, ns := len(m.Answer), len(m.Ns)
	m.Truncate(size)
	m.Truncated = len(m.Answer) < answers || len(m.Ns) < ns
}
