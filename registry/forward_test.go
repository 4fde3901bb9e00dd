package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
)

// followerRaft is a node that does not lead (until leads is set); it records the index
// reads caught up to, and the read indexes it answered as leader (readIndex).
type followerRaft struct {
	countingRaft
	mu        sync.Mutex
	leads     bool
	caughtUp  []uint64
	readIndex uint64
}

func (r *followerRaft) IsLeader() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.leads }

func (r *followerRaft) ReadIndex(context.Context, bool) (uint64, error) { return r.readIndex, nil }

func (r *followerRaft) CatchUp(_ context.Context, min uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.caughtUp = append(r.caughtUp, min)
	return nil
}

// scriptedPeer answers Forward calls from a script; past its end it answers index 7.
type scriptedPeer struct {
	mu     sync.Mutex
	leader string
	script []error
	calls  []Forwarded
	reads  []error
	modes  []Consistency
}

func (p *scriptedPeer) Leader() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leader, p.leader != ""
}

func (p *scriptedPeer) Forward(_ context.Context, _ string, f Forwarded) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, f)
	if n := len(p.calls); n <= len(p.script) {
		return 0, p.script[n-1]
	}
	return 7, nil
}

// ReadIndex answers from the read script (past its end: index 11), recording the modes.
func (p *scriptedPeer) ReadIndex(_ context.Context, _ string, mode Consistency) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.modes = append(p.modes, mode)
	if n := len(p.modes); n <= len(p.reads) {
		return 0, p.reads[n-1]
	}
	return 11, nil
}

func forwardingRegistry(t *testing.T, raft Raft, peer Peer, hold time.Duration) *Registry {
	t.Helper()
	r, err := New(Config{Settings: defaultSettings{}, Raft: raft, Peer: peer, NodeID: "n2", LeaderHold: hold})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var forwardedInstance = model.Instance{Namespace: "public", Group: "g", Service: "orders", IP: "127.0.0.1", Port: 8080,
	Cluster: "DEFAULT", Weight: 1, Enabled: true, Healthy: true}

// What reached no leader waits for the next one and is sent again; what may have
// reached the leader is answered as an unknown outcome and never sent twice; a leader
// of an older release is reported at once for the surface to hand the write over.
func TestForward_RetriesOnlyWhatWasNotSent(t *testing.T) {
	ctx := context.Background()
	leaderMoved := &Answered{Err: fmt.Errorf("%w: n1 steps down", ErrNotLeader)}
	peer := &scriptedPeer{leader: "n1", script: []error{fmt.Errorf("%w: refused", ErrNotSent), leaderMoved, fmt.Errorf("%w: busy", ErrNotSent)}}
	r := forwardingRegistry(t, &followerRaft{}, peer, 5*time.Second)
	idx, err := r.RegisterInstance(WithRequestID(ctx, "req-7"), forwardedInstance, Condition{})
	if err != nil || idx != 7 || len(peer.calls) != 4 {
		t.Fatalf("after two not-sent and a not-leader answer: index %d, %v, %d calls; want 7 after 4 calls", idx, err, len(peer.calls))
	}
	if fsm.MessageType(peer.calls[0].Command[0]) != fsm.RegisterInstanceType || peer.calls[0].From != "n2" || peer.calls[0].RequestID != "req-7" {
		t.Fatalf("forwarded %+v", peer.calls[0])
	}

	unknown := &scriptedPeer{leader: "n1", script: []error{fmt.Errorf("%w: no answer", ErrUnavailable)}}
	r = forwardingRegistry(t, &followerRaft{}, unknown, 5*time.Second)
	if _, err := r.RegisterInstance(ctx, forwardedInstance, Condition{}); !errors.Is(err, ErrUnavailable) || len(unknown.calls) != 1 {
		t.Fatalf("an unanswered write: %v after %d calls, want ErrUnavailable after 1", err, len(unknown.calls))
	}

	legacy := &scriptedPeer{leader: "n1", script: []error{fmt.Errorf("%w: old", ErrLegacyLeader)}}
	r = forwardingRegistry(t, &followerRaft{}, legacy, 5*time.Second)
	if _, err := r.RegisterInstance(ctx, forwardedInstance, Condition{}); !errors.Is(err, ErrLegacyLeader) || len(legacy.calls) != 1 {
		t.Fatalf("a legacy leader: %v after %d calls", err, len(legacy.calls))
	}

	refused := &scriptedPeer{leader: "n1", script: []error{&Answered{Err: model.Invalid("weight", "too heavy")}}}
	r = forwardingRegistry(t, &followerRaft{}, refused, 5*time.Second)
	if _, err := r.RegisterInstance(ctx, forwardedInstance, Condition{}); !errors.Is(err, model.ErrInvalid) || len(refused.calls) != 1 {
		t.Fatalf("a refusal: %v after %d calls", err, len(refused.calls))
	}
}

// With no leader reachable within the hold the write fails as not sent (no_leader),
// and a node that becomes the leader meanwhile applies the write itself.
func TestForward_NoLeaderAndBecomingTheLeader(t *testing.T) {
	ctx := context.Background()
	none := &scriptedPeer{}
	r := forwardingRegistry(t, &followerRaft{}, none, 100*time.Millisecond)
	if _, err := r.RegisterInstance(ctx, forwardedInstance, Condition{}); !errors.Is(err, ErrNoLeader) || len(none.calls) != 0 {
		t.Fatalf("no leader: %v, %d calls", err, len(none.calls))
	}
	raft := &followerRaft{}
	// The node wins the election while the write waits for a leader.
	r = forwardingRegistry(t, raft, electedPeer{raft}, 5*time.Second)
	if _, err := r.RegisterInstance(ctx, forwardedInstance, Condition{}); err != nil || len(raft.applied) != 1 {
		t.Fatalf("after becoming the leader: %v, %d applied", err, len(raft.applied))
	}
}

// The leader serves a forwarded write as its own, conditions included.
func TestForward_ServeForwardedRunsTheWrite(t *testing.T) {
	raft := &countingRaft{}
	r, err := New(Config{Settings: defaultSettings{}, Raft: raft})
	if err != nil {
		t.Fatal(err)
	}
	cas, err := fsm.NewCAS(0, false, fsm.RegisterInstanceRequest{Instance: forwardedInstance})
	if err != nil {
		t.Fatal(err)
	}
	data, err := fsm.Encode(cas)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ServeForwarded(context.Background(), Forwarded{Command: data, From: "n2"}); err != nil || len(raft.applied) != 1 {
		t.Fatalf("ServeForwarded: %v, %d applied", err, len(raft.applied))
	}
	if c, ok := raft.applied[0].(fsm.CASRequest); !ok || c.Type != fsm.RegisterInstanceType {
		t.Fatalf("applied %#v, want the conditional registration", raft.applied[0])
	}
	bad := append([]byte{byte(fsm.RegisterInstanceType)}, 0xc1) // 0xc1: never a MessagePack byte
	if _, err := r.ServeForwarded(context.Background(), Forwarded{Command: bad}); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("an undecodable write: %v", err)
	}
	hc, _ := fsm.Encode(fsm.SetHealthRequest{})
	if _, err := r.ServeForwarded(context.Background(), Forwarded{Command: hc}); !errors.Is(err, model.ErrInvalid) || len(raft.applied) != 1 {
		t.Fatalf("a prober command from a peer: %v", err)
	}
}

// electedPeer knows no leader, and makes its node the leader when asked.
type electedPeer struct{ raft *followerRaft }

func (p electedPeer) Leader() (string, bool) {
	p.raft.mu.Lock()
	defer p.raft.mu.Unlock()
	p.raft.leads = true
	return "", false
}

func (electedPeer) Forward(context.Context, string, Forwarded) (uint64, error) {
	return 0, errors.New("electedPeer: no forward expected")
}

func (electedPeer) ReadIndex(context.Context, string, Consistency) (uint64, error) {
	return 0, errors.New("electedPeer: no read index expected")
}

// A consistent read on a follower asks the leader for a read index and waits until this
// node applied it: what reached no leader is asked again, a not-leader answer too; a
// leader that could not confirm is answered as its error; a legacy leader is reported
// as not-leader for the surface to forward the read; a stale read asks nothing.
func TestFollowerRead_AsksTheLeaderForAReadIndex(t *testing.T) {
	ctx := context.Background()
	notLeader := &Answered{Err: fmt.Errorf("%w: n1 steps down", ErrNotLeader)}
	peer := &scriptedPeer{leader: "n1", reads: []error{fmt.Errorf("%w: refused", ErrNotSent), notLeader}}
	raft := &followerRaft{}
	r := forwardingRegistry(t, raft, peer, 5*time.Second)
	read := 0
	fn := func(*WatchSet) (uint64, error) { read++; return 11, nil }
	if _, err := r.Read(ctx, ReadOptions{Consistency: Leader}, fn); err != nil || read != 1 {
		t.Fatalf("Read: %v, read %d times", err, read)
	}
	if len(peer.modes) != 3 || peer.modes[2] != Leader || len(raft.caughtUp) != 1 || raft.caughtUp[0] != 11 {
		t.Fatalf("asked %v, caught up to %v; want 3 asks and a catch-up to 11", peer.modes, raft.caughtUp)
	}
	if _, err := r.Read(ctx, ReadOptions{Consistency: Stale}, fn); err != nil || len(peer.modes) != 3 {
		t.Fatalf("a stale read: %v, %d asks", err, len(peer.modes))
	}

	timedOut := &scriptedPeer{leader: "n1", reads: []error{&Answered{Err: fmt.Errorf("%w: no quorum", ErrTimeout)}}}
	r = forwardingRegistry(t, &followerRaft{}, timedOut, 5*time.Second)
	if err := r.CheckConsistency(ctx, Linearizable); !errors.Is(err, ErrTimeout) || len(timedOut.modes) != 1 {
		t.Fatalf("a leader that could not confirm: %v after %d asks", err, len(timedOut.modes))
	}

	legacy := &scriptedPeer{leader: "n1", reads: []error{fmt.Errorf("%w: old", ErrLegacyLeader)}}
	r = forwardingRegistry(t, &followerRaft{}, legacy, 5*time.Second)
	if err := r.CheckConsistency(ctx, Linearizable); !errors.Is(err, ErrLegacyLeader) || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a legacy leader: %v", err)
	}

	none := &scriptedPeer{}
	r = forwardingRegistry(t, &followerRaft{}, none, 100*time.Millisecond)
	if err := r.CheckConsistency(ctx, Linearizable); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("no leader: %v", err)
	}
}

// The leader answers a read index in the mode asked (a quorum-confirmed one for
// linearizable reads), and refuses when it does not lead.
func TestFollowerRead_ServeReadIndex(t *testing.T) {
	raft := &followerRaft{leads: true, readIndex: 42}
	r := forwardingRegistry(t, raft, &scriptedPeer{}, time.Second)
	if idx, err := r.ServeReadIndex(context.Background(), Linearizable); err != nil || idx != 42 {
		t.Fatalf("ServeReadIndex: %d %v", idx, err)
	}
	if _, err := r.ServeReadIndex(context.Background(), Stale); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("a stale read index: %v", err)
	}
	raft.mu.Lock()
	raft.leads = false
	raft.mu.Unlock()
	if _, err := r.ServeReadIndex(context.Background(), Linearizable); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a follower's read index: %v", err)
	}
}

// steppingDownRaft leads until a write is applied, which it refuses as not-leader
// (leadership moved before the entry was appended) and stops leading.
type steppingDownRaft struct{ followerRaft }

func (r *steppingDownRaft) Apply(context.Context, fsm.Command) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leads = false
	return 0, fmt.Errorf("%w: raft: node is not the leader", ErrNotLeader)
}

// A write this node began to apply as leader, refused because leadership moved before
// anything was appended, is handed to the new leader, as the caller sent it.
func TestForward_LocalWriteRefusedAsNotLeaderGoesToTheNewLeader(t *testing.T) {
	raft := &steppingDownRaft{followerRaft{leads: true}}
	peer := &scriptedPeer{leader: "n1"}
	r := forwardingRegistry(t, raft, peer, 5*time.Second)
	idx, err := r.RegisterInstance(context.Background(), forwardedInstance, Condition{})
	if err != nil || idx != 7 || len(peer.calls) != 1 {
		t.Fatalf("a write whose leader stepped down: %d %v after %d forwards; want index 7 after 1", idx, err, len(peer.calls))
	}
	if fsm.MessageType(peer.calls[0].Command[0]) != fsm.RegisterInstanceType {
		t.Fatalf("forwarded type %d", peer.calls[0].Command[0])
	}
}

// stoppingRaft still leads but refuses every write as not-leader: the node is stopping
// and hands leadership over.
type stoppingRaft struct{ followerRaft }

func (r *stoppingRaft) Apply(context.Context, fsm.Command) (uint64, error) {
	return 0, fmt.Errorf("%w: this node is stopping and hands leadership over", ErrNotLeader)
}

// A write refused by a leader that is stopping goes to the server its peers elect, even
// while this node's Raft still says it leads; with no other leader within the hold it
// is refused as not sent.
func TestForward_StoppingLeaderHandsTheWriteOn(t *testing.T) {
	peer := &scriptedPeer{leader: "n2"} // this node's own id: no other leader yet
	r := forwardingRegistry(t, &stoppingRaft{followerRaft{leads: true}}, peer, 300*time.Millisecond)
	if _, err := r.RegisterInstance(context.Background(), forwardedInstance, Condition{}); !errors.Is(err, ErrNoLeader) || len(peer.calls) != 0 {
		t.Fatalf("with no other leader: %v after %d forwards", err, len(peer.calls))
	}
	peer = &scriptedPeer{leader: "n1"}
	r = forwardingRegistry(t, &stoppingRaft{followerRaft{leads: true}}, peer, 5*time.Second)
	if idx, err := r.RegisterInstance(context.Background(), forwardedInstance, Condition{}); err != nil || idx != 7 || len(peer.calls) != 1 {
		t.Fatalf("with n1 elected: %d %v after %d forwards", idx, err, len(peer.calls))
	}
}

// changingTokens holds one token until deleted is set.
type changingTokens struct {
	noTokens
	tok     acl.Token
	deleted atomic.Bool
}

func (c *changingTokens) ACLBootstrapIndex() (uint64, error) { return 1, nil }
func (c *changingTokens) TokenBySecretHash(h string) (acl.Token, bool, error) {
	if c.deleted.Load() || h != c.tok.SecretHash {
		return acl.Token{}, false, nil
	}
	return c.tok, true, nil
}

// catchingUpRaft applies a token's deletion while it catches up to the leader's read
// index (the deletion was committed before the read began).
type catchingUpRaft struct {
	followerRaft
	tokens *changingTokens
}

func (r *catchingUpRaft) CatchUp(ctx context.Context, min uint64) error {
	r.tokens.deleted.Store(true)
	return r.followerRaft.CatchUp(ctx, min)
}

// A consistent read at a follower checks the caller's token again once the follower has
// applied the leader's read index: a token the leader deleted before the read began is
// refused, as the leader would refuse it.
func TestFollowerRead_ChecksTheTokenAgainAfterCatchingUp(t *testing.T) {
	const secret = "8f14e45f-ceea-467f-a0e6-b6b4bd3dc2a1"
	tokens := &changingTokens{tok: acl.Token{AccessorID: "a", SecretHash: acl.HashSecret(secret),
		Rules: acl.Rules{Namespaces: map[string]acl.Access{"public": acl.Read}}}}
	raft := &catchingUpRaft{tokens: tokens}
	r, err := New(Config{Settings: defaultSettings{}, Raft: raft, Peer: &scriptedPeer{leader: "n1"}, NodeID: "n2",
		ACLEnabled: true, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Authenticate(secret)
	if err != nil {
		t.Fatal(err)
	}
	ctx := acl.WithAuthorizer(context.Background(), a)
	read := func(*WatchSet) (uint64, error) { return 1, nil }
	if _, err := r.Read(ctx, ReadOptions{Namespace: "public", Consistency: Stale}, read); err != nil {
		t.Fatalf("a stale read with the token as this node had it: %v", err)
	}
	if _, err := r.Read(ctx, ReadOptions{Namespace: "public"}, read); !errors.Is(err, acl.ErrUnauthenticated) {
		t.Fatalf("a linearizable read with a token deleted before it began: %v, want unauthenticated", err)
	}
}
