package raftnode

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/tlsutil"
)

// testCA is a CA directory whose node certificates are made on demand.
type testCA struct {
	t   testing.TB
	dir string
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	dir := t.TempDir()
	if _, _, err := tlsutil.CreateCA(tlsutil.CAOptions{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	return &testCA{t: t, dir: dir}
}

// certs returns the loaded certificate of node, created on first use.
func (ca *testCA) certs(node string) *tlsutil.NodeCerts {
	ca.t.Helper()
	cert, key := tlsutil.NodeFiles(ca.dir, node)
	if _, err := os.Stat(cert); err != nil {
		if _, _, err := tlsutil.CreateCert(tlsutil.CertOptions{Dir: ca.dir, Node: node}); err != nil {
			ca.t.Fatal(err)
		}
	}
	caFile, _ := tlsutil.CAFiles(ca.dir)
	nc, err := tlsutil.LoadNode(tlsutil.Files{CertFile: cert, KeyFile: key, CAFile: caFile})
	if err != nil {
		ca.t.Fatal(err)
	}
	return nc
}

// transportTLS is node's Raft TLS configuration under ca.
func (ca *testCA) transportTLS(node string) *TransportTLS {
	nc := ca.certs(node)
	return &TransportTLS{Server: nc.RaftServer(), Client: nc.RaftClient()}
}

// newTLSCluster starts a 3-node cluster whose Raft traffic is mutual TLS under ca.
func newTLSCluster(t *testing.T, ca *testCA) *testCluster {
	t.Helper()
	c := newTestCluster(t, 3, true)
	c.mod = func(cfg *Config) { cfg.TLS = ca.transportTLS(cfg.NodeID) }
	for _, tn := range c.nodes {
		c.start(tn, "")
	}
	return c
}

// outsider is a Raft transport of a process that is not a member: it dials through
// stream, a stream layer with its own listener.
func outsider(t *testing.T, tlsCfg *TransportTLS) *raft.NetworkTransport {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	trans := raft.NewNetworkTransport(&tcpStreamLayer{ln: ln, tls: tlsCfg}, 1, 2*time.Second, io.Discard)
	t.Cleanup(func() { trans.CloseStreams(); _ = trans.Close() })
	return trans
}

// heartbeatFrom is an AppendEntries of a term above the leader's: a member would make
// the leader step down and take that term.
func heartbeatFrom(term uint64) *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte("127.0.0.1:1")},
		Term:      term + 100,
	}
}

// A cluster whose Raft traffic is mutual TLS elects a leader and replicates.
func TestTLS_ClusterReplicatesOverMutualTLS(t *testing.T) {
	c := newTLSCluster(t, newTestCA(t))
	leader := c.waitForLeader(15 * time.Second)
	idx := mustApplyNamespace(t, leader.N(), "over-tls")
	for _, tn := range c.nodes {
		if err := tn.N().FSM().WaitApplied(ctxTimeout(t, 10*time.Second), idx); err != nil {
			t.Fatalf("%s: %v", tn.id, err)
		}
		if !hasNamespace(tn, "over-tls") {
			t.Fatalf("%s lacks the namespace", tn.id)
		}
	}
}

// No Raft RPC of a process without a certificate of the cluster's CA is accepted: sent
// in plain text, under a certificate of another CA (offered or forced on the server),
// or without a client certificate, an AppendEntries of a higher term fails at the
// handshake and the leader keeps its term and its office. The same RPC sent under a
// certificate of the cluster's CA is accepted and makes the leader step down, which is
// what the refusals prevent.
func TestTLS_NoRPCAcceptedWithoutTheClusterCA(t *testing.T) {
	ca := newTestCA(t)
	other := newTestCA(t)
	c := newTLSCluster(t, ca)
	leader := c.waitForLeader(15 * time.Second)
	term := leader.N().Raft().CurrentTerm()
	addr := raft.ServerAddress(leader.raftAddr)
	id := raft.ServerID(leader.id)

	foreign := other.transportTLS("n1")
	forced := other.transportTLS("n1")
	forced.Client = forced.Client.Clone()
	forcedCert := forced.Client.Certificates[0]
	forced.Client.Certificates = nil
	forced.Client.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &forcedCert, nil }
	forced.Client.VerifyConnection = nil // it even accepts the leader's certificate
	anonymous := ca.transportTLS("n9")
	anonymous.Client = anonymous.Client.Clone()
	anonymous.Client.Certificates = nil

	for _, tc := range []struct {
		name string
		tls  *TransportTLS
	}{
		{"plain text", nil},
		{"certificate of another CA", foreign},
		{"certificate of another CA, forced", forced},
		{"no client certificate", anonymous},
	} {
		var resp raft.AppendEntriesResponse
		err := outsider(t, tc.tls).AppendEntries(id, addr, heartbeatFrom(term), &resp)
		if err == nil {
			t.Fatalf("%s: the leader answered an AppendEntries: %+v", tc.name, resp)
		}
		t.Logf("%s: %v", tc.name, err)
		var vote raft.RequestVoteResponse
		if err := outsider(t, tc.tls).RequestVote(id, addr, &raft.RequestVoteRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte("127.0.0.1:1")},
			Term:      term + 100, LastLogIndex: 1 << 40, LastLogTerm: term + 99, LeadershipTransfer: true,
		}, &vote); err == nil {
			t.Fatalf("%s: the leader answered a RequestVote: %+v", tc.name, vote)
		}
		if got := leader.N().Raft().CurrentTerm(); got != term || !leader.N().IsLeader() {
			t.Fatalf("%s: the leader's term went from %d to %d (leader: %v)", tc.name, term, got, leader.N().IsLeader())
		}
	}

	// The control: a certificate of the cluster's CA gets the same RPC accepted.
	var resp raft.AppendEntriesResponse
	if err := outsider(t, ca.transportTLS("n9")).AppendEntries(id, addr, heartbeatFrom(term), &resp); err != nil {
		t.Fatalf("AppendEntries under the cluster's CA: %v", err)
	}
	wait.For(t, 5*time.Second, "the leader to take the higher term", func() bool {
		return leader.N().Raft().CurrentTerm() >= term+100
	})
}

// TestTLS_RefusedHandshakesAreCountedNotLoggedAsErrors: connections to the Raft port
// that fail the TLS handshake (plain text here) are counted, logged at debug level at
// most once per handshakeLogEvery, and never as ERROR lines: anyone who reaches the port
// could otherwise fill the node's log.
func TestTLS_RefusedHandshakesAreCountedNotLoggedAsErrors(t *testing.T) {
	ca := newTestCA(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	count := prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"})
	stream := &tcpStreamLayer{ln: ln, tls: ca.transportTLS("n1"), refused: newHandshakeFailures(count, log)}
	trans := raft.NewNetworkTransportWithLogger(stream, 1, 2*time.Second, newHCLogger(log, "raft-net"))
	t.Cleanup(func() { _ = trans.Close() })

	const conns = 50
	for range conns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		// Not a TLS ClientHello: the handshake fails at once.
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, c) // the server closes the connection
		_ = c.Close()
	}
	wait.For(t, 5*time.Second, "every refused handshake to be counted", func() bool {
		return testutil.ToFloat64(count) == conns
	})
	out := logs.String()
	if strings.Contains(out, "level=ERROR") || strings.Contains(out, "level=WARN") {
		t.Fatalf("refused handshakes logged as errors:\n%s", out)
	}
	if n := strings.Count(out, "TLS handshake refused"); n < 1 || n > 2 {
		t.Fatalf("%d debug lines for %d refused handshakes within a few seconds, want 1 (rate-limited):\n%s", n, conns, out)
	}
}
