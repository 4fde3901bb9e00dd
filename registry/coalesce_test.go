package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
)

// fakeProposer records what the coalescer proposes. Propose blocks while hold is set,
// as raft.Apply blocks while the leader's loop is busy writing the previous entries;
// each proposal is answered by decide, or applied at once when decide is nil.
type fakeProposer struct {
	mu        sync.Mutex
	proposed  []fsm.Command
	index     uint64
	hold      chan struct{} // nil: take proposals at once
	entered   chan struct{} // signalled when a Propose starts
	noBatches bool          // ServersApply(BatchType) false
	proposeFn func(fsm.Command) error
	// refuse returns the state machine's refusal of one command (nil: applies).
	refuse func(fsm.Command) error
}

type fakeProposal struct {
	res *fsm.Result
	err error
}

func (p fakeProposal) Wait(context.Context) (*fsm.Result, error) { return p.res, p.err }

func (f *fakeProposer) Propose(ctx context.Context, cmd fsm.Command) (Proposal, error) {
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if f.proposeFn != nil {
		if err := f.proposeFn(cmd); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.proposed = append(f.proposed, cmd)
	f.index++
	res := &fsm.Result{Index: f.index}
	refuse := func(c fsm.Command) error {
		if f.refuse == nil {
			return nil
		}
		return f.refuse(c)
	}
	if b, ok := cmd.(fsm.BatchRequest); ok {
		for _, data := range b.Commands {
			var in fsm.RegisterInstanceRequest
			if data[0] != byte(fsm.RegisterInstanceType) {
				return nil, fmt.Errorf("unexpected command type %d in the batch", data[0])
			}
			if err := fsm.Decode(data[1:], &in); err != nil {
				return nil, err
			}
			res.Batch = append(res.Batch, refuse(in))
		}
	} else {
		res.Err = refuse(cmd)
	}
	return fakeProposal{res: res}, nil
}

// ProposeEncoded decodes data (the tests' writes are registrations) and proposes it.
func (f *fakeProposer) ProposeEncoded(ctx context.Context, data []byte) (Proposal, error) {
	var c fsm.RegisterInstanceRequest
	if fsm.MessageType(data[0]) != c.MessageType() {
		return nil, fmt.Errorf("fakeProposer: a %s, not a registration", fsm.MessageType(data[0]))
	}
	if err := fsm.Decode(data[1:], &c); err != nil {
		return nil, err
	}
	return f.Propose(ctx, c)
}

func (f *fakeProposer) ServersApply(t fsm.MessageType) bool { return !f.noBatches || t < fsm.BatchType }

func (f *fakeProposer) Prepare(_ context.Context, cmd fsm.Command) (fsm.Command, error) {
	return cmd, nil
}

func (f *fakeProposer) commands() []fsm.Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fsm.Command(nil), f.proposed...)
}

func register(port int) fsm.RegisterInstanceRequest {
	return fsm.RegisterInstanceRequest{Instance: model.Instance{Namespace: "public", Group: "DEFAULT_GROUP",
		Service: "orders", IP: "127.0.0.1", Port: port, Cluster: "DEFAULT", Weight: 1, Enabled: true}}
}

type submitted struct {
	port  int
	index uint64
	err   error
}

// submitWhileBusy submits one write, waits until its proposal is being handed over
// (and held), submits n more, waits until all n are queued, then lets Raft take
// proposals again; it returns every write's outcome.
func submitWhileBusy(t *testing.T, c *coalescer, p *fakeProposer, n int) []submitted {
	t.Helper()
	hold := make(chan struct{})
	p.mu.Lock()
	p.hold, p.entered = hold, make(chan struct{}, 2*n+2)
	p.mu.Unlock()
	out := make(chan submitted, n+1)
	send := func(port int) {
		idx, err := c.submit(context.Background(), register(port))
		out <- submitted{port, idx, err}
	}
	go send(1)
	<-p.entered // the first write is being handed over: Raft is busy
	for i := range n {
		go send(100 + i)
	}
	wait.For(t, 5*time.Second, "the writes to queue", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queue) == n
	})
	p.mu.Lock()
	p.hold = nil
	p.mu.Unlock()
	close(hold)
	var res []submitted
	for range n + 1 {
		res = append(res, <-out)
	}
	return res
}

func TestCoalescer_WritesWaitingForRaftLeaveAsOneEntry(t *testing.T) {
	p := &fakeProposer{refuse: func(c fsm.Command) error {
		if r, ok := c.(fsm.RegisterInstanceRequest); ok && r.Instance.Port == 105 {
			return model.Invalid("weight", "refused for the test")
		}
		return nil
	}}
	c := newCoalescer(p, 5*time.Second, nil)
	res := submitWhileBusy(t, c, p, 10)

	cmds := p.commands()
	if len(cmds) != 2 {
		t.Fatalf("%d entries proposed, want 2 (the first write alone, then the 10 that waited): %v", len(cmds), cmds)
	}
	if _, ok := cmds[0].(fsm.RegisterInstanceRequest); !ok {
		t.Fatalf("a lone write went as %T, want its own command", cmds[0])
	}
	b, ok := cmds[1].(fsm.BatchRequest)
	if !ok || len(b.Commands) != 10 {
		t.Fatalf("second entry %T with %d commands, want a batch of 10", cmds[1], len(b.Commands))
	}
	for _, r := range res {
		switch {
		case r.port == 1:
			if r.err != nil || r.index != 1 {
				t.Fatalf("lone write: index %d, %v", r.index, r.err)
			}
		case r.port == 105:
			if !errors.Is(r.err, model.ErrInvalid) {
				t.Fatalf("the refused write of the batch got %v, want its own refusal", r.err)
			}
		default:
			if r.err != nil || r.index != 2 {
				t.Fatalf("write %d: index %d, %v; want the batch entry's index 2 and no error", r.port, r.index, r.err)
			}
		}
	}
}

func TestCoalescer_NoBatchesUntilEveryServerAppliesThem(t *testing.T) {
	p := &fakeProposer{noBatches: true}
	c := newCoalescer(p, 5*time.Second, nil)
	res := submitWhileBusy(t, c, p, 5)
	for _, r := range res {
		if r.err != nil {
			t.Fatalf("write %d: %v", r.port, r.err)
		}
	}
	cmds := p.commands()
	if len(cmds) != 6 {
		t.Fatalf("%d entries, want one per write while a server cannot apply batches", len(cmds))
	}
	for _, cmd := range cmds {
		if cmd.MessageType() == fsm.BatchType {
			t.Fatal("a batch was proposed although a server does not apply batches")
		}
	}
}

func TestCoalescer_RaftErrorAnswersEveryWriteOfTheEntry(t *testing.T) {
	p := &fakeProposer{}
	c := newCoalescer(p, 5*time.Second, nil)
	p.proposeFn = func(cmd fsm.Command) error {
		if cmd.MessageType() == fsm.BatchType {
			return raftnode.ErrNotLeader
		}
		return nil
	}
	res := submitWhileBusy(t, c, p, 4)
	for _, r := range res {
		if r.port == 1 {
			if r.err != nil {
				t.Fatalf("lone write: %v", r.err)
			}
			continue
		}
		if !errors.Is(r.err, raftnode.ErrNotLeader) {
			t.Fatalf("write %d: %v, want the batch's ErrNotLeader", r.port, r.err)
		}
	}
}

// A write whose caller gave up while it waited in the queue is never handed to Raft.
func TestCoalescer_AbandonedWriteIsNeverSent(t *testing.T) {
	hold := make(chan struct{})
	p := &fakeProposer{hold: hold, entered: make(chan struct{}, 4)}
	c := newCoalescer(p, 5*time.Second, nil)
	first := make(chan error, 1)
	go func() { _, err := c.submit(context.Background(), register(1)); first <- err }()
	<-p.entered
	ctx, cancel := context.WithCancel(context.Background())
	abandoned := make(chan error, 1)
	go func() { _, err := c.submit(ctx, register(2)); abandoned <- err }()
	wait.For(t, 5*time.Second, "the second write to queue", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queue) == 1
	})
	cancel()
	if err := <-abandoned; !errors.Is(err, ErrTimeout) {
		t.Fatalf("abandoned write: %v, want ErrTimeout", err)
	}
	p.mu.Lock()
	p.hold = nil
	p.mu.Unlock()
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the coalescer to go idle", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.running
	})
	if cmds := p.commands(); len(cmds) != 1 {
		t.Fatalf("%d entries proposed, want only the first write's: %v", len(cmds), cmds)
	}
}

// The limits split a long queue into several entries.
func TestCoalescer_LimitsSplitTheQueue(t *testing.T) {
	p := &fakeProposer{}
	c := newCoalescer(p, 5*time.Second, nil)
	n := maxBatchCommands + 10
	res := submitWhileBusy(t, c, p, n)
	for _, r := range res {
		if r.err != nil {
			t.Fatalf("write %d: %v", r.port, r.err)
		}
	}
	cmds := p.commands()
	if len(cmds) != 3 {
		t.Fatalf("%d entries, want 3 (1 alone, %d, 10)", len(cmds), maxBatchCommands)
	}
	if b := cmds[1].(fsm.BatchRequest); len(b.Commands) != maxBatchCommands {
		t.Fatalf("first batch has %d commands, want %d", len(b.Commands), maxBatchCommands)
	}
	if b := cmds[2].(fsm.BatchRequest); len(b.Commands) != 10 {
		t.Fatalf("second batch has %d commands, want 10", len(b.Commands))
	}
}
