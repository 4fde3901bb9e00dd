package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
)

// followerRaft is a node that does not lead (until leads is set).
type followerRaft struct {
	countingRaft
	mu    sync.Mutex
	leads bool
}

func (r *followerRaft) IsLeader() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.leads }

// scriptedPeer answers Forward calls from a script; past its end it answers index 7.
type scriptedPeer struct {
	mu     sync.Mutex
	leader string
	script []error
	calls  []Forwarded
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
