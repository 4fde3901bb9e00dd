// Package model holds Roster's domain types — the five layers namespace › group ›
// service › cluster › instance, health-check specs, members and cluster-wide settings —
// and their validation. The store, the state machine and the registry service all
// depend on it; it depends on nothing of Roster's.
//
// The JSON tags of these types are the on-disk schema of the state file and, through
// msgpack, the Raft log format: never rename one. The REST API has its own wire types
// (package api).
package model

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Defaults of the five-layer model, the same as Nacos's.
const (
	DefaultNamespace = "public"
	DefaultGroup     = "DEFAULT_GROUP"
	DefaultCluster   = "DEFAULT"
	// GroupSeparator joins a group and a service into a grouped name (group@@service).
	GroupSeparator = "@@"
)

// Namespace is the outermost layer. "public" always exists.
type Namespace struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	CreateIndex uint64 `json:"createIndex"`
	ModifyIndex uint64 `json:"modifyIndex"`
}

// ServiceKey names a service.
type ServiceKey struct {
	Namespace string `json:"namespace"`
	Group     string `json:"group"`
	Service   string `json:"service"`
}

// String is namespace/group@@service, for logs and errors.
func (k ServiceKey) String() string {
	return k.Namespace + "/" + k.Group + GroupSeparator + k.Service
}

// GroupedName is group@@service, the form Nacos clients use.
func (k ServiceKey) GroupedName() string { return k.Group + GroupSeparator + k.Service }

// Service is a named set of instances inside a group.
type Service struct {
	Namespace        string            `json:"namespace"`
	Group            string            `json:"group"`
	Name             string            `json:"name"`
	ProtectThreshold float64           `json:"protectThreshold"`
	Metadata         map[string]string `json:"metadata"`
	CreateIndex      uint64            `json:"createIndex"`
	// ModifyIndex is the index of the last change to the service, its clusters or its instances.
	ModifyIndex uint64 `json:"modifyIndex"`
}

// Key returns the service's key.
func (s Service) Key() ServiceKey {
	return ServiceKey{Namespace: s.Namespace, Group: s.Group, Service: s.Name}
}

// CheckType is how the leader probes a cluster's instances.
type CheckType string

// Check types.
const (
	CheckTCP  CheckType = "TCP"
	CheckHTTP CheckType = "HTTP"
	// CheckHTTPS is an HTTP check over TLS.
	CheckHTTPS CheckType = "HTTPS"
	// CheckTLS is a TCP connect plus a completed TLS handshake.
	CheckTLS CheckType = "TLS"
	// CheckGRPC is the standard gRPC health check (grpc.health.v1.Health/Check).
	CheckGRPC CheckType = "GRPC"
	// CheckMySQL connects to a MySQL or MariaDB server, authenticates and runs a query.
	CheckMySQL CheckType = "MYSQL"
	CheckNone  CheckType = "NONE"
)

// IsHTTP reports whether the type sends an HTTP request (HTTP or HTTPS).
func (t CheckType) IsHTTP() bool { return t == CheckHTTP || t == CheckHTTPS }

// UsesTLS reports whether the type's probe takes the TLS options (tlsServerName,
// tlsSkipVerify, tlsCaPem): HTTPS, TLS, and GRPC with grpcTls.
func (t CheckType) UsesTLS() bool { return t == CheckHTTPS || t == CheckTLS || t == CheckGRPC }

// Health-check defaults and bounds.
const (
	DefaultCheckInterval = 5 * time.Second
	DefaultCheckTimeout  = 2 * time.Second
	DefaultRise          = 2
	DefaultFall          = 3
	MinCheckInterval     = time.Second
	MaxCheckInterval     = time.Hour
	MaxRiseFall          = 10
	// MinDeregisterAfter and MaxDeregisterAfter bound HealthCheck.DeregisterAfter when
	// it is set; it must also be at least the check's interval.
	MinDeregisterAfter = time.Second
	MaxDeregisterAfter = 8760 * time.Hour
)

// HealthCheck is a cluster's probe specification. Port 0 means the instance's own port.
// ExpectedStatus empty means any status in 200..399 is healthy.
//
// The fields added after the first release are omitempty, so that a spec without them
// encodes exactly as before (the log format and the state file are frozen).
type HealthCheck struct {
	Type           CheckType         `json:"type"`
	Port           int               `json:"port"`
	Path           string            `json:"path,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	ExpectedStatus []int             `json:"expectedStatus,omitempty"`
	Interval       Duration          `json:"interval"`
	Timeout        Duration          `json:"timeout"`
	Rise           int               `json:"rise"`
	Fall           int               `json:"fall"`
	// Confirm is who decides a health transition: ConfirmMajority ("" too) or
	// ConfirmLeader.
	Confirm ConfirmMode `json:"confirm,omitempty"`

	// TLSServerName is the name the server's certificate is verified against (and
	// sent as SNI); empty means the instance's address.
	TLSServerName string `json:"tlsServerName,omitempty"`
	// TLSSkipVerify accepts any server certificate.
	TLSSkipVerify bool `json:"tlsSkipVerify,omitempty"`
	// TLSCAPEM is a PEM bundle of CA certificates that verify the server; empty means
	// the system roots.
	TLSCAPEM string `json:"tlsCaPem,omitempty"`

	// GRPCService is the service name a GRPC check asks the health server about
	// (empty: the server as a whole). It is not the Roster service of the cluster.
	GRPCService string `json:"grpcService,omitempty"`
	// GRPCTLS makes a GRPC check connect over TLS (with the TLS options above).
	GRPCTLS bool `json:"grpcTls,omitempty"`

	// User, Password and Query are a MYSQL check's account and the query it runs
	// (DefaultMySQLQuery when empty). The password is kept in the replicated state
	// (and so in snapshots and backups) but never shown: reads show RedactedPassword.
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
	Query    string `json:"query,omitempty"`
	// DeregisterAfter, when not zero, is how long an instance may stay unhealthy without
	// interruption before the leader deregisters it (0: never).
	DeregisterAfter Duration `json:"deregisterAfter,omitempty"`
}

// RedactedPassword is what reads show instead of a check's password; a write that
// sends it back keeps the stored password.
const RedactedPassword = "***"

// DefaultMySQLQuery is the query of a MYSQL check without one.
const DefaultMySQLQuery = "SELECT 1"

// Redacted returns h with the password, if any, replaced by RedactedPassword.
func (h HealthCheck) Redacted() HealthCheck {
	if h.Password != "" {
		h.Password = RedactedPassword
	}
	return h
}

// TLS reports whether the check's probe does a TLS handshake.
func (h HealthCheck) TLS() bool {
	return h.Type == CheckHTTPS || h.Type == CheckTLS || (h.Type == CheckGRPC && h.GRPCTLS)
}

// ConfirmMode says who decides a health transition of a cluster's instances.
type ConfirmMode string

// Confirmation modes.
const (
	// ConfirmMajority (the default, stored as ""): before it commits a transition the
	// leader asks the other voters to probe the instance once, and commits only when a
	// majority of the voters, itself included, answered in time and saw the same.
	ConfirmMajority ConfirmMode = "majority"
	// ConfirmLeader: the leader's own probes decide alone.
	ConfirmLeader ConfirmMode = "leader"
)

// Majority reports whether transitions need a majority of the nodes (the default).
func (c ConfirmMode) Majority() bool { return c != ConfirmLeader }

// DefaultHealthCheck is the spec of a cluster created implicitly: TCP on the instance's own port.
func DefaultHealthCheck() HealthCheck {
	return HealthCheck{
		Type:     CheckTCP,
		Interval: Duration(DefaultCheckInterval),
		Timeout:  Duration(DefaultCheckTimeout),
		Rise:     DefaultRise,
		Fall:     DefaultFall,
	}
}

// WithDefaults fills zero fields with the defaults.
func (h HealthCheck) WithDefaults() HealthCheck {
	if h.Type == "" {
		h.Type = CheckTCP
	}
	if h.Interval == 0 {
		h.Interval = Duration(DefaultCheckInterval)
	}
	if h.Timeout == 0 {
		h.Timeout = Duration(DefaultCheckTimeout)
		if h.Timeout >= h.Interval {
			h.Timeout = h.Interval / 2
		}
	}
	if h.Rise == 0 {
		h.Rise = DefaultRise
	}
	if h.Fall == 0 {
		h.Fall = DefaultFall
	}
	if h.Type.IsHTTP() && h.Path == "" {
		h.Path = "/"
	}
	if h.Type == CheckMySQL && h.Query == "" {
		h.Query = DefaultMySQLQuery
	}
	return h
}

// Healthy reports whether an HTTP status counts as healthy under this spec.
func (h HealthCheck) Healthy(status int) bool {
	if len(h.ExpectedStatus) == 0 {
		return status >= 200 && status <= 399
	}
	for _, s := range h.ExpectedStatus {
		if s == status {
			return true
		}
	}
	return false
}

// ProtectThresholdReached is the protect-threshold rule, the one every surface applies
// (native REST and its service list, the Nacos HTTP and gRPC APIs and their pushes, DNS
// and the console): the threshold is reached when the service has instances to count
// (enabled > 0, the enabled instances of the clusters read) and healthy/enabled ≤
// threshold, a negative threshold counting as 0. A read of the healthy instances then
// answers every enabled instance instead, so that the few healthy ones are not
// overwhelmed. It is Nacos 2.x's rule (ServiceUtil.selectInstancesWithHealthyProtection:
// healthyCount / total <= threshold), so with the default threshold 0 it is reached
// exactly when every enabled instance is unhealthy; with no enabled instance (Nacos's
// 0/0) it is not.
func ProtectThresholdReached(healthy, enabled int, threshold float64) bool {
	if enabled <= 0 {
		return false
	}
	return float64(healthy)/float64(enabled) <= max(threshold, 0)
}

// Cluster groups a service's instances and carries their health-check spec.
type Cluster struct {
	Namespace   string            `json:"namespace"`
	Group       string            `json:"group"`
	Service     string            `json:"service"`
	Name        string            `json:"name"`
	HealthCheck HealthCheck       `json:"healthCheck"`
	Metadata    map[string]string `json:"metadata"`
	CreateIndex uint64            `json:"createIndex"`
	ModifyIndex uint64            `json:"modifyIndex"`
}

// Instance is one persistent backend. It is identified within its service by Addr().
type Instance struct {
	Namespace string            `json:"namespace"`
	Group     string            `json:"group"`
	Service   string            `json:"service"`
	IP        string            `json:"ip"`
	Port      int               `json:"port"`
	Cluster   string            `json:"cluster"`
	Weight    float64           `json:"weight"`
	Enabled   bool              `json:"enabled"`
	Healthy   bool              `json:"healthy"`
	Metadata  map[string]string `json:"metadata"`
	// CreateIndex is the registration epoch: it changes only when the instance is
	// deregistered and registered again.
	CreateIndex uint64 `json:"createIndex"`
	ModifyIndex uint64 `json:"modifyIndex"`
	// UnhealthySince is when the instance last became unhealthy, in Unix milliseconds of
	// the leader's clock, carried in the command that made it unhealthy (0: healthy, or
	// made unhealthy by a command that carried no time).
	UnhealthySince int64 `json:"unhealthySince,omitempty"`
}

// ServiceKey returns the key of the instance's service.
func (in Instance) ServiceKey() ServiceKey {
	return ServiceKey{Namespace: in.Namespace, Group: in.Group, Service: in.Service}
}

// Addr is the instance's identity inside its service: ip:port, IPv6 in brackets.
func (in Instance) Addr() string { return JoinAddr(in.IP, in.Port) }

// InstanceID is Nacos's simple id: ip#port#cluster#group@@service.
func (in Instance) InstanceID() string {
	return in.IP + "#" + strconv.Itoa(in.Port) + "#" + in.Cluster + "#" + in.Group + GroupSeparator + in.Service
}

// JoinAddr formats ip:port, bracketing IPv6 addresses.
func JoinAddr(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }

// SplitAddr parses ip:port (IPv6 in brackets) into its parts, without validating them.
func SplitAddr(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, err
	}
	return host, port, nil
}

// InstanceRef names one instance.
type InstanceRef struct {
	Namespace string `json:"namespace"`
	Group     string `json:"group"`
	Service   string `json:"service"`
	IP        string `json:"ip"`
	Port      int    `json:"port"`
}

// ServiceKey returns the key of the referenced instance's service.
func (r InstanceRef) ServiceKey() ServiceKey {
	return ServiceKey{Namespace: r.Namespace, Group: r.Group, Service: r.Service}
}

// Ref returns the instance's reference.
func (in Instance) Ref() InstanceRef {
	return InstanceRef{Namespace: in.Namespace, Group: in.Group, Service: in.Service, IP: in.IP, Port: in.Port}
}

// Member is a Raft server with the HTTP address it serves the API on.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr"`
	// NewestCommand is the highest state-machine command type the server applies (0: a
	// server from before servers announced it). The leader writes a command type only
	// once every server of the configuration announced at least that type.
	NewestCommand uint8 `json:"newestCommand,omitempty"`
}

// Duration is a time.Duration that reads and writes JSON as a Go duration string ("5s").
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats the duration as Go does.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// isIP reports whether s is a literal IPv4 or IPv6 address (no zone).
func isIP(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Zone() == ""
}

// InstancePatch lists the instance fields an update changes; nil fields stay as they are.
// A non-nil Metadata replaces the whole metadata map.
type InstancePatch struct {
	Cluster  *string            `json:"cluster,omitempty"`
	Weight   *float64           `json:"weight,omitempty"`
	Enabled  *bool              `json:"enabled,omitempty"`
	Metadata *map[string]string `json:"metadata,omitempty"`
}

// HealthUpdate is one health transition observed by the prober. Epoch is the instance's
// CreateIndex when the prober observed it.
type HealthUpdate struct {
	Ref     InstanceRef `json:"ref"`
	Epoch   uint64      `json:"epoch"`
	Healthy bool        `json:"healthy"`
}

// ApplyTo returns in with the patch's non-nil fields applied; it does not validate.
func (p InstancePatch) ApplyTo(in Instance) Instance {
	if p.Cluster != nil {
		in.Cluster = *p.Cluster
	}
	if p.Weight != nil {
		in.Weight = *p.Weight
	}
	if p.Enabled != nil {
		in.Enabled = *p.Enabled
	}
	if p.Metadata != nil {
		in.Metadata = *p.Metadata
	}
	return in
}

// Settings are the cluster-wide settings: part of the replicated state, the same on
// every node, changed only through Raft (PUT /v1/operator/settings). They bound what
// the registry admits; the state machine itself checks only the compiled-in ceilings
// of HardLimits, so that applying an entry never depends on a node's configuration.
type Settings struct {
	// MetadataMaxBytes bounds a metadata map's JSON encoding (1..HardMaxMetadataBytes).
	MetadataMaxBytes int `json:"metadataMaxBytes"`
	// ModifyIndex is the index of the entry that last changed the settings (0: never
	// changed, the defaults).
	ModifyIndex uint64 `json:"modifyIndex"`
}

// DefaultSettings are the settings of a cluster that never changed them.
func DefaultSettings() Settings { return Settings{MetadataMaxBytes: DefaultMetadataSize} }

// Limits returns the admission bounds the settings define.
func (s Settings) Limits() Limits { return Limits{MaxMetadataBytes: s.MetadataMaxBytes} }

// ValidateSettings checks settings to be stored.
func ValidateSettings(s Settings) error {
	if s.MetadataMaxBytes < 1 || s.MetadataMaxBytes > HardMaxMetadataBytes {
		return Invalid("metadataMaxBytes", "must be between 1 and %d, got %d", HardMaxMetadataBytes, s.MetadataMaxBytes)
	}
	return nil
}
