package dnsapi

import (
	"net/netip"
	"testing"

	"github.com/rosterhq/roster/model"
)

func key(ns, group, svc string) model.ServiceKey {
	return model.ServiceKey{Namespace: ns, Group: group, Service: svc}
}

func short(svc string) model.ServiceKey { return key(model.DefaultNamespace, model.DefaultGroup, svc) }

func TestParseName(t *testing.T) {
	roster := []string{"roster"}
	multi := []string{"dns", "example", "internal"}
	cases := []struct {
		name   string
		domain []string
		want   parsedName
	}{
		// The four service forms: the label count before "svc" decides.
		{"orders.svc.roster.", roster, parsedName{kind: nameService, hasService: true, key: short("orders"), parentNS: "orders"}},
		{"primary.orders.svc.roster.", roster, parsedName{kind: nameService, hasService: true, key: short("orders"), cluster: "primary", parentNS: "orders", parentGroup: "primary"}},
		{"orders.billing.prod.svc.roster.", roster, parsedName{kind: nameService, hasService: true, key: key("prod", "billing", "orders")}},
		{"primary.orders.billing.prod.svc.roster.", roster, parsedName{kind: nameService, hasService: true, key: key("prod", "billing", "orders"), cluster: "primary"}},
		{"orders.DEFAULT_GROUP.public.svc.roster.", roster, parsedName{kind: nameService, hasService: true, key: short("orders")}},
		{"a.b.c.d.e.svc.roster.", roster, parsedName{kind: nameNone}},
		// Case: labels keep the case asked; the domain and "svc" match any case.
		{"Orders.SVC.Roster.", roster, parsedName{kind: nameService, hasService: true, key: short("Orders"), parentNS: "Orders"}},
		{"orders.svc.roster", roster, parsedName{kind: nameService, hasService: true, key: short("orders"), parentNS: "orders"}},
		// A label is one DNS label: an escaped dot stays inside it.
		{`orders\.db.svc.roster.`, roster, parsedName{kind: nameService, hasService: true, key: short("orders.db")}},
		{`orders.g\.1.prod.svc.roster.`, roster, parsedName{kind: nameService, hasService: true, key: key("prod", "g.1", "orders")}},
		{`\079rders.svc.roster.`, roster, parsedName{kind: nameService, hasService: true, key: short("Orders"), parentNS: "Orders"}},
		// Labels no name may have.
		{"@orders.svc.roster.", roster, parsedName{kind: nameNone}},
		{"c.orders.billing.bad:ns.svc.roster.", roster, parsedName{kind: nameNone}},
		{"bad.cluster.orders.billing.prod.svc.roster.", roster, parsedName{kind: nameNone}},
		// Two labels whose first cannot be a cluster may still be group.namespace.
		{"team:a.prod.svc.roster.", roster, parsedName{kind: nameService, parentNS: "prod", parentGroup: "team:a"}},
		{"bad!.orders.svc.roster.", roster, parsedName{kind: nameNone}},
		// The rest of the zone.
		{"roster.", roster, parsedName{kind: nameApex}},
		{"ROSTER.", roster, parsedName{kind: nameApex}},
		{"svc.roster.", roster, parsedName{kind: nameEmpty}},
		{"addr.roster.", roster, parsedName{kind: nameEmpty}},
		{"orders.roster.", roster, parsedName{kind: nameNone}},
		{"svc.orders.roster.", roster, parsedName{kind: nameNone}},
		{"7f000001.addr.roster.", roster, parsedName{kind: nameAddr, addr: netip.MustParseAddr("127.0.0.1")}},
		{"7F000001.addr.roster.", roster, parsedName{kind: nameAddr, addr: netip.MustParseAddr("127.0.0.1")}},
		{"00000000000000000000000000000001.addr.roster.", roster, parsedName{kind: nameAddr, addr: netip.MustParseAddr("::1")}},
		{"7f00001.addr.roster.", roster, parsedName{kind: nameNone}},
		{"zz000001.addr.roster.", roster, parsedName{kind: nameNone}},
		{"x.7f000001.addr.roster.", roster, parsedName{kind: nameNone}},
		// Outside the domain: refused, never resolved.
		{".", roster, parsedName{kind: nameOutside}},
		{"example.com.", roster, parsedName{kind: nameOutside}},
		{"roster.com.", roster, parsedName{kind: nameOutside}},
		{"xroster.", roster, parsedName{kind: nameOutside}},
		{"orders.svc.roster.example.", roster, parsedName{kind: nameOutside}},
		// A domain of several labels.
		{"orders.svc.dns.example.internal.", multi, parsedName{kind: nameService, hasService: true, key: short("orders"), parentNS: "orders"}},
		{"dns.example.internal.", multi, parsedName{kind: nameApex}},
		{"example.internal.", multi, parsedName{kind: nameOutside}},
		{"orders.svc.roster.", multi, parsedName{kind: nameOutside}},
	}
	for _, tc := range cases {
		if got := parseName(tc.name, tc.domain); got != tc.want {
			t.Errorf("parseName(%q)\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestAddrNameRoundTrip(t *testing.T) {
	for _, s := range []string{"127.0.0.1", "10.1.2.3", "::1", "fd00::5", "2001:db8::1"} {
		a := netip.MustParseAddr(s)
		name := addrName(a, "roster.")
		p := parseName(name, []string{"roster"})
		if p.kind != nameAddr || p.addr != a {
			t.Errorf("%s: name %s parses as %+v", s, name, p)
		}
	}
	if got := addrName(netip.MustParseAddr("127.0.0.1"), "roster."); got != "7f000001.addr.roster." {
		t.Errorf("addrName(127.0.0.1) = %s", got)
	}
}

func TestEqualFoldIsASCIIOnly(t *testing.T) {
	if !equalFold("OrDeRs-1_x", "orders-1_X") {
		t.Error("ASCII letters must match in any case")
	}
	// Only ASCII letters fold (RFC 4343): 'K' (U+212A KELVIN SIGN) is not 'k'.
	if equalFold("\u212a", "k") || equalFold("É", "é") {
		t.Error("non-ASCII bytes must match exactly")
	}
	if foldASCII("AbC-É") != "abc-É" {
		t.Errorf("foldASCII = %q", foldASCII("AbC-É"))
	}
}

func TestNormalizeDomain(t *testing.T) {
	for in, want := range map[string]string{"roster.": "roster.", "Roster": "roster.", " dns.Example.internal ": "dns.example.internal."} {
		if got, err := normalizeDomain(in); err != nil || got != want {
			t.Errorf("normalizeDomain(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{".", "", "a..b"} {
		if _, err := normalizeDomain(bad); err == nil {
			t.Errorf("normalizeDomain(%q) accepted", bad)
		}
	}
}
