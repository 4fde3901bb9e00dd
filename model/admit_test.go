package model

import (
	"errors"
	"strings"
	"testing"
)

// admissionOnly checks that err is a validation error naming field while apply, the
// apply-time rule of the same input, accepts it: the rule belongs to admission only.
func admissionOnly(t *testing.T, what string, err, apply error, field string) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != field {
		t.Errorf("%s: admission answered %v, want a validation error naming %q", what, err, field)
	}
	if apply != nil {
		t.Errorf("%s: the apply-time rule refuses it too (%v); the state machine must keep applying it", what, apply)
	}
}

// invisibleSamples are the characters the review named plus others of the classes
// invisible covers.
var invisibleSamples = []rune{
	0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0x200E, 0x200F, // bidi
	0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, // zero-width
	0x00AD, 0x061C, 0x180E, 0xE0001, // other format characters
	0x3164, 0x115F, 0x034F, 0xFE0F, 0xFFFE, 0xFDD0, // fillers, joiner, selector, noncharacters
}

// TestAdmitServiceName refuses dot segments and invisible characters, which the
// apply-time rule still accepts, and keeps what names legitimately hold.
func TestAdmitServiceName(t *testing.T) {
	refused := []string{".", ".."}
	for _, r := range invisibleSamples {
		refused = append(refused, "a"+string(r)+"b", string(r)+"orders", "orders"+string(r))
	}
	for _, s := range refused {
		admissionOnly(t, strings.ToValidUTF8(s, "?"), AdmitServiceName(s), ValidateServiceName(s), "service")
		admissionOnly(t, "key "+s, AdmitServiceKey(ServiceKey{Namespace: "public", Group: "g", Service: s}),
			ValidateServiceKey(ServiceKey{Namespace: "public", Group: "g", Service: s}), "service")
	}
	for _, s := range []string{"orders", "a.b", "...", ".hidden", "v1..2", "zamówienia", "Ωμέγα-1", "a:b", "😀"} {
		if err := AdmitServiceName(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	// The apply-time rules keep refusing what they refused.
	for _, s := range []string{"", "@x", "a@@b", "a/b", "a b", "a\x00b", "\xff"} {
		if AdmitServiceName(s) == nil || ValidateServiceName(s) == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// TestAdmitGroup refuses the dot segments; the other names are already ASCII-only.
func TestAdmitGroup(t *testing.T) {
	for _, g := range []string{".", ".."} {
		admissionOnly(t, g, AdmitGroup(g), ValidateGroup(g), "group")
	}
	for _, g := range []string{"DEFAULT_GROUP", "a.b", "...", "g:1"} {
		if err := AdmitGroup(g); err != nil {
			t.Errorf("%q: %v", g, err)
		}
	}
	for _, r := range invisibleSamples {
		s := "a" + string(r)
		if ValidateGroup(s) == nil || ValidateClusterName(s) == nil || ValidateNamespace(s) == nil || ValidateIP(s) == nil {
			t.Errorf("%q: an ASCII-only name rule accepts it", s)
		}
	}
	for _, s := range []string{".", ".."} {
		if ValidateClusterName(s) == nil || ValidateNamespace(s) == nil || ValidateIP(s) == nil {
			t.Errorf("%q: accepted as a cluster, namespace or host name", s)
		}
	}
}

// TestAdmitMetadata refuses invalid UTF-8, control characters, bidi reordering and
// invisible or ambiguous keys, and keeps what text needs.
func TestAdmitMetadata(t *testing.T) {
	l := DefaultLimits()
	for _, md := range []map[string]string{
		{"k": "a\xffb"},
		{"\xff": "1", "\xfe": "2"}, // both would be encoded as U+FFFD: duplicate JSON keys
		{"k": "\x1b[31mred\x1b[0m"},
		{"k": "a\nb"}, {"k": "a\tb"}, {"k": "a\rb"}, {"k": "\x00"}, {"k": "\x7f"}, {"k": "\u009b2J"},
		{"k": "\u202egnp.exe"}, {"k": "\u2066x"}, {"k": "a\u2028b"}, {"k": "a\u2029b"},
		{"k\x07": "v"}, {"env\u200b": "v"}, {"\ufeffenv": "v"}, {"e\u202env": "v"}, {"e\u00adnv": "v"},
		{"env ": "v"}, {" env": "v"}, {"a\u00a0b": "v"}, {"a\u3000b": "v"},
	} {
		admissionOnly(t, strings.ToValidUTF8(mdString(md), "?"), l.AdmitMetadata("metadata", md), l.ValidateMetadata("metadata", md), "metadata")
	}
	for _, md := range []map[string]string{
		nil, {}, {"k": ""}, {"display name": "x"},
		{"he": "\u05e9\u05dc\u05d5\u05dd\u200f (1)", "emoji": "👩\u200d💻❤️", "fa": "می\u200cخواهم", "bom": "\ufeffx"},
		{"k": "\ufffd"}, {"preserved.register.source": "SPRING_CLOUD"},
	} {
		if err := l.AdmitMetadata("metadata", md); err != nil {
			t.Errorf("%q: %v", md, err)
		}
	}
	// The same map is refused for the same key, whatever the map's order.
	md := map[string]string{"a": "\x01", "b": "\x02", "c": "\x03", "d": "\x04"}
	first := l.AdmitMetadata("metadata", md).Error()
	for range 20 {
		if got := l.AdmitMetadata("metadata", md).Error(); got != first || !strings.Contains(got, `"a"`) {
			t.Fatalf("%q then %q", first, got)
		}
	}
}

func mdString(md map[string]string) string {
	var b strings.Builder
	for k, v := range md {
		b.WriteString(k + "=" + v + ",")
	}
	return b.String()
}

// TestAdmitHealthCheck refuses paths with spaces, control or invisible characters, and
// headers that are not HTTP tokens, carry control characters or appear twice.
func TestAdmitHealthCheck(t *testing.T) {
	base := HealthCheck{Type: CheckHTTP, Path: "/health"}.WithDefaults()
	with := func(path string, headers map[string]string) HealthCheck {
		h := base
		h.Path, h.Headers = path, headers
		return h
	}
	for _, tc := range []struct {
		h     HealthCheck
		field string
	}{
		{with("/a b", nil), "healthCheck.path"},
		{with("/a\tb", nil), "healthCheck.path"},
		{with("/a\x00", nil), "healthCheck.path"},
		{with("/\x7f", nil), "healthCheck.path"},
		{with("/\u200b", nil), "healthCheck.path"},
		{with("/\u202e", nil), "healthCheck.path"},
		{with("/\xff", nil), "healthCheck.path"},
		{with("/", map[string]string{"X-Ä": "v"}), "healthCheck.headers"},
		{with("/", map[string]string{"X\x01": "v"}), "healthCheck.headers"},
		{with("/", map[string]string{"X(": "v"}), "healthCheck.headers"},
		{with("/", map[string]string{"X\u200b": "v"}), "healthCheck.headers"},
		{with("/", map[string]string{"X-A": "a\x00b"}), "healthCheck.headers"},
		{with("/", map[string]string{"X-A": "\x1b[2J"}), "healthCheck.headers"},
		{with("/", map[string]string{"X-A": "a\tb"}), "healthCheck.headers"},
		{with("/", map[string]string{"X-A": "\xff"}), "healthCheck.headers"},
		{with("/", map[string]string{"X-A": "\u202e"}), "healthCheck.headers"},
		{with("/", map[string]string{"X-A": "1", "x-a": "2"}), "healthCheck.headers"},
	} {
		admissionOnly(t, strings.ToValidUTF8(tc.h.Path+mdString(tc.h.Headers), "?"), AdmitHealthCheck(tc.h), ValidateHealthCheck(tc.h), tc.field)
	}
	for _, h := range []HealthCheck{
		base, with("/health?full=1&x=%20", nil), with("/é", map[string]string{"Host": "svc.local", "X-Token_1": "a b é", "!#$%&'*+-.^_`|~": ""}),
		HealthCheck{Type: CheckTCP}.WithDefaults(),
	} {
		if err := AdmitHealthCheck(h); err != nil {
			t.Errorf("%+v: %v", h, err)
		}
	}
}

// TestAdmitObjects checks the Admit* rules of whole objects carry the field rules, and
// that each still enforces the apply-time rules.
func TestAdmitObjects(t *testing.T) {
	l := DefaultLimits()
	in := Instance{Namespace: "public", Group: "g", Service: "..", IP: "127.100.0.1", Port: 80, Cluster: "DEFAULT", Weight: 1}
	admissionOnly(t, "instance", l.AdmitInstance(in), l.ValidateInstance(in), "service")
	in.Service, in.Metadata = "orders", map[string]string{"k": "\x1b"}
	admissionOnly(t, "instance metadata", l.AdmitInstance(in), l.ValidateInstance(in), "metadata")
	in.Metadata, in.Port = nil, 0
	if err := l.AdmitInstance(in); err == nil {
		t.Error("port 0 admitted")
	}
	md := map[string]string{"k": "\u202e"}
	admissionOnly(t, "patch", l.AdmitPatch(InstancePatch{Metadata: &md}), nil, "metadata")
	bad := "bad.c"
	if err := l.AdmitPatch(InstancePatch{Cluster: &bad}); err == nil {
		t.Error("patch to cluster bad.c admitted")
	}
	svc := Service{Namespace: "public", Group: "..", Name: "orders"}
	admissionOnly(t, "service", l.AdmitService(svc), l.ValidateService(svc), "group")
	c := Cluster{Namespace: "public", Group: "g", Service: "orders", Name: "web",
		HealthCheck: HealthCheck{Type: CheckHTTP, Path: "/a b"}.WithDefaults()}
	admissionOnly(t, "cluster", l.AdmitCluster(c), l.ValidateCluster(c), "healthCheck.path")
	c.HealthCheck, c.Metadata = DefaultHealthCheck(), map[string]string{"k": "\n"}
	admissionOnly(t, "cluster metadata", l.AdmitCluster(c), l.ValidateCluster(c), "metadata")
	ns := Namespace{ID: "dev", Name: "\u202eved"}
	admissionOnly(t, "namespace name", AdmitNamespaceRecord(ns), ValidateNamespaceRecord(ns), "name")
	ns = Namespace{ID: "dev", Name: "dev", Description: "a\u2028b"}
	admissionOnly(t, "namespace description", AdmitNamespaceRecord(ns), ValidateNamespaceRecord(ns), "description")
	if err := AdmitNamespaceRecord(Namespace{ID: "dev", Name: "Dév", Description: "équipe \u05e9\u200f"}); err != nil {
		t.Error(err)
	}
}

// TestParsePort takes canonical decimal ports only.
func TestParsePort(t *testing.T) {
	for _, s := range []string{"+80", "-80", "080", "0080", " 80", "80 ", "8 0", "0", "00", "65536", "99999", "100000",
		"", "8_0", "0x50", "80.0", "٨٠", "８０", "1e2"} {
		var ve *ValidationError
		if _, err := ParsePort("port", s); !errors.As(err, &ve) || ve.Field != "port" {
			t.Errorf("%q: %v, want a refusal naming port", s, err)
		}
	}
	for s, want := range map[string]int{"1": 1, "80": 80, "8080": 8080, "65535": 65535, "10": 10} {
		if got, err := ParsePort("port", s); err != nil || got != want {
			t.Errorf("%q: %d %v", s, got, err)
		}
	}
}
