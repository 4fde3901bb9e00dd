package raftnode

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/internal/wait"
)

// leadershipLog records, per node, the callbacks that are running.
type leadershipLog struct {
	mu      sync.Mutex
	active  map[string]int
	started map[string]int
}

func newLeadershipLog() *leadershipLog {
	return &leadershipLog{active: map[string]int{}, started: map[string]int{}}
}

// callback returns an OnLeadership callback for node id that runs until its ctx ends.
func (l *leadershipLog) callback(id string) func(context.Context) {
	return func(ctx context.Context) {
		l.mu.Lock()
		l.active[id]++
		l.started[id]++
		l.mu.Unlock()
		<-ctx.Done()
		l.mu.Lock()
		l.active[id]--
		l.mu.Unlock()
	}
}

func (l *leadershipLog) counts(id string) (active, started int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.active[id], l.started[id]
}

// OnLeadership callbacks run on the leader only, after it is ready, and their ctx is
// cancelled when leadership moves; the new leader's callbacks start.
func TestNode_OnLeadershipFollowsLeader(t *testing.T) {
	c := mustNewCluster(t, 3)
	log := newLeadershipLog()
	for _, tn := range c.nodes {
		tn.N().OnLeadership(log.callback(tn.id))
	}
	leader := c.waitForLeader(10 * time.Second)
	wait.For(t, 5*time.Second, "the leader's callback", func() bool {
		a, _ := log.counts(leader.id)
		return a == 1
	})
	for _, tn := range c.followers(leader) {
		if _, s := log.counts(tn.id); s != 0 {
			t.Fatalf("callback started on follower %s", tn.id)
		}
	}
	// The member record of the leader is committed before the callbacks start.
	if rec, ok := leader.st.Member(leader.id); !ok || rec.HTTPAddr != leader.httpAddr {
		t.Fatalf("leader's member record = %+v, %v; want HTTP address %s", rec, ok, leader.httpAddr)
	}

	target := c.followers(leader)[0]
	if err := leader.N().TransferLeadership(ctxTimeout(t, 10*time.Second), target.id); err != nil {
		t.Fatalf("transfer leadership: %v", err)
	}
	wait.For(t, 5*time.Second, "the old leader's callback to end", func() bool {
		a, _ := log.counts(leader.id)
		return a == 0
	})
	newLeader := c.waitForLeader(10 * time.Second)
	if newLeader != target {
		t.Fatalf("leader is %s after transfer to %s", newLeader.id, target.id)
	}
	wait.For(t, 5*time.Second, "the new leader's callback", func() bool {
		a, _ := log.counts(target.id)
		return a == 1
	})
	if a, s := log.counts(leader.id); a != 0 || s != 1 {
		t.Fatalf("old leader callbacks: %d active, %d started; want 0, 1", a, s)
	}
}

// A callback registered on a ready leader starts at once; Shutdown cancels it and
// waits for it.
func TestNode_OnLeadershipLateRegistrationAndShutdown(t *testing.T) {
	c := mustNewCluster(t, 1)
	leader := c.waitForLeader(10 * time.Second)
	log := newLeadershipLog()
	leader.N().OnLeadership(log.callback(leader.id))
	wait.For(t, 5*time.Second, "the late callback to start", func() bool {
		a, _ := log.counts(leader.id)
		return a == 1
	})
	c.stop(leader)
	if a, _ := log.counts(leader.id); a != 0 {
		t.Fatalf("callback still running after Shutdown returned")
	}
}

// ConsistentRead and LeaderRead succeed on the ready leader and fail with ErrNotLeader
// on followers.
func TestNode_ReadsOnLeaderAndFollowers(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	mustApplyNamespace(t, leader.N(), "x")
	if err := leader.N().ConsistentRead(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatalf("ConsistentRead on leader: %v", err)
	}
	if !hasNamespace(leader, "x") {
		t.Fatalf("leader state misses a write acknowledged before the read")
	}
	if err := leader.N().LeaderRead(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatalf("LeaderRead on leader: %v", err)
	}
	for _, tn := range c.followers(leader) {
		if err := tn.N().ConsistentRead(ctxTimeout(t, 5*time.Second)); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("ConsistentRead on follower %s: %v, want ErrNotLeader", tn.id, err)
		}
		if err := tn.N().LeaderRead(ctxTimeout(t, 5*time.Second)); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("LeaderRead on follower %s: %v, want ErrNotLeader", tn.id, err)
		}
	}
}

// A leader that lost its quorum cannot serve a consistent read: reads fail within a
// few lease timeouts rather than returning possibly stale state. (Acknowledgements
// already in flight when the followers stopped may still confirm one early read.)
func TestNode_ConsistentReadFailsWithoutQuorum(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	for _, tn := range c.followers(leader) {
		c.stop(tn)
	}
	start := time.Now()
	var err error
	wait.For(t, 5*time.Second, "ConsistentRead to fail on the isolated leader", func() bool {
		err = leader.N().ConsistentRead(ctxTimeout(t, 10*time.Second))
		return err != nil
	})
	t.Logf("ConsistentRead failed %s after quorum loss: %v", time.Since(start), err)
	if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrLeadershipLost) {
		t.Fatalf("err = %v, want ErrNotLeader or ErrLeadershipLost", err)
	}
	wait.For(t, 5*time.Second, "the isolated leader to step down", func() bool { return !leader.N().IsLeader() })
	if err := leader.N().LeaderRead(ctxTimeout(t, time.Second)); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("LeaderRead after step-down: %v, want ErrNotLeader", err)
	}
}

// ConsistentRead honours its context: on a leader without quorum, a context that ends
// first makes it return ErrTimeout wrapping the context's error.
func TestNode_ConsistentReadHonoursContext(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	for _, tn := range c.followers(leader) {
		c.stop(tn)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := leader.N().ConsistentRead(ctx)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrTimeout wrapping context.Canceled", err)
	}
}

// An isolated leader whose lease has not run out yet still passes LeaderRead, but
// ConsistentRead refuses: it needs a quorum to confirm the leadership.
func TestNode_ConsistentReadNeedsQuorumBeforeStepDown(t *testing.T) {
	c := newTestCluster(t, 3, true)
	c.mod = func(cfg *Config) {
		// A long lease keeps the isolated node leader long enough to observe.
		cfg.HeartbeatTimeout = 1500 * time.Millisecond
		cfg.ElectionTimeout = 1500 * time.Millisecond
		cfg.LeaderLeaseTimeout = 1500 * time.Millisecond
	}
	for _, tn := range c.nodes {
		c.start(tn, "")
	}
	leader := c.waitForLeader(20 * time.Second)
	for _, tn := range c.followers(leader) {
		c.stop(tn)
	}
	if err := leader.N().LeaderRead(ctxTimeout(t, time.Second)); err != nil {
		t.Fatalf("LeaderRead right after isolation: %v (the lease should still hold)", err)
	}
	// Acknowledgements in flight when the followers stopped may confirm one early read;
	// after that, every read must be refused while the node still thinks it leads.
	refused := false
	for i := 0; i < 5 && leader.N().IsLeader(); i++ {
		ctx := ctxTimeout(t, 200*time.Millisecond)
		if err := leader.N().ConsistentRead(ctx); err != nil {
			if !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrLeadershipLost) {
				t.Fatalf("ConsistentRead: %v", err)
			}
			refused = true
			break
		}
	}
	if !refused {
		t.Fatalf("ConsistentRead kept succeeding on a leader without quorum")
	}
}

// Entries the state machine never sees (barriers) may be the last committed ones;
// Ready and ConsistentRead must not wait for the FSM to "apply" them.
func TestNode_ReadyAfterStatelessEntries(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	// Let the followers' address announcements (commands) finish first, so nothing
	// but the barrier follows the last command.
	for _, tn := range c.nodes {
		wait.For(t, 10*time.Second, "member records", func() bool {
			rec, ok := leader.st.Member(tn.id)
			return ok && rec.HTTPAddr == tn.httpAddr
		})
	}
	mustApplyNamespace(t, leader.N(), "x")
	if err := leader.N().Raft().Barrier(5 * time.Second).Error(); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	commit := leader.N().Raft().CommitIndex()
	if applied := leader.sm.AppliedIndex(); applied >= commit {
		t.Fatalf("FSM applied %d >= commit %d: the barrier did not leave a state-less tail", applied, commit)
	}
	if err := leader.N().ConsistentRead(ctxTimeout(t, 2*time.Second)); err != nil {
		t.Fatalf("ConsistentRead after a barrier: %v", err)
	}
	for _, tn := range c.nodes {
		wait.For(t, 5*time.Second, tn.id+" learns the commit index", func() bool {
			return tn.N().Raft().CommitIndex() >= commit
		})
		wait.For(t, 5*time.Second, tn.id+" ready", func() bool {
			ok, rep := tn.N().Ready()
			return ok && rep.AppliedIndex >= commit && rep.CommitIndex >= commit
		})
	}
}
