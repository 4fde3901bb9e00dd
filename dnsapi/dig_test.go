package dnsapi_test

import (
	"context"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/dnsapi"
	"github.com/rosterhq/roster/internal/testtool"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server/servertest"
)

// digPath finds dig (testtool.Missing without it).
func digPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("dig")
	if err != nil {
		testtool.Missing(t, "dig", "Debian: apt-get install dnsutils")
	}
	return p
}

// dig runs dig against the node's DNS address and returns its output.
func dig(t *testing.T, digBin, addr string, args ...string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	argv := append([]string{"@" + host, "-p", port, "+time=2", "+tries=2"}, args...)
	out, err := exec.CommandContext(ctx, digBin, argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("dig %s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// TestDig_EndToEnd queries a node with the real dig, over UDP and TCP.
func TestDig_EndToEnd(t *testing.T) {
	digBin := digPath(t)
	c := servertest.New(t, 1, servertest.FastTimeouts(), withDNS(dnsapi.Config{}))
	nd := c.Nodes[c.MustLeader()]
	addr := nd.Server.DNSAddr()
	cl := nd.Client()
	noneCluster(t, cl, "db")
	register(t, cl, "db", "127.0.0.1", 5432, 1)
	register(t, cl, "db", "127.0.0.2", 5432, 2)

	var got []string
	wait.For(t, 10*time.Second, "dig to see both instances", func() bool {
		got = lines(dig(t, digBin, addr, "+short", "db.svc.roster.", "A"))
		return slices.Equal(got, []string{"127.0.0.1", "127.0.0.2"})
	})
	if got := lines(dig(t, digBin, addr, "+short", "+tcp", "db.svc.roster.", "A")); !slices.Equal(got, []string{"127.0.0.1", "127.0.0.2"}) {
		t.Fatalf("dig +tcp A: %q", got)
	}
	if got := lines(dig(t, digBin, addr, "+short", "db.svc.roster.", "SRV")); !slices.Equal(got, []string{
		"0 32768 5432 7f000001.addr.roster.", "0 65535 5432 7f000002.addr.roster.",
	}) {
		t.Fatalf("dig SRV: %q", got)
	}
	full := dig(t, digBin, addr, "db.svc.roster.", "SRV")
	for _, s := range []string{"status: NOERROR", "flags: qr aa rd;", "ADDITIONAL SECTION:", "7f000002.addr.roster.\t5\tIN\tA\t127.0.0.2"} {
		if !strings.Contains(full, s) {
			t.Errorf("dig SRV lacks %q:\n%s", s, full)
		}
	}
	if out := dig(t, digBin, addr, "nope.svc.roster.", "A"); !strings.Contains(out, "status: NXDOMAIN") || !strings.Contains(out, "IN\tSOA\tns.roster. hostmaster.roster.") {
		t.Errorf("unknown service:\n%s", out)
	}
	if out := dig(t, digBin, addr, "example.com.", "A"); !strings.Contains(out, "status: REFUSED") || strings.Contains(out, " ra") {
		t.Errorf("a name outside the domain:\n%s", out)
	}
}
