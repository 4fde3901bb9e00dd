package dnsapi

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/rosterhq/roster/model"
)

// FuzzQuery feeds arbitrary messages through the query path (header check, then the
// handler) against a small registry, and checks what every answer must keep: it
// packs, it is a response to the same id without RA, it fits the client's UDP buffer,
// a name outside the domain is refused with no records, and every record it carries
// is under the domain or answers the question's own name.
func FuzzQuery(f *testing.F) {
	fx := newFixture(f, Config{MaxAnswers: 20})
	db := short("db")
	fx.register(db, "127.0.0.1:5432", func(in *model.Instance) { in.Weight = 2 })
	fx.register(db, "[::1]:5432")
	fx.register(db, "db1.example.com:5432", func(in *model.Instance) { in.Cluster = "names" })
	fx.register(key("prod", "billing", "Orders"), "127.0.0.2:1", func(in *model.Instance) { in.Healthy = false })
	fx.register(key("prod", "billing", "orders"), "127.0.0.3:1")
	for i := 1; i <= 30; i++ {
		fx.register(short("big"), netip.AddrFrom4([4]byte{127, 0, 2, byte(i)}).String()+":80")
	}
	fx.threshold(key("prod", "billing", "Orders"), 0.5)

	for _, q := range []struct {
		name  string
		qtype uint16
		edns  uint16
	}{
		{"db.svc.roster.", dns.TypeA, 0}, {"db.svc.roster.", dns.TypeSRV, 1232}, {"names.db.svc.roster.", dns.TypeA, 0},
		{"big.svc.roster.", dns.TypeSRV, 0}, {"big.svc.roster.", dns.TypeANY, 4096}, {"Orders.billing.prod.svc.roster.", dns.TypeA, 0},
		{"ORDERS.billing.prod.svc.roster.", dns.TypeAAAA, 0}, {"7f000001.addr.roster.", dns.TypeA, 0}, {"roster.", dns.TypeSOA, 0},
		{"prod.svc.roster.", dns.TypeTXT, 0}, {"example.com.", dns.TypeA, 0}, {`db\.x.svc.roster.`, dns.TypeCNAME, 0},
	} {
		m := new(dns.Msg).SetQuestion(q.name, q.qtype)
		if q.edns != 0 {
			m.SetEdns0(q.edns, true)
		}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Add([]byte{0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 2, 'd', 'b', 0, 0, 1, 0, 1}, false)

	f.Fuzz(func(t *testing.T, b []byte, tcp bool) {
		req := new(dns.Msg)
		if err := req.Unpack(b); err != nil {
			return // the DNS library answers FORMERR without the handler
		}
		if acceptHeader(req.Response, req.Opcode, len(req.Question), len(req.Answer), len(req.Ns), len(req.Extra)) != dns.MsgAccept {
			return
		}
		m := fx.h.answer(req, tcp, localClient)
		out, err := m.Pack()
		if err != nil {
			t.Fatalf("answer does not pack: %v\n%v", err, m)
		}
		if !m.Response || m.RecursionAvailable || m.Id != req.Id {
			t.Fatalf("header %+v for id %d", m.MsgHdr, req.Id)
		}
		if !tcp {
			limit := dns.MinMsgSize
			if opt := req.IsEdns0(); opt != nil {
				limit = min(max(int(opt.UDPSize()), dns.MinMsgSize), maxUDPResponse)
			}
			if len(out) > limit {
				t.Fatalf("UDP answer of %d bytes for a buffer of %d", len(out), limit)
			}
		}
		if len(m.Answer) > fx.h.cfg.MaxAnswers {
			t.Fatalf("%d answers, cap %d", len(m.Answer), fx.h.cfg.MaxAnswers)
		}
		if len(req.Question) != 1 {
			return
		}
		q := req.Question[0]
		if parseName(q.Name, fx.h.domain).kind == nameOutside {
			if m.Rcode != dns.RcodeRefused && m.Rcode != dns.RcodeFormatError && m.Rcode != dns.RcodeBadVers {
				t.Fatalf("%q outside the domain answered %s", q.Name, dns.RcodeToString[m.Rcode])
			}
			if len(m.Answer)+len(m.Ns) != 0 {
				t.Fatalf("%q outside the domain answered with records", q.Name)
			}
			return
		}
		for _, rr := range append(append(append([]dns.RR{}, m.Answer...), m.Ns...), m.Extra...) {
			name := rr.Header().Name
			if rr.Header().Rrtype == dns.TypeOPT {
				continue
			}
			if name != q.Name && !strings.HasSuffix(dns.CanonicalName(name), "."+fx.h.cfg.Domain) && dns.CanonicalName(name) != fx.h.cfg.Domain {
				t.Fatalf("record %v is neither the question's name %q nor under the domain", rr, q.Name)
			}
		}
	})
}
