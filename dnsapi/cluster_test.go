package dnsapi_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/dnsapi"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

const (
	ns    = model.DefaultNamespace
	group = model.DefaultGroup
)

// withDNS serves DNS on a free loopback port on every node.
func withDNS(c dnsapi.Config) servertest.Option {
	return func(sc *server.Config) {
		c.Addr = "127.0.0.1:0"
		sc.DNS = c
	}
}

// ask sends one question to addr over network ("udp" or "tcp") from 127.0.0.1 or,
// when from is set, from that local address.
func ask(t *testing.T, addr, network, name string, qtype uint16, from string) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	if from != "" {
		c.Dialer = &net.Dialer{Timeout: 5 * time.Second}
		if network == "tcp" {
			c.Dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
		} else {
			c.Dialer.LocalAddr = &net.UDPAddr{IP: net.ParseIP(from)}
		}
	}
	r, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, qtype), addr)
	if err != nil {
		t.Fatalf("%s %s over %s to %s: %v", name, dns.TypeToString[qtype], network, addr, err)
	}
	if !r.Response || r.RecursionAvailable {
		t.Fatalf("%s: header %+v", name, r.MsgHdr)
	}
	return r
}

// records lists the answer section as sorted data: addresses, or "weight port target" for SRV.
func records(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch r := rr.(type) {
		case *dns.A:
			out = append(out, r.A.String())
		case *dns.AAAA:
			out = append(out, r.AAAA.String())
		case *dns.SRV:
			out = append(out, strconv.Itoa(int(r.Weight))+" "+strconv.Itoa(int(r.Port))+" "+r.Target)
		default:
			out = append(out, rr.String())
		}
	}
	slices.Sort(out)
	return out
}

// eventually waits until the answer of name/qtype on addr has rcode and exactly want.
func eventually(t *testing.T, addr, name string, qtype uint16, rcode int, want ...string) {
	t.Helper()
	var last *dns.Msg
	ok := false
	defer func() {
		if !ok && last != nil {
			t.Logf("last answer: rcode %s, %v", dns.RcodeToString[last.Rcode], records(last))
		}
	}()
	wait.For(t, 10*time.Second, name+" "+dns.TypeToString[qtype]+" to be "+dns.RcodeToString[rcode]+" "+strings.Join(want, ","), func() bool {
		last = ask(t, addr, "udp", name, qtype, "")
		ok = last.Rcode == rcode && slices.Equal(records(last), want)
		return ok
	})
}

func noneCluster(t *testing.T, c *client.Client, svc string) {
	t.Helper()
	write(t, func() (uint64, error) {
		return c.UpsertCluster(context.Background(), ns, group, svc, model.DefaultCluster,
			api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}})
	})
}

// write runs an idempotent write, again while the cluster answers 503 (a leader
// stepping down under a loaded machine's scheduling delays): what the tests check is
// what the DNS answers after the write, not that no election happened meanwhile.
func write(t *testing.T, fn func() (uint64, error)) {
	t.Helper()
	var err error
	wait.For(t, 15*time.Second, "a write to be applied", func() bool {
		_, err = fn()
		var ae *client.APIError
		return err == nil || !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable
	})
	if err != nil {
		t.Fatal(err)
	}
}

func register(t *testing.T, c *client.Client, svc, ip string, port int, weight float64) {
	t.Helper()
	write(t, func() (uint64, error) {
		return c.RegisterInstance(context.Background(), ns, group, svc, ip, port, api.InstanceRequest{Weight: &weight})
	})
}

func TestCluster_FollowerAnswersFollowTheRegistry(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts(), withDNS(dnsapi.Config{}))
	leader := c.Nodes[c.MustLeader()]
	follower := c.Nodes[c.Followers()[0]]
	addr := follower.Server.DNSAddr()
	if addr == "" || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("follower's DNS address %q", addr)
	}
	cl := leader.Client()
	ctx := context.Background()

	eventually(t, addr, "db.svc.roster.", dns.TypeA, dns.RcodeNameError)
	noneCluster(t, cl, "db")
	// A service without instances exists: NODATA.
	eventually(t, addr, "db.svc.roster.", dns.TypeA, dns.RcodeSuccess)
	register(t, cl, "db", "127.0.0.1", 5432, 1)
	register(t, cl, "db", "127.0.0.2", 5432, 3)
	eventually(t, addr, "db.svc.roster.", dns.TypeA, dns.RcodeSuccess, "127.0.0.1", "127.0.0.2")
	eventually(t, addr, "db.svc.roster.", dns.TypeSRV, dns.RcodeSuccess,
		"21845 5432 7f000001.addr.roster.", "65535 5432 7f000002.addr.roster.")
	eventually(t, addr, "DEFAULT.db.DEFAULT_GROUP.public.svc.roster.", dns.TypeA, dns.RcodeSuccess, "127.0.0.1", "127.0.0.2")
	eventually(t, addr, "db.svc.roster.", dns.TypeAAAA, dns.RcodeSuccess)

	// Health transitions (NONE cluster: set by hand).
	write(t, func() (uint64, error) { return cl.SetInstanceHealth(ctx, ns, group, "db", "127.0.0.2", 5432, false) })
	eventually(t, addr, "db.svc.roster.", dns.TypeA, dns.RcodeSuccess, "127.0.0.1")
	eventually(t, addr, "db.svc.roster.", dns.TypeSRV, dns.RcodeSuccess, "65535 5432 7f000001.addr.roster.")

	// Protect threshold: 1 healthy of 2 ≤ 0.5, so every enabled instance is answered.
	th := 0.5
	write(t, func() (uint64, error) {
		return cl.UpsertService(ctx, ns, group, "db", api.ServiceRequest{ProtectThreshold: &th})
	})
	eventually(t, addr, "db.svc.roster.", dns.TypeA, dns.RcodeSuccess, "127.0.0.1", "127.0.0.2")
	th = 0
	write(t, func() (uint64, error) {
		return cl.UpsertService(ctx, ns, group, "db", api.ServiceRequest{ProtectThreshold: &th})
	})
	eventually(t, addr, "db.svc.roster.", dns.TypeA, dns.RcodeSuccess, "127.0.0.1")

	// A disabled instance is never answered: the one enabled instance left is down, so
	// the threshold 0 is reached and it is answered, the disabled one not.
	off := false
	write(t, func() (uint64, error) {
		return cl.UpdateInstance(ctx, ns, group, "db", "127.0.0.1", 5432, api.InstanceRequest{Enabled: &off})
	})
	eventually(t, addr, "db.svc.roster.", dns.TypeA, dns.RcodeSuccess, "127.0.0.2")
	write(t, func() (uint64, error) { return cl.SetInstanceHealth(ctx, ns, group, "db", "127.0.0.2", 5432, true) })
	eventually(t, addr, "db.svc.roster.", dns.TypeA, dns.RcodeSuccess, "127.0.0.2")

	// Deregistration, and IPv6.
	register(t, cl, "db", "::1", 5433, 1)
	write(t, func() (uint64, error) { return cl.DeregisterInstance(ctx, ns, group, "db", "127.0.0.2", 5432) })
	eventually(t, addr, "db.svc.roster.", dns.TypeA, dns.RcodeSuccess)
	eventually(t, addr, "db.svc.roster.", dns.TypeAAAA, dns.RcodeSuccess, "::1")
	eventually(t, addr, "db.svc.roster.", dns.TypeSRV, dns.RcodeSuccess, "65535 5433 00000000000000000000000000000001.addr.roster.")

	// Every node answers, the leader too.
	eventually(t, leader.Server.DNSAddr(), "db.svc.roster.", dns.TypeAAAA, dns.RcodeSuccess, "::1")

	// The negative answers carry the SOA; outside names are refused.
	m := ask(t, addr, "udp", "nope.svc.roster.", dns.TypeA, "")
	if m.Rcode != dns.RcodeNameError || len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("unknown service: %v", m)
	}
	m = ask(t, addr, "udp", "example.com.", dns.TypeA, "")
	if m.Rcode != dns.RcodeRefused || len(m.Answer)+len(m.Ns) != 0 {
		t.Fatalf("outside the domain: %v", m)
	}
}

// rawExchange sends b over UDP and returns the reply.
func rawExchange(t *testing.T, addr string, b []byte) *dns.Msg {
	t.Helper()
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(b); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no reply to %x: %v", b, err)
	}
	m := new(dns.Msg)
	if err := m.Unpack(buf[:n]); err != nil {
		t.Fatalf("reply %x: %v", buf[:n], err)
	}
	return m
}

func TestCluster_FormErrTruncationTCPAndRateLimit(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts(),
		withDNS(dnsapi.Config{MaxAnswers: 100, RateLimit: 0.001, RateBurst: 1000}))
	nd := c.Nodes[c.MustLeader()]
	addr := nd.Server.DNSAddr()
	cl := nd.Client()
	noneCluster(t, cl, "big")
	for i := 1; i <= 60; i++ {
		register(t, cl, "big", "127.0.1."+strconv.Itoa(i), 80, 1)
	}
	eventually(t, addr, "big.svc.roster.", dns.TypeSOA, dns.RcodeSuccess) // NODATA once it exists

	// Malformed: no question; a question cut short.
	m := rawExchange(t, addr, []byte{0x12, 0x34, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0})
	if m.Id != 0x1234 || m.Rcode != dns.RcodeFormatError {
		t.Fatalf("no question: id %x rcode %s", m.Id, dns.RcodeToString[m.Rcode])
	}
	m = rawExchange(t, addr, []byte{0x12, 0x35, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'b', 'i'})
	if m.Id != 0x1235 || m.Rcode != dns.RcodeFormatError {
		t.Fatalf("cut question: id %x rcode %s", m.Id, dns.RcodeToString[m.Rcode])
	}

	// 60 A records do not fit 512 bytes: UDP answers part of them with TC; TCP all.
	udp := ask(t, addr, "udp", "big.svc.roster.", dns.TypeA, "")
	if !udp.Truncated || len(udp.Answer) == 0 || len(udp.Answer) >= 60 {
		t.Fatalf("UDP: %d records, TC %v", len(udp.Answer), udp.Truncated)
	}
	tcp := ask(t, addr, "tcp", "big.svc.roster.", dns.TypeA, "")
	if tcp.Truncated || len(tcp.Answer) != 60 {
		t.Fatalf("TCP: %d records, TC %v", len(tcp.Answer), tcp.Truncated)
	}

	// Rate limit: the burst (1000, minus what this test sent) runs out for 127.0.0.1;
	// another client address still gets answers.
	refused := false
	for i := 0; i < 1100 && !refused; i++ {
		refused = ask(t, addr, "udp", "big.svc.roster.", dns.TypeSOA, "").Rcode == dns.RcodeRefused
	}
	if !refused {
		t.Fatal("1100 queries within the burst of 1000 were never refused")
	}
	if m := ask(t, addr, "udp", "big.svc.roster.", dns.TypeA, "127.0.0.2"); m.Rcode != dns.RcodeSuccess || len(m.Answer) == 0 {
		t.Fatalf("another client refused: %v", m.MsgHdr)
	}
	if m := ask(t, addr, "tcp", "big.svc.roster.", dns.TypeA, ""); m.Rcode != dns.RcodeRefused {
		t.Fatalf("the limited client over TCP: %s", dns.RcodeToString[m.Rcode])
	}

	// The metrics count queries by type and rcode, and their latency.
	metrics := scrape(t, "http://"+nd.HTTPAddr+"/metrics")
	for _, s := range []string{
		`roster_dns_queries_total{rcode="REFUSED",type="SOA"} 1`,
		`roster_dns_queries_total{rcode="FORMERR",type="none"} 2`,
		`roster_dns_queries_total{rcode="NOERROR",type="A"}`,
		`roster_dns_query_duration_seconds_count{proto="tcp"}`,
		`roster_dns_truncated_total 2`, // both UDP queries of the 60 A records
		`roster_dns_rate_limit_clients 2`,
	} {
		if !strings.Contains(metrics, s) {
			t.Errorf("metrics lack %q:\n%s", s, metrics)
		}
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServer_DNSIsOffByDefaultAndOptionalWhenTaken(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts())
	if a := c.Nodes[0].Server.DNSAddr(); a != "" {
		t.Fatalf("a node without DNS settings serves DNS on %s", a)
	}

	taken, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := func() server.Config {
		dir := t.TempDir()
		return server.Config{
			NodeID: "solo", DataDir: filepath.Join(dir, "data"), HTTPAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
			NoSync: true, DNS: dnsapi.Config{Addr: taken.LocalAddr().String()},
		}
	}
	if _, err := server.New(cfg()); err == nil || !strings.Contains(err.Error(), "dns-addr") {
		t.Fatalf("a taken DNS address: %v, want a dns-addr error", err)
	}
	opt := cfg()
	opt.DNSOptional = true
	s, err := server.New(opt)
	if err != nil {
		t.Fatalf("a taken optional DNS address: %v", err)
	}
	defer s.Close()
	if s.DNSAddr() != "" {
		t.Fatalf("DNSAddr %q with the address taken", s.DNSAddr())
	}
	bad := cfg()
	bad.DNSOptional, bad.DNS.Domain = true, "."
	if _, err := server.New(bad); err == nil {
		t.Fatal("an invalid DNS domain was accepted because DNS is optional")
	}
}
