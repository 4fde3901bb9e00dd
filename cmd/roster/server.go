package main

import (
	"fmt"
	"log/slog"

	"github.com/rosterhq/roster/healthcheck"
	"github.com/rosterhq/roster/httpapi"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/server"
)

// startNode builds the server configuration from o, opens the node and starts serving.
// It returns the address the API listens on and a function that stops the node.
func startNode(o nodeOptions, log *slog.Logger) (string, func() error, error) {
	cfg, err := serverConfig(o, log)
	if err != nil {
		return "", nil, err
	}
	srv, err := server.New(cfg)
	if err != nil {
		return "", nil, err
	}
	if err := srv.Start(); err != nil {
		_ = srv.Close()
		return "", nil, err
	}
	return srv.HTTPAddr(), srv.Close, nil
}

// serverConfig is the server configuration of the node options o.
func serverConfig(o nodeOptions, log *slog.Logger) (server.Config, error) {
	var peers []raftnode.Peer
	if o.Peers != "" {
		p, err := raftnode.ParsePeers(o.Peers)
		if err != nil {
			return server.Config{}, fmt.Errorf("--peers: %w", err)
		}
		peers = p
	}
	policy, err := o.probePolicy()
	if err != nil {
		return server.Config{}, err
	}
	return server.Config{
		NodeID:           o.NodeID,
		DataDir:          o.DataDir,
		HTTPAddr:         o.HTTPAddr,
		HTTPAdvertise:    o.HTTPAdvertise,
		RaftAddr:         o.RaftAddr,
		RaftAdvertise:    o.RaftAdvertise,
		Peers:            peers,
		Join:             o.Join,
		NonVoter:         o.NonVoter,
		TLS:              o.tlsConfig(),
		MetadataMaxBytes: o.MetadataMaxBytes,
		Logger:           log,
		Snapshot:         httpapi.SnapshotConfig{MaxBytes: o.SnapshotMaxBytes},
		Raft: server.RaftTuning{
			HeartbeatTimeout:   o.HeartbeatTimeout,
			ElectionTimeout:    o.ElectionTimeout,
			LeaderLeaseTimeout: o.LeaderLeaseTimeout,
			PromoteAfter:       o.PromoteAfter,
			MaxTrailingLogs:    o.Autopilot.MaxTrailingLogs,
			LogVerifyInterval:  o.LogVerifyInterval,
		},
		Autopilot:                  o.Autopilot.config(),
		StateSyncInterval:          o.StateSyncInterval,
		Pprof:                      o.Pprof,
		NoWriteCoalescing:          !o.CoalesceWrites,
		InstanceMetricsByNamespace: o.InstanceMetricsByNamespace,
		Health:                     healthcheck.Config{MaxConcurrent: o.ProbeConcurrency, Policy: policy},
		DNS:                        o.dnsConfig(),
		DNSOptional:                o.DNSAddrOptional,
		GRPCAddr:                   o.grpcAddr(),
		GRPCMaxConnsPerIP:          o.GRPCMaxConnsPerIP,
		GRPCMaxConns:               o.GRPCMaxConns,
		NacosPush:                  o.NacosPush,
		RefuseConfusableNames:      o.RefuseConfusableNames,
		GRPCMaxUntrusted:           o.GRPCMaxUntrusted,
		GRPCMaxUntrustedPerIP:      o.GRPCMaxUntrustedPerIP,
		GRPCAcceptRatePerIP:        o.GRPCAcceptRatePerIP,
		TrustedOrigins:             o.TrustedOrigins,
		MaxWatchers:                o.MaxWatchers,
		ReadCacheSize:              o.readCacheSize(),
		ACLEnabled:                 o.ACLEnabled,
		MetricsRequireToken:        o.MetricsRequireToken,
		JoinToken:                  o.JoinToken,
	}, nil
}
