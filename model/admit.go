package model

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Two sets of rules guard what the registry holds.
//
// The Validate* functions (and Limits.Validate*) are the apply-time rules: the state
// machine runs them on every entry it applies, on every replica, so they are part of
// what a log entry means. Making one stricter would let an upgraded node refuse an entry
// that older nodes applied, and the replicas would diverge. They never get stricter.
//
// The Admit* functions are the admission rules: every apply-time rule plus the rules
// added since, checked by the registry service (and by the API layers, which want their
// own error shapes) before a command is built, never by the state machine. A new rule
// goes here.
//
// Admission covers what a write creates or replaces. Reads, deletes, and the instance a
// patch or a health change names keep the apply-time rules, so that an object stored
// under older rules can still be read, deregistered and deleted.
//
// Rules per field, beyond the apply-time ones:
//   - service name: not "." or ".." (a client resolves them as path segments), and no
//     invisible character (see invisible: bidi controls, zero-width characters...);
//   - group: not "." or ".."; namespace ids, cluster names and host names are ASCII
//     letters, digits and a little punctuation already, which excludes all of these;
//   - metadata keys: valid UTF-8, no invisible character, no whitespace at either end
//     and none but U+0020 inside (a key must look like itself);
//   - metadata values, namespace display names and descriptions, health-check header
//     values: free text, valid UTF-8 without control characters, line or paragraph
//     separators, or bidi embeddings, overrides and isolates (which reorder the text
//     shown around them); the marks and joiners that right-to-left and many other
//     scripts and emoji need are allowed;
//   - health-check path: valid UTF-8 without whitespace or invisible characters;
//   - health-check header names: HTTP tokens (RFC 9110), at most one per name whatever
//     its case;
//   - ports given as text (ParsePort): plain decimal digits, no sign, spaces or leading
//     zeros.

// invisible reports whether r shows nothing, or changes how the text around it shows:
// control characters (Cc); format characters (Cf), among them the bidi controls
// U+200E, U+200F, U+202A–U+202E and U+2066–U+2069 and the zero-width U+200B–U+200D,
// U+2060 and U+FEFF; line and paragraph separators; variation selectors; noncharacters;
// and Unicode's other default-ignorable code points (Hangul fillers, the combining
// grapheme joiner...). Two names that differ only by such characters look the same.
func invisible(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp,
		unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector, unicode.Noncharacter_Code_Point)
}

// reorders reports whether r is a bidi embedding, override or isolate control
// (U+202A–U+202E, U+2066–U+2069): it changes the display order of the text after it.
func reorders(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// checkText is the rule of free text: valid UTF-8 without control characters, line or
// paragraph separators or bidi embeddings, overrides and isolates.
func checkText(field, what, s string) error {
	if !utf8.ValidString(s) {
		return Invalid(field, "%s must be valid UTF-8", what)
	}
	for _, r := range s {
		switch {
		case unicode.IsControl(r):
			return Invalid(field, "%s must not contain control characters (%U)", what, r)
		case unicode.In(r, unicode.Zl, unicode.Zp):
			return Invalid(field, "%s must not contain line or paragraph separators (%U)", what, r)
		case reorders(r):
			return Invalid(field, "%s must not contain bidi embedding, override or isolate controls (%U)", what, r)
		}
	}
	return nil
}

// dotSegment reports whether s is "." or "..", which URL resolution removes from a path.
func dotSegment(s string) bool { return s == "." || s == ".." }

// AdmitServiceName is ValidateServiceName plus the admission rules: not "." or "..",
// and no invisible character.
func AdmitServiceName(s string) error {
	if err := ValidateServiceName(s); err != nil {
		return err
	}
	if dotSegment(s) {
		return Invalid("service", "must not be %q (a path segment clients resolve)", s)
	}
	for _, r := range s {
		if invisible(r) {
			return Invalid("service", "must not contain invisible characters such as bidi controls or zero-width characters (%U)", r)
		}
	}
	return nil
}

// AdmitGroup is ValidateGroup plus the admission rule: not "." or "..".
func AdmitGroup(g string) error {
	if err := ValidateGroup(g); err != nil {
		return err
	}
	if dotSegment(g) {
		return Invalid("group", "must not be %q (a path segment clients resolve)", g)
	}
	return nil
}

// AdmitServiceKey checks the three names of a service key under the admission rules.
func AdmitServiceKey(k ServiceKey) error {
	if err := ValidateNamespace(k.Namespace); err != nil {
		return err
	}
	if err := AdmitGroup(k.Group); err != nil {
		return err
	}
	return AdmitServiceName(k.Service)
}

// AdmitMetadata is ValidateMetadata plus the admission rules of keys and values. Keys
// are checked in sorted order, so that the same map is always refused for the same key.
func (l Limits) AdmitMetadata(field string, md map[string]string) error {
	if err := l.ValidateMetadata(field, md); err != nil {
		return err
	}
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := checkMetadataKey(field, k); err != nil {
			return err
		}
		if err := checkText(field, "the value of "+strconv.Quote(k), md[k]); err != nil {
			return err
		}
	}
	return nil
}

// checkMetadataKey is the rule of a metadata key (non-empty is ValidateMetadata's).
func checkMetadataKey(field, k string) error {
	if !utf8.ValidString(k) {
		return Invalid(field, "keys must be valid UTF-8")
	}
	q := strconv.Quote(k)
	if strings.TrimSpace(k) != k {
		return Invalid(field, "key %s must not start or end with whitespace", q)
	}
	for _, r := range k {
		switch {
		case invisible(r):
			return Invalid(field, "key %s must not contain control or invisible characters (%U)", q, r)
		case unicode.IsSpace(r) && r != ' ':
			return Invalid(field, "key %s must not contain whitespace other than spaces (%U)", q, r)
		}
	}
	return nil
}

// AdmitHealthCheck is ValidateHealthCheck plus the admission rules of the path, the
// headers and the CA bundle (whose certificates must parse).
func AdmitHealthCheck(h HealthCheck) error {
	if err := ValidateHealthCheck(h); err != nil {
		return err
	}
	if h.TLSCAPEM != "" {
		if err := validateCAPEM(h.TLSCAPEM, true); err != nil {
			return err
		}
	}
	if !utf8.ValidString(h.Path) {
		return Invalid("healthCheck.path", "must be valid UTF-8")
	}
	for _, r := range h.Path {
		if unicode.IsSpace(r) || invisible(r) {
			return Invalid("healthCheck.path", "must not contain whitespace, control or invisible characters (%U)", r)
		}
	}
	names := make([]string, 0, len(h.Headers))
	for k := range h.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	seen := make(map[string]string, len(names))
	for _, k := range names {
		if !httpToken(k) {
			return Invalid("healthCheck.headers", "header name %q is not an HTTP token (letters, digits and !#$%%&'*+-.^_`|~)", k)
		}
		if other, dup := seen[strings.ToLower(k)]; dup {
			return Invalid("healthCheck.headers", "headers %q and %q are the same header (names are case-insensitive)", other, k)
		}
		seen[strings.ToLower(k)] = k
		if err := checkText("healthCheck.headers", "the value of header "+strconv.Quote(k), h.Headers[k]); err != nil {
			return err
		}
	}
	return nil
}

// httpToken reports whether s is an HTTP token (RFC 9110 section 5.6.2), the syntax of
// a header name.
func httpToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// AdmitInstance is ValidateInstance under the admission rules.
func (l Limits) AdmitInstance(in Instance) error {
	if err := l.ValidateInstance(in); err != nil {
		return err
	}
	if err := AdmitServiceKey(in.ServiceKey()); err != nil {
		return err
	}
	return l.AdmitMetadata("metadata", in.Metadata)
}

// AdmitPatch checks the fields an instance patch sets under the admission rules (the
// instance it names is checked apart, with ValidateInstanceRef).
func (l Limits) AdmitPatch(p InstancePatch) error {
	if p.Cluster != nil {
		if err := ValidateClusterName(*p.Cluster); err != nil {
			return err
		}
	}
	if p.Weight != nil {
		if err := ValidateWeight(*p.Weight); err != nil {
			return err
		}
	}
	if p.Metadata != nil {
		return l.AdmitMetadata("metadata", *p.Metadata)
	}
	return nil
}

// AdmitService is ValidateService under the admission rules.
func (l Limits) AdmitService(s Service) error {
	if err := l.ValidateService(s); err != nil {
		return err
	}
	if err := AdmitServiceKey(s.Key()); err != nil {
		return err
	}
	return l.AdmitMetadata("metadata", s.Metadata)
}

// AdmitCluster is ValidateCluster under the admission rules.
func (l Limits) AdmitCluster(c Cluster) error {
	if err := l.ValidateCluster(c); err != nil {
		return err
	}
	if err := AdmitServiceKey(ServiceKey{Namespace: c.Namespace, Group: c.Group, Service: c.Service}); err != nil {
		return err
	}
	if err := AdmitHealthCheck(c.HealthCheck); err != nil {
		return err
	}
	return l.AdmitMetadata("metadata", c.Metadata)
}

// AdmitNamespaceRecord is ValidateNamespaceRecord under the admission rules: the display
// name and the description are free text.
func AdmitNamespaceRecord(ns Namespace) error {
	if err := ValidateNamespaceRecord(ns); err != nil {
		return err
	}
	if err := checkText("name", "the name", ns.Name); err != nil {
		return err
	}
	return checkText("description", "the description", ns.Description)
}

// ParsePort parses a port written as text (the port of a path's ip:port, a Nacos
// parameter): decimal digits only, without sign, spaces or leading zeros, 1..65535, so
// that a port has exactly one spelling and an instance one address. field names it in
// the error.
func ParsePort(field, s string) (int, error) {
	bad := Invalid(field, "must be a decimal number between 1 and 65535 without sign, spaces or leading zeros, got %q", s)
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, bad
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, bad
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > 65535 {
		return 0, bad
	}
	return n, nil
}

// CheckText applies the rule of free text (valid UTF-8 without control characters, line
// or paragraph separators or bidi embeddings, overrides and isolates) to s, the value
// of field; what names it in the message.
func CheckText(field, what, s string) error { return checkText(field, what, s) }
