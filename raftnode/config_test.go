package raftnode

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/store"
)

func validConfig() Config {
	return Config{
		NodeID:        "n1",
		DataDir:       "/tmp/data",
		RaftBind:      "127.0.0.1:7848",
		HTTPAdvertise: "127.0.0.1:8848",
	}
}

// nopJoiner accepts every join request without sending it.
func nopJoiner(context.Context, string, JoinRequest) error { return nil }

func TestConfig_Validate(t *testing.T) {
	peers := []Peer{{ID: "n1", Addr: "127.0.0.1:7848"}, {ID: "n2", Addr: "127.0.0.1:7849"}}
	tests := []struct {
		name  string
		mod   func(*Config)
		field string // "" = valid
	}{
		{"minimal", func(*Config) {}, ""},
		{"empty node id", func(c *Config) { c.NodeID = "" }, "NodeID"},
		{"node id with space", func(c *Config) { c.NodeID = "n 1" }, "NodeID"},
		{"node id with comma", func(c *Config) { c.NodeID = "n,1" }, "NodeID"},
		{"empty data dir", func(c *Config) { c.DataDir = "" }, "DataDir"},
		{"empty raft bind", func(c *Config) { c.RaftBind = "" }, "RaftBind"},
		{"raft bind without port", func(c *Config) { c.RaftBind = "127.0.0.1" }, "RaftBind"},
		{"raft bind bad port", func(c *Config) { c.RaftBind = "127.0.0.1:99999" }, "RaftBind"},
		{"wildcard bind needs advertise", func(c *Config) { c.RaftBind = "0.0.0.0:7848" }, "RaftAdvertise"},
		{"wildcard bind with advertise", func(c *Config) { c.RaftBind = ":7848"; c.RaftAdvertise = "127.100.0.1:7848" }, ""},
		{"port 0 bind", func(c *Config) { c.RaftBind = "127.0.0.1:0" }, ""},
		{"wildcard port 0 bind needs advertise", func(c *Config) { c.RaftBind = ":0" }, "RaftAdvertise"},
		{"wildcard advertise", func(c *Config) { c.RaftAdvertise = "0.0.0.0:7848" }, "RaftAdvertise"},
		{"advertise port 0", func(c *Config) { c.RaftAdvertise = "127.100.0.1:0" }, "RaftAdvertise"},
		{"empty http advertise", func(c *Config) { c.HTTPAdvertise = "" }, "HTTPAdvertise"},
		{"wildcard http advertise", func(c *Config) { c.HTTPAdvertise = ":8848" }, "HTTPAdvertise"},
		{"https advertise", func(c *Config) { c.HTTPAdvertise = "https://127.100.0.1:8848" }, ""},
		{"https advertise without port", func(c *Config) { c.HTTPAdvertise = "https://127.100.0.1" }, "HTTPAdvertise"},
		{"http advertise with a path", func(c *Config) { c.HTTPAdvertise = "https://127.100.0.1:8848/x" }, "HTTPAdvertise"},
		{"tls without a client side", func(c *Config) { c.TLS = &TransportTLS{Server: &tls.Config{}} }, "TLS"},
		{"peers with this node", func(c *Config) { c.Peers = peers }, ""},
		{"peers without this node", func(c *Config) { c.Peers = peers[1:] }, "Peers"},
		{"peers list this node elsewhere", func(c *Config) {
			c.Peers = []Peer{{ID: "n1", Addr: "127.0.0.1:7000"}, peers[1]}
		}, "Peers"},
		{"peers with port-0 bind", func(c *Config) { c.RaftBind = "127.0.0.1:0"; c.Peers = peers }, "Peers"},
		{"duplicate peer id", func(c *Config) {
			c.Peers = []Peer{peers[0], {ID: "n1", Addr: "127.0.0.1:7000"}}
		}, "peers[1]"},
		{"duplicate peer addr", func(c *Config) {
			c.Peers = []Peer{peers[0], {ID: "n2", Addr: "127.0.0.1:7848"}}
		}, "peers[1]"},
		{"bad peer addr", func(c *Config) { c.Peers = []Peer{peers[0], {ID: "n2", Addr: "nohost"}} }, "peers[1]"},
		{"peers and join", func(c *Config) { c.Peers = peers; c.Join = "127.0.0.1:8849" }, "Join"},
		{"join", func(c *Config) { c.Join = "127.0.0.1:8849"; c.Joiner = nopJoiner }, ""},
		{"join url", func(c *Config) { c.Join = "http://127.100.0.2:8848/"; c.Joiner = nopJoiner }, ""},
		{"join url with a path prefix", func(c *Config) { c.Join = "https://127.100.0.2:8848/roster/"; c.Joiner = nopJoiner }, ""},
		{"join without a joiner", func(c *Config) { c.Join = "127.0.0.1:8849" }, "Joiner"},
		{"bad join", func(c *Config) { c.Join = "127.100.0.2"; c.Joiner = nopJoiner }, "Join"},
		{"join url without port", func(c *Config) { c.Join = "http://127.100.0.2/"; c.Joiner = nopJoiner }, "Join"},
		{"negative heartbeat", func(c *Config) { c.HeartbeatTimeout = -time.Second }, "HeartbeatTimeout"},
		{"election below heartbeat", func(c *Config) {
			c.HeartbeatTimeout = time.Second
			c.ElectionTimeout = 500 * time.Millisecond
		}, "ElectionTimeout"},
		{"lease above heartbeat", func(c *Config) { c.LeaderLeaseTimeout = 2 * time.Second }, "LeaderLeaseTimeout"},
		{"commit timeout too low", func(c *Config) { c.CommitTimeout = time.Microsecond }, "CommitTimeout"},
		{"negative retain", func(c *Config) { c.SnapshotRetain = -1 }, "SnapshotRetain"},
		{"negative apply timeout", func(c *Config) { c.ApplyTimeout = -1 }, "ApplyTimeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			tc.mod(&cfg)
			err := cfg.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want a *ConfigError", err)
			}
			if ce.Field != tc.field {
				t.Fatalf("error names field %q (%v), want %q", ce.Field, err, tc.field)
			}
		})
	}
}

// Validate fills every default, keeps explicit values, and derives the advertise
// address and dependent timeouts.
func TestConfig_ValidateDefaults(t *testing.T) {
	cfg := validConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if cfg.RaftAdvertise != cfg.RaftBind {
		t.Fatalf("RaftAdvertise = %q, want RaftBind %q", cfg.RaftAdvertise, cfg.RaftBind)
	}
	if cfg.HeartbeatTimeout != DefaultHeartbeatTimeout || cfg.ElectionTimeout != DefaultElectionTimeout ||
		cfg.LeaderLeaseTimeout != DefaultLeaderLeaseTimeout || cfg.CommitTimeout != DefaultCommitTimeout {
		t.Fatalf("timings not defaulted: %+v", cfg)
	}
	if cfg.ApplyTimeout != DefaultApplyTimeout || cfg.SnapshotRetain != 3 || cfg.SnapshotThreshold == 0 ||
		cfg.SnapshotInterval == 0 || cfg.TrailingLogs == 0 || cfg.Logger == nil {
		t.Fatalf("defaults not filled: %+v", cfg)
	}

	slow := validConfig()
	slow.HeartbeatTimeout = 2 * time.Second
	if err := slow.Validate(); err != nil {
		t.Fatalf("Validate with a slow heartbeat: %v", err)
	}
	if slow.ElectionTimeout != 2*time.Second || slow.LeaderLeaseTimeout != DefaultLeaderLeaseTimeout {
		t.Fatalf("derived election %s lease %s", slow.ElectionTimeout, slow.LeaderLeaseTimeout)
	}
	fast := validConfig()
	fast.HeartbeatTimeout = 100 * time.Millisecond
	if err := fast.Validate(); err != nil {
		t.Fatalf("Validate with a fast heartbeat: %v", err)
	}
	if fast.LeaderLeaseTimeout != 100*time.Millisecond {
		t.Fatalf("lease %s, want capped at the heartbeat timeout", fast.LeaderLeaseTimeout)
	}

	rc := cfg.raftConfig(nil)
	if !rc.NoSnapshotRestoreOnStart || rc.MaxAppendEntries != maxAppendEntries || rc.BatchApplyCh {
		t.Fatalf("raft config: NoSnapshotRestoreOnStart %v MaxAppendEntries %d BatchApplyCh %v",
			rc.NoSnapshotRestoreOnStart, rc.MaxAppendEntries, rc.BatchApplyCh)
	}
}

func TestParsePeers(t *testing.T) {
	tests := []struct {
		in      string
		want    []Peer
		errPart string // a substring of the error naming the bad entry
	}{
		{"", nil, ""},
		{"  ", nil, ""},
		{"n1=127.0.0.1:7848", []Peer{{"n1", "127.0.0.1:7848"}}, ""},
		{"n1=127.100.0.1:7848, n2=127.100.0.2:7848 ,n3=[::1]:7848",
			[]Peer{{"n1", "127.100.0.1:7848"}, {"n2", "127.100.0.2:7848"}, {"n3", "[::1]:7848"}}, ""},
		{"n1=roster1:7848,n2=roster2:7848", []Peer{{"n1", "roster1:7848"}, {"n2", "roster2:7848"}}, ""},
		{"n1", nil, `"n1"`},
		{"n1=127.0.0.1:7848,,n2=127.0.0.1:7849", nil, "peers[1]"},
		{"=127.0.0.1:7848", nil, `"=127.0.0.1:7848"`},
		{"n1=", nil, `"n1="`},
		{"n1=127.0.0.1", nil, `n1=127.0.0.1`},
		{"n1=127.0.0.1:0", nil, `n1=127.0.0.1:0`},
		{"n1=0.0.0.0:7848", nil, `n1=0.0.0.0:7848`},
		{"n1=127.0.0.1:7848,n1=127.0.0.1:7849", nil, "duplicate id"},
		{"n1=127.0.0.1:7848,n2=127.0.0.1:7848", nil, "duplicate address"},
		{"n 1=127.0.0.1:7848", nil, `n 1=127.0.0.1:7848`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParsePeers(tc.in)
			if tc.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errPart) || !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("ParsePeers(%q) = %v, %v; want an error mentioning %s", tc.in, got, err, tc.errPart)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParsePeers(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
	peers := []Peer{{"a", "h1:1"}, {"b", "h2:2"}}
	var parts []string
	for _, p := range peers {
		parts = append(parts, p.String())
	}
	back, err := ParsePeers(strings.Join(parts, ","))
	if err != nil || !reflect.DeepEqual(back, peers) {
		t.Fatalf("round trip = %v, %v", back, err)
	}
}

// A RaftListener fixes RaftBind (which must agree) and the default advertise address.
func TestConfig_ValidateRaftListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := validConfig()
	cfg.RaftBind = ""
	cfg.RaftListener = ln
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if cfg.RaftBind != ln.Addr().String() || cfg.RaftAdvertise != ln.Addr().String() {
		t.Fatalf("RaftBind %q RaftAdvertise %q, want %s", cfg.RaftBind, cfg.RaftAdvertise, ln.Addr())
	}
	other := validConfig()
	other.RaftListener = ln
	var ce *ConfigError
	if err := other.Validate(); !errors.As(err, &ce) || ce.Field != "RaftBind" {
		t.Fatalf("Validate with a listener on another address: %v, want a RaftBind error", err)
	}
}

// A node bound to port 0 advertises the address it actually bound; a node that fails
// validation closes the listener it was given.
func TestNew_ListenerHandling(t *testing.T) {
	c := newTestCluster(t, 1, false)
	tn := c.nodes[0]
	_ = tn.raftLn.Close()
	tn.raftLn = nil
	st, err := store.Open(filepath.Join(tn.dir, "state.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := New(Config{NodeID: "solo", DataDir: tn.dir, RaftBind: "127.0.0.1:0", HTTPAdvertise: tn.httpAddr, Logger: c.logger}, fsm.New(st, nil))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	addr := n.RaftAddr()
	if err := n.Shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if _, port, err := splitHostPort(addr); err != nil || port == 0 {
		t.Fatalf("RaftAddr() = %q, want the bound address", addr)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{DataDir: tn.dir, RaftListener: ln, HTTPAdvertise: tn.httpAddr}, fsm.New(st, nil)); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New without NodeID: %v, want ErrInvalidConfig", err)
	}
	if _, err := ln.Accept(); err == nil || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("listener still open after a failed New: %v", err)
	}
}
