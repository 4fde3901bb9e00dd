package httpapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/store"
)

// raftMember is one node of an in-process Raft cluster serving the API.
type raftMember struct {
	id   string
	url  string
	node *raftnode.Node
	srv  *http.Server
	api  http.Handler
	st   *store.Store
	down bool
}

// stop shuts the member down (HTTP first, so that it refuses connections).
func (m *raftMember) stop(t *testing.T) {
	t.Helper()
	if m.down {
		return
	}
	m.down = true
	if m.srv != nil {
		_ = m.srv.Close()
		m.api.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	}
	if err := m.node.Shutdown(); err != nil {
		t.Errorf("%s: shutdown: %v", m.id, err)
	}
	_ = m.st.Close()
}

// startRaftCluster starts size nodes bootstrapped from a static peer list, each
// serving the API on 127.0.0.1, and waits until every node knows the leader's HTTP
// address and is ready.
func startRaftCluster(t *testing.T, size int) []*raftMember {
	t.Helper()
	var (
		members []*raftMember
		peers   []raftnode.Peer
		lns     []net.Listener
	)
	// Reserve distinct Raft ports by holding them all, then release them for Raft.
	var raftLns []net.Listener
	for range size {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		raftLns = append(raftLns, ln)
	}
	for i := range size {
		raftAddr := raftLns[i].Addr().String()
		httpLn, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, httpLn)
		id := fmt.Sprintf("n%d", i+1)
		peers = append(peers, raftnode.Peer{ID: id, Addr: raftAddr})
		members = append(members, &raftMember{id: id, url: "http://" + httpLn.Addr().String()})
	}
	for _, ln := range raftLns {
		_ = ln.Close()
	}
	// Followers announce their HTTP addresses to the leader with the API client, as
	// the server wires it.
	joinHTTP := &http.Client{Transport: &http.Transport{Proxy: nil}}
	joiner := func(ctx context.Context, target string, req raftnode.JoinRequest) error {
		_, err := client.New(target, client.WithHTTPClient(joinHTTP)).Join(ctx, api.JoinRequest{
			ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr, NonVoter: req.NonVoter,
		})
		return err
	}
	// The data directories exist before the cleanup below is registered, so that the
	// nodes stop before their directories are removed (cleanups run last-in, first-out).
	dirs := make([]string, len(members))
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	t.Cleanup(func() {
		for i, m := range members {
			if m.srv == nil {
				_ = lns[i].Close()
			}
			if m.node != nil {
				m.stop(t)
			}
		}
		joinHTTP.CloseIdleConnections()
	})
	for i, m := range members {
		dir := dirs[i]
		st, err := store.Open(filepath.Join(dir, "state.db"), store.Options{NoSync: true, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		node, err := raftnode.New(raftnode.Config{
			NodeID: m.id, DataDir: dir, RaftBind: peers[i].Addr, HTTPAdvertise: lns[i].Addr().String(),
			Peers: peers, Joiner: joiner, Logger: discardLogger(),
		}, fsm.New(st, discardLogger()))
		if err != nil {
			_ = st.Close()
			t.Fatalf("%s: %v", m.id, err)
		}
		m.node, m.st = node, st
		h, err := New(Config{Store: st, Node: node, Logger: discardLogger(), RequestTimeout: 3 * time.Second,
			Registry: testRegistry(node, st), Metrics: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		m.api = h
		m.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go func(ln net.Listener, srv *http.Server) { _ = srv.Serve(ln) }(lns[i], m.srv)
	}
	waitUntil(t, 20*time.Second, "a ready cluster that knows the leader's HTTP address", func() bool {
		for _, m := range members {
			l, ok := m.node.Leader()
			if ready, _ := m.node.Ready(); !ready || !ok || l.HTTPAddr == "" {
				return false
			}
		}
		return true
	})
	return members
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func leaderOf(t *testing.T, members []*raftMember) (*raftMember, []*raftMember) {
	t.Helper()
	var leader *raftMember
	var followers []*raftMember
	for _, m := range members {
		switch {
		case m.down:
		case m.node.IsLeader():
			leader = m
		default:
			followers = append(followers, m)
		}
	}
	if leader == nil {
		t.Fatal("no leader")
	}
	return leader, followers
}

// TestRaftCluster_ForwardingAndReads runs the API over a real three-node Raft cluster:
// writes and linearizable reads sent to followers are served by the leader, stale
// reads by the follower, membership is listed, and after the leader dies a follower
// answers promptly (503 while there is no leader) until the new leader takes writes.
func TestRaftCluster_ForwardingAndReads(t *testing.T) {
	members := startRaftCluster(t, 3)
	leader, followers := leaderOf(t, members)
	f := followers[0]

	resp := doHTTP(t, http.MethodPut, f.url+instPath, `{"weight":2}`, nil)
	if resp.Code != http.StatusOK || resp.Header.Get(api.HeaderServedBy) != leader.id {
		t.Fatalf("write via follower: %d served by %q: %s", resp.Code, resp.Header.Get(api.HeaderServedBy), resp.Body)
	}
	var wr api.WriteResult
	resp.decode(t, &wr)

	resp = doHTTP(t, http.MethodGet, followers[1].url+instPath, nil, nil)
	if resp.Code != http.StatusOK || resp.Header.Get(api.HeaderServedBy) != leader.id ||
		resp.Header.Get(api.HeaderConsistency) != api.ConsistencyLinearizable {
		t.Fatalf("linearizable read via follower: %d %v %s", resp.Code, resp.Header, resp.Body)
	}

	// A stale read on a follower is local; it sees the write once applied there.
	waitUntil(t, 5*time.Second, "the follower to apply the write", func() bool {
		r := doHTTP(t, http.MethodGet, f.url+instPath+"?consistency=stale", nil, nil)
		return r.Code == http.StatusOK && r.Header.Get(api.HeaderServedBy) == f.id
	})
	// A blocking stale query on the follower wakes on the next write.
	done := make(chan response, 1)
	go func() {
		done <- doHTTP(t, http.MethodGet, fmt.Sprintf("%s%s/instances?consistency=stale&index=%d&wait=20s", f.url, svcPath, wr.Index), nil, nil)
	}()
	if r := doHTTP(t, http.MethodPut, f.url+svcPath+"/instances/127.100.0.2:8080", `{}`, nil); r.Code != http.StatusOK {
		t.Fatalf("second write: %d %s", r.Code, r.Body)
	}
	select {
	case r := <-done:
		var out api.InstancesResponse
		r.decode(t, &out)
		if r.Code != http.StatusOK || out.Index <= wr.Index || len(out.Instances) != 2 {
			t.Fatalf("blocking query: %d index %d, %d instances", r.Code, out.Index, len(out.Instances))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocking query did not wake on the write")
	}

	var mr api.MembersResponse
	r := doHTTP(t, http.MethodGet, f.url+"/v1/cluster/members", nil, nil)
	r.decode(t, &mr)
	if r.Code != http.StatusOK || len(mr.Members) != 3 || r.Header.Get(api.HeaderServedBy) != leader.id {
		t.Fatalf("members: %d %+v", r.Code, mr)
	}
	var l api.Leader
	doHTTP(t, http.MethodGet, f.url+"/v1/status/leader", nil, nil).decode(t, &l)
	if l.ID != leader.id || l.HTTPAddr == "" {
		t.Fatalf("status/leader %+v", l)
	}

	// The leader dies: the follower never hangs, and writes resume at the new leader.
	leader.stop(t)
	waitUntil(t, 20*time.Second, "a write to succeed at a new leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, f.url+svcPath+"/instances/127.100.0.3:8080", nil)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("write during failover: %v", err)
		}
		_ = res.Body.Close()
		if elapsed := time.Since(start); elapsed > 10*time.Second {
			t.Fatalf("write during failover took %s", elapsed)
		}
		switch res.StatusCode {
		case http.StatusOK:
			return true
		case http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return false
		default:
			t.Fatalf("write during failover: %d", res.StatusCode)
			return false
		}
	})
	newLeader, _ := leaderOf(t, members)
	if newLeader.id == leader.id {
		t.Fatal("the dead leader still leads")
	}
}
