package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/registry"
)

// recordingServer serves h over HTTP and records the requests it received.
type recordingServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
	// before runs before h for every request.
	before func(r *http.Request)
}

func newRecordingServer(t *testing.T, h http.Handler) *recordingServer {
	t.Helper()
	rs := &recordingServer{}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		rs.reqs = append(rs.reqs, r.Clone(r.Context()))
		before := rs.before
		rs.mu.Unlock()
		if before != nil {
			before(r)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(rs.Close)
	return rs
}

func (rs *recordingServer) requests() []*http.Request {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]*http.Request(nil), rs.reqs...)
}

func (rs *recordingServer) member(id string) *model.Member {
	return &model.Member{ID: id, RaftAddr: "127.0.0.1:7848", HTTPAddr: rs.Listener.Addr().String()}
}

// newLeaderServer runs a leader's API over HTTP.
func newLeaderServer(t *testing.T, id string) (*recordingServer, *fakeNode) {
	t.Helper()
	node := newLeaderNode(id)
	rs := newRecordingServer(t, mustNew(t, testConfig(node, seededReader())))
	node.setLeader(true, rs.member(id))
	return rs, node
}

// TestForward_FollowerProxiesWritesToTheLeader checks a follower forwards a write with
// its body and the X-Roster-Forwarded-By header, and passes the leader's answer back.
func TestForward_FollowerProxiesWritesToTheLeader(t *testing.T) {
	leaderSrv, leader := newLeaderServer(t, "n1")
	follower := newFollowerNode("n2", leaderSrv.member("n1"))
	h := newRecordingServer(t, mustNew(t, testConfig(follower, seededReader())))

	resp := doHTTP(t, http.MethodPut, h.URL+instPath+"?x=1", `{"weight":7}`, nil)
	if resp.Code != http.StatusOK {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
	if got := resp.Header.Values(api.HeaderServedBy); len(got) != 1 || got[0] != "n1" {
		t.Fatalf("served by %v", got)
	}
	if got := resp.Header.Values(api.HeaderIndex); len(got) != 1 || got[0] != "101" {
		t.Fatalf("index %v", got)
	}
	reqs := leaderSrv.requests()
	if len(reqs) != 1 {
		t.Fatalf("leader got %d requests", len(reqs))
	}
	if got := reqs[0].Header.Get(api.HeaderForwardedBy); got != "n2" {
		t.Fatalf("forwarded by %q", got)
	}
	if reqs[0].URL.RawQuery != "x=1" || reqs[0].URL.Path != instPath {
		t.Fatalf("forwarded URL %v", reqs[0].URL)
	}
	calls := leader.calls()
	if len(calls) != 1 || len(follower.calls()) != 0 {
		t.Fatalf("leader applied %d, follower %d", len(calls), len(follower.calls()))
	}
	if w := registeredWeight(t, calls[0]); w != 7 {
		t.Fatalf("forwarded weight %v", w)
	}
}

// TestForward_ReadsThatNeedTheLeader checks linearizable and leader reads are forwarded
// from a follower, stale ones are not.
func TestForward_ReadsThatNeedTheLeader(t *testing.T) {
	leaderSrv, leader := newLeaderServer(t, "n1")
	follower := newFollowerNode("n2", leaderSrv.member("n1"))
	h := mustNew(t, testConfig(follower, seededReader()))
	for _, q := range []string{"", "?consistency=linearizable", "?consistency=leader", "?consistency=stale"} {
		resp := do(t, h, http.MethodGet, svcPath+"/instances"+q, nil)
		want := "n1"
		if q == "?consistency=stale" {
			want = "n2"
		}
		if resp.Code != http.StatusOK || resp.Header.Get(api.HeaderServedBy) != want {
			t.Fatalf("%q: %d served by %q", q, resp.Code, resp.Header.Get(api.HeaderServedBy))
		}
	}
	if n := len(leaderSrv.requests()); n != 3 {
		t.Fatalf("leader got %d requests, want 3", n)
	}
	leader.mu.Lock()
	consistent, leaderful := leader.consistentReads, leader.leaderReads
	leader.mu.Unlock()
	if consistent != 2 || leaderful != 1 {
		t.Fatalf("leader checks: consistent %d leader %d", consistent, leaderful)
	}
	// The members list too.
	if resp := do(t, h, http.MethodGet, "/v1/cluster/members", nil); resp.Header.Get(api.HeaderServedBy) != "n1" {
		t.Fatalf("members served by %q: %d %s", resp.Header.Get(api.HeaderServedBy), resp.Code, resp.Body)
	}
}

// TestForward_LoopGuard checks a forwarded request that reaches a non-leader is 503,
// never forwarded again.
func TestForward_LoopGuard(t *testing.T) {
	leaderSrv, _ := newLeaderServer(t, "n1")
	follower := newFollowerNode("n2", leaderSrv.member("n1"))
	h := mustNew(t, testConfig(follower, seededReader()))
	req := newRequest(t, http.MethodPut, instPath, `{}`)
	req.Header.Set(api.HeaderForwardedBy, "n3")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get(api.HeaderNotLeader) != "true" {
		t.Fatalf("%d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	resp := response{Code: rec.Code, Body: rec.Body.Bytes()}
	if e := resp.errorBody(t); e.Code != api.CodeNotLeader || !strings.Contains(e.Message, "n3") {
		t.Fatalf("%+v", e)
	}
	if n := len(leaderSrv.requests()); n != 0 {
		t.Fatalf("forwarded %d times", n)
	}
}

// TestForward_NoLeaderIs503WithinTheHold checks a follower without a leader answers
// 503 no_leader once the hold timeout passes, for writes and leader reads alike.
func TestForward_NoLeaderIs503WithinTheHold(t *testing.T) {
	node := newFollowerNode("n2", nil)
	cfg := testConfig(node, seededReader())
	cfg.LeaderHold = 200 * time.Millisecond
	h := mustNew(t, cfg)
	for _, c := range []struct{ method, path string }{{http.MethodPut, instPath}, {http.MethodGet, svcPath}} {
		start := time.Now()
		resp := do(t, h, c.method, c.path, nil)
		elapsed := time.Since(start)
		if resp.Code != http.StatusServiceUnavailable || resp.errorBody(t).Code != api.CodeNoLeader {
			t.Fatalf("%s: %d %s", c.method, resp.Code, resp.Body)
		}
		if elapsed < cfg.LeaderHold || elapsed > cfg.LeaderHold+2*time.Second {
			t.Fatalf("%s answered after %s, hold %s", c.method, elapsed, cfg.LeaderHold)
		}
	}
	// The hold never exceeds the request timeout.
	cfg.RequestTimeout = 50 * time.Millisecond
	cfg.LeaderHold = time.Hour
	cfg.Metrics = nil
	h = mustNew(t, cfg)
	start := time.Now()
	if resp := do(t, h, http.MethodPut, instPath, nil); resp.Code != http.StatusServiceUnavailable {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("hold not bounded by the request timeout: %s", elapsed)
	}
}

// pollingNode wraps a fakeNode and runs onPoll at every Leader call.
type pollingNode struct {
	*fakeNode
	mu     sync.Mutex
	polls  int
	onPoll func(n int)
}

func (p *pollingNode) Leader() (model.Member, bool) {
	p.mu.Lock()
	p.polls++
	n, fn := p.polls, p.onPoll
	p.mu.Unlock()
	if fn != nil {
		fn(n)
	}
	return p.fakeNode.Leader()
}

// TestForward_WaitsForALeaderToAppear checks a request held without a leader is
// forwarded as soon as one becomes known, or served here if this node becomes leader.
func TestForward_WaitsForALeaderToAppear(t *testing.T) {
	leaderSrv, leader := newLeaderServer(t, "n1")
	node := &pollingNode{fakeNode: newFollowerNode("n2", nil)}
	node.onPoll = func(n int) {
		if n == 3 {
			node.setLeader(false, leaderSrv.member("n1"))
		}
	}
	cfg := testConfig(node, seededReader())
	cfg.LeaderHold = 5 * time.Second
	h := mustNew(t, cfg)
	resp := do(t, h, http.MethodPut, instPath, `{}`)
	if resp.Code != http.StatusOK || resp.Header.Get(api.HeaderServedBy) != "n1" || len(leader.calls()) != 1 {
		t.Fatalf("%d %v %s", resp.Code, resp.Header, resp.Body)
	}

	self := &pollingNode{fakeNode: newFollowerNode("n3", nil)}
	self.onPoll = func(n int) {
		if n == 3 {
			self.setLeader(true, &model.Member{ID: "n3"})
		}
	}
	cfg = testConfig(self, seededReader())
	cfg.LeaderHold = 5 * time.Second
	h = mustNew(t, cfg)
	resp = do(t, h, http.MethodPut, instPath, `{}`)
	if resp.Code != http.StatusOK || resp.Header.Get(api.HeaderServedBy) != "n3" || len(self.calls()) != 1 {
		t.Fatalf("%d %v %s", resp.Code, resp.Header, resp.Body)
	}
}

// TestForward_RetriesOnceWhenTheLeaderMoved checks a follower whose forward reaches a
// node that is no longer leader forwards once more to the new leader, and only once.
func TestForward_RetriesOnceWhenTheLeaderMoved(t *testing.T) {
	newSrv, newLeader := newLeaderServer(t, "n3")
	follower := newFollowerNode("n2", nil)
	// The old leader n1 lost leadership and knows n3 now.
	oldNode := newFollowerNode("n1", newSrv.member("n3"))
	oldSrv := newRecordingServer(t, mustNew(t, testConfig(oldNode, seededReader())))
	// The follower still believes n1 leads until n1 refuses.
	follower.setLeader(false, oldSrv.member("n1"))
	oldSrv.before = func(*http.Request) { follower.setLeader(false, newSrv.member("n3")) }

	h := mustNew(t, testConfig(follower, seededReader()))
	resp := do(t, h, http.MethodPut, instPath, `{"weight":3}`)
	if resp.Code != http.StatusOK || resp.Header.Get(api.HeaderServedBy) != "n3" {
		t.Fatalf("%d %v %s", resp.Code, resp.Header, resp.Body)
	}
	if len(oldSrv.requests()) != 1 || len(newSrv.requests()) != 1 || len(newLeader.calls()) != 1 {
		t.Fatalf("old %d new %d applied %d", len(oldSrv.requests()), len(newSrv.requests()), len(newLeader.calls()))
	}
	if w := registeredWeight(t, newLeader.calls()[0]); w != 3 {
		t.Fatalf("retried body lost: weight %v", w)
	}

	// Two refusals in a row: the second answer reaches the client; no third attempt.
	refuser := newFollowerNode("n4", nil)
	refuserSrv := newRecordingServer(t, mustNew(t, testConfig(refuser, seededReader())))
	other := newFollowerNode("n5", nil)
	otherSrv := newRecordingServer(t, mustNew(t, testConfig(other, seededReader())))
	follower.setLeader(false, refuserSrv.member("n4"))
	refuserSrv.before = func(*http.Request) { follower.setLeader(false, otherSrv.member("n5")) }
	otherSrv.before = func(*http.Request) { follower.setLeader(false, refuserSrv.member("n4")) }
	resp = do(t, h, http.MethodPut, instPath, `{}`)
	if resp.Code != http.StatusServiceUnavailable {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
	if len(refuserSrv.requests()) != 1 || len(otherSrv.requests()) != 1 {
		t.Fatalf("attempts: %d + %d", len(refuserSrv.requests()), len(otherSrv.requests()))
	}
}

// TestForward_LeadershipLostDuringApply checks that when Apply on this node says it is
// not the leader any more, the request is sent on to the new leader.
func TestForward_LeadershipLostDuringApply(t *testing.T) {
	newSrv, newLeader := newLeaderServer(t, "n3")
	node := newLeaderNode("n1")
	node.applyFn = func(fsmType, any) (uint64, error) {
		node.setLeader(false, newSrv.member("n3"))
		return 0, raftnode.ErrNotLeader
	}
	h := mustNew(t, testConfig(node, seededReader()))
	resp := do(t, h, http.MethodPut, instPath, `{"weight":4}`)
	if resp.Code != http.StatusOK || resp.Header.Get(api.HeaderServedBy) != "n3" {
		t.Fatalf("%d %v %s", resp.Code, resp.Header, resp.Body)
	}
	if len(newLeader.calls()) != 1 || newSrv.requests()[0].Header.Get(api.HeaderForwardedBy) != "n1" {
		t.Fatalf("new leader applied %d", len(newLeader.calls()))
	}
	if w := registeredWeight(t, newLeader.calls()[0]); w != 4 {
		t.Fatalf("body lost: weight %v", w)
	}

	// A forwarded request refused the same way is answered 503 not_leader (for the
	// forwarding follower to retry), never forwarded a second hop.
	node.setLeader(true, &model.Member{ID: "n1"})
	req := newRequest(t, http.MethodPut, instPath, `{}`)
	req.Header.Set(api.HeaderForwardedBy, "n2")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get(api.HeaderNotLeader) != "true" {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if len(newSrv.requests()) != 1 {
		t.Fatal("a forwarded request was forwarded again")
	}
}

// TestForward_DeadLeaderIs503 checks a follower whose leader does not answer replies
// 503 promptly instead of hanging, and says no_leader: the request never reached a
// leader, so it was not applied and may be retried anywhere.
func TestForward_DeadLeaderIs503(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	follower := newFollowerNode("n2", &model.Member{ID: "n1", HTTPAddr: addr})
	h := mustNew(t, testConfig(follower, seededReader()))
	start := time.Now()
	resp := do(t, h, http.MethodPut, instPath, `{}`)
	if e := resp.errorBody(t); resp.Code != http.StatusServiceUnavailable || e.Code != api.CodeNoLeader ||
		!strings.Contains(e.Message, "not applied") {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
	if resp.Header.Get(api.HeaderServedBy) != "n2" {
		t.Fatalf("served by %q", resp.Header.Get(api.HeaderServedBy))
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("took %s", elapsed)
	}
}

// TestForward_DeadLeaderWaitsForTheNextLeader checks that a write whose leader cannot
// be dialed (killed: this node may still take it for the leader until an election ends)
// is not refused at once: it is sent to the next leader once one is known, whether that
// is already the case at the first retry or only after several attempts.
func TestForward_DeadLeaderWaitsForTheNextLeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		// knownAt is the poll of the leader from which n3 is known (the first picks the
		// dead n1).
		knownAt int
	}{
		{"another leader known at the retry", 2},
		{"the dead leader known for several attempts", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newSrv, _ := newLeaderServer(t, "n3")
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			dead := ln.Addr().String()
			ln.Close()
			node := &pollingNode{fakeNode: newFollowerNode("n2", &model.Member{ID: "n1", HTTPAddr: dead})}
			node.onPoll = func(n int) {
				if n == tc.knownAt {
					node.setLeader(false, newSrv.member("n3"))
				}
			}
			h := mustNew(t, testConfig(node, seededReader()))
			resp := do(t, h, http.MethodPut, instPath, `{}`)
			if resp.Code != http.StatusOK || resp.Header.Get(api.HeaderServedBy) != "n3" {
				t.Fatalf("%d %s", resp.Code, resp.Body)
			}
			if n := len(newSrv.requests()); n != 1 {
				t.Fatalf("the new leader got %d requests, want 1", n)
			}
		})
	}
}

// TestForward_LeaderWithoutHTTPAddress checks a leader whose HTTP address is unknown
// is a 503 no_leader after the hold.
func TestForward_LeaderWithoutHTTPAddress(t *testing.T) {
	h := mustNew(t, testConfig(newFollowerNode("n2", &model.Member{ID: "n1"}), seededReader()))
	resp := do(t, h, http.MethodPut, instPath, `{}`)
	if resp.Code != http.StatusServiceUnavailable || !strings.Contains(resp.errorBody(t).Message, "HTTP address") {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
}

// TestForward_BodyLimitsCheckedBeforeForwarding checks a follower refuses an oversized
// or non-JSON body itself.
func TestForward_BodyLimitsCheckedBeforeForwarding(t *testing.T) {
	leaderSrv, _ := newLeaderServer(t, "n1")
	h := mustNew(t, testConfig(newFollowerNode("n2", leaderSrv.member("n1")), seededReader()))
	resp := do(t, h, http.MethodPut, instPath, strings.Repeat(" ", DefaultMaxBodyBytes+1))
	if resp.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d", resp.Code)
	}
	if n := len(leaderSrv.requests()); n != 0 {
		t.Fatalf("forwarded %d", n)
	}
}

// TestForward_FollowerRefusesWhatTheLeaderLacks checks that during a rolling upgrade a
// follower refuses, instead of forwarding, a write of a command type its older leader
// lacks (settings, tokens, conditional writes): 503 upgrade_in_progress naming the
// leader, nothing sent to it; the writes the leader applies are still forwarded.
func TestForward_FollowerRefusesWhatTheLeaderLacks(t *testing.T) {
	leaderSrv, leader := newLeaderServer(t, "n1")
	follower := newFollowerNode("n2", leaderSrv.member("n1"))
	follower.leaderNewest = uint8(fsm.LegacyNewestType)
	h := mustNew(t, testConfig(follower, seededReader()))
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPut, "/v1/operator/settings", `{"metadataMaxBytes":2048}`},
		{http.MethodPost, "/v1/acl/tokens", `{"description":"x"}`},
		{http.MethodDelete, "/v1/acl/tokens/0123", ``},
		{http.MethodPatch, instPath + "?cas=3", `{"weight":2}`},
	} {
		resp := do(t, h, tc.method, tc.path, tc.body)
		var body api.ErrorBody
		if err := json.Unmarshal(resp.Body, &body); err != nil || resp.Code != http.StatusServiceUnavailable ||
			body.Error.Code != api.CodeUpgradeInProgress || len(body.Error.Nodes) != 1 || body.Error.Nodes[0].ID != "n1" {
			t.Errorf("%s %s on a follower of an older leader: %d %s", tc.method, tc.path, resp.Code, resp.Body)
		}
	}
	if n := len(leaderSrv.requests()); n != 0 {
		t.Fatalf("the leader got %d requests", n)
	}
	// A write every release applies goes through.
	resp := do(t, h, http.MethodPut, instPath, `{"weight":7}`)
	if resp.Code != http.StatusOK || len(leader.calls()) != 1 {
		t.Fatalf("register on a follower of an older leader: %d %s", resp.Code, resp.Body)
	}
}

// legacyPeer is the peer RPC of a cluster whose leader n1 runs a release without it.
type legacyPeer struct{}

func (legacyPeer) Leader() (string, bool) { return "n1", true }
func (legacyPeer) Forward(context.Context, string, registry.Forwarded) (uint64, error) {
	return 0, fmt.Errorf("%w: n1", registry.ErrLegacyLeader)
}
func (legacyPeer) ReadIndex(context.Context, string, registry.Consistency) (uint64, error) {
	return 0, fmt.Errorf("%w: n1", registry.ErrLegacyLeader)
}

// followerReads gives a fake node the reads a registry with a peer needs.
type followerReads struct{ *pollingNode }

func (followerReads) ReadIndex(context.Context, bool) (uint64, error) {
	return 0, registry.ErrNotLeader
}
func (followerReads) CatchUp(context.Context, uint64) error { return nil }

// A write the registry could not hand to a leader of an older release goes over HTTP,
// and when this node wins the election while it waits for a leader to send it to, it is
// served here (not held until the leader hold ends).
func TestForward_LegacyHandOverServedHereOnceThisNodeLeads(t *testing.T) {
	self := &pollingNode{fakeNode: newFollowerNode("n3", nil)}
	self.onPoll = func(n int) {
		if n == 3 {
			self.setLeader(true, &model.Member{ID: "n3"})
		}
	}
	node := followerReads{self}
	cfg := testConfig(node, seededReader())
	cfg.LeaderHold = 5 * time.Second
	reg, err := registry.New(registry.Config{Settings: seededReader(), Raft: node, Peer: legacyPeer{}, NodeID: "n3",
		RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Registry = reg
	h := mustNew(t, cfg)
	start := time.Now()
	resp := do(t, h, http.MethodPut, instPath, `{}`)
	if resp.Code != http.StatusOK || resp.Header.Get(api.HeaderServedBy) != "n3" || len(self.calls()) != 1 {
		t.Fatalf("%d %v %s after %v", resp.Code, resp.Header, resp.Body, time.Since(start))
	}
}
