// Package api holds the wire types of Roster's native REST API (/v1/...), shared by the
// server, the Go client and the CLI so that both sides agree on every field. It
// depends on the standard library only: a client of the API pulls in nothing of the
// server (storage, Raft, encodings). The server converts its own types into these
// (httpapi/wire.go).
package api

import (
	"strings"
	"time"
)

// Defaults of the five-layer model (namespace › group › service › cluster › instance),
// the same as Nacos's: an empty namespace, group or cluster in a request means these.
const (
	DefaultNamespace = "public"
	DefaultGroup     = "DEFAULT_GROUP"
	DefaultCluster   = "DEFAULT"
)

// Health-check types, the values of HealthCheck.Type and ProbeResult.CheckType.
const (
	CheckTCP   = "TCP"
	CheckHTTP  = "HTTP"
	CheckHTTPS = "HTTPS"
	CheckTLS   = "TLS"
	CheckGRPC  = "GRPC"
	CheckMySQL = "MYSQL"
	CheckNone  = "NONE"
)

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

// Namespace is the outermost layer. "public" always exists.
type Namespace struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	CreateIndex uint64 `json:"createIndex"`
	ModifyIndex uint64 `json:"modifyIndex"`
}

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

// HealthCheck is a cluster's probe specification as the API shows it. Port 0 means the
// instance's own port; ExpectedStatus empty means any status in 200..399 is healthy.
type HealthCheck struct {
	// Type is one of the Check* constants.
	Type           string            `json:"type"`
	Port           int               `json:"port"`
	Path           string            `json:"path,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	ExpectedStatus []int             `json:"expectedStatus,omitempty"`
	Interval       Duration          `json:"interval"`
	Timeout        Duration          `json:"timeout"`
	Rise           int               `json:"rise"`
	Fall           int               `json:"fall"`
	// Confirm is who decides a health transition: "majority" (the leader asks the other
	// voters to probe once and needs a majority of the voters, itself included, to see
	// the transition) or "leader".
	Confirm string `json:"confirm"`
	// TLSServerName, TLSSkipVerify and TLSCAPEM are the TLS options of HTTPS and TLS
	// checks: the name the certificate is verified against (empty: the instance's
	// address), whether any certificate is accepted, and a PEM bundle of CA
	// certificates (empty: the system roots).
	TLSServerName string `json:"tlsServerName,omitempty"`
	TLSSkipVerify bool   `json:"tlsSkipVerify,omitempty"`
	TLSCAPEM      string `json:"tlsCaPem,omitempty"`
	// GRPCService is the name a GRPC check asks the gRPC health server about (empty:
	// the server as a whole), not the Roster service; GRPCTLS makes it use TLS.
	GRPCService string `json:"grpcService,omitempty"`
	GRPCTLS     bool   `json:"grpcTls,omitempty"`
	// User, Password and Query are a MYSQL check's account and query. Password is
	// never shown: a set password reads as RedactedPassword.
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
	Query    string `json:"query,omitempty"`
	// DeregisterAfter is how long an instance may stay unhealthy without interruption
	// before the leader deregisters it; absent (0) means never.
	DeregisterAfter Duration `json:"deregisterAfter,omitempty"`
}

// RedactedPassword is what reads show instead of a MYSQL check's password. A cluster
// write whose healthCheck.password is RedactedPassword keeps the stored password, so
// that a client may write back what it read.
const RedactedPassword = "***"

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

// Headers and query parameters of the native API.
const (
	// HeaderIndex carries the index of the data read (reads) or of the applied entry (writes).
	HeaderIndex = "X-Roster-Index"
	// HeaderKnownLeader is "true" when the serving node knows a leader.
	HeaderKnownLeader = "X-Roster-Known-Leader"
	// HeaderLastContact is the milliseconds since the serving node last heard from the leader (0 on the leader).
	HeaderLastContact = "X-Roster-Last-Contact"
	// HeaderConsistency is the consistency mode actually used.
	HeaderConsistency = "X-Roster-Consistency"
	// HeaderForwardedBy is set by a follower that forwarded the request; a node that
	// receives a forwarded request it cannot serve answers 503 instead of forwarding again.
	HeaderForwardedBy = "X-Roster-Forwarded-By"
	// HeaderServedBy names the node that served the request.
	HeaderServedBy = "X-Roster-Served-By"
	// HeaderToken carries an ACL token's secret (so does "Authorization: Bearer SECRET").
	HeaderToken = "X-Roster-Token"
)

// Consistency modes of reads.
const (
	ConsistencyLinearizable = "linearizable"
	ConsistencyLeader       = "leader"
	ConsistencyStale        = "stale"
)

// Error codes used in ErrorBody.Code.
const (
	CodeInvalid          = "invalid_argument"
	CodeNotFound         = "not_found"
	CodeConflict         = "conflict"
	CodeCASMismatch      = "cas_mismatch"
	CodeTooLarge         = "payload_too_large"
	CodeNoLeader         = "no_leader"
	CodeUnavailable      = "unavailable"
	CodeTimeout          = "timeout"
	CodeInternal         = "internal"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeNotAcceptable    = "not_acceptable"
	CodeForbidden        = "forbidden"
	// CodeTooManyRequests: the node holds its limit of blocking queries and streams;
	// Retry-After says when to try again.
	CodeTooManyRequests = "too_many_requests"
	// CodeRequestTimeout: the request body did not arrive in time.
	CodeRequestTimeout = "request_timeout"
	// CodeStateMismatch: this node's state differs from its peers' (a failed state
	// check); it serves no reads until it is rebuilt.
	CodeStateMismatch = "state_mismatch"
	// CodeStorage: the leader could not write the change to its Raft log (a full or
	// failing disk); it was not applied, and the leader steps down. Retry.
	CodeStorage = "storage_failure"
	// CodeUnauthenticated: ACLs are on and the request carried no token, or one the
	// cluster does not know (401).
	CodeUnauthenticated = "unauthenticated"
	// CodePermissionDenied: the token lacks the permission the message names (403).
	CodePermissionDenied = "permission_denied"
	// CodeACLMismatch: this node and the cluster disagree on whether ACLs are on; the
	// node serves nothing until it is restarted with the cluster's setting (503).
	CodeACLMismatch = "acl_mismatch"
	// CodeUpgradeInProgress: some server of the cluster runs an older release that
	// cannot apply the change (Error.Nodes names them); nothing was written. Upgrade
	// them first (503).
	CodeUpgradeInProgress = "upgrade_in_progress"
)

// ReasonNeedsUpgrade is Ready.ReasonCode for a node that stopped applying at a
// committed entry its build cannot apply (Ready.HaltedAt): restart it on a newer release.
const ReasonNeedsUpgrade = "needs_upgrade"

// ErrorBody is the body of every error response: {"error":{"code","message","field"}}.
type ErrorBody struct {
	Error Error `json:"error"`
}

// Error describes what went wrong; Field names the offending input when there is one.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Index is, for cas_mismatch, the object's current modify index (0: it does not exist).
	Index *uint64 `json:"index,omitempty"`
	// Nodes are, for upgrade_in_progress, the servers that must be upgraded first.
	Nodes []NodeBuild `json:"nodes,omitempty"`
}

// NodeBuild is the build a server runs, as the cluster knows it.
type NodeBuild struct {
	ID string `json:"id"`
	// Version and Commit are the server's release and git commit; empty for a server of
	// a release before servers reported them.
	Version string `json:"version,omitempty"`
	Commit  string `json:"commit,omitempty"`
	// NewestCommand is the newest state-machine command type the server applies.
	NewestCommand uint8 `json:"newestCommand"`
	// Release describes the release for people: Version, or what NewestCommand tells
	// of a server that reports no version ("a release before v0.2.0").
	Release string `json:"release"`
}

// Build is a node's own build (Ready.Build).
type Build struct {
	Version       string `json:"version"`
	Commit        string `json:"commit"`
	GoVersion     string `json:"goVersion"`
	NewestCommand uint8  `json:"newestCommand"`
}

// HaltedEntry is the committed entry a node stopped applying at (Ready.HaltedAt).
type HaltedEntry struct {
	Index uint64 `json:"index"`
	// Type is the entry's command type, TypeName its name ("MessageType(24)" for a type
	// this build does not know).
	Type     uint8  `json:"type"`
	TypeName string `json:"typeName"`
}

// WriteResult is the body of every successful write: the Raft index it was applied at.
type WriteResult struct {
	Index uint64 `json:"index"`
}

// NamespaceRequest is the body of PUT /v1/namespaces/{ns}.
type NamespaceRequest struct {
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
}

// NamespacesResponse is the body of GET /v1/namespaces.
type NamespacesResponse struct {
	Index      uint64      `json:"index"`
	Namespaces []Namespace `json:"namespaces"`
}

// NamespaceResponse is the body of GET /v1/namespaces/{ns}.
type NamespaceResponse struct {
	Index     uint64    `json:"index"`
	Namespace Namespace `json:"namespace"`
}

// ServiceRequest is the body of PUT .../services/{service}. Omitted fields take defaults
// (protectThreshold 0, no metadata); PUT replaces the service's definition, never its
// clusters or instances.
type ServiceRequest struct {
	ProtectThreshold *float64          `json:"protectThreshold,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
}

// ServicesResponse is the body of GET /v1/namespaces/{ns}/services.
type ServicesResponse struct {
	Index     uint64           `json:"index"`
	Namespace string           `json:"namespace"`
	Page      int              `json:"page"`
	Size      int              `json:"size"`
	Total     int              `json:"total"`
	Services  []ServiceSummary `json:"services"`
}

// ServiceSummary is a service as a service list shows it: the service and counts of its
// instances.
type ServiceSummary struct {
	Service
	InstanceCount int `json:"instanceCount"`
	HealthyCount  int `json:"healthyCount"`
	// ProtectThresholdReached is set when the protect threshold is reached among the
	// service's enabled instances (model.ProtectThresholdReached): a healthy read (native,
	// Nacos or DNS) then answers every enabled instance, healthy or not.
	ProtectThresholdReached bool `json:"protectThresholdReached"`
}

// ServiceResponse is the body of GET .../services/{service}.
type ServiceResponse struct {
	Index    uint64    `json:"index"`
	Service  Service   `json:"service"`
	Clusters []Cluster `json:"clusters"`
	// InstanceCount and HealthyCount describe the service's instances.
	InstanceCount int `json:"instanceCount"`
	HealthyCount  int `json:"healthyCount"`
}

// HealthCheckSpec is the health-check part of a cluster request; omitted fields take
// the defaults (TCP, instance port, interval 5s, timeout 2s, rise 2, fall 3, path "/").
type HealthCheckSpec struct {
	Type           string            `json:"type,omitempty"`
	Port           int               `json:"port,omitempty"`
	Path           string            `json:"path,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	ExpectedStatus []int             `json:"expectedStatus,omitempty"`
	Interval       string            `json:"interval,omitempty"`
	Timeout        string            `json:"timeout,omitempty"`
	Rise           int               `json:"rise,omitempty"`
	Fall           int               `json:"fall,omitempty"`
	Confirm        string            `json:"confirm,omitempty"`
	TLSServerName  string            `json:"tlsServerName,omitempty"`
	TLSSkipVerify  bool              `json:"tlsSkipVerify,omitempty"`
	TLSCAPEM       string            `json:"tlsCaPem,omitempty"`
	GRPCService    string            `json:"grpcService,omitempty"`
	GRPCTLS        bool              `json:"grpcTls,omitempty"`
	User           string            `json:"user,omitempty"`
	Password       string            `json:"password,omitempty"`
	Query          string            `json:"query,omitempty"`
	// DeregisterAfter is a Go duration ("72h"); empty or "0s" means never.
	DeregisterAfter string `json:"deregisterAfter,omitempty"`
}

// ClusterRequest is the body of PUT .../clusters/{cluster}.
type ClusterRequest struct {
	HealthCheck *HealthCheckSpec  `json:"healthCheck,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

// ClusterResponse is the body of GET .../clusters/{cluster}.
type ClusterResponse struct {
	Index   uint64  `json:"index"`
	Cluster Cluster `json:"cluster"`
}

// ClustersResponse is the body of GET .../services/{service}/clusters.
type ClustersResponse struct {
	Index    uint64    `json:"index"`
	Clusters []Cluster `json:"clusters"`
}

// InstanceRequest is the body of PUT .../instances/{ip}:{port} (create or replace) and
// of PATCH (only the fields present change). PUT defaults: cluster DEFAULT, weight 1,
// enabled true, healthy true (health is set only when the instance is first registered;
// afterwards the prober or the health endpoint owns it).
type InstanceRequest struct {
	Cluster  *string           `json:"cluster,omitempty"`
	Weight   *float64          `json:"weight,omitempty"`
	Enabled  *bool             `json:"enabled,omitempty"`
	Healthy  *bool             `json:"healthy,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// HealthRequest is the body of PUT .../instances/{ip}:{port}/health (NONE clusters only).
type HealthRequest struct {
	Healthy *bool `json:"healthy"`
}

// Instance is one persistent backend as the native API shows it. It is identified
// within its service by ip:port.
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
	// InstanceID is Nacos's simple id: ip#port#cluster#group@@service.
	InstanceID string `json:"instanceId"`
	// UnhealthySince is when the instance became unhealthy, as the leader's clock
	// recorded it in the committed transition; absent while healthy (and for an
	// instance made unhealthy before the time was recorded).
	UnhealthySince *time.Time `json:"unhealthySince,omitempty"`
}

// Addr is the instance's identity inside its service: ip:port, IPv6 in brackets.
func (in Instance) Addr() string { return JoinAddr(in.IP, in.Port) }

// InstanceResponse is the body of GET .../instances/{ip}:{port}.
type InstanceResponse struct {
	Index    uint64   `json:"index"`
	Instance Instance `json:"instance"`
}

// InstancesResponse is the body of GET .../instances.
type InstancesResponse struct {
	Service Service `json:"service"`
	Index   uint64  `json:"index"`
	// ProtectThresholdReached reports the protect threshold reached among the enabled
	// instances of the selected clusters (model.ProtectThresholdReached), whatever the
	// health filter; with healthy=true the list is then every enabled instance.
	ProtectThresholdReached bool       `json:"protectThresholdReached"`
	Instances               []Instance `json:"instances"`
}

// Leader is the body of GET /v1/status/leader.
type Leader struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr"`
}

// Ready is the body of GET /v1/status/ready.
type Ready struct {
	Ready        bool   `json:"ready"`
	Leader       string `json:"leader"`
	AppliedIndex uint64 `json:"appliedIndex"`
	CommitIndex  uint64 `json:"commitIndex"`
	// LeaderCommitIndex is the highest commit index the leader has sent this node.
	LeaderCommitIndex uint64 `json:"leaderCommitIndex"`
	// ClusterID is the cluster's identity ("" until its first leader set it).
	ClusterID string `json:"clusterId,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// ReasonCode classifies Reason where a program should act on it: ReasonNeedsUpgrade.
	ReasonCode string `json:"reasonCode,omitempty"`
	// HaltedAt is the entry the node stopped applying at (with ReasonNeedsUpgrade, and
	// for an entry it cannot decode).
	HaltedAt *HaltedEntry `json:"haltedAt,omitempty"`
	// Build is the node's own build (absent from releases before v0.3.0).
	Build *Build `json:"build,omitempty"`
	// LastStateCheck is the newest state check this node applied: its hash of the state
	// at that index, which every node takes at the same entries (GET
	// /v1/status/state-check?index=N compares them).
	LastStateCheck *StateCheck `json:"lastStateCheck,omitempty"`
}

// StateCheck is the body of GET /v1/status/state-check: the hash of a node's state as
// of a CheckState entry.
type StateCheck struct {
	Index uint64 `json:"index"`
	Hash  string `json:"hash"`
}

// Member is one Raft server as GET /v1/cluster/members shows it.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
	// LastContactMillis is the leader's last contact with this server, -1 when unknown.
	LastContactMillis int64 `json:"lastContactMillis"`
	// Version and Commit are the server's build as the answering node knows it (what
	// the server announced to it, when it leads; the server's own answer with
	// ?detail=true); empty when unknown (a release before servers reported them).
	Version string `json:"version,omitempty"`
	Commit  string `json:"commit,omitempty"`
	// NewestCommand is the newest command type the server applies, as far as the
	// answering node knows (12 for a server that announces none).
	NewestCommand uint8 `json:"newestCommand"`
	// Release is Version, or a description of the server's release from NewestCommand.
	Release string `json:"release"`
	// Status is what the server says of itself, asked by the node that answered the
	// list (GET /v1/cluster/members?detail=true only).
	Status *MemberStatus `json:"status,omitempty"`
}

// MemberStatus is a member's own readiness and progress, as the node that listed the
// members asked it (GET /v1/status/ready on the member).
type MemberStatus struct {
	// Reachable is false when the member could not be asked (Error says why); the other
	// fields are then zero.
	Reachable    bool   `json:"reachable"`
	Ready        bool   `json:"ready"`
	AppliedIndex uint64 `json:"appliedIndex"`
	CommitIndex  uint64 `json:"commitIndex"`
	// Lag is the listing node's commit index minus the member's applied index (0 when
	// the member is ahead).
	Lag        uint64 `json:"lag"`
	Reason     string `json:"reason,omitempty"`
	ReasonCode string `json:"reasonCode,omitempty"`
	// Build is the member's own build, as it answered (absent from releases before v0.3.0).
	Build *Build `json:"build,omitempty"`
	Error string `json:"error,omitempty"`
}

// MembersResponse is the body of GET /v1/cluster/members.
type MembersResponse struct {
	Index   uint64   `json:"index"`
	Members []Member `json:"members"`
}

// JoinRequest is the body of POST /v1/cluster/join: add (or re-announce) a server.
type JoinRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr"`
	// NonVoter keeps the server without a vote. Without it a new server is still added
	// as a non-voter, and promoted to voter once it has caught up with the leader and
	// stayed healthy for the stabilization time.
	NonVoter bool `json:"nonVoter,omitempty"`
	// ClusterID is the identity of the cluster the joining server belongs to, when it
	// has one; a join carrying another cluster's identity is refused.
	ClusterID string `json:"clusterId,omitempty"`
	// Announce marks a server re-announcing its own addresses: its suffrage is kept.
	Announce bool `json:"announce,omitempty"`
	// NewestCommand is the highest state-machine command type the server applies (0 or
	// absent: unknown, as from an older server). The leader uses a command type only
	// once every server announced it.
	NewestCommand uint8 `json:"newestCommand,omitempty"`
	// Version and Commit are the server's build (absent from releases before v0.3.0).
	Version string `json:"version,omitempty"`
	Commit  string `json:"commit,omitempty"`
}

// Forwarding signal of the native API.
const (
	// HeaderNotLeader is "true" on a 503 answered because the serving node is not the
	// leader (or knows none) and did not apply the request; a follower that forwarded
	// the request may retry it once at the new leader.
	HeaderNotLeader = "X-Roster-Not-Leader"
	// CodeNotLeader is the error code of such a 503.
	CodeNotLeader = "not_leader"
)

// ProbeResult is the leader's last probe of one instance, as GET .../services/{service}/health shows it.
type ProbeResult struct {
	IP      string `json:"ip"`
	Port    int    `json:"port"`
	Cluster string `json:"cluster"`
	// Epoch is the instance's registration epoch (CreateIndex).
	Epoch uint64 `json:"epoch"`
	// CheckType is one of the Check* constants.
	CheckType string `json:"checkType"`
	// Target is what is probed: the URL for HTTP and HTTPS, host:port for the other
	// types, empty for NONE.
	Target string `json:"target,omitempty"`
	// Healthy is the committed health as last known to the prober.
	Healthy bool `json:"healthy"`
	// Pending is true when the prober has decided the opposite of Healthy and the
	// transition is not yet known to be committed.
	Pending bool `json:"pending"`
	// LastCheck is when the last probe started (zero: not probed yet in this term or
	// since the cluster's spec changed).
	LastCheck time.Time `json:"lastCheck,omitzero"`
	Latency   Duration  `json:"latency,omitzero"`
	// Outcome is "success" or the class of the failure: "denied" (outside the probe
	// policy; nothing was sent), "refused", "timeout", "reset", "unreachable", "dns",
	// "status" (an unexpected HTTP status), "tls" (the TLS handshake failed),
	// "not serving" (a gRPC health status other than SERVING), "auth failed" (a
	// MYSQL check's login was refused), "query error", "malformed response" or
	// "error"; empty before the first probe.
	Outcome string `json:"outcome,omitempty"`
	// Status is the HTTP status of the last HTTP probe that got a response.
	Status int `json:"status,omitempty"`
	// Error describes a failure in Roster's words; it never contains bytes the target sent.
	Error string `json:"error,omitempty"`
	// CertificateExpiry is when the peer's leaf certificate expires, as the last probe
	// saw it in its TLS handshake (absent when the probe did no handshake).
	CertificateExpiry time.Time `json:"certificateExpiry,omitzero"`

	ConsecutiveSuccesses int      `json:"consecutiveSuccesses"`
	ConsecutiveFailures  int      `json:"consecutiveFailures"`
	Rise                 int      `json:"rise"`
	Fall                 int      `json:"fall"`
	Interval             Duration `json:"interval"`
	// NextCheck is when the next probe is due (zero for NONE clusters).
	NextCheck time.Time `json:"nextCheck,omitzero"`
	// DeregisterAt is when the leader deregisters the instance if it stays unhealthy:
	// its committed unhealthySince plus the cluster's deregisterAfter (zero: not due).
	DeregisterAt time.Time `json:"deregisterAt,omitzero"`
	// Vantages are the nodes' views in the last majority confirmation of a transition
	// of the instance (the leader's first), while this leader has been in office.
	Vantages []Vantage `json:"vantages,omitempty"`
}

// Vantage is one node's probe of an instance when the leader asks the voters to confirm
// a health transition (confirm: majority), and the answer of POST /v1/cluster/probe.
type Vantage struct {
	Node string `json:"node"`
	// Answered is false when the node could not be asked or did not answer in time
	// (Error says why); its view then does not count.
	Answered bool      `json:"answered"`
	Healthy  bool      `json:"healthy"`
	Outcome  string    `json:"outcome,omitempty"`
	Error    string    `json:"error,omitempty"`
	Latency  Duration  `json:"latency,omitzero"`
	At       time.Time `json:"at,omitzero"`
}

// HealthResponse is the body of GET .../services/{service}/health: the leader's last
// probe of each of the service's instances.
type HealthResponse struct {
	Namespace string `json:"namespace"`
	Group     string `json:"group"`
	Service   string `json:"service"`
	// Leader is the node whose prober produced the results.
	Leader string `json:"leader"`
	// Probing is false when the leader has not started probing yet (it starts once it
	// has applied every entry of earlier terms).
	Probing bool          `json:"probing"`
	Results []ProbeResult `json:"results"`
}

// Settings are the cluster-wide settings, the same on every node (replicated state).
type Settings struct {
	// MetadataMaxBytes bounds a metadata map's JSON encoding in every write.
	MetadataMaxBytes int `json:"metadataMaxBytes"`
	// ModifyIndex is the index of the last change (0: never changed, the defaults).
	ModifyIndex uint64 `json:"modifyIndex"`
}

// SettingsResponse is the body of GET /v1/operator/settings.
type SettingsResponse struct {
	Index uint64 `json:"index"`
	Settings
}

// SettingsRequest is the body of PUT /v1/operator/settings: fields left out keep their
// current value.
type SettingsRequest struct {
	MetadataMaxBytes *int `json:"metadataMaxBytes,omitempty"`
}

// ProbePolicyResponse is the body of GET /v1/operator/probe-policy: the ranges the
// answering node's prober may connect to (Allow empty: every address) and never
// connects to.
type ProbePolicyResponse struct {
	Node  string   `json:"node"`
	Allow []string `json:"allow"`
	Deny  []string `json:"deny"`
}

// Streaming watches: GET .../services/{service}/instances and GET /v1/namespaces/{ns}/services
// with Accept: text/event-stream answer server-sent events.
const (
	// MediaEventStream is the Accept value that asks for a stream.
	MediaEventStream = "text/event-stream"
	// HeaderLastEventID resumes a stream: no first event when nothing changed since it.
	HeaderLastEventID = "Last-Event-ID"
	// EventInstances carries an InstancesResponse, EventServices a ServicesResponse,
	// EventNotFound an ErrorBody (the service or namespace does not exist, for now).
	EventInstances = "instances"
	EventServices  = "services"
	EventNotFound  = "not_found"
)

// ACLRules are what a token may do: per namespace ("*" for the others), and for
// operator actions and ACL management, an access level "none", "read" or "write".
type ACLRules struct {
	Namespaces map[string]string `json:"namespaces,omitempty"`
	Operator   string            `json:"operator,omitempty"`
	ACL        string            `json:"acl,omitempty"`
}

// ACLBootstrapRequest is the optional body of POST /v1/acl/bootstrap: a secret the
// caller chose (a UUID); without it the cluster draws one.
type ACLBootstrapRequest struct {
	SecretID string `json:"secretId,omitempty"`
}

// ACLTokenRequest is the body of POST /v1/acl/tokens.
type ACLTokenRequest struct {
	Description string   `json:"description,omitempty"`
	Rules       ACLRules `json:"rules"`
}

// ACLToken is a token as the API shows it. SecretID is set only in the answer that
// created the token (POST /v1/acl/bootstrap, POST /v1/acl/tokens): the cluster keeps a
// hash of it, never the secret.
type ACLToken struct {
	AccessorID  string   `json:"accessorId"`
	SecretID    string   `json:"secretId,omitempty"`
	Description string   `json:"description"`
	Rules       ACLRules `json:"rules"`
	Management  bool     `json:"management"`
	CreateIndex uint64   `json:"createIndex"`
}

// ACLTokensResponse is the body of GET /v1/acl/tokens.
type ACLTokensResponse struct {
	Index  uint64     `json:"index"`
	Tokens []ACLToken `json:"tokens"`
}

// Snapshot restores and ACL state.

// Values of PUT /v1/snapshot?acl= and of SnapshotRestoreResult.ACL.
const (
	// RestoreACLCluster keeps the cluster's current ACL state (tokens, bootstrap): the
	// default, whatever the archive holds.
	RestoreACLCluster = "cluster"
	// RestoreACLArchive restores the archive's ACL state (needs acl: write).
	RestoreACLArchive = "archive"
)

// SnapshotRestoreResult is the answer to PUT /v1/snapshot.
type SnapshotRestoreResult struct {
	// Index is the index of the first write after the restore.
	Index uint64 `json:"index"`
	// ACL says whose ACL state the cluster has now: RestoreACLCluster (its own, kept)
	// or RestoreACLArchive (the archive's).
	ACL string `json:"acl"`
}
