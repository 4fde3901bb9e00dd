package raftnode

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/raft"
	"github.com/rosterhq/roster/buildinfo"
	"github.com/rosterhq/roster/model"
)

// Timing defaults, tuned for a LAN or loopback cluster that fails over fast.
//
// A follower notices a dead leader when its heartbeat timer, re-armed at random in
// [HeartbeatTimeout, 2×HeartbeatTimeout), fires with no contact for HeartbeatTimeout.
// A follower that still believes in the old leader refuses votes, so an election
// completes once a quorum of followers has timed out. Halving the library's 1 s
// halves the failover: from leader shutdown to the first write committed by the new
// leader, a 3-node loopback cluster measured a median of 1.09 s (p90 1.33 s, max 1.6 s;
// BenchmarkCluster_Failover) against 2.04 s (p90 2.46 s) with the library defaults.
// Heartbeats go out every HeartbeatTimeout/10 = 50 ms, so a follower still tolerates
// several lost or delayed ones. LeaderLeaseTimeout keeps the library's ratio of half
// the heartbeat timeout: an isolated leader steps down before the other side can
// elect a new one. CommitTimeout bounds how late followers learn the commit index
// when writes pause (5-10 ms instead of the library's 50-100 ms), which is what stale
// reads, blocking queries served by followers and Ready see: with 16 blocking queries
// spread over a 3-node loopback cluster, the time from a write to every watcher seeing
// it fell from a p50 of 26.6 ms at 20 ms to 8.3 ms at 5 ms. The commit notifier
// (commitnotify.go) now tells followers about a commit at once, so the timer is only the
// fallback for latency; it stays short because the leader's lease check counts each
// follower's last successful append entries, and with the library's 50 ms only
// heartbeats would refresh it: under load, leaders with short leases stepped down more
// often. The cost is up to 200 idle AppendEntries per second per follower.
const (
	DefaultHeartbeatTimeout   = 500 * time.Millisecond
	DefaultElectionTimeout    = 500 * time.Millisecond
	DefaultLeaderLeaseTimeout = 250 * time.Millisecond
	DefaultCommitTimeout      = 5 * time.Millisecond
	DefaultApplyTimeout       = 10 * time.Second
	DefaultSnapshotRetain     = 3
)

// Throughput settings (not configurable).
//
// maxAppendEntries is the most entries the leader groups into one log-store write
// (one fsync), one AppendEntries RPC and one FSM ApplyBatch (one bbolt transaction).
// 512 (library default 64) lets a burst of more than 64 concurrent writes share those
// costs; Roster's commands are a few KiB at most (metadata is bounded), so a full
// batch stays around a MiB on the wire.
// The leader loop drains every Apply call already waiting on its channel into one
// group, so an unbuffered apply channel (BatchApplyCh false, the default) batches just
// as well under concurrency; buffering it would void the Apply enqueue timeout and
// leave buffered futures unanswered forever if Raft shuts down.
const (
	maxAppendEntries = 512
	logCacheSize     = 512
	transportPool    = 3
	transportTimeout = 10 * time.Second
)

// Peer is one server of the static bootstrap configuration.
type Peer struct {
	ID   string
	Addr string // Raft address, host:port
}

// String formats the peer as id=addr, the form ParsePeers reads.
func (p Peer) String() string { return p.ID + "=" + p.Addr }

// ParsePeers reads "n1=10.0.0.1:7848,n2=10.0.0.2:7848". Spaces around entries are
// ignored; an empty string gives no peers. Every error names the offending entry.
// Ids and addresses must be unique.
func ParsePeers(s string) ([]Peer, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var peers []Peer
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		id, addr, ok := strings.Cut(entry, "=")
		id, addr = strings.TrimSpace(id), strings.TrimSpace(addr)
		if !ok || id == "" || addr == "" {
			return nil, configErr(fmt.Sprintf("peers[%d]", i), "entry %q is not id=host:port", entry)
		}
		peers = append(peers, Peer{ID: id, Addr: addr})
	}
	if err := validatePeers(peers); err != nil {
		return nil, err
	}
	return peers, nil
}

// validatePeers checks each peer's id and address and that both are unique.
func validatePeers(peers []Peer) error {
	ids := make(map[string]bool, len(peers))
	addrs := make(map[string]bool, len(peers))
	for i, p := range peers {
		field := fmt.Sprintf("peers[%d]", i)
		if err := validateNodeID(p.ID); err != nil {
			return configErr(field, "%q: id %s", p.String(), err)
		}
		if err := validateDialAddr(p.Addr); err != nil {
			return configErr(field, "%q: address %s", p.String(), err)
		}
		if ids[p.ID] {
			return configErr(field, "%q: duplicate id %q", p.String(), p.ID)
		}
		if addrs[p.Addr] {
			return configErr(field, "%q: duplicate address %q", p.String(), p.Addr)
		}
		ids[p.ID], addrs[p.Addr] = true, true
	}
	return nil
}

// Config configures a Node. Validate fills the defaults; New calls it.
type Config struct {
	// NodeID is this server's unique, permanent id.
	NodeID string
	// DataDir holds raft/ (raft.db and snapshots/); the state store lives beside it.
	DataDir string
	// RaftBind is the address the Raft transport listens on (host:port; port 0 picks one).
	RaftBind string
	// RaftListener, when set, is used instead of listening on RaftBind (which then
	// defaults to, and must equal, its address). The Node owns it from New on and
	// closes it on Shutdown or when New fails. Tests and socket activation use it to
	// hold a port from the start.
	RaftListener net.Listener
	// RaftAdvertise is the address peers dial. It defaults to RaftBind when RaftBind has
	// a specific host and port, and to the address actually bound when the port is 0.
	RaftAdvertise string
	// HTTPAdvertise is this node's HTTP API address, recorded in the member table:
	// host:port, or an http:// or https:// URL of host:port.
	HTTPAdvertise string
	// TLS, when set, makes every Raft connection mutual TLS (TransportTLS).
	TLS *TransportTLS
	// Peers is the static bootstrap configuration, the same list on every node; it
	// must include this node. It is ignored when Raft state already exists.
	Peers []Peer
	// Join is the HTTP address of a member to ask to add this node (when it has no state).
	Join string
	// Joiner sends this node's join requests: to Join at the first start, and to the
	// leader whenever this node's member record is missing or holds other addresses.
	// Nil: the node sends none (Join must be empty, and the other servers learn this
	// node's HTTP address only when it leads).
	Joiner Joiner

	// Raft timing; 0 means the Default* constant above.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration

	// Snapshot policy; 0 means the hashicorp/raft default (8192 entries, 120 s, 10240
	// trailing entries) and 3 retained snapshots.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	SnapshotRetain    int

	// NonVoter keeps this node without a vote when it joins a cluster.
	NonVoter bool
	// PromoteAfter is how long a joined non-voter must stay caught up and in contact
	// before the leader promotes it (default DefaultPromoteAfter); MaxTrailingLogs how
	// far behind the leader's log it may be and still count as caught up (default
	// DefaultMaxTrailingLogs).
	PromoteAfter    time.Duration
	MaxTrailingLogs uint64
	// Autopilot configures server health and dead-server cleanup (autopilot.go).
	Autopilot AutopilotConfig
	// MaxLag is how many committed entries a follower may not have applied and still be
	// ready (default DefaultMaxLag).
	MaxLag uint64

	// ApplyTimeout bounds how long Apply waits to enqueue a command (default 10 s).
	ApplyTimeout time.Duration
	// LogVerifyInterval is how often the leader writes a log checkpoint, at which every
	// node checks its own Raft log (logverify.go; default DefaultLogVerifyInterval,
	// negative: none).
	LogVerifyInterval time.Duration
	// Logger receives the node's and Raft's logs (default slog.Default()).
	Logger *slog.Logger
	// Build is this server's build, announced to every leader (the zero value:
	// buildinfo.Get()).
	Build buildinfo.Info

	// noCommitNotify turns the commit notifier off (commitnotify.go), leaving followers
	// to learn the commit index from the library alone: tests and benchmarks compare.
	noCommitNotify bool
}

// Validate fills defaults and rejects an unusable or contradictory configuration.
// Every error is a *ConfigError naming the field.
func (c *Config) Validate() error {
	if err := validateNodeID(c.NodeID); err != nil {
		return configErr("NodeID", "%s", err)
	}
	if c.DataDir == "" {
		return configErr("DataDir", "must not be empty")
	}
	if c.Build == (buildinfo.Info{}) {
		c.Build = buildinfo.Get()
	}
	if err := c.validateAddrs(); err != nil {
		return err
	}
	if len(c.Peers) > 0 && c.Join != "" {
		return configErr("Join", "cannot be combined with Peers: bootstrap either from a static peer list or by joining")
	}
	if c.Join != "" {
		if err := validateHTTPTarget(c.Join); err != nil {
			return configErr("Join", "%s", err)
		}
		if c.Joiner == nil {
			return configErr("Joiner", "must be set to join through %s", c.Join)
		}
	}
	if err := c.validatePeerList(); err != nil {
		return err
	}
	if err := c.fillTimings(); err != nil {
		return err
	}
	if err := c.Autopilot.fill(c.HeartbeatTimeout); err != nil {
		return err
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if err := raft.ValidateConfig(c.raftConfig(nil)); err != nil {
		return configErr("Config", "%s", err)
	}
	return nil
}

func (c *Config) validateAddrs() error {
	if c.RaftListener != nil {
		addr := c.RaftListener.Addr().String()
		if c.RaftBind != "" && c.RaftBind != addr {
			return configErr("RaftBind", "%q differs from RaftListener's address %s", c.RaftBind, addr)
		}
		c.RaftBind = addr
	}
	if c.RaftBind == "" {
		return configErr("RaftBind", "must not be empty")
	}
	host, port, err := splitHostPort(c.RaftBind)
	if err != nil {
		return configErr("RaftBind", "%s", err)
	}
	if c.RaftAdvertise == "" {
		if unspecifiedHost(host) {
			return configErr("RaftAdvertise", "must be set when RaftBind %q has no specific host", c.RaftBind)
		}
		if port != 0 {
			c.RaftAdvertise = c.RaftBind
		}
	}
	if c.RaftAdvertise != "" {
		if err := validateDialAddr(c.RaftAdvertise); err != nil {
			return configErr("RaftAdvertise", "%s", err)
		}
	}
	if c.HTTPAdvertise == "" {
		return configErr("HTTPAdvertise", "must not be empty")
	}
	if err := validateHTTPAdvertise(c.HTTPAdvertise); err != nil {
		return configErr("HTTPAdvertise", "%s", err)
	}
	if c.TLS != nil && (c.TLS.Server == nil || c.TLS.Client == nil) {
		return configErr("TLS", "needs both a server and a client configuration")
	}
	return nil
}

func (c *Config) validatePeerList() error {
	if len(c.Peers) == 0 {
		return nil
	}
	if err := validatePeers(c.Peers); err != nil {
		return err
	}
	for _, p := range c.Peers {
		if p.ID != c.NodeID {
			continue
		}
		if c.RaftAdvertise == "" {
			return configErr("Peers", "this node (%s) is listed at %s, but RaftBind %q has port 0 and RaftAdvertise is not set", c.NodeID, p.Addr, c.RaftBind)
		}
		if p.Addr != c.RaftAdvertise {
			return configErr("Peers", "this node (%s) is listed at %s, but RaftAdvertise is %s", c.NodeID, p.Addr, c.RaftAdvertise)
		}
		return nil
	}
	return configErr("Peers", "must include this node (%s)", c.NodeID)
}

func (c *Config) fillTimings() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"HeartbeatTimeout", c.HeartbeatTimeout}, {"ElectionTimeout", c.ElectionTimeout},
		{"LeaderLeaseTimeout", c.LeaderLeaseTimeout}, {"CommitTimeout", c.CommitTimeout},
		{"SnapshotInterval", c.SnapshotInterval}, {"ApplyTimeout", c.ApplyTimeout},
		{"PromoteAfter", c.PromoteAfter},
	} {
		if d.v < 0 {
			return configErr(d.name, "must not be negative")
		}
	}
	if c.SnapshotRetain < 0 {
		return configErr("SnapshotRetain", "must not be negative")
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = max(DefaultElectionTimeout, c.HeartbeatTimeout)
	}
	if c.LeaderLeaseTimeout == 0 {
		c.LeaderLeaseTimeout = min(DefaultLeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = DefaultCommitTimeout
	}
	if c.LogVerifyInterval == 0 {
		c.LogVerifyInterval = DefaultLogVerifyInterval
	}
	if c.HeartbeatTimeout < 5*time.Millisecond {
		return configErr("HeartbeatTimeout", "must be at least 5ms")
	}
	if c.ElectionTimeout < c.HeartbeatTimeout {
		return configErr("ElectionTimeout", "%s must be at least HeartbeatTimeout (%s)", c.ElectionTimeout, c.HeartbeatTimeout)
	}
	if c.LeaderLeaseTimeout < 5*time.Millisecond {
		return configErr("LeaderLeaseTimeout", "must be at least 5ms")
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return configErr("LeaderLeaseTimeout", "%s must not exceed HeartbeatTimeout (%s)", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	if c.CommitTimeout < time.Millisecond {
		return configErr("CommitTimeout", "must be at least 1ms")
	}
	def := raft.DefaultConfig()
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = def.SnapshotThreshold
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = def.SnapshotInterval
	}
	if c.SnapshotInterval < 5*time.Millisecond {
		return configErr("SnapshotInterval", "must be at least 5ms")
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = def.TrailingLogs
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = DefaultSnapshotRetain
	}
	if c.PromoteAfter == 0 {
		c.PromoteAfter = DefaultPromoteAfter
	}
	if c.MaxTrailingLogs == 0 {
		c.MaxTrailingLogs = DefaultMaxTrailingLogs
	}
	if c.MaxLag == 0 {
		c.MaxLag = DefaultMaxLag
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = DefaultApplyTimeout
	}
	return nil
}

// raftConfig builds the hashicorp/raft configuration of a validated Config.
func (c *Config) raftConfig(notify chan<- bool) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.MaxAppendEntries = maxAppendEntries
	rc.BatchApplyCh = false
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.SnapshotInterval = c.SnapshotInterval
	rc.TrailingLogs = c.TrailingLogs
	// The FSM's bbolt file is durable and skips entries it already applied, so
	// restoring the latest snapshot at start would only throw newer state away.
	rc.NoSnapshotRestoreOnStart = true
	rc.NotifyCh = notify
	if c.Logger != nil {
		rc.Logger = newHCLogger(c.Logger, "raft")
	}
	return rc
}

// validateNodeID applies the member table's id rules (non-empty, at most
// model.MaxMemberIDLen bytes, valid UTF-8 without whitespace or control characters)
// and forbids the separators of the peer-list syntax.
func validateNodeID(id string) error {
	switch {
	case id == "":
		return errors.New("must not be empty")
	case len(id) > model.MaxMemberIDLen:
		return fmt.Errorf("must be at most %d bytes", model.MaxMemberIDLen)
	case !utf8.ValidString(id) || strings.IndexFunc(id, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return fmt.Errorf("%q must be valid UTF-8 without whitespace or control characters", id)
	case strings.ContainsAny(id, ",="):
		return fmt.Errorf("%q must not contain ',' or '='", id)
	}
	return nil
}

// splitHostPort parses host:port with a numeric port in 0..65535.
func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port: %v", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q has an invalid port", addr)
	}
	return host, port, nil
}

// validateDialAddr accepts host:port that another machine can dial: a specific host
// and a port in 1..65535.
func validateDialAddr(addr string) error {
	host, port, err := splitHostPort(addr)
	if err != nil {
		return err
	}
	if port == 0 {
		return fmt.Errorf("%q needs a port in 1..65535", addr)
	}
	if unspecifiedHost(host) {
		return fmt.Errorf("%q needs a specific host, not a wildcard", addr)
	}
	if strings.ContainsAny(host, " \t/?#@") {
		return fmt.Errorf("%q has an invalid host", addr)
	}
	return nil
}

// validateHTTPTarget accepts host:port or an http(s):// URL whose host has a port (a
// path prefix is allowed: a node behind a reverse proxy).
func validateHTTPTarget(addr string) error {
	s := strings.TrimSpace(addr)
	if i := strings.Index(s, "://"); i >= 0 {
		if sc := s[:i]; sc != "http" && sc != "https" {
			return fmt.Errorf("address %q: scheme must be http or https", addr)
		}
		s = s[i+3:]
		if j := strings.IndexAny(s, "/?#"); j >= 0 {
			s = s[:j]
		}
	}
	hp, err := model.HTTPHostPort(s)
	if err != nil {
		return err
	}
	return validateDialAddr(hp)
}

// validateHTTPAdvertise accepts host:port or an http(s):// URL of host:port without a
// path (model.ValidateMember's rule for the member table).
func validateHTTPAdvertise(addr string) error {
	hp, err := model.HTTPHostPort(addr)
	if err != nil {
		return err
	}
	return validateDialAddr(hp)
}

func unspecifiedHost(host string) bool {
	if host == "" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsUnspecified()
}
