// Package server wires one Roster node together: the bbolt store, the FSM, the Raft
// node, the leader-only health prober and the HTTP API.
package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/buildinfo"
	"github.com/rosterhq/roster/datadir"
	"github.com/rosterhq/roster/dnsapi"
	"github.com/rosterhq/roster/fanout"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/healthcheck"
	"github.com/rosterhq/roster/httpapi"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/internal/instgauge"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos/grpcapi"
	"github.com/rosterhq/roster/nacos/openapi"
	"github.com/rosterhq/roster/nacos/udppush"
	"github.com/rosterhq/roster/peerrpc"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/statecheck"
	"github.com/rosterhq/roster/store"
	"github.com/rosterhq/roster/tlsutil"
)

// Config is the validated configuration of one node.
type Config struct {
	// NodeID is this node's Raft server ID; it must be unique in the cluster.
	NodeID string
	// DataDir holds state.db, the raft/ directory and snapshot-tmp/.
	DataDir string
	// HTTPAddr is the address the API listens on (":8848"; port 0 picks a free port).
	HTTPAddr string
	// HTTPAdvertise is the address other nodes use to reach this node's API; defaults to
	// the listen address when it names a host, else to the Raft advertise host.
	HTTPAdvertise string
	// RaftAddr is the address the Raft transport listens on.
	RaftAddr string
	// RaftListener, when set, is an already-open listener for the Raft transport (its
	// address must be RaftAddr); the server owns it from New on.
	RaftListener net.Listener
	// RaftAdvertise is the address peers dial for Raft; defaults to RaftAddr.
	RaftAdvertise string
	// Peers is the static bootstrap list (the same on every node); ignored when the node has state.
	Peers []raftnode.Peer
	// Join is the HTTP address of a member to ask to add this node.
	Join string
	// NonVoter makes a node that joins (Join) ask to stay without a vote: it receives
	// the log and serves reads but never counts towards the quorum or leads.
	NonVoter bool
	// MetadataMaxBytes seeds the cluster-wide metadata size limit (model.Settings) when
	// this node first leads a cluster whose settings were never set; 0 seeds nothing
	// (the cluster keeps the default, 1 KiB). Afterwards only PUT /v1/operator/settings
	// changes it.
	MetadataMaxBytes int
	// Health configures the leader's prober (zero values take healthcheck's defaults).
	Health healthcheck.Config
	// Raft carries optional timing overrides (zero values take raftnode's defaults).
	Raft RaftTuning
	// Autopilot configures server health and dead-server cleanup on the leader (zero
	// values take raftnode's defaults; cleanup is off unless enabled).
	Autopilot raftnode.AutopilotConfig
	// Pprof serves Go's profiling endpoints under /debug/pprof/ on the HTTP API.
	Pprof bool
	// InstanceMetricsByNamespace labels the roster_instances gauge by namespace and
	// health only (default: by namespace, group, service and health).
	InstanceMetricsByNamespace bool
	// NoSync disables fsync of the state file (tests only).
	NoSync bool
	// StateSyncInterval is how often the state file is fsynced (default 1s). Commits are
	// not fsynced one by one: every entry is already in the fsynced Raft log of a
	// majority, and a node that crashed rebuilds what its state file lost from its Raft
	// snapshot and log at start. Negative: fsync every commit.
	StateSyncInterval time.Duration
	// ReadCacheSize is the memory, in bytes, of the read cache of service views and of
	// the responses encoded from them (0: store.DefaultReadCacheSize; negative: no cache).
	ReadCacheSize int64
	// MaxWatchers bounds the blocking queries and streams the node holds at once
	// (0: DefaultMaxWatchers(); negative: no bound). Beyond it they are answered 429.
	MaxWatchers int
	// StateCheckInterval is how often the leader has every node hash its state for the
	// nodes to compare (default DefaultStateCheckInterval; package statecheck).
	StateCheckInterval time.Duration
	// Snapshot configures the backup routes; an empty Dir means DataDir/snapshot-tmp.
	Snapshot httpapi.SnapshotConfig
	// DNS configures the DNS interface; an empty DNS.Addr serves no DNS.
	DNS dnsapi.Config
	// TrustedOrigins are the origins (scheme://host[:port]) whose pages a browser may send
	// state-changing requests from; other cross-origin writes are refused with 403.
	TrustedOrigins []string
	// ACLEnabled turns access control on (roster server --acl-enabled): every request
	// but the status routes, /metrics and the bootstrap needs a token. Every node of a
	// cluster must agree; a node without it refuses to serve a cluster whose ACLs are
	// bootstrapped.
	ACLEnabled bool
	// MetricsRequireToken puts /metrics behind operator: read while ACLs are on.
	MetricsRequireToken bool
	// JoinToken is the token (operator: write) this node presents when it asks to join a
	// cluster with ACLs, or announces its addresses to the leader.
	JoinToken string
	// GRPCAddr is the address of the Nacos 2.x gRPC API (grpcapi.AddrFor gives the
	// address clients expect: the HTTP port + 1000); "" serves no gRPC.
	GRPCAddr string
	// GRPCMaxConnsPerIP bounds the gRPC port's connections from one source address
	// (0: grpcapi.DefaultMaxConnsPerIP), GRPCMaxConns all of them (0:
	// DefaultMaxGRPCTransports(), from the file descriptor limit).
	GRPCMaxConnsPerIP int
	GRPCMaxConns      int
	// NacosPush bounds the Nacos 1.x UDP pushes (0: the nacos package's defaults).
	NacosPush NacosPushLimits
	// RefuseConfusableNames refuses writes under service names that mix scripts or hold
	// fullwidth forms (roster server --refuse-confusable-names); without it they are
	// admitted with a warning. Per node, not replicated: give it to every server.
	RefuseConfusableNames bool
	// GRPCMaxUntrusted and GRPCMaxUntrustedPerIP bound the gRPC port's connections not
	// yet authenticated, node-wide and from one source; GRPCAcceptRatePerIP is the
	// connections a second accepted from one source, after a burst of 4 times as many
	// (0: the grpcapi.Default... constants).
	GRPCMaxUntrusted      int
	GRPCMaxUntrustedPerIP int
	GRPCAcceptRatePerIP   float64
	// DNSOptional makes a DNS address that cannot be bound a warning instead of an
	// error: the node runs without DNS (for a default address, as several nodes on one
	// host would all ask for it).
	DNSOptional bool
	// TLS turns TLS on for the API, Raft and the traffic between nodes (tls.go).
	TLS TLSConfig
	// NoWriteCoalescing makes every write its own Raft entry instead of gathering the
	// writes that arrive together into one (registry/coalesce.go); for comparisons.
	NoWriteCoalescing bool
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
}

// NacosPushLimits bound the Nacos 1.x UDP pushes of a node (docs/nacos-compatibility.md,
// "UDP push"): subscribers per client address (MaxPerAddr) and per address and udpPort
// (MaxPerPort), and the bytes one change sends to one client address (ChangeBudget).
// Zero values take udppush.DefaultMaxPerAddr, DefaultPushMaxPerPort and
// DefaultPushChangeBudget.
type NacosPushLimits struct {
	MaxPerAddr   int
	MaxPerPort   int
	ChangeBudget int
}

// RaftTuning overrides raftnode's timing defaults.
type RaftTuning struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	SnapshotThreshold  uint64
	SnapshotInterval   time.Duration
	TrailingLogs       uint64
	// PromoteAfter is how long a joined server must stay healthy before it gets a vote.
	PromoteAfter time.Duration
	// MaxTrailingLogs is how many entries a server may lack and still be healthy.
	MaxTrailingLogs uint64
	// LogVerifyInterval is how often the leader writes a log checkpoint, at which every
	// node checks its Raft log (0: raftnode.DefaultLogVerifyInterval; negative: never).
	LogVerifyInterval time.Duration
}

// Validate fills defaults and rejects unusable settings.
func (c *Config) Validate() error {
	if c.NodeID == "" {
		return errors.New("node-id: must not be empty")
	}
	if c.DataDir == "" {
		return errors.New("data-dir: must not be empty")
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = ":8848"
	}
	if c.RaftAddr == "" {
		c.RaftAddr = ":7848"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.StateSyncInterval == 0 {
		c.StateSyncInterval = DefaultStateSyncInterval
	}
	if c.StateCheckInterval <= 0 {
		c.StateCheckInterval = DefaultStateCheckInterval
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		return fmt.Errorf("http-addr: %w", err)
	}
	if _, _, err := net.SplitHostPort(c.RaftAddr); err != nil {
		return fmt.Errorf("raft-addr: %w", err)
	}
	return c.TLS.validate()
}

// DefaultMetadataMaxBytes is the cluster-wide metadata size limit of a cluster whose
// settings were never set.
const DefaultMetadataMaxBytes = model.DefaultMetadataSize

// DefaultStateCheckInterval is how often the leader asks the nodes to compare their
// states by default.
const DefaultStateCheckInterval = statecheck.DefaultInterval

// DefaultStateSyncInterval is how often the state file is fsynced by default.
const DefaultStateSyncInterval = time.Second

// Server is one running Roster node.
type Server struct {
	cfg      Config
	log      *slog.Logger
	store    *store.Store
	fsm      *fsm.FSM
	node     *raftnode.Node
	joinHTTP *http.Client    // join requests of the node (raftnode.Joiner)
	peer     *peerrpc.Client // writes handed to the leader
	peerSrv  *peerrpc.Server // writes handed to this node as leader
	metrics  *prometheus.Registry
	registry *registry.Registry
	health   *healthcheck.Manager
	fwd      *httpx.Forwarder
	dns      *dnsapi.Server // nil: no DNS
	nacosAPI *openapi.API
	grpc     *grpcapi.Server // nil: no gRPC
	grpcLn   net.Listener
	hub      *fanout.Hub // watch fan-out of this node's state
	ln       net.Listener
	http     *http.Server
	httpAddr string
	httpAdv  string // the HTTP address the others reach this node at

	// life holds what New opened and the goroutines the node runs (lifecycle.go).
	life *lifecycle

	closeOnce sync.Once
	closeErr  error

	certs *tlsutil.NodeCerts // the node's TLS material; nil: TLS is off
}

// New opens the node's state and Raft log and binds the HTTP listener; Start begins
// serving. It runs in ordered steps (openState, openRaft, startServices, buildAPI), each
// registering what it opened with the node's lifecycle; on error everything opened so far
// is closed again, in reverse order, and every goroutine started is waited for.
func New(cfg Config) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Lines logged with a request's context carry its id (httpx.RequestIDs).
	log := slog.New(httpx.RequestIDLogs(cfg.Logger.Handler())).With("node", cfg.NodeID)
	s := &Server{cfg: cfg, log: log, life: newLifecycle()}
	if s.certs, err = loadTLS(cfg.TLS); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.life.undo()
		}
	}()
	// The steps complete s.cfg (openState chooses the snapshot directory).
	for _, step := range []func(*Config) error{s.openState, s.openRaft, s.startServices, s.buildAPI} {
		if err := step(&s.cfg); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// openState opens the data directory and the state file, and binds the HTTP listener.
func (s *Server) openState(cfg *Config) error {
	// Before anything in the directory is opened: a directory in a newer format is refused
	// untouched (a downgrade past a format change).
	if err := datadir.Stamp(cfg.DataDir, buildinfo.Get().Version); err != nil {
		return fmt.Errorf("data-dir: %w", err)
	}
	// Everything in it is private to this user, whatever wrote it (docs/security.md).
	if err := datadir.Tighten(cfg.DataDir); err != nil {
		return fmt.Errorf("data-dir: %w", err)
	}
	var err error
	s.store, err = store.Open(raftnode.StatePath(cfg.DataDir), store.Options{
		NoSync:        cfg.NoSync,
		SyncInterval:  max(cfg.StateSyncInterval, 0),
		ReadCacheSize: cfg.ReadCacheSize,
		Logger:        s.log,
	})
	if err != nil {
		return fmt.Errorf("open state: %w", err)
	}
	s.life.onUndo(s.store.Close)
	if cfg.Snapshot.Dir == "" {
		// Emptied only now that the state file's lock shows no other process uses DataDir.
		cfg.Snapshot.Dir = filepath.Join(cfg.DataDir, snapshotTempDir)
		if err := resetDir(cfg.Snapshot.Dir); err != nil {
			return fmt.Errorf("data-dir: %w", err)
		}
	}
	s.fsm = fsm.New(s.store, s.log)
	switch alarm, err := statecheck.VerifyShutdown(cfg.DataDir, s.store); {
	case err != nil:
		s.log.Warn("the state recorded at the last clean shutdown cannot be checked", "error", err)
	case alarm != nil:
		s.fsm.RaiseAlarm(alarm)
		s.log.Error("the state file changed while the node was stopped: it serves no reads until its data directory is rebuilt (docs/operations.md)", "error", alarm)
	}

	s.ln, err = net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http-addr: %w", err)
	}
	s.life.onUndo(s.ln.Close)
	s.httpAddr = s.ln.Addr().String()
	return nil
}

// openRaft opens the Raft node on the state, and the node's metrics.
func (s *Server) openRaft(cfg *Config) error {
	advertiseFn := advertise
	if s.certs != nil {
		advertiseFn = tlsAdvertise
		if err := checkTLSJoin(cfg.Join); err != nil {
			return fmt.Errorf("join: %w", err)
		}
	}
	var err error
	s.httpAdv, err = advertiseFn(cfg.HTTPAdvertise, s.httpAddr, cfg.RaftAdvertise, cfg.RaftAddr)
	if err != nil {
		return fmt.Errorf("http-advertise: %w", err)
	}

	s.joinHTTP = newJoinHTTPClient(s.peerTLS())
	s.life.onUndo(func() error { s.joinHTTP.CloseIdleConnections(); return nil })
	s.node, err = raftnode.New(raftnode.Config{
		NodeID:             cfg.NodeID,
		DataDir:            cfg.DataDir,
		RaftBind:           cfg.RaftAddr,
		RaftListener:       cfg.RaftListener,
		TLS:                s.raftTLS(),
		RaftAdvertise:      cfg.RaftAdvertise,
		HTTPAdvertise:      s.httpAdv,
		Peers:              cfg.Peers,
		Join:               cfg.Join,
		NonVoter:           cfg.NonVoter,
		Joiner:             joiner(s.joinHTTP, cfg.JoinToken, s.peerURL),
		HeartbeatTimeout:   cfg.Raft.HeartbeatTimeout,
		ElectionTimeout:    cfg.Raft.ElectionTimeout,
		LeaderLeaseTimeout: cfg.Raft.LeaderLeaseTimeout,
		SnapshotThreshold:  cfg.Raft.SnapshotThreshold,
		SnapshotInterval:   cfg.Raft.SnapshotInterval,
		TrailingLogs:       cfg.Raft.TrailingLogs,
		PromoteAfter:       cfg.Raft.PromoteAfter,
		MaxTrailingLogs:    cfg.Raft.MaxTrailingLogs,
		LogVerifyInterval:  cfg.Raft.LogVerifyInterval,
		Autopilot:          cfg.Autopilot,
		Logger:             s.log,
	}, s.fsm)
	if err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	s.life.onUndo(s.node.Shutdown)

	s.metrics = prometheus.NewRegistry()
	s.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfoGauge())
	if err := s.node.RegisterMetrics(s.metrics); err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	diskMetrics(s.metrics, cfg.DataDir)
	if err := s.store.RegisterMetrics(s.metrics); err != nil {
		return fmt.Errorf("read cache metrics: %w", err)
	}
	s.metrics.MustRegister(newAutopilotCollector(s.node))
	s.metrics.MustRegister(statecheck.Collectors(s.fsm)...)
	return nil
}

// startServices builds the registry and what runs beside the APIs: the peer RPC, the
// health checks, DNS, the watch fan-out and the node's background loops.
func (s *Server) startServices(cfg *Config) error {
	dataDir := cfg.DataDir
	s.life.loop(func(ctx context.Context) { watchDisk(dataDir, s.log, ctx.Done()) })
	gauges, err := instgauge.New(s.store, s.metrics, !cfg.InstanceMetricsByNamespace, s.log)
	if err != nil {
		return fmt.Errorf("instance metrics: %w", err)
	}
	s.life.loop(func(ctx context.Context) { gauges.Run(ctx.Done()) })

	hcfg := cfg.Health
	hcfg.Registerer = s.metrics
	hcfg.Confirmer, hcfg.NodeID = confirmer{s: s}, cfg.NodeID
	s.health, err = healthcheck.NewManager(hcfg, s.store, s.node, s.log)
	if err != nil {
		return fmt.Errorf("health checks: %w", err)
	}
	// Connections are file descriptors: take what the hard limit allows before the
	// bounds below are sized from it.
	RaiseFileLimit()
	maxWatchers := cfg.MaxWatchers
	if maxWatchers == 0 {
		maxWatchers = DefaultMaxWatchers()
	}
	watchers, err := registry.NewWatchers(maxWatchers, s.metrics)
	if err != nil {
		return err
	}
	rcfg := registry.Config{Settings: s.store, Raft: s.node, StateAlarm: s.fsm.Alarm, Watchers: watchers,
		ACLEnabled: cfg.ACLEnabled, Tokens: s.store, Metrics: s.metrics,
		RefuseConfusableNames: cfg.RefuseConfusableNames, Logger: s.log}
	if !cfg.NoWriteCoalescing {
		rcfg.Coalesce = proposer{s.node}
	}
	// Writes and consistent reads that reach a follower go to the leader typed, over the
	// peer RPC on the Raft port (registry/forward.go, peerrpc).
	s.peer = peerrpc.NewClient(s.node.DialPeer, s.node.LeaderPeer)
	s.life.onUndo(func() error { s.peer.Close(); return nil })
	rcfg.Peer, rcfg.NodeID, rcfg.LeaderHold = s.peer, cfg.NodeID, httpapi.DefaultLeaderHold
	s.registry, err = registry.New(rcfg)
	if err != nil {
		return err
	}
	s.peerSrv = peerrpc.NewServer(s.registry, s.log)
	s.node.ServePeer(s.peerSrv.ServeConn)
	s.life.onUndo(func() error { s.node.ServePeer(nil); s.peerSrv.Close(); return nil })
	if cfg.DNS.Addr != "" {
		s.dns, err = dnsapi.New(cfg.DNS, dnsapi.Options{
			Store: s.store, Staleness: s.node.LastContact, Alarm: s.fsm.Alarm, Registerer: s.metrics, Logger: s.log,
		})
		switch {
		case err == nil:
			s.life.onUndo(s.dns.Close)
		case cfg.DNSOptional && errors.Is(err, dnsapi.ErrListen):
			s.log.Warn("serving no DNS: its address cannot be bound", "addr", cfg.DNS.Addr, "err", err)
			s.dns = nil
		default:
			return err
		}
	}
	s.hub, err = fanout.New(s.store, fanout.Options{Metrics: s.metrics, Logger: s.log})
	if err != nil {
		return fmt.Errorf("watch fan-out: %w", err)
	}
	s.life.onUndo(func() error { s.hub.Close(); return nil })
	s.observeLeader()
	s.node.OnLeadership(s.health.Run)
	s.node.OnLeadership(s.seedSettings)
	checks := statecheck.New(statecheck.Config{NodeID: cfg.NodeID, Interval: cfg.StateCheckInterval, Node: s.node,
		FSM: s.fsm, PeerHash: s.peerStateCheck, Logger: s.log})
	s.node.OnLeadership(checks.Propose)
	agreement, err := s.registry.NewACLAgreement(func() bool { ready, _ := s.node.Ready(); return ready },
		func(ctx context.Context) error { return s.node.TransferLeadership(ctx, "") })
	if err != nil {
		return err
	}
	s.node.OnLeadership(agreement.HandOffWhileMismatched)
	s.life.loop(agreement.WatchAgreement)
	s.life.loop(checks.Compare)
	s.log.Info("health probe policy", "policy", cfg.Health.Policy.String())
	return nil
}

// buildAPI builds the HTTP APIs, the Nacos gRPC server and the HTTP server.
func (s *Server) buildAPI(cfg *Config) error {
	handler, err := s.newAPI(*cfg)
	if err != nil {
		return err
	}
	if cfg.GRPCAddr != "" {
		if s.grpcLn, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
			return fmt.Errorf("grpc-addr: %w", err)
		}
		s.life.onUndo(s.grpcLn.Close)
		s.grpc, err = grpcapi.New(grpcapi.Config{
			Registry: s.registry, API: s.nacosAPI, Store: s.store, Watch: s.hub, HTTPAddr: s.httpAdv,
			Registerer: s.metrics, Logger: s.log, Alarm: s.fsm.Alarm,
			CatchUp: func(ctx context.Context) error {
				return s.node.CatchUp(ctx, max(s.fwd.LastWriteIndex(), s.registry.LastForwarded()))
			},
			TLS: s.grpcTLS(),
			// Bounded well below the file descriptor limit, so that a flood of the
			// port leaves descriptors for HTTPS and Raft (docs/security.md).
			MaxTransports:     cmp.Or(cfg.GRPCMaxConns, DefaultMaxGRPCTransports()),
			MaxConnsPerIP:     cfg.GRPCMaxConnsPerIP,
			MaxUntrusted:      cfg.GRPCMaxUntrusted,
			MaxUntrustedPerIP: cfg.GRPCMaxUntrustedPerIP,
			AcceptRatePerIP:   cfg.GRPCAcceptRatePerIP,
		})
		if err != nil {
			return fmt.Errorf("nacos grpc: %w", err)
		}
	}
	if cfg.Pprof {
		handler = withPprof(handler, s.registry)
	}
	if s.certs != nil {
		handler = requireNodeCertToJoin(handler)
	}
	handler = strictTransportSecurity(httpx.RequestIDs(s.log)(handler))
	s.http = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// net/http's own complaints go to the node's log, not to the standard logger.
		ErrorLog: slog.NewLogLogger(s.log.With("component", "http").Handler(), slog.LevelWarn),
	}
	if s.certs != nil {
		s.http.TLSConfig = s.certs.HTTPServer(cfg.TLS.VerifyIncoming)
		// HTTP/1.1 only: event streams take their connection over from net/http, which
		// HTTP/2 does not allow (httpapi/streamer.go; docs/security.md).
		s.http.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		s.http.ErrorLog = httpErrorLog(s.log)
	}
	s.logTLS()
	if cfg.ACLEnabled && s.certs == nil && cfg.JoinToken == "" && (len(cfg.Peers) > 1 || cfg.Join != "") {
		s.log.Warn("ACLs without TLS and without --join-token: this node cannot authenticate to the others, " +
			"so it cannot announce its addresses nor ask them to confirm health transitions (while it leads, the health transitions " +
			"of clusters with confirm: majority find no majority of the voters and are not committed)")
	}
	return nil
}

// advertise picks the address peers use to reach the HTTP API.
func advertise(explicit, bound, raftAdv, raftBind string) (string, error) {
	if explicit != "" {
		if _, _, err := net.SplitHostPort(explicit); err != nil {
			return "", err
		}
		return explicit, nil
	}
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return bound, nil
	}
	for _, ra := range []string{raftAdv, raftBind} {
		if ra == "" {
			continue
		}
		rh, _, err := net.SplitHostPort(ra)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(rh); rh != "" && (ip == nil || !ip.IsUnspecified()) {
			return net.JoinHostPort(rh, port), nil
		}
	}
	return "", errors.New("cannot derive an address other nodes can reach: the listen address has no host; set --http-advertise")
}

// Start serves the HTTP API until Close.
func (s *Server) Start() error {
	s.life.serve(func() {
		serve := s.http.Serve
		if s.certs != nil {
			serve = func(ln net.Listener) error { return s.http.ServeTLS(ln, "", "") }
		}
		if err := serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "err", err)
		}
	})
	if s.dns != nil {
		s.dns.Start()
	}
	if s.grpc != nil {
		s.life.serve(func() {
			if err := s.grpc.Serve(s.grpcLn); err != nil {
				s.log.Error("nacos grpc server stopped", "err", err)
			}
		})
	}
	s.log.Info("serving", "http", s.httpAddr, "raft", s.cfg.RaftAddr, "dns", s.DNSAddr(), "grpc", s.GRPCAddr())
	return nil
}

// HTTPAddr is the address the API listens on (with the real port when 0 was asked for).
func (s *Server) HTTPAddr() string { return s.httpAddr }

// DNSAddr is the address DNS is served on over UDP and TCP (with the real port when 0
// was asked for), or "" when the node serves no DNS.
func (s *Server) DNSAddr() string {
	if s.dns == nil {
		return ""
	}
	return s.dns.Addr()
}

// GRPCAddr is the address the Nacos gRPC API listens on, or "" when the node serves none.
func (s *Server) GRPCAddr() string {
	if s.grpcLn == nil {
		return ""
	}
	return s.grpcLn.Addr().String()
}

// Node is the node's Raft wiring.
func (s *Server) Node() *raftnode.Node { return s.node }

// Hub is the node's watch fan-out.
func (s *Server) Hub() *fanout.Hub { return s.hub }

// Store is the node's state.
func (s *Server) Store() *store.Store { return s.store }

// Close stops serving, leaves Raft running no longer and closes the state. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		errs := []error{}
		// The background loops first (they read the state and talk to the others).
		s.life.stopLoops()
		// A leader hands leadership over before anything stops serving: writes that
		// arrive meanwhile wait here and are sent on to the next leader, and the
		// requests still being answered below can be forwarded to it.
		hctx, hcancel := context.WithTimeout(ctx, handoverTimeout)
		if _, err := s.node.Handover(hctx); err != nil {
			s.log.Warn("leadership hand-over failed; the others elect a leader after their election timeout", "error", err)
		}
		hcancel()
		// Nacos gRPC clients are asked to move to another node while this one still serves.
		if s.grpc != nil {
			gctx, gcancel := context.WithTimeout(ctx, 3*time.Second)
			s.grpc.Shutdown(gctx)
			gcancel()
		}
		// Ending the watch streams first lets the HTTP server's shutdown find them done.
		s.hub.Close()
		if s.dns != nil {
			if err := s.dns.Close(); err != nil {
				errs = append(errs, fmt.Errorf("dns: %w", err))
			}
		}
		if err := s.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http: %w", err))
			_ = s.http.Close()
		}
		s.life.waitServes() // the HTTP and gRPC servers' Serve calls have returned
		s.fwd.CloseIdleConnections()
		s.node.ServePeer(nil)
		s.peerSrv.Close()
		s.peer.Close()
		if err := s.node.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("raft: %w", err))
		}
		s.joinHTTP.CloseIdleConnections()
		if s.fsm.Alarm() == nil {
			// The next start checks that the state file did not change meanwhile.
			if err := statecheck.RecordShutdown(s.cfg.DataDir, s.store); err != nil {
				s.log.Warn("recording the state at shutdown failed", "error", err)
			}
		}
		if err := s.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("state: %w", err))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// handoverTimeout bounds Close's leadership hand-over: the writes in flight, then the
// transfer (which Raft bounds by an election timeout) and the first heartbeat of the
// new leader.
const handoverTimeout = 3 * time.Second

// snapshotTempDir, under the data directory, receives uploaded snapshot archives while
// they are checked. It is emptied at start: anything in it is left from an interrupted
// upload.
const snapshotTempDir = "snapshot-tmp"

// observeLeader resends every watcher its views whenever this node sees the leader
// change (on followers too): a watcher then holds what the new term's node serves.
func (s *Server) observeLeader() {
	ch := make(chan raft.Observation, 8)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	s.node.Raft().RegisterObserver(obs)
	s.life.loop(func(ctx context.Context) {
		defer s.node.Raft().DeregisterObserver(obs)
		for {
			select {
			case <-ch:
				s.hub.Resync("leadership")
			case <-ctx.Done():
				return
			}
		}
	})
}

// resetDir creates dir, or empties it if it exists.
func resetDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, datadir.DirMode)
}

// withPprof serves net/http/pprof's handlers under /debug/pprof/ and everything else
// through next. With ACLs on, profiles need operator: write (they show the process's
// memory and command line).
func withPprof(next http.Handler, reg *registry.Registry) http.Handler {
	prof := http.NewServeMux()
	prof.HandleFunc("/debug/pprof/", pprof.Index)
	prof.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	prof.HandleFunc("/debug/pprof/profile", pprof.Profile)
	prof.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	prof.HandleFunc("/debug/pprof/trace", pprof.Trace)
	guarded := httpx.Authenticate(reg, nil, writeAPIError)(
		httpx.Require(reg, httpx.Fixed(acl.OperatorWrite), writeAPIError)(prof))
	mux := http.NewServeMux()
	mux.Handle("/debug/pprof/", guarded)
	mux.Handle("/", next)
	return mux
}

// writeAPIError answers err as the native API does, for handlers outside it.
func writeAPIError(w http.ResponseWriter, _ *http.Request, err error) {
	status, code, field := httpx.Classify(err)
	httpx.WriteJSON(w, status, api.ErrorBody{Error: api.Error{Code: code, Message: httpx.Message(err), Field: field}})
}

// seedSettings runs on every leadership term: when the cluster's settings were never set
// and this node was configured with a metadata limit, it writes that limit as the
// cluster-wide setting (a node flag only ever seeds the replicated
// value). A flag that disagrees with settings already set is logged and ignored.
func (s *Server) seedSettings(ctx context.Context) {
	want := s.cfg.MetadataMaxBytes
	if want == 0 {
		return
	}
	cur, err := s.registry.Settings()
	if err != nil {
		s.log.Warn("reading the cluster settings failed; not seeding them", "err", err)
		return
	}
	if cur.ModifyIndex != 0 {
		if cur.MetadataMaxBytes != want {
			s.log.Warn("--metadata-max-bytes differs from the cluster setting and is ignored; change it with PUT /v1/operator/settings",
				"flag", want, "setting", cur.MetadataMaxBytes)
		}
		return
	}
	cur.MetadataMaxBytes = want
	if _, err := s.registry.UpdateSettings(ctx, cur); err != nil && ctx.Err() == nil {
		s.log.Warn("seeding the cluster settings failed", "err", err)
		return
	}
	s.log.Info("cluster settings seeded from this node's flags", "metadata_max_bytes", want)
}

// newAPI builds the HTTP handler of the node: the native API and the Nacos API over the
// one registry, sharing one forwarder to the leader and one set of HTTP metrics.
func (s *Server) newAPI(cfg Config) (http.Handler, error) {
	httpMetrics, err := httpx.NewMetrics(s.metrics)
	if err != nil {
		return nil, err
	}
	s.fwd, err = httpx.NewForwarder(httpx.ForwarderConfig{
		Node: s.node, NodeID: cfg.NodeID, Logger: s.log, Metrics: httpMetrics,
		RequestTimeout: httpapi.DefaultRequestTimeout, LeaderHold: httpapi.DefaultLeaderHold,
		TLS: s.peerTLS(), CatchUp: s.node.CatchUp,
	})
	if err != nil {
		return nil, err
	}
	native, err := httpapi.New(httpapi.Config{
		NodeID:      cfg.NodeID,
		Store:       s.store,
		Node:        s.node,
		Logger:      s.log,
		Registry:    s.registry,
		Forwarder:   s.fwd,
		Metrics:     s.metrics,
		Version:     buildinfo.Get().Version,
		Snapshot:    cfg.Snapshot,
		Health:      s.health,
		StateChecks: s.fsm,
		PeerReady:   s.peerReady,
		Prober:      s.health,
		Autopilot:   s.node,
		Watch:       s.hub,

		ProbePolicy:         cfg.Health.Policy,
		TrustedOrigins:      cfg.TrustedOrigins,
		MetricsRequireToken: cfg.MetricsRequireToken,
	})
	if err != nil {
		return nil, fmt.Errorf("http api: %w", err)
	}
	nacosAPI, err := openapi.New(openapi.Config{
		NodeID: cfg.NodeID, Store: s.store, Node: s.node, Registry: s.registry,
		Forwarder: s.fwd, Metrics: httpMetrics, Logger: s.log, Watch: s.hub,
		Registerer: s.metrics, PushAddr: udppush.AddrFor(s.httpAddr), TrustedOrigins: cfg.TrustedOrigins,
		PushMaxPerAddr: cfg.NacosPush.MaxPerAddr, PushMaxPerPort: cfg.NacosPush.MaxPerPort,
		PushChangeBudget: cfg.NacosPush.ChangeBudget,
	})
	if err != nil {
		return nil, fmt.Errorf("nacos api: %w", err)
	}
	s.nacosAPI = nacosAPI
	return apiMux(native, nacosAPI), nil
}

// apiMux sends /nacos/... to the Nacos API and everything else to the native API.
func apiMux(native, nacosAPI http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openapi.IsPath(r.URL.Path) {
			nacosAPI.ServeHTTP(w, r)
			return
		}
		native.ServeHTTP(w, r)
	})
}

// proposer hands the registry's coalesced writes to the Raft node.
type proposer struct{ node *raftnode.Node }

func (p proposer) Propose(ctx context.Context, cmd fsm.Command) (registry.Proposal, error) {
	pr, err := p.node.Propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return pr, nil
}

func (p proposer) ProposeEncoded(ctx context.Context, data []byte) (registry.Proposal, error) {
	pr, err := p.node.ProposeEncoded(ctx, data)
	if err != nil {
		return nil, err
	}
	return pr, nil
}

func (p proposer) ServersApply(t fsm.MessageType) bool { return p.node.ServersApply(t) }

func (p proposer) Prepare(ctx context.Context, cmd fsm.Command) (fsm.Command, error) {
	return p.node.Prepare(ctx, cmd)
}
