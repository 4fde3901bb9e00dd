package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rosterhq/roster/buildinfo"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/dnsapi"
	"github.com/rosterhq/roster/healthcheck"
	"github.com/rosterhq/roster/httpapi"
	"github.com/rosterhq/roster/nacos/grpcapi"
	"github.com/rosterhq/roster/nacos/udppush"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/store"
)

// nodeOptions are the settings of one node, as the server and dev commands collect them.
type nodeOptions struct {
	NodeID           string
	DataDir          string
	HTTPAddr         string
	HTTPAdvertise    string
	RaftAddr         string
	RaftAdvertise    string
	Peers            string // id=raftaddr,... as given
	Join             string
	MetadataMaxBytes int
	SnapshotMaxBytes int64 // largest snapshot archive PUT /v1/snapshot accepts (0: the default)
	// TLS (--tls-*): all three files, or none; TLSVerifyIncoming needs them.
	TLSCertFile, TLSKeyFile, TLSCAFile string
	TLSVerifyIncoming                  bool
	// Raft timing and state-file durability (0: the defaults).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	LogVerifyInterval  time.Duration
	// PromoteAfter is how long a joined server stays caught up before it gets a vote.
	PromoteAfter      time.Duration
	StateSyncInterval time.Duration
	ProbeConcurrency  int
	ProbeAllow        string // CIDR list; empty: every address
	ProbeDeny         string // CIDR list; empty: healthcheck.DefaultProbeDeny, "none": nothing
	Pprof             bool
	// CoalesceWrites gathers concurrent writes into one Raft entry (default on).
	CoalesceWrites bool
	// InstanceMetricsByNamespace labels roster_instances by namespace only.
	InstanceMetricsByNamespace bool
	// DNS interface (--dns-*); an empty DNSAddr serves no DNS.
	DNSAddr        string
	DNSDomain      string
	DNSTTL         time.Duration
	DNSNegativeTTL time.Duration
	DNSMaxAnswers  int
	DNSRateLimit   float64
	DNSRateBurst   int
	DNSMaxStale    time.Duration
	// DNSAddrOptional: --dns-addr was left at its default, so an address in use only
	// disables DNS (several nodes on one host would all ask for it).
	DNSAddrOptional bool
	// GRPCAddr is --grpc-addr: "" derives it from the HTTP address, "off" serves none.
	GRPCAddr string
	// GRPCMaxConnsPerIP and GRPCMaxConns are --grpc-max-conns-per-ip and
	// --grpc-max-conns (0: the defaults).
	GRPCMaxConnsPerIP int
	GRPCMaxConns      int
	// NacosPush is --nacos-push-max-per-addr, --nacos-push-max-per-port and
	// --nacos-push-change-budget.
	NacosPush server.NacosPushLimits
	// RefuseConfusableNames is --refuse-confusable-names.
	RefuseConfusableNames bool
	// GRPCMaxUntrusted, GRPCMaxUntrustedPerIP and GRPCAcceptRatePerIP are
	// --grpc-max-untrusted, --grpc-max-untrusted-per-ip and --grpc-accept-rate-per-ip.
	GRPCMaxUntrusted      int
	GRPCMaxUntrustedPerIP int
	GRPCAcceptRatePerIP   float64
	// TrustedOrigins is --trusted-origins: origins whose pages may write.
	TrustedOrigins []string
	// MaxWatchers is --max-watchers (0: sized for the machine).
	MaxWatchers int
	// ReadCacheSize is --read-cache-size, in bytes (0: no read cache).
	ReadCacheSize int64
	// ACLEnabled is --acl-enabled; MetricsRequireToken --metrics-require-token;
	// JoinToken --join-token (the token the node presents when it joins).
	ACLEnabled          bool
	MetricsRequireToken bool
	JoinToken           string

	// NonVoter is --non-voter: the node joins (Join) without a vote and stays so.
	NonVoter bool
	// Autopilot is the server-health and dead-server flags (autopilot_cmd.go).
	Autopilot autopilotOptions
}

// grpcAddrOff is the --grpc-addr value that serves no gRPC.
const grpcAddrOff = "off"

// grpcAddr is the address the Nacos gRPC API listens on: --grpc-addr, or the HTTP
// address's host with its port + 1000 (what Nacos 2.x clients dial), or "" for none
// ("off", or an HTTP port of 0, which has no fixed neighbour).
func (o nodeOptions) grpcAddr() string {
	switch o.GRPCAddr {
	case grpcAddrOff:
		return ""
	case "":
		return grpcapi.AddrFor(o.HTTPAddr)
	}
	return o.GRPCAddr
}

// readCacheFlag adds --read-cache-size.
func readCacheFlag(fs *pflag.FlagSet, o *nodeOptions) {
	fs.Int64Var(&o.ReadCacheSize, "read-cache-size", store.DefaultReadCacheSize,
		"memory, in bytes, the cache of services read and of the responses encoded from them may hold (0: no cache)")
}

// readCacheSize is server.Config.ReadCacheSize for --read-cache-size, whose 0 turns
// the cache off.
func (o nodeOptions) readCacheSize() int64 {
	if o.ReadCacheSize <= 0 {
		return -1
	}
	return o.ReadCacheSize
}

// grpcFlag adds --grpc-addr and --trusted-origins.
func grpcFlag(fs *pflag.FlagSet, o *nodeOptions) {
	fs.StringVar(&o.GRPCAddr, "grpc-addr", "", `address of the Nacos 2.x gRPC API (default: the --http-addr host, port + 1000, as Nacos clients expect; "off": none)`)
	fs.IntVar(&o.GRPCMaxConnsPerIP, "grpc-max-conns-per-ip", grpcapi.DefaultMaxConnsPerIP,
		"most connections to the gRPC port from one source address (an IPv6 /64); more are closed as soon as accepted")
	fs.IntVar(&o.GRPCMaxConns, "grpc-max-conns", 0,
		"most connections to the gRPC port, registered or not (0: a quarter of the open-file limit, between 64 and 20000)")
	fs.IntVar(&o.GRPCMaxUntrusted, "grpc-max-untrusted", grpcapi.DefaultMaxUntrusted,
		"most connections to the gRPC port not yet authenticated; when full, a source holding fewer of them takes the oldest of the source holding the most")
	fs.IntVar(&o.GRPCMaxUntrustedPerIP, "grpc-max-untrusted-per-ip", grpcapi.DefaultMaxUntrustedPerIP,
		"most connections to the gRPC port not yet authenticated from one source address (an IPv6 /64); more are closed as soon as accepted")
	fs.Float64Var(&o.GRPCAcceptRatePerIP, "grpc-accept-rate-per-ip", grpcapi.DefaultAcceptRatePerIP,
		"connections a second the gRPC port accepts from one source address (an IPv6 /64), after a burst of 4 times as many; more are closed as soon as accepted")
	fs.IntVar(&o.MaxWatchers, "max-watchers", 0, "most blocking queries and streams held at once; more are answered 429 (0: the open-file limit less 1024, at most 100000; negative: no limit)")
	fs.StringSliceVar(&o.TrustedOrigins, "trusted-origins", nil, "origins (scheme://host[:port], comma-separated) whose web pages may send writes; browsers' writes from any other origin are refused")
}

// nacosPushFlags adds the bounds of the Nacos 1.x UDP pushes.
func nacosPushFlags(fs *pflag.FlagSet, o *nodeOptions) {
	fs.IntVar(&o.NacosPush.MaxPerAddr, "nacos-push-max-per-addr", udppush.DefaultMaxPerAddr,
		"most Nacos 1.x UDP push subscriptions one client IP address may hold on this node; further queries are answered as polls")
	fs.IntVar(&o.NacosPush.MaxPerPort, "nacos-push-max-per-port", udppush.DefaultMaxPerPort,
		"most Nacos 1.x UDP push subscriptions one client IP address and udpPort (one client process) may hold on this node")
	fs.IntVar(&o.NacosPush.ChangeBudget, "nacos-push-change-budget", udppush.DefaultChangeBudget,
		"most bytes one change of a service pushes (resends included) to one client IP address; further pushes of it are skipped and those clients poll")
}

// validate checks the options that are parsed later, so that a bad value is reported
// before anything starts.
func (o nodeOptions) validate() error {
	if o.PromoteAfter < 0 {
		return fmt.Errorf("--promote-after %s: must not be negative", o.PromoteAfter)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"grpc-max-untrusted", float64(o.GRPCMaxUntrusted)}, {"grpc-max-untrusted-per-ip", float64(o.GRPCMaxUntrustedPerIP)},
		{"grpc-accept-rate-per-ip", o.GRPCAcceptRatePerIP}} {
		if f.v <= 0 {
			return fmt.Errorf("--%s %v: must be positive", f.name, f.v)
		}
	}
	if o.Peers != "" {
		if _, err := raftnode.ParsePeers(o.Peers); err != nil {
			return fmt.Errorf("--peers: %w", err)
		}
	}
	if o.NonVoter && o.Join == "" {
		return fmt.Errorf("--non-voter applies only to a node that joins: give --join too (or %s); "+
			"a node started from --peers is a voter", envName("join"))
	}
	if _, err := o.probePolicy(); err != nil {
		return err
	}
	if err := o.Autopilot.validate(); err != nil {
		return err
	}
	if o.DNSAddr != "" {
		if err := o.dnsConfig().Validate(); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"nacos-push-max-per-addr", o.NacosPush.MaxPerAddr},
		{"nacos-push-max-per-port", o.NacosPush.MaxPerPort},
		{"nacos-push-change-budget", o.NacosPush.ChangeBudget},
	} {
		if f.v < 0 {
			return fmt.Errorf("--%s %d: must not be negative (0: the default)", f.name, f.v)
		}
	}
	if a := o.GRPCAddr; a != "" && a != grpcAddrOff {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("--grpc-addr %q: %w", a, err)
		}
	}
	return o.validateTLS()
}

// dnsConfig is the node's DNS configuration.
func (o nodeOptions) dnsConfig() dnsapi.Config {
	return dnsapi.Config{
		Addr:        o.DNSAddr,
		Domain:      o.DNSDomain,
		TTL:         o.DNSTTL,
		NegativeTTL: o.DNSNegativeTTL,
		MaxAnswers:  o.DNSMaxAnswers,
		RateLimit:   o.DNSRateLimit,
		RateBurst:   o.DNSRateBurst,
		MaxStale:    o.DNSMaxStale,
	}
}

// defaultDNSRateLimit is --dns-rate-limit's default, in queries per second per client.
const defaultDNSRateLimit = 1000

// dnsFlags adds the --dns-* flags. Call dnsAddrOptional once the flags are parsed.
func dnsFlags(fs *pflag.FlagSet, o *nodeOptions) {
	fs.StringVar(&o.DNSAddr, "dns-addr", dnsapi.DefaultAddr, "UDP and TCP address DNS is served on (empty: no DNS); when left at the default, an address already in use only disables DNS")
	fs.StringVar(&o.DNSDomain, "dns-domain", dnsapi.DefaultDomain, "DNS zone the node answers for; names outside it are refused")
	fs.DurationVar(&o.DNSTTL, "dns-ttl", dnsapi.DefaultTTL, "TTL of DNS records (whole seconds)")
	fs.DurationVar(&o.DNSNegativeTTL, "dns-negative-ttl", 0, "how long resolvers may cache NXDOMAIN and NODATA answers, the SOA minimum (0: --dns-ttl)")
	fs.IntVar(&o.DNSMaxAnswers, "dns-max-answers", dnsapi.DefaultMaxAnswers, "most records in one DNS answer; more qualifying instances are answered with a random subset")
	fs.Float64Var(&o.DNSRateLimit, "dns-rate-limit", defaultDNSRateLimit, "DNS queries per second each client address may send, answered REFUSED past it (0: no limit)")
	fs.IntVar(&o.DNSRateBurst, "dns-rate-burst", 0, "DNS queries a client may send at once before --dns-rate-limit applies (0: one second's worth)")
	fs.DurationVar(&o.DNSMaxStale, "dns-max-stale", 0, "answer DNS queries SERVFAIL while this node has not heard from the leader for longer (0: always answer)")
}

// dnsAddrOptional records whether --dns-addr was left at its default (neither the flag
// nor ROSTER_DNS_ADDR set).
func dnsAddrOptional(cmd *cobra.Command, o *nodeOptions) {
	o.DNSAddrOptional = !cmd.Flags().Changed("dns-addr")
}

// probePolicy parses --probe-allow and --probe-deny.
func (o nodeOptions) probePolicy() (healthcheck.Policy, error) {
	p, err := healthcheck.ParsePolicy(o.ProbeAllow, o.ProbeDeny)
	if err != nil {
		return p, fmt.Errorf("--probe-allow/--probe-deny: %w", err)
	}
	return p, nil
}

// metadataFlagUsage describes --metadata-max-bytes, which only seeds a replicated setting.
var metadataFlagUsage = fmt.Sprintf("largest metadata map, in bytes of JSON, written as the cluster-wide setting when this node "+
	"first leads a cluster that never had it set (0: leave it; the default is %d; later changes: PUT /v1/operator/settings)", server.DefaultMetadataMaxBytes)

// probePolicyFlags adds --probe-allow and --probe-deny.
func probePolicyFlags(fs *pflag.FlagSet, o *nodeOptions) {
	fs.StringVar(&o.ProbeAllow, "probe-allow", "", "CIDR ranges health probes may connect to, comma-separated (default: every address); give every node the same list")
	fs.StringVar(&o.ProbeDeny, "probe-deny", healthcheck.DefaultProbeDeny, `CIDR ranges health probes never connect to, comma-separated ("none": no range); give every node the same list`)
}

// newLogger returns a text logger on w at the named level (debug, info, warn or error).
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	return newFormatLogger(w, level, logFormatText)
}

func (a *app) serverCmd() *cobra.Command {
	var (
		o         nodeOptions
		logLevel  string
		logFormat logFormat
	)
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a Roster node",
		Long: "Run a Roster node until SIGINT or SIGTERM.\n\n" +
			"A new cluster starts from the same --peers list on every node (ignored once a node has\n" +
			"state); a node can also be added later with --join pointing at any member's HTTP address.",
		Example: "  roster server --node-id n1 --data-dir /var/lib/roster \\\n" +
			"    --raft-advertise 10.0.0.1:7848 --peers n1=10.0.0.1:7848,n2=10.0.0.2:7848,n3=10.0.0.3:7848",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.NodeID == "" {
				return usagef("--node-id is required (or %s)", envName("node-id"))
			}
			if o.DataDir == "" {
				return usagef("--data-dir is required (or %s)", envName("data-dir"))
			}
			dnsAddrOptional(cmd, &o)
			if err := o.validate(); err != nil {
				return asUsage(err)
			}
			log, err := newFormatLogger(a.stderr, logLevel, logFormat)
			if err != nil {
				return asUsage(err)
			}
			return a.serve(ctxOf(cmd), o, log)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.NodeID, "node-id", "", "this node's unique, stable id (required)")
	fs.StringVar(&o.DataDir, "data-dir", "", "directory of the node's state and Raft log (required)")
	fs.StringVar(&o.HTTPAddr, "http-addr", ":8848", "address the HTTP API listens on")
	fs.StringVar(&o.RaftAddr, "raft-addr", ":7848", "address the Raft transport listens on")
	fs.StringVar(&o.HTTPAdvertise, "http-advertise", "", "HTTP address other nodes reach this one at (default derived from --http-addr/--raft-advertise)")
	fs.StringVar(&o.RaftAdvertise, "raft-advertise", "", "Raft address peers dial (default --raft-addr)")
	fs.StringVar(&o.Peers, "peers", "", "bootstrap list id=raftaddr,... (the same on every node of a new cluster)")
	fs.StringVar(&o.Join, "join", "", "HTTP address of a cluster member to ask to add this node")
	fs.BoolVar(&o.NonVoter, "non-voter", false, "with --join: join without a vote and stay so (a read replica that never counts towards the quorum or leads); without it a joined node gets a vote once caught up")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	logFormatFlag(fs, &logFormat)
	fs.IntVar(&o.MetadataMaxBytes, "metadata-max-bytes", 0, metadataFlagUsage)
	fs.Int64Var(&o.SnapshotMaxBytes, "snapshot-max-bytes", 0, fmt.Sprintf("largest snapshot archive a restore accepts, in bytes (0: %d)", int64(httpapi.DefaultSnapshotMaxBytes)))
	fs.DurationVar(&o.HeartbeatTimeout, "raft-heartbeat-timeout", 0, fmt.Sprintf("time without leader contact before a follower calls an election (0: %s); raise it on loaded or slow machines", raftnode.DefaultHeartbeatTimeout))
	fs.DurationVar(&o.ElectionTimeout, "raft-election-timeout", 0, fmt.Sprintf("time a candidate waits for votes (0: %s)", raftnode.DefaultElectionTimeout))
	fs.DurationVar(&o.LeaderLeaseTimeout, "raft-leader-lease-timeout", 0, fmt.Sprintf("time a leader keeps leading without hearing from a quorum (0: %s; at most the heartbeat timeout)", raftnode.DefaultLeaderLeaseTimeout))
	fs.DurationVar(&o.LogVerifyInterval, "raft-log-verify-interval", 0, fmt.Sprintf("how often the leader writes a log checkpoint, at which every node checks its Raft log against what the leader wrote (0: %s; negative: never)", raftnode.DefaultLogVerifyInterval))
	fs.BoolVar(&o.ACLEnabled, "acl-enabled", false, "enforce ACL tokens (every node of the cluster must agree; bootstrap with roster acl bootstrap)")
	fs.BoolVar(&o.MetricsRequireToken, "metrics-require-token", false, "with ACLs on, all of /metrics needs a token with operator: read (without it, its per-namespace and per-service series do)")
	fs.BoolVar(&o.RefuseConfusableNames, "refuse-confusable-names", false, "refuse (400) writes under service names that mix scripts (Latin with Cyrillic...) or hold fullwidth forms; without it they are accepted and logged once per name (a setting of this server: set it on every server)")
	fs.StringVar(&o.JoinToken, "join-token", "", "token (operator: write) this node presents when it joins with --join or announces its addresses, on a cluster with ACLs")
	fs.DurationVar(&o.PromoteAfter, "promote-after", 0, fmt.Sprintf("how long a server added with --join must stay caught up with the leader and in contact before it gets a vote (0: %s)", raftnode.DefaultPromoteAfter))
	fs.DurationVar(&o.StateSyncInterval, "state-sync-interval", 0, fmt.Sprintf("how often the state file is fsynced; the Raft log is fsynced on every write regardless (0: %s; negative: fsync every commit)", server.DefaultStateSyncInterval))
	fs.BoolVar(&o.CoalesceWrites, "coalesce-writes", true, "on the leader, gather the writes that arrive together into one Raft entry (one log write, one replication round, one state transaction for all); false makes every write its own entry")
	fs.BoolVar(&o.Pprof, "pprof", false, "serve Go's profiling endpoints under /debug/pprof/ on the HTTP address")
	fs.BoolVar(&o.InstanceMetricsByNamespace, "instance-metrics-by-namespace", false, "label the roster_instances gauge by namespace and health only, not by service (two series per namespace instead of two per service)")
	fs.IntVar(&o.ProbeConcurrency, "probe-concurrency", 0, fmt.Sprintf("health probes in flight at once on the leader (0: %d)", healthcheck.DefaultMaxConcurrent))
	probePolicyFlags(fs, &o)
	dnsFlags(fs, &o)
	grpcFlag(fs, &o)
	nacosPushFlags(fs, &o)
	readCacheFlag(fs, &o)
	serverTLSFlags(fs, &o)
	autopilotFlags(fs, &o.Autopilot)
	return cmd
}

// serve runs a node until ctx is done, then stops it.
func (a *app) serve(ctx context.Context, o nodeOptions, log *slog.Logger) error {
	addr, stop, err := a.startNode(o, log)
	if err != nil {
		return err
	}
	log.Info("roster started", "version", buildinfo.Get().Version, "commit", buildinfo.Get().ShortCommit(), "node", o.NodeID, "http", addr)
	<-ctx.Done()
	log.Info("roster stopping", "node", o.NodeID)
	return stop()
}

// devNodeID is the id of the node `roster dev` runs.
const devNodeID = "dev"

func (a *app) devCmd() *cobra.Command {
	var (
		o        nodeOptions
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a single-node Roster for development",
		Long: "Run one node that bootstraps itself, with its data in a fresh temporary directory\n" +
			"(removed on exit) unless --data-dir is given. Stops on SIGINT or SIGTERM.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			dnsAddrOptional(cmd, &o)
			if err := o.validate(); err != nil {
				return asUsage(err)
			}
			log, err := newLogger(a.stderr, logLevel)
			if err != nil {
				return asUsage(err)
			}
			return a.dev(ctxOf(cmd), o, log)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.DataDir, "data-dir", "", "keep the data in this directory (default a temporary one, removed on exit)")
	fs.StringVar(&o.HTTPAddr, "http-addr", ":8848", "address the HTTP API listens on")
	fs.StringVar(&o.RaftAddr, "raft-addr", "127.0.0.1:7848", "address the Raft transport listens on")
	fs.StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn or error")
	fs.BoolVar(&o.ACLEnabled, "acl-enabled", false, "enforce ACL tokens (bootstrap with roster acl bootstrap)")
	fs.IntVar(&o.MetadataMaxBytes, "metadata-max-bytes", 0, metadataFlagUsage)
	probePolicyFlags(fs, &o)
	dnsFlags(fs, &o)
	grpcFlag(fs, &o)
	readCacheFlag(fs, &o)
	return cmd
}

// dev runs a self-bootstrapping single node until ctx is done.
func (a *app) dev(ctx context.Context, o nodeOptions, log *slog.Logger) (err error) {
	o.NodeID = devNodeID
	temp := o.DataDir == ""
	if temp {
		if o.DataDir, err = os.MkdirTemp("", "roster-dev-"); err != nil {
			return err
		}
		defer func() {
			if rerr := os.RemoveAll(o.DataDir); rerr != nil && err == nil {
				err = rerr
			}
		}()
	}
	o.RaftAdvertise = dialableAddr(o.RaftAddr)
	o.Peers = o.NodeID + "=" + o.RaftAdvertise

	addr, stop, err := a.startNode(o, log)
	if err != nil {
		return err
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	httpAddr := dialableAddr(addr)
	if err := waitReady(ctx, client.New(httpAddr, client.WithTimeout(2*time.Second)), 30*time.Second); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		fmt.Fprintf(a.stderr, "roster: warning: the dev node is not ready yet: %v\n", err)
	}
	banner := devBanner(httpAddr, o.DataDir, temp)
	if o.DNSAddr != "" {
		banner += dnsBanner(dialableAddr(o.DNSAddr), o.DNSDomain)
	}
	if g := o.grpcAddr(); g != "" {
		banner += fmt.Sprintf("\nNacos 2.x clients (gRPC): %s\n", dialableAddr(g))
	}
	fmt.Fprint(a.stderr, banner+devStopHint)
	<-ctx.Done()
	fmt.Fprintln(a.stderr, "roster dev: stopping")
	return nil
}

// waitReady polls the node's readiness until it is ready, ctx is done or limit passes.
func waitReady(ctx context.Context, c *client.Client, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := c.Ready(ctx)
		if err == nil && r.Ready {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("%s", orDash(r.Reason))
			}
			return err
		case <-tick.C:
		}
	}
}

// dialableAddr turns a listen address into one a local client can dial: an empty or
// unspecified host (":8848", "0.0.0.0:8848", "[::]:8848") becomes 127.0.0.1.
func dialableAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// dnsBanner tells how to query the dev node's DNS interface.
func dnsBanner(addr, domain string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if domain == "" {
		domain = dnsapi.DefaultDomain
	}
	domain = strings.TrimSuffix(domain, ".") + "."
	return fmt.Sprintf("DNS on %s (udp and tcp); the healthy instances of service demo:\n  dig @%s -p %s demo.svc.%s SRV\n\n", addr, host, port, domain)
}

// devStopHint ends what `roster dev` prints once the node is up.
const devStopHint = "Press Ctrl-C to stop.\n"

// devBanner is what `roster dev` prints once the node is up: where it is and how to try it.
func devBanner(httpAddr, dataDir string, temp bool) string {
	base := "http://" + httpAddr
	svc := base + "/v1/namespaces/public/groups/DEFAULT_GROUP/services/demo"
	inst := svc + "/instances/127.0.0.1:9000"
	addrFlag := ""
	if httpAddr != defaultAddr {
		addrFlag = " --addr " + httpAddr
	}
	data := "data in " + dataDir
	if temp {
		data += " (removed on exit)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nRoster dev node %q is ready at %s, %s.\n\n", devNodeID, base, data)
	b.WriteString("Try it:\n")
	b.WriteString("  # register an instance (its TCP health check fails unless something listens on 127.0.0.1:9000)\n")
	fmt.Fprintf(&b, "  curl -X PUT -H 'Content-Type: application/json' -d '{\"weight\":1,\"metadata\":{\"version\":\"v1\"}}' \\\n    %s\n", inst)
	b.WriteString("  # list the service's instances\n")
	fmt.Fprintf(&b, "  curl %s/instances\n", svc)
	b.WriteString("  # deregister it\n")
	fmt.Fprintf(&b, "  curl -X DELETE %s\n\n", inst)
	fmt.Fprintf(&b, "Or with the CLI:\n  roster register demo 127.0.0.1:9000%[1]s\n  roster instances demo%[1]s\n  roster deregister demo 127.0.0.1:9000%[1]s\n\n", addrFlag)
	return b.String()
}
