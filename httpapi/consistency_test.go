package httpapi

import (
	"net/http"
	"testing"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
)

// TestRead_ConsistencyModes checks each mode runs its check (linearizable →
// ConsistentRead, leader → LeaderRead, stale → none) and reports itself in the header.
func TestRead_ConsistencyModes(t *testing.T) {
	for _, tc := range []struct {
		mode                  string
		consistent, leaderful int
	}{
		{"", 1, 0},
		{"linearizable", 1, 0},
		{"leader", 0, 1},
		{"stale", 0, 0},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			node := newLeaderNode("n1")
			h := mustNew(t, testConfig(node, seededReader()))
			path := svcPath
			if tc.mode != "" {
				path += "?consistency=" + tc.mode
			}
			resp := do(t, h, http.MethodGet, path, nil)
			if resp.Code != http.StatusOK {
				t.Fatalf("%d %s", resp.Code, resp.Body)
			}
			want := tc.mode
			if want == "" {
				want = api.ConsistencyLinearizable
			}
			if got := resp.Header.Get(api.HeaderConsistency); got != want {
				t.Fatalf("consistency header %q", got)
			}
			node.mu.Lock()
			defer node.mu.Unlock()
			if node.consistentReads != tc.consistent || node.leaderReads != tc.leaderful {
				t.Fatalf("consistent %d leader %d", node.consistentReads, node.leaderReads)
			}
		})
	}
}

// TestRead_StaleOnFollowerIsLocal checks a stale read on a follower is served there,
// with the leader headers, and never forwarded.
func TestRead_StaleOnFollowerIsLocal(t *testing.T) {
	// The leader's address is unreachable: forwarding would fail.
	leader := model.Member{ID: "n1", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:1"}
	node := newFollowerNode("n2", &leader)
	h := mustNew(t, testConfig(node, seededReader()))
	resp := do(t, h, http.MethodGet, svcPath+"/instances?consistency=stale", nil)
	if resp.Code != http.StatusOK {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
	for hdr, want := range map[string]string{
		api.HeaderServedBy: "n2", api.HeaderKnownLeader: "true", api.HeaderLastContact: "42",
		api.HeaderConsistency: "stale", api.HeaderIndex: "10",
	} {
		if got := resp.Header.Get(hdr); got != want {
			t.Fatalf("%s = %q, want %q", hdr, got, want)
		}
	}
}

// TestRead_ConsistencyCheckErrors checks a failing consistency check answers its error.
func TestRead_ConsistencyCheckErrors(t *testing.T) {
	node := newLeaderNode("n1")
	node.readErr = raftnode.ErrTimeout
	rd := seededReader()
	h := mustNew(t, testConfig(node, rd))
	resp := do(t, h, http.MethodGet, svcPath, nil)
	if resp.Code != http.StatusGatewayTimeout || resp.errorBody(t).Code != api.CodeTimeout {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
	if rd.readCount() != 0 {
		t.Fatal("the store was read although the consistency check failed")
	}
}
