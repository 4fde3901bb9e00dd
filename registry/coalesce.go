package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/fsm"
)

// Proposal is a command handed to the consensus layer whose outcome is not known yet.
type Proposal interface {
	// Wait returns the state machine's result once the entry is committed and applied
	// on this node, or the consensus layer's error (raftnode's sentinels).
	Wait(ctx context.Context) (*fsm.Result, error)
}

// Proposer is what write coalescing needs of the consensus layer.
type Proposer interface {
	// Propose hands cmd to Raft and returns once Raft took it, before it commits.
	Propose(ctx context.Context, cmd fsm.Command) (Proposal, error)
	// ProposeEncoded is Propose of a command already prepared and encoded: data
	// becomes the entry as it is.
	ProposeEncoded(ctx context.Context, data []byte) (Proposal, error)
	// ServersApply reports whether every server of the configuration applies command
	// type t (a rolling upgrade may still run servers that do not).
	ServersApply(t fsm.MessageType) bool
	// Prepare returns cmd as every server of the configuration applies it, or the
	// consensus layer's refusal when some server cannot (raftnode.Node.Prepare).
	Prepare(ctx context.Context, cmd fsm.Command) (fsm.Command, error)
}

// Limits of one coalesced entry: the commands of a batch and the bytes of their
// encodings. A write larger than maxBatchBytes still goes alone.
const (
	maxBatchCommands = 512
	maxBatchBytes    = 1 << 20
)

// coalescer gathers the writes that reach the leader concurrently into one Raft entry
// (group commit): the writes waiting when the previous entry has been handed to Raft
// leave together as one fsm.BatchRequest, so they share one log write, one replication
// round and one state transaction. A write arriving while nothing is being handed over
// leaves at once, alone and in its own encoding: a lone write is never delayed. Each
// write still gets its own result (Result.Batch), and is answered only once it is
// committed and applied, as before. Entries leave in the order their writes were taken,
// one hand-over at a time; many entries can be in flight in Raft at once.
//
// Batches are written only once every server applies fsm.BatchType (Proposer.
// ServersApply); until then the writes are handed over one entry each.
type coalescer struct {
	p       Proposer
	timeout time.Duration // bounds a hand-over and the wait for its outcome
	met     *coalesceMetrics

	mu      sync.Mutex
	queue   []*call
	running bool // a goroutine is handing the queue over
}

// call is one write waiting in the coalescer.
type call struct {
	ctx   context.Context
	cmd   fsm.Command
	data  []byte       // cmd encoded (fsm.Encode)
	state atomic.Int32 // callQueued, callTaken or callAbandoned
	done  chan outcome // buffered: the hand-over never blocks on a caller that left
}

const (
	callQueued int32 = iota
	callTaken
	callAbandoned
)

type outcome struct {
	index uint64
	err   error
}

func newCoalescer(p Proposer, timeout time.Duration, met *coalesceMetrics) *coalescer {
	return &coalescer{p: p, timeout: timeout, met: met}
}

// submit replicates cmd, coalesced with the writes submitted at the same time, and
// returns its index once applied; the state machine's refusal of this command is the
// error. The errors are those of raftnode.Node.Apply: a write whose ctx ends while it
// waits in the queue was never handed over (not applied), one whose ctx ends later has
// an unknown outcome; both are ErrTimeout.
func (c *coalescer) submit(ctx context.Context, cmd fsm.Command) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	// A batch carries its commands encoded, so each is put in the encoding every server
	// applies now; a write no server of an older release can apply is refused here.
	cmd, err := c.p.Prepare(ctx, cmd)
	if err != nil {
		return 0, err
	}
	data, ok := forwardedEncoding(ctx, cmd)
	if !ok {
		if data, err = fsm.Encode(cmd); err != nil {
			return 0, fmt.Errorf("registry: encode command %s: %w", cmd.MessageType(), err)
		}
	}
	cl := &call{ctx: ctx, cmd: cmd, data: data, done: make(chan outcome, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, cl)
	start := !c.running
	c.running = true
	c.mu.Unlock()
	if start {
		go c.run()
	}
	select {
	case o := <-cl.done:
		return o.index, o.err
	case <-ctx.Done():
		if cl.state.CompareAndSwap(callQueued, callAbandoned) {
			return 0, fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
		}
		select {
		case o := <-cl.done: // answered at the same moment: the answer wins
			return o.index, o.err
		default:
			return 0, fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
		}
	}
}

// run hands the queue over, batch after batch, until it is empty.
func (c *coalescer) run() {
	for {
		batch := c.take()
		if len(batch) == 0 {
			return
		}
		c.handOver(batch)
	}
}

// take removes the next batch from the queue: the writes still waiting for it, in
// order, up to the limits. With the queue empty it returns nil and marks the coalescer
// idle, under the same lock, so that the next submit starts a new run.
func (c *coalescer) take() []*call {
	c.mu.Lock()
	defer c.mu.Unlock()
	var batch []*call
	size, n := 0, 0
	for _, cl := range c.queue {
		if len(batch) > 0 && (len(batch) == maxBatchCommands || size+len(cl.data) > maxBatchBytes) {
			break
		}
		n++
		if !cl.state.CompareAndSwap(callQueued, callTaken) {
			continue // its caller left before the hand-over: never sent
		}
		batch = append(batch, cl)
		size += len(cl.data)
	}
	clear(c.queue[:n])
	c.queue = c.queue[n:]
	if len(c.queue) == 0 {
		c.queue = nil
	}
	if len(batch) == 0 {
		c.running = false
	}
	return batch
}

// handOver proposes batch as one entry (or, while some server cannot apply a batch,
// as one entry per write) and answers its writes when the outcome is known, without
// waiting for it here.
func (c *coalescer) handOver(batch []*call) {
	if len(batch) == 1 || !c.p.ServersApply(fsm.BatchType) {
		for _, cl := range batch {
			c.proposeOne(cl)
		}
		return
	}
	cmds := make([][]byte, len(batch))
	for i, cl := range batch {
		cmds[i] = cl.data
	}
	c.propose(fsm.BatchRequest{Commands: cmds}, batch)
}

// proposeOne hands one write to Raft in the encoding it was queued with.
func (c *coalescer) proposeOne(cl *call) {
	c.hand([]*call{cl}, func(ctx context.Context) (Proposal, error) { return c.p.ProposeEncoded(ctx, cl.data) })
}

// propose hands cmd to Raft for calls and answers them in a goroutine of its own.
func (c *coalescer) propose(cmd fsm.Command, calls []*call) {
	c.hand(calls, func(ctx context.Context) (Proposal, error) { return c.p.Propose(ctx, cmd) })
}

// hand proposes with propose for calls and answers them in a goroutine of its own.
func (c *coalescer) hand(calls []*call, propose func(context.Context) (Proposal, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	p, err := propose(ctx)
	if err != nil {
		cancel()
		answerAll(calls, outcome{err: err})
		return
	}
	c.met.observe(len(calls))
	go func() {
		defer cancel()
		res, err := p.Wait(ctx)
		switch {
		case err != nil:
			answerAll(calls, outcome{err: err})
		case len(calls) == 1 && res.Batch == nil:
			calls[0].done <- outcome{index: res.Index, err: res.Err}
		case len(res.Batch) != len(calls):
			answerAll(calls, outcome{index: res.Index, err: fmt.Errorf("registry: %d results for a batch of %d commands: %w", len(res.Batch), len(calls), errBatchResult)})
		default:
			for i, cl := range calls {
				cl.done <- outcome{index: res.Index, err: res.Batch[i]}
			}
		}
	}()
}

// errBatchResult marks a state machine answer that does not fit the batch proposed: the
// writes' outcome is unknown.
var errBatchResult = errors.New("unexpected state machine result")

func answerAll(calls []*call, o outcome) {
	for _, cl := range calls {
		cl.done <- o
	}
}

// coalesceMetrics counts what coalescing does.
type coalesceMetrics struct {
	commands prometheus.Histogram
}

func newCoalesceMetrics(reg prometheus.Registerer) (*coalesceMetrics, error) {
	m := &coalesceMetrics{commands: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "roster_registry_entry_commands",
		Help:    "Writes per Raft entry the registry proposed (1: a write alone; more: writes coalesced into one batch entry).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
	})}
	if reg != nil {
		if err := reg.Register(m.commands); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *coalesceMetrics) observe(n int) {
	if m != nil {
		m.commands.Observe(float64(n))
	}
}
