package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// scrape reads every series of a node's GET /metrics, keyed as the exposition writes
// it: `name` or `name{label="value",...}`.
func scrape(ctx context.Context, t *testing.T, nd *servertest.Node) map[string]float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, nd.URL()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics on %s: %s", nd.ID, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("%s: metric line %q: %v", nd.ID, line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The Raft, state machine and snapshot series are on every node's /metrics and move
// with the cluster's writes: the indexes rise, the apply histograms count, exactly one
// node reports itself leader, the leader reports its contact with each follower, and
// snapshots (a Raft snapshot, a backup save, a restore) are timed.
func TestMetrics_RaftSeriesMoveWithWrites(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts(), func(cfg *server.Config) {
		// Raft snapshots soon after a few writes, so that op="persist" is seen.
		cfg.Raft.SnapshotThreshold = 8
		cfg.Raft.SnapshotInterval = 50 * time.Millisecond
	})
	c.MustLeader()
	ctx := ctxT(t, 90*time.Second)
	before := make([]map[string]float64, len(c.Nodes))
	for i, nd := range c.Nodes {
		before[i] = scrape(ctx, t, nd)
	}
	sumAll := func(series string, ms []map[string]float64) float64 {
		var s float64
		for _, m := range ms {
			s += m[series]
		}
		return s
	}

	const writes = 12
	var last uint64
	for i := range writes {
		// Through every node in turn: followers forward to the leader.
		cl := c.Nodes[i%len(c.Nodes)].Client()
		idx, err := cl.UpsertService(ctx, ns, group, fmt.Sprintf("metrics-%d", i), api.ServiceRequest{})
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		last = max(last, idx)
	}
	if err := c.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}

	var after []map[string]float64
	scrapeAll := func() {
		after = after[:0]
		for _, nd := range c.Nodes {
			after = append(after, scrape(ctx, t, nd))
		}
	}
	wait.For(t, 20*time.Second, "every node to report the writes applied and committed", func() bool {
		scrapeAll()
		for i, m := range after {
			if m["roster_raft_applied_index"] < float64(last) || m["roster_raft_commit_index"] < float64(last) ||
				m["roster_raft_last_index"] < float64(last) {
				return false
			}
			// Every node applies every batch: its batch histogram counts them.
			if m["roster_raft_apply_batch_size_sum"]-before[i]["roster_raft_apply_batch_size_sum"] < writes ||
				m["roster_raft_apply_batch_size_count"] <= before[i]["roster_raft_apply_batch_size_count"] ||
				m["roster_fsm_apply_duration_seconds_count"] <= before[i]["roster_fsm_apply_duration_seconds_count"] {
				return false
			}
		}
		return true
	})
	for i, m := range after {
		id := c.Nodes[i].ID
		if m["roster_raft_applied_index"] <= before[i]["roster_raft_applied_index"] ||
			m["roster_raft_commit_index"] <= before[i]["roster_raft_commit_index"] {
			t.Errorf("%s: indexes did not rise: applied %v → %v, commit %v → %v", id,
				before[i]["roster_raft_applied_index"], m["roster_raft_applied_index"],
				before[i]["roster_raft_commit_index"], m["roster_raft_commit_index"])
		}
		if m["roster_raft_term"] < 1 {
			t.Errorf("%s: roster_raft_term = %v", id, m["roster_raft_term"])
		}
		if m["roster_raft_leader_changes_total"] < 1 {
			t.Errorf("%s: roster_raft_leader_changes_total = %v, want ≥ 1", id, m["roster_raft_leader_changes_total"])
		}
		if m["roster_store_size_bytes"] <= 0 || m["roster_raft_log_size_bytes"] <= 0 {
			t.Errorf("%s: roster_store_size_bytes = %v, roster_raft_log_size_bytes = %v", id,
				m["roster_store_size_bytes"], m["roster_raft_log_size_bytes"])
		}
	}
	// The leader (or leaders, should one have stepped down meanwhile) timed every write.
	if got := sumAll("roster_raft_apply_duration_seconds_count", after) - sumAll("roster_raft_apply_duration_seconds_count", before); got < writes {
		t.Errorf("roster_raft_apply_duration_seconds_count rose by %v over the nodes, want ≥ %d", got, writes)
	}

	// Exactly one node reports itself leader; it reports its last contact with each
	// follower, and the followers theirs with it.
	wait.For(t, 20*time.Second, "exactly one node with roster_raft_is_leader 1 and consistent contact series", func() bool {
		scrapeAll()
		leaders := 0
		for _, m := range after {
			leaders += int(m["roster_raft_is_leader"])
		}
		if leaders != 1 {
			return false
		}
		for i, m := range after {
			contact, ok := m["roster_raft_last_contact_seconds"]
			if !ok {
				return false
			}
			peers := 0
			for _, nd := range c.Nodes {
				v, ok := m[fmt.Sprintf("roster_raft_peer_last_contact_seconds{peer=%q}", nd.ID)]
				if ok {
					peers++
					if nd.ID == c.Nodes[i].ID || v < 0 {
						return false
					}
				}
			}
			if m["roster_raft_is_leader"] == 1 {
				if contact != 0 || peers != len(c.Nodes)-1 {
					return false
				}
			} else if contact < 0 || peers != 0 {
				return false
			}
		}
		return true
	})

	// Snapshots: Raft's own (threshold 8 entries), a backup save and a restore of it.
	wait.For(t, 20*time.Second, "a Raft snapshot persisted on every node", func() bool {
		scrapeAll()
		for _, m := range after {
			if m[`roster_snapshot_duration_seconds_count{op="persist"}`] < 1 {
				return false
			}
		}
		return true
	})
	var archive bytes.Buffer
	if _, err := c.Nodes[0].Client().SaveSnapshot(ctx, &archive, false); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the backup save timed", func() bool {
		scrapeAll()
		return sumAll(`roster_snapshot_duration_seconds_count{op="save"}`, after) >= 1
	})
	if err := c.Nodes[0].Client().RestoreSnapshot(ctx, &archive); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 20*time.Second, "the restore timed on every node", func() bool {
		scrapeAll()
		for _, m := range after {
			if m[`roster_snapshot_duration_seconds_count{op="restore"}`] < 1 {
				return false
			}
		}
		return true
	})
}
