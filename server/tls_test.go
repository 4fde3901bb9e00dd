package server_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos/nacospb"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// httpsGet sends GET path to the node with tlsCfg and returns the status code.
func httpsGet(ctx context.Context, nd *servertest.Node, tlsCfg *tls.Config, path string) (int, error) {
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+nd.HTTPAddr+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// withoutClientCert is the cluster's client configuration without its certificate.
func withoutClientCert(c *servertest.Cluster) *tls.Config {
	cfg := c.TLS.Client.Clone()
	cfg.Certificates = nil
	return cfg
}

// A TLS cluster serves its API over HTTPS only, to clients that trust its CA: the Go
// client works, plain HTTP to the same port is refused, a client without the CA fails
// verification, and HTTP/2 is not offered. Writes sent to followers are forwarded to the
// leader over HTTPS, and the member table records https:// addresses.
func TestTLS_ClusterServesHTTPSOnly(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts(), servertest.WithTLS())
	leader := c.MustLeader()
	ctx := ctxT(t, 30*time.Second)

	for _, f := range c.Followers() {
		idx := register(ctx, t, c.Nodes[f].Client(), "orders", "127.100.0.1", 5000+f)
		if err := c.WaitApplied(ctx, idx); err != nil {
			t.Fatal(err)
		}
	}
	for i, nd := range c.Nodes {
		res, _, err := nd.Client().Instances(ctx, ns, group, "orders", client.InstancesQuery{})
		if err != nil || len(res.Instances) != 2 {
			t.Fatalf("read on %s: %+v %v", nd.ID, res, err)
		}
		if !strings.HasPrefix(nd.Client().Addr(), "https://") || nd.URL() != "https://"+nd.HTTPAddr {
			t.Fatalf("node %d: client at %s, URL %s", i, nd.Client().Addr(), nd.URL())
		}
	}
	// Every node announces its https:// address to the leader (over HTTPS, with its
	// certificate) for the member table.
	want := map[string]string{}
	for _, nd := range c.Nodes {
		want[nd.ID] = "https://" + nd.HTTPAddr
	}
	wait.For(t, 10*time.Second, "every member's https address in the member table", func() bool {
		res, _, err := c.Nodes[leader].Client().Members(ctx, client.QueryOptions{})
		if err != nil || len(res.Members) != len(want) {
			return false
		}
		for _, m := range res.Members {
			if m.HTTPAddr != want[m.ID] {
				return false
			}
		}
		return true
	})
	l, err := c.Nodes[c.Followers()[0]].Client().Leader(ctx)
	if err != nil || l.HTTPAddr != "https://"+c.Nodes[leader].HTTPAddr {
		t.Fatalf("leader as a follower sees it: %+v %v", l, err)
	}

	nd := c.Nodes[leader]
	resp, err := http.Get("http://" + nd.HTTPAddr + "/v1/status/ready")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("plain HTTP to the HTTPS port: %s %s", resp.Status, body)
		}
	}
	if _, err := client.New(nd.HTTPAddr).Ready(ctx); err == nil {
		t.Fatal("a plain-HTTP client got an answer")
	}
	if _, err := client.New("https://" + nd.HTTPAddr).Ready(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client that does not trust the CA: %v", err)
	}

	conn, err := tls.Dial("tcp", nd.HTTPAddr, &tls.Config{RootCAs: c.TLS.Client.RootCAs, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Errorf("negotiated %q, want http/1.1 (no HTTP/2)", p)
	}
	_ = conn.Close()
	old := &tls.Config{RootCAs: c.TLS.Client.RootCAs, MinVersion: tls.VersionTLS11, MaxVersion: tls.VersionTLS11}
	if conn, err := tls.Dial("tcp", nd.HTTPAddr, old); err == nil {
		_ = conn.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	}

	// An event stream over HTTPS (taken over from net/http like over plain HTTP).
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := c.Nodes[c.Followers()[0]].Client().WatchInstances(sctx, ns, group, "orders", client.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; ev.Err != nil || len(ev.Instances.Instances) != 2 {
		t.Fatalf("first event: %+v", ev)
	}
	register(ctx, t, c.Nodes[leader].Client(), "orders", "127.100.0.9", 5009)
	if ev := <-ch; ev.Err != nil || len(ev.Instances.Instances) != 3 {
		t.Fatalf("second event: %+v", ev)
	}
}

// A node started with TLS and --join (a follower's address, without a scheme) joins the
// TLS cluster over HTTPS — the follower forwards the join to the leader with its own
// certificate — becomes a voter with an https:// address, and forwards writes.
func TestTLS_JoinOverHTTPS(t *testing.T) {
	c := servertest.New(t, 2, servertest.FastTimeouts(), servertest.WithTLS())
	leader := c.MustLeader()
	follower := c.Nodes[1-leader]
	s := startJoiner(t, "n3", follower.HTTPAddr, c.TLS.NodeConfig("n3"), nil)
	ctx := ctxT(t, 30*time.Second)
	wait.For(t, 20*time.Second, "n3 to join as a voter", func() bool {
		res, _, err := c.Nodes[leader].Client().Members(ctx, client.QueryOptions{})
		if err != nil {
			return false
		}
		for _, m := range res.Members {
			if m.ID == "n3" && m.Voter && m.HTTPAddr == "https://"+s.HTTPAddr() && m.RaftAddr == s.Node().RaftAddr() {
				return true
			}
		}
		return false
	})
	n3 := client.New(s.HTTPAddr(), client.WithTLSConfig(c.TLS.Client))
	idx := register(ctx, t, n3, "joined", "127.100.0.2", 6000)
	if err := s.Node().FSM().WaitApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
}

// startJoiner starts node id with tlsCfg and --join target, logging into logs when set;
// mods change its configuration last.
func startJoiner(t *testing.T, id, target string, tlsCfg server.TLSConfig, logs io.Writer, mods ...func(*server.Config)) *server.Server {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	if logs != nil {
		logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg := server.Config{
		NodeID:   id,
		DataDir:  t.TempDir(),
		HTTPAddr: "127.0.0.1:0",
		RaftAddr: "127.0.0.1:0",
		Join:     target,
		TLS:      tlsCfg,
		Logger:   logger,
	}
	servertest.FastTimeouts()(&cfg)
	for _, mod := range mods {
		mod(&cfg)
	}
	cfg.Health.Policy = servertest.LoopbackPolicy()
	cfg.Health.Dial = servertest.GuardDial(t, cfg.Health.Policy.Dialer())
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// syncLog is a log sink safe for concurrent writes and reads.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// A node whose certificate comes from another CA cannot join: its join requests fail at
// the TLS handshake and it never enters the member table or the Raft configuration.
// Nor can a client of the right CA without a client certificate add a server (403), or
// one with a certificate of another CA (the handshake fails).
func TestTLS_NodeOfAnotherCACannotJoin(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithTLS())
	leader := c.MustLeader()
	other := servertest.NewTLS(t)
	logs := &syncLog{}
	startJoiner(t, "n2", c.Nodes[leader].HTTPAddr, other.NodeConfig("n2"), logs)
	wait.For(t, 20*time.Second, "n2's join to fail three times", func() bool {
		return logs.count("join request failed") >= 3
	})
	if logs.count("certificate signed by unknown authority") < 3 {
		t.Fatalf("n2's joins did not fail at the TLS handshake:\n%s", logs.b.String())
	}
	ctx := ctxT(t, 30*time.Second)
	assertMembers := func(what string) {
		t.Helper()
		res, _, err := c.Nodes[leader].Client().Members(ctx, client.QueryOptions{})
		if err != nil || len(res.Members) != 1 || res.Members[0].ID != "n1" {
			t.Fatalf("%s: members %+v %v", what, res.Members, err)
		}
		if got := len(c.Nodes[leader].Server.Node().Raft().GetConfiguration().Configuration().Servers); got != 1 {
			t.Fatalf("%s: %d servers in the Raft configuration", what, got)
		}
	}
	assertMembers("after n2's joins")

	req := api.JoinRequest{ID: "n3", RaftAddr: "127.0.0.1:1", HTTPAddr: "https://127.0.0.1:2"}
	_, err := client.New(c.Nodes[leader].HTTPAddr, client.WithTLSConfig(withoutClientCert(c))).Join(ctx, req)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Code != api.CodeForbidden {
		t.Fatalf("a join without a client certificate: %v, want 403 forbidden", err)
	}
	foreign := other.Client.Clone()
	foreign.RootCAs = c.TLS.Client.RootCAs
	cert := foreign.Certificates[0]
	foreign.Certificates = nil
	foreign.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	if _, err := client.New(c.Nodes[leader].HTTPAddr, client.WithTLSConfig(foreign)).Join(ctx, req); err == nil || errors.As(err, &ae) {
		t.Fatalf("a join under a certificate of another CA: %v, want a failed handshake", err)
	}
	assertMembers("after the refused joins")
	// The control: the cluster's own certificate may add a server.
	if _, err := c.Nodes[leader].Client().Join(ctx, api.JoinRequest{ID: "n3", RaftAddr: "127.0.0.1:1", HTTPAddr: "https://127.0.0.1:2", NonVoter: true}); err != nil {
		t.Fatalf("a join with the cluster's client certificate: %v", err)
	}
}

// tlsStream is a Raft stream layer dialing with a given TLS configuration.
type tlsStream struct {
	ln  net.Listener
	cfg *tls.Config
}

func (s tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), s.cfg)
}
func (s tlsStream) Accept() (net.Conn, error) { return s.ln.Accept() }
func (s tlsStream) Close() error              { return s.ln.Close() }
func (s tlsStream) Addr() net.Addr            { return s.ln.Addr() }

// No Raft RPC sent under a certificate of another CA reaches the leader: the handshake
// fails, and the leader keeps its term and its office.
func TestTLS_RaftRefusesAnotherCA(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts(), servertest.WithTLS())
	leader := c.MustLeader()
	node := c.Nodes[leader].Server.Node()
	term := node.Raft().CurrentTerm()
	other := servertest.NewTLS(t)
	cert := other.Client.Certificates[0]
	foreign := &tls.Config{
		MinVersion: tls.VersionTLS13,
		// It accepts any server and insists on sending its certificate.
		InsecureSkipVerify:   true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	trans := raft.NewNetworkTransport(tlsStream{ln: ln, cfg: foreign}, 1, 2*time.Second, io.Discard)
	defer func() { trans.CloseStreams(); _ = trans.Close() }()
	var resp raft.AppendEntriesResponse
	err = trans.AppendEntries(raft.ServerID(c.Nodes[leader].ID), raft.ServerAddress(c.Nodes[leader].RaftAddr), &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte(ln.Addr().String())},
		Term:      term + 100,
	}, &resp)
	if err == nil || !strings.Contains(err.Error(), "unknown certificate authority") {
		t.Fatalf("AppendEntries under another CA: %v (%+v), want a refused handshake", err, resp)
	}
	if got := node.Raft().CurrentTerm(); got != term || !node.IsLeader() {
		t.Fatalf("the leader's term went from %d to %d (leader: %v)", term, got, node.IsLeader())
	}
}

// With --tls-verify-incoming the HTTPS API and the Nacos gRPC API refuse clients
// without a certificate of the CA, and serve those with one.
func TestTLS_VerifyIncoming(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithTLSVerifyIncoming(), servertest.WithGRPC())
	leader := c.MustLeader()
	nd := c.Nodes[leader]
	ctx := ctxT(t, 30*time.Second)
	if _, err := httpsGet(ctx, nd, withoutClientCert(c), "/v1/status/ready"); err == nil {
		t.Fatal("HTTPS without a client certificate was served")
	}
	if code, err := httpsGet(ctx, nd, c.TLS.Client, "/v1/status/ready"); err != nil || code != http.StatusOK {
		t.Fatalf("HTTPS with a client certificate: %d %v", code, err)
	}
	if r, err := nd.Client().Ready(ctx); err != nil || !r.Ready {
		t.Fatalf("the Go client with the cluster's client certificate: %+v %v", r, err)
	}

	serverCheck := func(creds credentials.TransportCredentials) error {
		cc, err := grpc.NewClient(nd.GRPCAddr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer cc.Close()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		out, err := nacospb.Call(cctx, cc, &nacospb.Payload{
			Metadata: &nacospb.Metadata{Type: "ServerCheckRequest"},
			Body:     &anypb.Any{Value: []byte(`{"module":"internal","headers":{}}`)},
		})
		if err != nil {
			return err
		}
		var m struct {
			ResultCode int `json:"resultCode"`
		}
		if err := json.Unmarshal(out.GetBody().GetValue(), &m); err != nil || m.ResultCode != 200 || out.GetMetadata().GetType() != "ServerCheckResponse" {
			return errors.New("unexpected answer " + string(out.GetBody().GetValue()))
		}
		return nil
	}
	if err := serverCheck(credentials.NewTLS(c.TLS.Client)); err != nil {
		t.Fatalf("gRPC with a client certificate: %v", err)
	}
	if err := serverCheck(credentials.NewTLS(withoutClientCert(c))); err == nil {
		t.Fatal("gRPC without a client certificate was served")
	}
	if err := serverCheck(insecure.NewCredentials()); err == nil {
		t.Fatal("plain-text gRPC was served")
	}
}

// Without --tls-verify-incoming a client certificate is optional on both APIs, and the
// Nacos gRPC API is served over TLS only.
func TestTLS_ClientCertificateOptional(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithTLS(), servertest.WithGRPC())
	nd := c.Nodes[c.MustLeader()]
	ctx := ctxT(t, 30*time.Second)
	if code, err := httpsGet(ctx, nd, withoutClientCert(c), "/v1/status/ready"); err != nil || code != http.StatusOK {
		t.Fatalf("HTTPS without a client certificate: %d %v", code, err)
	}
	call := func(creds credentials.TransportCredentials) error {
		cc, err := grpc.NewClient(nd.GRPCAddr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer cc.Close()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err = nacospb.Call(cctx, cc, &nacospb.Payload{
			Metadata: &nacospb.Metadata{Type: "ServerCheckRequest"},
			Body:     &anypb.Any{Value: []byte(`{"module":"internal","headers":{}}`)},
		})
		return err
	}
	if err := call(credentials.NewTLS(withoutClientCert(c))); err != nil {
		t.Fatalf("gRPC over TLS without a client certificate: %v", err)
	}
	if err := call(insecure.NewCredentials()); err == nil {
		t.Fatal("plain-text gRPC was served")
	}
}

// Nodes compare their state checks over HTTPS: a node whose state diverges is found out
// by the two others' hashes, fetched with the cluster's certificates.
func TestTLS_StateChecksOverHTTPS(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts(), servertest.WithTLS(), stateCheckEvery(300*time.Millisecond))
	leader := c.MustLeader()
	ctx := ctxT(t, 30*time.Second)
	idx, err := c.Nodes[leader].Client().RegisterInstance(ctx, "", "", "orders", "127.100.0.1", 8080, api.InstanceRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	victim := c.Followers()[0]
	tamper(t, c.Nodes[victim].Server.Store(), model.InstanceRef{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", IP: "127.100.0.1", Port: 8080})
	notReadyFor(t, c, victim)
}

// A partial TLS configuration, or one whose files do not fit together, is refused
// before the node opens anything.
func TestTLS_ConfigRefusals(t *testing.T) {
	x := servertest.NewTLS(t)
	other := servertest.NewTLS(t)
	good := x.NodeConfig("n1")
	foreign := other.NodeConfig("n1")
	for _, tc := range []struct {
		tls  server.TLSConfig
		want string
	}{
		{server.TLSConfig{CertFile: good.CertFile}, "tls-key-file and tls-ca-file missing"},
		{server.TLSConfig{CertFile: good.CertFile, KeyFile: good.KeyFile}, "tls-ca-file missing"},
		{server.TLSConfig{VerifyIncoming: true}, "tls-verify-incoming: needs"},
		{server.TLSConfig{CertFile: foreign.CertFile, KeyFile: foreign.KeyFile, CAFile: good.CAFile}, "does not verify against the CA"},
	} {
		dir := t.TempDir()
		_, err := server.New(server.Config{NodeID: "n1", DataDir: dir, HTTPAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", TLS: tc.tls})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.tls, err, tc.want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%+v: the data directory was written to", tc.tls)
		}
	}
	for _, tc := range []struct {
		advertise, join, want string
	}{
		{"http://127.0.0.1:1", "", "HTTPS only"},
		{"", "http://127.0.0.1:1", "over HTTPS"},
	} {
		_, err := server.New(server.Config{NodeID: "n1", DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
			HTTPAdvertise: tc.advertise, Join: tc.join, TLS: good})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("advertise %q join %q: %v, want %q", tc.advertise, tc.join, err, tc.want)
		}
	}
}

// Every HTTPS response carries Strict-Transport-Security — native API, Nacos HTTP API,
// console, errors — and no plain-HTTP response does. The HTTPS and gRPC listeners
// refuse a TLS 1.2 client that offers only CBC suites and accept an AEAD one.
func TestTLS_StrictTransportSecurityAndCipherSuites(t *testing.T) {
	paths := []string{
		"/v1/status/leader",
		"/v1/namespaces/public/groups/DEFAULT_GROUP/services/orders/instances",
		"/v1/no-such-route",
		"/nacos/v1/ns/instance/list?serviceName=orders",
		"/nacos/v2/ns/instance/list?serviceName=orders",
		"/ui/",
	}
	get := func(t *testing.T, hc *http.Client, url string) http.Header {
		t.Helper()
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.Header
	}
	secure := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithTLS(), servertest.WithGRPC())
	nd := secure.Nodes[secure.MustLeader()]
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: secure.TLS.Client}}
	defer hc.CloseIdleConnections()
	for _, p := range paths {
		if got := get(t, hc, "https://"+nd.HTTPAddr+p).Get("Strict-Transport-Security"); got != "max-age=31536000" {
			t.Errorf("HTTPS %s: Strict-Transport-Security %q, want max-age=31536000", p, got)
		}
	}
	for name, addr := range map[string]string{"https": nd.HTTPAddr, "grpc": nd.GRPCAddr} {
		cbc := secure.TLS.Client.Clone()
		cbc.ServerName, cbc.MaxVersion = "localhost", tls.VersionTLS12
		cbc.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, tls.TLS_RSA_WITH_AES_128_CBC_SHA}
		if conn, err := tls.Dial("tcp", addr, cbc); err == nil {
			_ = conn.Close()
			t.Errorf("%s: a TLS 1.2 handshake offering only CBC suites succeeded", name)
		}
		aead := cbc.Clone()
		aead.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}
		if name == "grpc" {
			aead.NextProtos = []string{"h2"}
		}
		conn, err := tls.Dial("tcp", addr, aead)
		if err != nil {
			t.Errorf("%s: a TLS 1.2 handshake offering AEAD suites: %v", name, err)
			continue
		}
		_ = conn.Close()
	}

	plain := servertest.New(t, 1, servertest.FastTimeouts())
	pn := plain.Nodes[plain.MustLeader()]
	for _, p := range paths {
		if got := get(t, http.DefaultClient, "http://"+pn.HTTPAddr+p).Get("Strict-Transport-Security"); got != "" {
			t.Errorf("plain HTTP %s: Strict-Transport-Security %q, want none", p, got)
		}
	}
}
