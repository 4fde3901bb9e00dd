package dnsapi

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/rosterhq/roster/internal/storetest"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// fixture is a handler over a real store, without sockets.
type fixture struct {
	t   testing.TB
	st  *store.Store
	idx uint64
	h   *handler
	// stale is what the handler's staleness function returns.
	stale time.Duration
}

func newFixture(t testing.TB, cfg Config) *fixture {
	t.Helper()
	st := storetest.Open(t)
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: st}
	cat := newCatalog(st)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cat.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	f.h = newHandler(cfg, cat, func() time.Duration { return f.stale })
	return f
}

// register stores an instance: healthy, enabled, weight 1 and cluster DEFAULT unless
// mod changes them.
func (f *fixture) register(k model.ServiceKey, addr string, mod ...func(*model.Instance)) model.Instance {
	f.t.Helper()
	ip, port, err := model.SplitAddr(addr)
	if err != nil {
		f.t.Fatal(err)
	}
	in := model.Instance{Namespace: k.Namespace, Group: k.Group, Service: k.Service, IP: ip, Port: port,
		Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true}
	for _, m := range mod {
		m(&in)
	}
	f.write(func(tx *store.Txn) error { return tx.RegisterInstance(f.idx, in) })
	_, in, err = f.st.Instance(nil, in.Ref())
	if err != nil {
		f.t.Fatal(err)
	}
	return in
}

// write applies fn as the FSM applies an entry: in one transaction that also records
// the entry's index as the applied index.
func (f *fixture) write(fn func(tx *store.Txn) error) {
	f.t.Helper()
	f.idx++
	if err := f.st.Update(func(tx *store.Txn) error {
		if err := fn(tx); err != nil {
			return err
		}
		return tx.SetAppliedIndex(f.idx)
	}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) setHealth(in model.Instance, healthy bool) {
	f.t.Helper()
	f.write(func(tx *store.Txn) error {
		_, err := tx.SetHealth(f.idx, []model.HealthUpdate{{Ref: in.Ref(), Epoch: in.CreateIndex, Healthy: healthy}})
		return err
	})
}

func (f *fixture) threshold(k model.ServiceKey, th float64) {
	f.t.Helper()
	f.write(func(tx *store.Txn) error {
		return tx.UpsertService(f.idx, model.Service{Namespace: k.Namespace, Group: k.Group, Name: k.Service, ProtectThreshold: th})
	})
}

var localClient = netip.MustParseAddr("127.0.0.1")

// ask sends one question over UDP (without EDNS0) and checks the invariants every
// answer keeps.
func (f *fixture) ask(name string, qtype uint16) *dns.Msg {
	f.t.Helper()
	req := new(dns.Msg).SetQuestion(name, qtype)
	return f.exchange(req, false)
}

func (f *fixture) exchange(req *dns.Msg, tcp bool) *dns.Msg {
	f.t.Helper()
	m := f.h.answer(req, tcp, localClient)
	if !m.Response || m.RecursionAvailable || m.Id != req.Id {
		f.t.Fatalf("%v: header %+v", req.Question, m.MsgHdr)
	}
	if _, err := m.Pack(); err != nil {
		f.t.Fatalf("%v: answer does not pack: %v", req.Question, err)
	}
	return m
}

// values lists an answer's records as their data, sorted (A/AAAA: the address, SRV:
// "weight port target", CNAME: the target).
func values(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch r := rr.(type) {
		case *dns.A:
			out = append(out, r.A.String())
		case *dns.AAAA:
			out = append(out, r.AAAA.String())
		case *dns.SRV:
			out = append(out, strings.Join([]string{itoa(int(r.Weight)), itoa(int(r.Port)), r.Target}, " "))
		case *dns.CNAME:
			out = append(out, "CNAME "+r.Target)
		default:
			out = append(out, rr.String())
		}
	}
	slices.Sort(out)
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

func wantRcode(t *testing.T, m *dns.Msg, rcode int) {
	t.Helper()
	if m.Rcode != rcode {
		t.Fatalf("%v: rcode %s, want %s\n%v", m.Question, dns.RcodeToString[m.Rcode], dns.RcodeToString[rcode], m)
	}
}

// wantNegative checks an NXDOMAIN or NODATA answer: no records, the zone's SOA in the
// authority section with the negative TTL as its TTL and minimum.
func wantNegative(t *testing.T, m *dns.Msg, rcode int, negTTL uint32) {
	t.Helper()
	wantRcode(t, m, rcode)
	if len(m.Answer) != 0 || len(m.Ns) != 1 {
		t.Fatalf("%v: negative answer with %d answers, %d authority records", m.Question, len(m.Answer), len(m.Ns))
	}
	soa, ok := m.Ns[0].(*dns.SOA)
	if !ok || soa.Hdr.Name != "roster." || soa.Minttl != negTTL || soa.Hdr.Ttl != negTTL || !m.Authoritative {
		t.Fatalf("%v: authority %v (aa %v), want the SOA of roster. with minimum %d", m.Question, m.Ns[0], m.Authoritative, negTTL)
	}
}

func TestAnswer_AddressesFollowHealthAndEnabled(t *testing.T) {
	f := newFixture(t, Config{TTL: 7 * time.Second})
	db := short("db")
	a := f.register(db, "127.0.0.1:5432")
	f.register(db, "127.0.0.2:5432", func(in *model.Instance) { in.Healthy = false })
	f.register(db, "127.0.0.3:5432", func(in *model.Instance) { in.Enabled = false })
	f.register(db, "[::1]:5432")
	f.register(db, "[fd00::2]:5432", func(in *model.Instance) { in.Healthy = false })
	f.register(db, "db1.example.com:5432")

	m := f.ask("db.svc.roster.", dns.TypeA)
	wantRcode(t, m, dns.RcodeSuccess)
	if got := values(m); !slices.Equal(got, []string{"127.0.0.1"}) {
		t.Fatalf("A %v, want the healthy enabled IPv4 instance only", got)
	}
	if m.Answer[0].Header().Ttl != 7 || m.Answer[0].Header().Name != "db.svc.roster." || !m.Authoritative {
		t.Fatalf("record %v (aa %v)", m.Answer[0], m.Authoritative)
	}
	if got := values(f.ask("db.svc.roster.", dns.TypeAAAA)); !slices.Equal(got, []string{"::1"}) {
		t.Fatalf("AAAA %v", got)
	}
	if got := values(f.ask("db.svc.roster.", dns.TypeANY)); !slices.Equal(got, []string{"127.0.0.1", "::1"}) {
		t.Fatalf("ANY %v", got)
	}
	// The same service by its long name.
	if got := values(f.ask("db.DEFAULT_GROUP.public.svc.roster.", dns.TypeA)); !slices.Equal(got, []string{"127.0.0.1"}) {
		t.Fatalf("long form A %v", got)
	}

	// A health transition shows up once committed (the catalog drops its cache).
	f.setHealth(a, false)
	wait.For(t, 5*time.Second, "the unhealthy instance to leave the A answer", func() bool {
		return len(f.ask("db.svc.roster.", dns.TypeA).Answer) == 0
	})
	wantNegative(t, f.ask("db.svc.roster.", dns.TypeA), dns.RcodeSuccess, 7)
}

func TestAnswer_ProtectThreshold(t *testing.T) {
	f := newFixture(t, Config{})
	db := short("db")
	f.register(db, "127.0.0.1:1")
	f.register(db, "127.0.0.2:1", func(in *model.Instance) { in.Healthy = false })
	f.register(db, "127.0.0.3:1", func(in *model.Instance) { in.Healthy = false })
	f.register(db, "127.0.0.4:1", func(in *model.Instance) { in.Healthy = false; in.Enabled = false })
	f.threshold(db, 0.5) // 1 healthy of 3 enabled: 0.33 ≤ 0.5
	if got := values(f.ask("db.svc.roster.", dns.TypeA)); !slices.Equal(got, []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}) {
		t.Fatalf("threshold reached: A %v, want every enabled instance", got)
	}
	f.threshold(db, 0.3)
	wait.For(t, 5*time.Second, "only the healthy instance under the threshold", func() bool {
		return slices.Equal(values(f.ask("db.svc.roster.", dns.TypeA)), []string{"127.0.0.1"})
	})
}

// TestAnswer_ProtectThresholdZeroEveryInstanceDown: with the default threshold 0 and
// every enabled instance unhealthy, the threshold is reached (the rule of every API):
// every enabled instance is answered; a healthy one ends the fallback.
func TestAnswer_ProtectThresholdZeroEveryInstanceDown(t *testing.T) {
	f := newFixture(t, Config{})
	db := short("db")
	f.register(db, "127.0.0.1:1", func(in *model.Instance) { in.Healthy = false })
	second := f.register(db, "127.0.0.2:1", func(in *model.Instance) { in.Healthy = false })
	f.register(db, "127.0.0.3:1", func(in *model.Instance) { in.Enabled = false })
	f.threshold(db, 0)
	if got := values(f.ask("db.svc.roster.", dns.TypeA)); !slices.Equal(got, []string{"127.0.0.1", "127.0.0.2"}) {
		t.Fatalf("threshold 0, every enabled instance down: A %v, want every enabled instance", got)
	}
	f.setHealth(second, true)
	wait.For(t, 5*time.Second, "only the healthy instance once one is healthy", func() bool {
		return slices.Equal(values(f.ask("db.svc.roster.", dns.TypeA)), []string{"127.0.0.2"})
	})
}

func TestAnswer_SRVWeightsTargetsAndGlue(t *testing.T) {
	f := newFixture(t, Config{})
	db := short("db")
	f.register(db, "127.0.0.1:5432", func(in *model.Instance) { in.Weight = 1 })
	f.register(db, "127.0.0.1:5433", func(in *model.Instance) { in.Weight = 2 })
	f.register(db, "[::1]:5432", func(in *model.Instance) { in.Weight = 4 })
	f.register(db, "db1.example.com:5432", func(in *model.Instance) { in.Weight = 0 })
	m := f.ask("db.svc.roster.", dns.TypeSRV)
	want := []string{
		"0 5432 db1.example.com.",
		"16384 5432 7f000001.addr.roster.",
		"32768 5433 7f000001.addr.roster.",
		"65535 5432 00000000000000000000000000000001.addr.roster.",
	}
	if got := values(m); !slices.Equal(got, want) {
		t.Fatalf("SRV\n got %v\nwant %v", got, want)
	}
	for _, rr := range m.Answer {
		if rr.(*dns.SRV).Priority != 0 {
			t.Fatalf("priority %v", rr)
		}
	}
	var glue []string
	for _, rr := range m.Extra {
		glue = append(glue, rr.String())
	}
	slices.Sort(glue)
	wantGlue := []string{
		"00000000000000000000000000000001.addr.roster.\t5\tIN\tAAAA\t::1",
		"7f000001.addr.roster.\t5\tIN\tA\t127.0.0.1",
	}
	if !slices.Equal(glue, wantGlue) {
		t.Fatalf("additional\n got %q\nwant %q (one record per target)", glue, wantGlue)
	}
	// The targets resolve.
	if got := values(f.ask("7f000001.addr.roster.", dns.TypeA)); !slices.Equal(got, []string{"127.0.0.1"}) {
		t.Fatalf("target A %v", got)
	}
	wantNegative(t, f.ask("7f000001.addr.roster.", dns.TypeAAAA), dns.RcodeSuccess, 5)
}

func TestSRVWeight(t *testing.T) {
	cases := []struct {
		w, maxW float64
		want    uint16
	}{
		{1, 1, 65535}, {1, 4, 16384}, {2, 4, 32768}, {0, 4, 0}, {0.0001, 10000, 1}, {10000, 10000, 65535}, {3, 0, 0},
	}
	for _, c := range cases {
		if got := srvWeight(c.w, c.maxW); got != c.want {
			t.Errorf("srvWeight(%v, %v) = %d, want %d", c.w, c.maxW, got, c.want)
		}
	}
}

func TestAnswer_HostnameInstancesAreCNAMEs(t *testing.T) {
	f := newFixture(t, Config{})
	names := short("names")
	f.register(names, "db1.example.com:5432")
	m := f.ask("names.svc.roster.", dns.TypeA)
	if got := values(m); !slices.Equal(got, []string{"CNAME db1.example.com."}) {
		t.Fatalf("A of a service of DNS names: %v, want a CNAME", got)
	}
	if got := values(f.ask("names.svc.roster.", dns.TypeCNAME)); !slices.Equal(got, []string{"CNAME db1.example.com."}) {
		t.Fatalf("CNAME %v", got)
	}
	// With an IP instance too the name owns address records, and no CNAME.
	f.register(names, "127.0.0.9:5432")
	wait.For(t, 5*time.Second, "the IP instance's A record", func() bool {
		return slices.Equal(values(f.ask("names.svc.roster.", dns.TypeA)), []string{"127.0.0.9"})
	})
	wantNegative(t, f.ask("names.svc.roster.", dns.TypeCNAME), dns.RcodeSuccess, 5)
}

func TestAnswer_ClustersAndCase(t *testing.T) {
	f := newFixture(t, Config{})
	db := key("prod", "billing", "Orders")
	f.register(db, "127.0.0.1:1", func(in *model.Instance) { in.Cluster = "primary" })
	f.register(db, "127.0.0.2:1", func(in *model.Instance) { in.Cluster = "replica" })
	for name, want := range map[string][]string{
		"Orders.billing.prod.svc.roster.":         {"127.0.0.1", "127.0.0.2"},
		"primary.Orders.billing.prod.svc.roster.": {"127.0.0.1"},
		"replica.Orders.billing.prod.svc.roster.": {"127.0.0.2"},
		// DNS is case-insensitive: a unique case-insensitive match answers.
		"ORDERS.BILLING.PROD.SVC.ROSTER.":         {"127.0.0.1", "127.0.0.2"},
		"Primary.orders.Billing.prod.svc.roster.": {"127.0.0.1"},
	} {
		if got := values(f.ask(name, dns.TypeA)); !slices.Equal(got, want) {
			t.Errorf("%s: A %v, want %v", name, got, want)
		}
	}
	wantNegative(t, f.ask("standby.Orders.billing.prod.svc.roster.", dns.TypeA), dns.RcodeNameError, 5)

	// Two services differing only in case: the exact one wins, another spelling is
	// ambiguous and answers NXDOMAIN.
	other := key("prod", "billing", "orders")
	f.register(other, "127.0.0.3:1")
	wait.For(t, 5*time.Second, "the second spelling to answer", func() bool {
		return slices.Equal(values(f.ask("orders.billing.prod.svc.roster.", dns.TypeA)), []string{"127.0.0.3"})
	})
	if got := values(f.ask("Orders.billing.prod.svc.roster.", dns.TypeA)); !slices.Equal(got, []string{"127.0.0.1", "127.0.0.2"}) {
		t.Fatalf("exact match: %v", got)
	}
	wantNegative(t, f.ask("ORDERS.billing.prod.svc.roster.", dns.TypeA), dns.RcodeNameError, 5)
}

func TestAnswer_NegativeAnswersAndEmptyNonTerminals(t *testing.T) {
	f := newFixture(t, Config{NegativeTTL: 3 * time.Second})
	f.register(key("prod", "billing", "orders"), "127.0.0.1:1")
	f.register(short("down"), "127.0.0.2:1", func(in *model.Instance) { in.Enabled = false })

	wantNegative(t, f.ask("nope.svc.roster.", dns.TypeA), dns.RcodeNameError, 3)
	wantNegative(t, f.ask("nope.billing.prod.svc.roster.", dns.TypeA), dns.RcodeNameError, 3)
	wantNegative(t, f.ask("other.roster.", dns.TypeA), dns.RcodeNameError, 3)
	// A service with no enabled instance exists: NODATA, not NXDOMAIN.
	wantNegative(t, f.ask("down.svc.roster.", dns.TypeA), dns.RcodeSuccess, 3)
	wantNegative(t, f.ask("down.svc.roster.", dns.TypeSRV), dns.RcodeSuccess, 3)
	// An existing name asked for a type it has none of.
	wantNegative(t, f.ask("orders.billing.prod.svc.roster.", dns.TypeTXT), dns.RcodeSuccess, 3)
	// Parents of existing names are empty non-terminals (RFC 8020: an NXDOMAIN there
	// would deny everything below).
	for _, n := range []string{"svc.roster.", "addr.roster.", "prod.svc.roster.", "billing.prod.svc.roster.", "PROD.svc.roster."} {
		wantNegative(t, f.ask(n, dns.TypeA), dns.RcodeSuccess, 3)
	}
	wantNegative(t, f.ask("staging.svc.roster.", dns.TypeA), dns.RcodeNameError, 3)
	// The apex has an SOA and nothing else.
	m := f.ask("roster.", dns.TypeSOA)
	if len(m.Answer) != 1 || m.Answer[0].Header().Rrtype != dns.TypeSOA || m.Rcode != dns.RcodeSuccess {
		t.Fatalf("apex SOA: %v", m)
	}
	wantNegative(t, f.ask("roster.", dns.TypeNS), dns.RcodeSuccess, 3)
}

func TestAnswer_RefusedFormErrAndBadVers(t *testing.T) {
	f := newFixture(t, Config{})
	f.register(short("db"), "127.0.0.1:1")
	for _, n := range []string{"example.com.", ".", "db.svc.roster.example.com.", "in-addr.arpa."} {
		m := f.ask(n, dns.TypeA)
		wantRcode(t, m, dns.RcodeRefused)
		if len(m.Answer)+len(m.Ns) != 0 || m.Authoritative {
			t.Fatalf("%s: refused answer carries records or AA: %v", n, m)
		}
	}
	for _, qt := range []uint16{dns.TypeAXFR, dns.TypeIXFR} {
		wantRcode(t, f.ask("roster.", qt), dns.RcodeRefused)
	}
	// Another class: refused.
	req := new(dns.Msg).SetQuestion("db.svc.roster.", dns.TypeA)
	req.Question[0].Qclass = dns.ClassCHAOS
	wantRcode(t, f.exchange(req, false), dns.RcodeRefused)
	// Recursion desired is echoed, never offered.
	req = new(dns.Msg).SetQuestion("db.svc.roster.", dns.TypeA)
	req.RecursionDesired = true
	if m := f.exchange(req, false); !m.RecursionDesired || m.RecursionAvailable {
		t.Fatalf("RD/RA: %v", m.MsgHdr)
	}
	// No question, or two OPT records: FORMERR.
	req = new(dns.Msg)
	req.Id = 7
	wantRcode(t, f.exchange(req, false), dns.RcodeFormatError)
	req = new(dns.Msg).SetQuestion("db.svc.roster.", dns.TypeA)
	req.SetEdns0(1232, false)
	req.Extra = append(req.Extra, req.Extra[0])
	wantRcode(t, f.exchange(req, false), dns.RcodeFormatError)
	// EDNS version 1: BADVERS, with an OPT record.
	req = new(dns.Msg).SetQuestion("db.svc.roster.", dns.TypeA)
	req.SetEdns0(1232, false)
	req.Extra[0].(*dns.OPT).SetVersion(1)
	m := f.exchange(req, false)
	if m.Rcode != dns.RcodeBadVers || m.IsEdns0() == nil {
		t.Fatalf("EDNS version 1: rcode %d, opt %v", m.Rcode, m.IsEdns0())
	}
}

func TestAcceptHeader(t *testing.T) {
	cases := []struct {
		response       bool
		opcode         int
		qd, an, ns, ar int
		want           dns.MsgAcceptAction
	}{
		{false, dns.OpcodeQuery, 1, 0, 0, 0, dns.MsgAccept},
		{false, dns.OpcodeQuery, 1, 0, 0, 2, dns.MsgAccept},
		{true, dns.OpcodeQuery, 1, 0, 0, 0, dns.MsgIgnore},
		{false, dns.OpcodeUpdate, 1, 0, 0, 0, dns.MsgRejectNotImplemented},
		{false, dns.OpcodeNotify, 1, 0, 0, 0, dns.MsgRejectNotImplemented},
		{false, dns.OpcodeQuery, 0, 0, 0, 0, dns.MsgReject},
		{false, dns.OpcodeQuery, 2, 0, 0, 0, dns.MsgReject},
		{false, dns.OpcodeQuery, 1, 1, 0, 0, dns.MsgReject},
		{false, dns.OpcodeQuery, 1, 0, 1, 0, dns.MsgReject},
		{false, dns.OpcodeQuery, 1, 0, 0, 3, dns.MsgReject},
	}
	for _, c := range cases {
		if got := acceptHeader(c.response, c.opcode, c.qd, c.an, c.ns, c.ar); got != c.want {
			t.Errorf("acceptHeader(%+v) = %d, want %d", c, got, c.want)
		}
	}
}

func TestAnswer_CapShuffleAndTruncation(t *testing.T) {
	f := newFixture(t, Config{MaxAnswers: 10})
	big := short("big")
	for i := 1; i <= 40; i++ {
		f.register(big, netip.AddrFrom4([4]byte{127, 0, 1, byte(i)}).String()+":80")
	}
	// The cap: 10 of the 40, a different subset across queries.
	seen := map[string]bool{}
	for range 50 {
		m := f.ask("big.svc.roster.", dns.TypeA)
		if len(m.Answer) != 10 || m.Truncated {
			t.Fatalf("capped answer: %d records, TC %v", len(m.Answer), m.Truncated)
		}
		for _, v := range values(m) {
			seen[v] = true
		}
	}
	if len(seen) < 20 {
		t.Fatalf("50 answers used only %d of 40 instances: not shuffled", len(seen))
	}

	// Size: 60 A records do not fit 512 bytes over UDP; TCP and a large EDNS0 buffer take them.
	f = newFixture(t, Config{MaxAnswers: 100})
	for i := 1; i <= 60; i++ {
		f.register(big, netip.AddrFrom4([4]byte{127, 0, 1, byte(i)}).String()+":80")
	}
	m := f.ask("big.svc.roster.", dns.TypeA)
	if !m.Truncated || len(m.Answer) >= 60 {
		t.Fatalf("UDP without EDNS0: %d records, TC %v; want truncated", len(m.Answer), m.Truncated)
	}
	if n, _ := m.Pack(); len(n) > dns.MinMsgSize {
		t.Fatalf("UDP answer of %d bytes, over 512", len(n))
	}
	req := new(dns.Msg).SetQuestion("big.svc.roster.", dns.TypeA)
	if m := f.exchange(req, true); m.Truncated || len(m.Answer) != 60 {
		t.Fatalf("TCP: %d records, TC %v", len(m.Answer), m.Truncated)
	}
	req.SetEdns0(4096, false)
	if m := f.exchange(req, false); m.Truncated || len(m.Answer) != 60 || m.IsEdns0() == nil {
		t.Fatalf("UDP with a 4096-byte buffer: %d records, TC %v", len(m.Answer), m.Truncated)
	}
	// SRV glue that does not fit is left out without TC: the client can ask for it.
	req = new(dns.Msg).SetQuestion("big.svc.roster.", dns.TypeSRV)
	req.SetEdns0(1400, false)
	m = f.exchange(req, false)
	if n, _ := m.Pack(); len(n) > 1400 {
		t.Fatalf("answer of %d bytes for a 1400-byte buffer", len(n))
	}
	if m.Truncated != (len(m.Answer) < 60) {
		t.Fatalf("SRV: %d answers, %d additional, TC %v", len(m.Answer), len(m.Extra), m.Truncated)
	}
}

func TestAnswer_RateLimitRefuses(t *testing.T) {
	f := newFixture(t, Config{RateLimit: 0.001, RateBurst: 2})
	f.register(short("db"), "127.0.0.1:1")
	req := new(dns.Msg).SetQuestion("db.svc.roster.", dns.TypeA)
	for range 2 {
		wantRcode(t, f.h.answer(req, false, localClient), dns.RcodeSuccess)
	}
	wantRcode(t, f.h.answer(req, false, localClient), dns.RcodeRefused)
	wantRcode(t, f.h.answer(req, true, netip.MustParseAddr("127.0.0.2")), dns.RcodeSuccess)
}

func TestAnswer_MaxStale(t *testing.T) {
	f := newFixture(t, Config{MaxStale: time.Second})
	f.register(short("db"), "127.0.0.1:1")
	wantRcode(t, f.ask("db.svc.roster.", dns.TypeA), dns.RcodeSuccess)
	f.stale = 2 * time.Second
	wantRcode(t, f.ask("db.svc.roster.", dns.TypeA), dns.RcodeServerFailure)
	f.stale = -1 // never heard from a leader
	wantRcode(t, f.ask("db.svc.roster.", dns.TypeA), dns.RcodeServerFailure)
	// Names outside the domain stay refused, stale or not.
	wantRcode(t, f.ask("example.com.", dns.TypeA), dns.RcodeRefused)
}

func TestAnswer_ClosedStoreIsServFail(t *testing.T) {
	f := newFixture(t, Config{})
	f.register(short("db"), "127.0.0.1:1")
	_ = f.st.Close()
	wait.For(t, 5*time.Second, "SERVFAIL once the state is closed", func() bool {
		return f.h.answer(new(dns.Msg).SetQuestion("other.svc.roster.", dns.TypeA), false, localClient).Rcode == dns.RcodeServerFailure
	})
}

// TestAnswer_UDPCappedAt1232: over UDP no answer exceeds the 1,232-byte buffer the
// server advertises, whatever buffer the client claims (a small spoofed query must
// not be amplified into kilobytes); the rest sets TC and is had over TCP.
func TestAnswer_UDPCappedAt1232(t *testing.T) {
	f := newFixture(t, Config{MaxAnswers: 100})
	big := short("big")
	for i := 1; i <= 60; i++ {
		f.register(big, netip.AddrFrom4([4]byte{127, 0, 1, byte(i)}).String()+":80")
	}
	for _, claimed := range []uint16{1233, 4096, 65535} {
		req := new(dns.Msg).SetQuestion("big.svc.roster.", dns.TypeSRV)
		req.SetEdns0(claimed, false)
		m := f.exchange(req, false)
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 1232 {
			t.Fatalf("EDNS0 buffer %d: a UDP answer of %d bytes, over 1232", claimed, len(b))
		}
		if !m.Truncated || len(m.Answer) >= 60 {
			t.Fatalf("EDNS0 buffer %d: %d of 60 SRV records, TC %v; want truncated", claimed, len(m.Answer), m.Truncated)
		}
		if opt := m.IsEdns0(); opt == nil || opt.UDPSize() != 1232 {
			t.Fatalf("EDNS0 buffer %d: the answer advertises %v, want 1232", claimed, opt)
		}
	}
	// TCP still carries the whole answer.
	req := new(dns.Msg).SetQuestion("big.svc.roster.", dns.TypeSRV)
	if m := f.exchange(req, true); m.Truncated || len(m.Answer) != 60 {
		t.Fatalf("TCP: %d records, TC %v", len(m.Answer), m.Truncated)
	}
}
