package server_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// withCleanup turns dead-server cleanup on with a short threshold.
func withCleanup(threshold time.Duration) servertest.Option {
	return func(c *server.Config) {
		c.Autopilot.CleanupDeadServers = true
		c.Autopilot.DeadServerThreshold = threshold
	}
}

// autopilotHealth asks node i for the autopilot health (the node forwards it to the
// leader); ok is false when the request failed.
func autopilotHealth(ctx context.Context, c *servertest.Cluster, i int) (api.AutopilotHealth, bool) {
	h, err := c.Nodes[i].Client().AutopilotHealth(ctx)
	return h, err == nil
}

// serverOf returns the entry of id in h.
func serverOf(h api.AutopilotHealth, id string) (api.AutopilotServer, bool) {
	for _, s := range h.Servers {
		if s.ID == id {
			return s, true
		}
	}
	return api.AutopilotServer{}, false
}

// autopilotMetric reads one series of node nd's /metrics; found is false when it is not there.
func autopilotMetric(t *testing.T, nd *servertest.Node, series string) (v float64, found bool) {
	t.Helper()
	resp, err := http.Get(nd.URL() + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics on %s: %v", nd.ID, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("%s: %q", series, line)
			}
			return v, true
		}
	}
	return 0, false
}

// allHealthyVoters reports whether h lists exactly n healthy voters with the leader
// among them and every progress field filled in.
func allHealthyVoters(h api.AutopilotHealth, n int, leader string) bool {
	if !h.Healthy || h.Leader != leader || len(h.Voters) != n || len(h.Servers) != n || h.FailureTolerance != (n-1)/2 {
		return false
	}
	for _, s := range h.Servers {
		want := "voter"
		if s.ID == leader {
			want = "leader"
		}
		if !s.Healthy || !s.Voter || s.Status != want || s.Leader != (s.ID == leader) || s.LastTerm == 0 || s.LastIndex == 0 ||
			s.LastContactMillis < 0 || s.HTTPAddr == "" || s.Address == "" || s.StableSince.IsZero() || s.Reason != "" {
			return false
		}
	}
	return true
}

// GET /v1/operator/autopilot/health, asked of a follower, answers the leader's view:
// three healthy voters tolerate one failure. A stopped follower turns unhealthy with
// the reason, and the failure tolerance drops to 0, on the endpoint and on /metrics.
func TestAutopilot_HealthOfThreeVoters(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	leader := c.MustLeader()
	lid := c.Nodes[leader].ID
	ctx := ctxT(t, 60*time.Second)
	f := c.Followers()[0]
	var h api.AutopilotHealth
	wait.For(t, 15*time.Second, "three healthy voters with failure tolerance 1", func() bool {
		var ok bool
		h, ok = autopilotHealth(ctx, c, f)
		return ok && allHealthyVoters(h, 3, lid)
	})
	if h.Config.LastContactThreshold != "300ms" || h.Config.MaxTrailingLogs != raftnode.DefaultMaxTrailingLogs ||
		h.Config.ServerStabilizationTime != "1s" || h.Config.CleanupDeadServers || h.Config.MinQuorum != raftnode.DefaultMinQuorum {
		t.Errorf("config %+v: want the heartbeat timeout as last-contact threshold and the defaults", h.Config)
	}
	// The leader's members list carries its contact with every member.
	ms, _, err := c.Nodes[leader].Client().Members(ctx, client.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms.Members {
		if m.LastContactMillis < 0 {
			t.Errorf("member %s: lastContactMillis %d on the leader, want its last contact", m.ID, m.LastContactMillis)
		}
	}

	stopped := c.Followers()[0]
	sid := c.Nodes[stopped].ID
	c.Stop(stopped)
	wait.For(t, 15*time.Second, sid+" unhealthy and failure tolerance 0", func() bool {
		h, ok := autopilotHealth(ctx, c, c.Leader())
		if !ok || h.Healthy || h.FailureTolerance != 0 || len(h.Voters) != 3 {
			return false
		}
		s, found := serverOf(h, sid)
		return found && !s.Healthy && s.Voter && strings.Contains(s.Reason, "no contact for")
	})
	wait.For(t, 15*time.Second, "the leader's metrics to show failure tolerance 0", func() bool {
		tol, tolFound := autopilotMetric(t, c.Nodes[leader], "roster_autopilot_failure_tolerance")
		healthy, healthyFound := autopilotMetric(t, c.Nodes[leader], "roster_autopilot_healthy")
		return tolFound && tol == 0 && healthyFound && healthy == 0
	})
	for _, i := range c.Followers() {
		if _, found := autopilotMetric(t, c.Nodes[i], "roster_autopilot_failure_tolerance"); found {
			t.Errorf("follower %s exports the failure tolerance; only the leader should", c.Nodes[i].ID)
		}
	}
}

// With dead-server cleanup on, a voter of four that stays stopped past the threshold
// is removed (3 voters remain, the minimum quorum) and counted; once back with its old
// data directory it is not added again.
func TestAutopilot_CleanupRemovesDeadVoter(t *testing.T) {
	c := servertest.New(t, 4, servertest.FastTimeouts(), withCleanup(time.Second))
	leader := c.MustLeader()
	lid := c.Nodes[leader].ID
	ctx := ctxT(t, 90*time.Second)
	wait.For(t, 15*time.Second, "four healthy voters", func() bool {
		h, ok := autopilotHealth(ctx, c, leader)
		return ok && allHealthyVoters(h, 4, lid)
	})
	victim := c.Followers()[0]
	vid := c.Nodes[victim].ID
	c.Stop(victim)
	wait.For(t, 30*time.Second, vid+" removed from the configuration and the member table", func() bool {
		ms, _, err := c.Nodes[leader].Client().Members(ctx, client.QueryOptions{})
		if err != nil || len(ms.Members) != 3 {
			return false
		}
		for _, m := range ms.Members {
			if m.ID == vid {
				return false
			}
		}
		return true
	})
	if c.Leader() != leader {
		t.Fatalf("leadership moved during the removal")
	}
	wait.For(t, 5*time.Second, "the removal counted", func() bool {
		v, _ := autopilotMetric(t, c.Nodes[leader], "roster_autopilot_dead_servers_removed_total")
		return v == 1
	})
	wait.For(t, 15*time.Second, "three healthy voters after the removal", func() bool {
		h, ok := autopilotHealth(ctx, c, leader)
		return ok && allHealthyVoters(h, 3, lid)
	})
	register(ctx, t, c.Nodes[leader].Client(), "after-cleanup", "127.100.0.7", 80)

	// Back with its data it either still sees itself as a voter of four and asks for
	// votes, which the others refuse, or — when the leader's last replication to it
	// reached it after the restart — it learns it was removed and stays idle. Either way
	// it cannot announce itself (it knows no leader, or is not in its configuration),
	// and nothing adds it back.
	c.Start(victim)
	back := c.Nodes[victim].Server.Node()
	campaigned := false
	wait.For(t, 15*time.Second, vid+" to campaign, or to learn of its removal, after its restart", func() bool {
		if back.Raft().Stats()["state"] == "Candidate" {
			campaigned = true
			return true
		}
		f := back.Raft().GetConfiguration()
		if f.Error() != nil {
			return false
		}
		for _, s := range f.Configuration().Servers {
			if string(s.ID) == vid {
				return false
			}
		}
		return true
	})
	t.Logf("%s after its restart: campaigned %v (else it learned of its removal)", vid, campaigned)
	h, ok := autopilotHealth(ctx, c, leader)
	if _, found := serverOf(h, vid); !ok || found || len(h.Servers) != 3 {
		t.Fatalf("after %s came back: %+v", vid, h)
	}
	if c.Leader() != leader {
		t.Fatalf("the removed server's return moved leadership")
	}
}

// With three voters and the default minimum quorum of 3, a stopped follower is never
// removed: well past the threshold the leader reports it dead and kept, with the
// reason, and counts it; the configuration keeps three voters.
func TestAutopilot_CleanupKeepsMinimumQuorum(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts(), withCleanup(time.Second))
	leader := c.MustLeader()
	lid := c.Nodes[leader].ID
	ctx := ctxT(t, 60*time.Second)
	wait.For(t, 15*time.Second, "three healthy voters", func() bool {
		h, ok := autopilotHealth(ctx, c, leader)
		return ok && allHealthyVoters(h, 3, lid)
	})
	victim := c.Followers()[0]
	vid := c.Nodes[victim].ID
	c.Stop(victim)
	var h api.AutopilotHealth
	wait.For(t, 30*time.Second, "the leader to judge "+vid+" dead and keep it", func() bool {
		var ok bool
		h, ok = autopilotHealth(ctx, c, leader)
		s, found := serverOf(h, vid)
		return ok && found && strings.Contains(s.Reason, "not removed: removing it would leave 2 voters, fewer than the minimum quorum of 3")
	})
	wait.For(t, 5*time.Second, "the kept server counted", func() bool {
		v, _ := autopilotMetric(t, c.Nodes[leader], "roster_autopilot_dead_servers_kept_total")
		return v >= 1
	})
	ms, _, err := c.Nodes[leader].Client().Members(ctx, client.QueryOptions{})
	if err != nil || len(ms.Members) != 3 || len(h.Voters) != 3 {
		t.Fatalf("members %+v (%v), voters %v: want all three", ms.Members, err, h.Voters)
	}
	if v, _ := autopilotMetric(t, c.Nodes[leader], "roster_autopilot_dead_servers_removed_total"); v != 0 {
		t.Fatalf("roster_autopilot_dead_servers_removed_total = %v, want 0", v)
	}
	register(ctx, t, c.Nodes[leader].Client(), "kept", "127.100.0.8", 80)
}

// A server that joins shows in the health view as a non-voter waiting for its vote
// ("promoting", with how long it has been healthy), and the leader promotes it once it
// has been healthy for the stabilization time.
func TestAutopilot_JoiningServerIsPromoted(t *testing.T) {
	const stabilize = 2 * time.Second
	slow := func(cfg *server.Config) { cfg.Raft.PromoteAfter = stabilize }
	c := servertest.New(t, 1, servertest.FastTimeouts(), slow)
	c.MustLeader()
	startJoiner(t, "n2", c.Nodes[0].HTTPAddr, server.TLSConfig{}, nil, slow)
	ctx := ctxT(t, 60*time.Second)
	cl := c.Nodes[0].Client()
	wait.For(t, 20*time.Second, "n2 healthy and waiting for its vote", func() bool {
		h, err := cl.AutopilotHealth(ctx)
		if err != nil {
			return false
		}
		n2, ok := serverOf(h, "n2")
		return ok && n2.Status == "promoting" && !n2.Voter && n2.Healthy &&
			strings.Contains(n2.Reason, "of the 2s before promotion") && len(h.Voters) == 1
	})
	var h api.AutopilotHealth
	wait.For(t, 20*time.Second, "n2 promoted to voter", func() bool {
		var err error
		h, err = cl.AutopilotHealth(ctx)
		n2, ok := serverOf(h, "n2")
		return err == nil && ok && n2.Status == "voter" && n2.Voter && n2.Reason == ""
	})
	if len(h.Voters) != 2 || h.Voters[0] != "n1" || h.Voters[1] != "n2" {
		t.Fatalf("voters %v, want n1 and n2", h.Voters)
	}
}
