package model

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Name length bounds (Nacos's parameter checker uses the same).
const (
	MaxServiceNameLen   = 512
	MaxGroupNameLen     = 128
	MaxClusterNameLen   = 64
	MaxNamespaceLen     = 64
	MaxHostnameLen      = 253
	MaxWeight           = 10000
	DefaultMetadataSize = 1024
	MaxDescriptionLen   = 256
	MaxHeaderCount      = 32
	MaxPathLen          = 1024
	// MaxCAPEMBytes bounds a health check's CA bundle (tlsCaPem).
	MaxCAPEMBytes = 64 << 10
	// MaxGRPCServiceLen bounds a GRPC check's service name.
	MaxGRPCServiceLen = 512
	// Bounds of a MYSQL check's user, password and query.
	MaxCheckUserLen     = 80
	MaxCheckPasswordLen = 256
	MaxCheckQueryLen    = 4096
)

var (
	groupRe     = regexp.MustCompile(`^[a-zA-Z0-9\-_:.]+$`)
	clusterRe   = regexp.MustCompile(`^[0-9a-zA-Z\-_]+$`)
	namespaceRe = regexp.MustCompile(`^[\w\-]+$`)
	hostLabelRe = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9\-_]{0,61}[a-zA-Z0-9])?$`)
)

// HardMaxMetadataBytes is the compiled-in ceiling of a metadata map's JSON encoding:
// the state machine refuses anything larger whatever the settings say, and
// Settings.MetadataMaxBytes cannot be set above it. Changing it changes what replicas
// apply, so it may only ever be raised together with a new command type.
const HardMaxMetadataBytes = 64 << 10

// Limits holds validation bounds: the registry admits writes under the cluster-wide
// settings (Settings.Limits), the state machine applies them under HardLimits.
type Limits struct {
	// MaxMetadataBytes bounds a metadata map's JSON encoding.
	MaxMetadataBytes int
}

// DefaultLimits returns the bounds of DefaultSettings (metadata at most 1 KiB).
func DefaultLimits() Limits { return Limits{MaxMetadataBytes: DefaultMetadataSize} }

// HardLimits returns the compiled-in ceilings the state machine applies.
func HardLimits() Limits { return Limits{MaxMetadataBytes: HardMaxMetadataBytes} }

func (l Limits) metadataMax() int {
	if l.MaxMetadataBytes <= 0 {
		return DefaultMetadataSize
	}
	return l.MaxMetadataBytes
}

// ValidateNamespace checks a namespace id.
func ValidateNamespace(ns string) error {
	switch {
	case ns == "":
		return Invalid("namespace", "must not be empty")
	case len(ns) > MaxNamespaceLen:
		return Invalid("namespace", "must be at most %d characters", MaxNamespaceLen)
	case !namespaceRe.MatchString(ns):
		return Invalid("namespace", "may contain only letters, digits, '_' and '-'")
	}
	return nil
}

// ValidateGroup checks a group name.
func ValidateGroup(g string) error {
	switch {
	case g == "":
		return Invalid("group", "must not be empty")
	case len(g) > MaxGroupNameLen:
		return Invalid("group", "must be at most %d characters", MaxGroupNameLen)
	case !groupRe.MatchString(g):
		return Invalid("group", "may contain only letters, digits, '-', '_', ':' and '.'")
	}
	return nil
}

// ValidateServiceName checks a service name: no leading '@', no "@@", no whitespace,
// no CJK ideographs (Nacos's rule), and no '/' or control characters (they cannot
// travel in a URL path segment).
func ValidateServiceName(s string) error {
	switch {
	case s == "":
		return Invalid("service", "must not be empty")
	case len(s) > MaxServiceNameLen:
		return Invalid("service", "must be at most %d characters", MaxServiceNameLen)
	case !utf8.ValidString(s):
		return Invalid("service", "must be valid UTF-8")
	case strings.HasPrefix(s, "@"):
		return Invalid("service", "must not start with '@'")
	case strings.Contains(s, GroupSeparator):
		return Invalid("service", "must not contain %q (it separates group and service)", GroupSeparator)
	case strings.Contains(s, "/"):
		return Invalid("service", "must not contain '/'")
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return Invalid("service", "must not contain whitespace or control characters")
		}
		if r >= 0x4E00 && r <= 0x9FA5 {
			return Invalid("service", "must not contain CJK ideographs")
		}
	}
	return nil
}

// ValidateClusterName checks a cluster name.
func ValidateClusterName(c string) error {
	switch {
	case c == "":
		return Invalid("cluster", "must not be empty")
	case len(c) > MaxClusterNameLen:
		return Invalid("cluster", "must be at most %d characters", MaxClusterNameLen)
	case !clusterRe.MatchString(c):
		return Invalid("cluster", "may contain only letters, digits, '-' and '_'")
	}
	return nil
}

// ValidateServiceKey checks all three names of a service key.
func ValidateServiceKey(k ServiceKey) error {
	if err := ValidateNamespace(k.Namespace); err != nil {
		return err
	}
	if err := ValidateGroup(k.Group); err != nil {
		return err
	}
	return ValidateServiceName(k.Service)
}

// ValidateIP checks an instance address: a literal IPv4 or IPv6 address, or a DNS name
// of at most 253 characters.
func ValidateIP(ip string) error {
	if ip == "" {
		return Invalid("ip", "must not be empty")
	}
	if isIP(ip) {
		return nil
	}
	if len(ip) > MaxHostnameLen {
		return Invalid("ip", "a host name must be at most %d characters", MaxHostnameLen)
	}
	name := strings.TrimSuffix(ip, ".")
	labels := strings.Split(name, ".")
	allDigits := true
	for _, l := range labels {
		if !hostLabelRe.MatchString(l) {
			return Invalid("ip", "%q is neither an IP address nor a valid DNS name", ip)
		}
		if strings.Trim(l, "0123456789") != "" {
			allDigits = false
		}
	}
	if allDigits {
		return Invalid("ip", "%q is not a valid IP address", ip)
	}
	return nil
}

// ValidatePort checks a port number (1..65535).
func ValidatePort(port int) error {
	if port < 1 || port > 65535 {
		return Invalid("port", "must be between 1 and 65535, got %d", port)
	}
	return nil
}

// ValidateWeight checks an instance weight (0..10000).
func ValidateWeight(w float64) error {
	if w != w || w < 0 || w > MaxWeight {
		return Invalid("weight", "must be between 0 and %d", MaxWeight)
	}
	return nil
}

// ValidateMetadata checks a metadata map against the size bound; field names the
// parameter in errors.
func (l Limits) ValidateMetadata(field string, md map[string]string) error {
	if len(md) == 0 {
		return nil
	}
	b, err := json.Marshal(md)
	if err != nil {
		return Invalid(field, "cannot be encoded: %v", err)
	}
	if len(b) > l.metadataMax() {
		return Invalid(field, "must be at most %d bytes encoded as JSON, got %d", l.metadataMax(), len(b))
	}
	for k := range md {
		if k == "" {
			return Invalid(field, "keys must not be empty")
		}
	}
	return nil
}

// ValidateProtectThreshold checks a protect threshold (0..1).
func ValidateProtectThreshold(t float64) error {
	if t != t || t < 0 || t > 1 {
		return Invalid("protectThreshold", "must be between 0 and 1")
	}
	return nil
}

// ValidateInstance checks every field of an instance to be registered.
func (l Limits) ValidateInstance(in Instance) error {
	if err := ValidateServiceKey(in.ServiceKey()); err != nil {
		return err
	}
	if err := ValidateIP(in.IP); err != nil {
		return err
	}
	if err := ValidatePort(in.Port); err != nil {
		return err
	}
	if err := ValidateClusterName(in.Cluster); err != nil {
		return err
	}
	if err := ValidateWeight(in.Weight); err != nil {
		return err
	}
	return l.ValidateMetadata("metadata", in.Metadata)
}

// ValidateService checks a service definition.
func (l Limits) ValidateService(s Service) error {
	if err := ValidateServiceKey(s.Key()); err != nil {
		return err
	}
	if err := ValidateProtectThreshold(s.ProtectThreshold); err != nil {
		return err
	}
	return l.ValidateMetadata("metadata", s.Metadata)
}

// ValidateCluster checks a cluster definition, including its health-check spec.
func (l Limits) ValidateCluster(c Cluster) error {
	if err := ValidateServiceKey(ServiceKey{Namespace: c.Namespace, Group: c.Group, Service: c.Service}); err != nil {
		return err
	}
	if err := ValidateClusterName(c.Name); err != nil {
		return err
	}
	if err := ValidateHealthCheck(c.HealthCheck); err != nil {
		return err
	}
	return l.ValidateMetadata("metadata", c.Metadata)
}

// ValidateHealthCheck checks a health-check spec after defaults were applied:
// interval ≥ 1 s, timeout < interval, 1 ≤ rise,fall ≤ 10, statuses 100..599, deregisterAfter
// 0 or between max(1 s, interval) and 8760 h.
func ValidateHealthCheck(h HealthCheck) error {
	switch h.Type {
	case CheckTCP, CheckHTTP, CheckHTTPS, CheckTLS, CheckGRPC, CheckMySQL, CheckNone:
	default:
		return Invalid("healthCheck.type", "must be TCP, HTTP, HTTPS, TLS, GRPC, MYSQL or NONE, got %q", h.Type)
	}
	if err := validateCheckFields(h); err != nil {
		return err
	}
	switch h.Confirm {
	case "", ConfirmMajority, ConfirmLeader:
	default:
		return Invalid("healthCheck.confirm", "must be majority or leader, got %q", h.Confirm)
	}
	if h.Port < 0 || h.Port > 65535 {
		return Invalid("healthCheck.port", "must be between 0 (the instance's port) and 65535")
	}
	if h.Interval.D() < MinCheckInterval || h.Interval.D() > MaxCheckInterval {
		return Invalid("healthCheck.interval", "must be between %s and %s", MinCheckInterval, MaxCheckInterval)
	}
	if h.Timeout.D() <= 0 || h.Timeout >= h.Interval {
		return Invalid("healthCheck.timeout", "must be positive and less than the interval (%s)", h.Interval.D())
	}
	if h.Timeout.D() < 10*time.Millisecond {
		return Invalid("healthCheck.timeout", "must be at least 10ms")
	}
	if h.Rise < 1 || h.Rise > MaxRiseFall {
		return Invalid("healthCheck.rise", "must be between 1 and %d", MaxRiseFall)
	}
	if h.Fall < 1 || h.Fall > MaxRiseFall {
		return Invalid("healthCheck.fall", "must be between 1 and %d", MaxRiseFall)
	}
	if len(h.Path) > MaxPathLen {
		return Invalid("healthCheck.path", "must be at most %d characters", MaxPathLen)
	}
	if h.Type.IsHTTP() && !strings.HasPrefix(h.Path, "/") {
		return Invalid("healthCheck.path", "must start with '/'")
	}
	if len(h.Headers) > MaxHeaderCount {
		return Invalid("healthCheck.headers", "at most %d headers", MaxHeaderCount)
	}
	for k, v := range h.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(v, "\r\n") {
			return Invalid("healthCheck.headers", "header %q is not a valid HTTP header", k)
		}
	}
	for _, s := range h.ExpectedStatus {
		if s < 100 || s > 599 {
			return Invalid("healthCheck.expectedStatus", "status %d is not between 100 and 599", s)
		}
	}
	if d := h.DeregisterAfter.D(); d != 0 && (d < max(MinDeregisterAfter, h.Interval.D()) || d > MaxDeregisterAfter) {
		return Invalid("healthCheck.deregisterAfter", "must be 0 (never) or between %s (and at least the interval, %s) and %s, got %s",
			MinDeregisterAfter, h.Interval.D(), MaxDeregisterAfter, d)
	}
	return nil
}

// validateCheckFields refuses the fields that do not belong to the check's type and
// checks the TLS options. The HTTP fields (path, headers, expectedStatus) are refused
// only on the types added with the TLS options: TCP and NONE specs written before them
// may carry a path, and the state machine must keep applying them.
func validateCheckFields(h HealthCheck) error {
	if err := validateMySQLFields(h); err != nil {
		return err
	}
	if h.Type != CheckGRPC {
		switch {
		case h.GRPCService != "":
			return notForType("healthCheck.grpcService", h.Type)
		case h.GRPCTLS:
			return notForType("healthCheck.grpcTls", h.Type)
		}
	}
	if h.Type == CheckGRPC && !h.GRPCTLS {
		for _, f := range []struct {
			name string
			set  bool
		}{{"tlsServerName", h.TLSServerName != ""}, {"tlsSkipVerify", h.TLSSkipVerify}, {"tlsCaPem", h.TLSCAPEM != ""}} {
			if f.set {
				return Invalid("healthCheck."+f.name, "applies to a GRPC check only with grpcTls: true")
			}
		}
	}
	if len(h.GRPCService) > MaxGRPCServiceLen {
		return Invalid("healthCheck.grpcService", "must be at most %d characters", MaxGRPCServiceLen)
	}
	if !printable(h.GRPCService) {
		return Invalid("healthCheck.grpcService", "must be valid UTF-8 without control characters")
	}
	if !h.Type.UsesTLS() {
		switch {
		case h.TLSServerName != "":
			return notForType("healthCheck.tlsServerName", h.Type)
		case h.TLSSkipVerify:
			return notForType("healthCheck.tlsSkipVerify", h.Type)
		case h.TLSCAPEM != "":
			return notForType("healthCheck.tlsCaPem", h.Type)
		}
	}
	if !h.Type.IsHTTP() && h.Type != CheckTCP && h.Type != CheckNone {
		switch {
		case h.Path != "":
			return notForType("healthCheck.path", h.Type)
		case len(h.Headers) > 0:
			return notForType("healthCheck.headers", h.Type)
		case len(h.ExpectedStatus) > 0:
			return notForType("healthCheck.expectedStatus", h.Type)
		}
	}
	if h.TLSServerName != "" {
		if err := validateServerName(h.TLSServerName); err != nil {
			return err
		}
	}
	if h.TLSCAPEM != "" {
		if err := validateCAPEM(h.TLSCAPEM, false); err != nil {
			return err
		}
	}
	return nil
}

// validateMySQLFields checks a MYSQL check's user (required), password and query, and
// refuses them on other types. No message quotes the password.
func validateMySQLFields(h HealthCheck) error {
	if h.Type != CheckMySQL {
		switch {
		case h.User != "":
			return notForType("healthCheck.user", h.Type)
		case h.Password != "":
			return notForType("healthCheck.password", h.Type)
		case h.Query != "":
			return notForType("healthCheck.query", h.Type)
		}
		return nil
	}
	switch {
	case h.User == "":
		return Invalid("healthCheck.user", "is required for a MYSQL check")
	case len(h.User) > MaxCheckUserLen:
		return Invalid("healthCheck.user", "must be at most %d characters", MaxCheckUserLen)
	case !printable(h.User):
		return Invalid("healthCheck.user", "must be valid UTF-8 without control characters")
	case len(h.Password) > MaxCheckPasswordLen:
		return Invalid("healthCheck.password", "must be at most %d bytes", MaxCheckPasswordLen)
	case !printable(h.Password):
		return Invalid("healthCheck.password", "must be valid UTF-8 without control characters")
	case strings.TrimSpace(h.Query) == "":
		return Invalid("healthCheck.query", "must not be blank")
	case len(h.Query) > MaxCheckQueryLen:
		return Invalid("healthCheck.query", "must be at most %d characters", MaxCheckQueryLen)
	case !printable(strings.NewReplacer("\n", " ", "\r", " ", "\t", " ").Replace(h.Query)):
		return Invalid("healthCheck.query", "must be valid UTF-8 without control characters other than tabs and line breaks")
	}
	return nil
}

func notForType(field string, t CheckType) error {
	return Invalid(field, "does not apply to a %s check", t)
}

// validateServerName checks tlsServerName: an IP address, or a DNS name of at most 253
// characters (a leading "*." is not a name a certificate is verified against).
func validateServerName(name string) error {
	const field = "healthCheck.tlsServerName"
	if len(name) > MaxHostnameLen {
		return Invalid(field, "must be at most %d characters", MaxHostnameLen)
	}
	if isIP(name) {
		return nil
	}
	for _, l := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		if !hostLabelRe.MatchString(l) {
			return Invalid(field, "%q is not a valid host name", name)
		}
	}
	return nil
}

// validateCAPEM checks tlsCaPem: at most 64 KiB of PEM holding at least one
// CERTIFICATE block, nothing else but such blocks and white space and, with parse
// (admission only), every block parsing as an X.509 certificate. The state machine
// does not parse the certificates: what crypto/x509 accepts may change between Go
// releases, and replicas built with different ones must apply the same entries.
func validateCAPEM(pemText string, parse bool) error {
	const field = "healthCheck.tlsCaPem"
	if len(pemText) > MaxCAPEMBytes {
		return Invalid(field, "must be at most %d bytes", MaxCAPEMBytes)
	}
	rest := []byte(pemText)
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return Invalid(field, "holds a %q block; only CERTIFICATE blocks are allowed", b.Type)
		}
		if parse {
			if _, err := x509.ParseCertificate(b.Bytes); err != nil {
				return Invalid(field, "certificate %d does not parse", n+1)
			}
		}
		n++
	}
	if n == 0 || len(bytes.TrimSpace(rest)) != 0 {
		return Invalid(field, "must be PEM holding one or more CERTIFICATE blocks")
	}
	return nil
}

// Bounds of namespace records and member records.
const (
	MaxNamespaceNameLen = 128
	MaxMemberIDLen      = 128
	MaxMemberAddrLen    = 300
)

// ValidateNamespaceRecord checks a namespace to be stored: its id, a display name of at
// most 128 characters and a description of at most 256, neither with control characters.
func ValidateNamespaceRecord(ns Namespace) error {
	if err := ValidateNamespace(ns.ID); err != nil {
		return err
	}
	if len(ns.Name) > MaxNamespaceNameLen {
		return Invalid("name", "must be at most %d characters", MaxNamespaceNameLen)
	}
	if !printable(ns.Name) {
		return Invalid("name", "must be valid UTF-8 without control characters")
	}
	if len(ns.Description) > MaxDescriptionLen {
		return Invalid("description", "must be at most %d characters", MaxDescriptionLen)
	}
	if !printable(ns.Description) {
		return Invalid("description", "must be valid UTF-8 without control characters")
	}
	return nil
}

// ValidateInstanceRef checks the names, ip and port of an instance reference.
func ValidateInstanceRef(r InstanceRef) error {
	if err := ValidateServiceKey(r.ServiceKey()); err != nil {
		return err
	}
	if err := ValidateIP(r.IP); err != nil {
		return err
	}
	return ValidatePort(r.Port)
}

// ValidateMember checks a member record: a non-empty id without whitespace or control
// characters, a Raft address in host:port form and, when set, an HTTP address in
// host:port form (plain HTTP) or as an http:// or https:// URL of host:port without a
// path (a node serving HTTPS advertises https://host:port).
func ValidateMember(m Member) error {
	switch {
	case m.ID == "":
		return Invalid("id", "must not be empty")
	case len(m.ID) > MaxMemberIDLen:
		return Invalid("id", "must be at most %d characters", MaxMemberIDLen)
	case !utf8.ValidString(m.ID) || strings.IndexFunc(m.ID, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return Invalid("id", "must be valid UTF-8 without whitespace or control characters")
	}
	if err := validateHostPort("raftAddr", m.RaftAddr, true); err != nil {
		return err
	}
	if rest, ok := cutScheme(m.HTTPAddr); ok {
		if len(m.HTTPAddr) > MaxMemberAddrLen {
			return Invalid("httpAddr", "must be at most %d characters", MaxMemberAddrLen)
		}
		if err := validateHostPort("httpAddr", rest, true); err != nil || strings.ContainsAny(rest, "/?#@") {
			return Invalid("httpAddr", "%q is not a host:port address or an http(s)://host:port URL", m.HTTPAddr)
		}
		return nil
	}
	return validateHostPort("httpAddr", m.HTTPAddr, false)
}

// HTTPHostPort returns the host:port of a node's HTTP address: host:port, or an http://
// or https:// URL of host:port without a path (a trailing slash is allowed), as the
// member table records it (ValidateMember).
func HTTPHostPort(addr string) (string, error) {
	rest, _ := cutScheme(strings.TrimSpace(addr))
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" {
		return "", fmt.Errorf("%q has no host", addr)
	}
	if strings.ContainsAny(rest, "/?#@") || strings.Contains(rest, "://") {
		return "", fmt.Errorf("%q must be host:port or http(s)://host:port, without a path", addr)
	}
	return rest, nil
}

// cutScheme removes a leading "http://" or "https://".
func cutScheme(addr string) (string, bool) {
	for _, p := range []string{"http://", "https://"} {
		if rest, ok := strings.CutPrefix(addr, p); ok {
			return rest, true
		}
	}
	return addr, false
}

func validateHostPort(field, addr string, required bool) error {
	if addr == "" {
		if required {
			return Invalid(field, "must not be empty")
		}
		return nil
	}
	if len(addr) > MaxMemberAddrLen {
		return Invalid(field, "must be at most %d characters", MaxMemberAddrLen)
	}
	_, port, err := SplitAddr(addr)
	if err != nil || port < 0 || port > 65535 || !printable(addr) {
		return Invalid(field, "%q is not a host:port address", addr)
	}
	return nil
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	return strings.IndexFunc(s, unicode.IsControl) < 0
}
