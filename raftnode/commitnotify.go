package raftnode

import (
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Commit notification: a follower learns that the leader committed an entry from the
// LeaderCommitIndex of the next AppendEntries, and hashicorp/raft sends one only when
// new entries are appended or when CommitTimeout (randomised to 1-2×) passes without
// any. After the last write of a burst, followers therefore apply it 5-10 ms after the
// leader did, and stale reads, blocking queries and watches served by followers see it
// that much later. The library offers no hook to send the commit index sooner, so the
// transport does it: it watches the leader's own AppendEntries and their answers to
// learn how much of the leader's log each follower holds, and when the leader's state
// machine is handed newly committed entries it sends each follower one extra, empty
// AppendEntries carrying the new commit index.
//
// Why the extra RPC is safe (hashicorp/raft v1.7.3, raft.go appendEntries):
//
//   - The follower rejects it unless Term is at least its own term, and rejects it unless
//     its entry at PrevLogEntry has term PrevLogTerm. PrevLogEntry/PrevLogTerm are the
//     last entry of an AppendEntries of this same leadership term that the follower
//     accepted (match, matchTerm). In one term there is one leader, and a follower's
//     copy of that leader's entries is only truncated by a leader of a later term, which
//     would also have raised the follower's term and made it reject the notification.
//     So an accepted notification means, by Log Matching, that the follower's log up to
//     match is the leader's log up to match.
//   - The follower commits min(LeaderCommitIndex, its last index), not min(..., the last
//     entry the request checked): entries after PrevLogEntry may be a stale suffix from
//     an older term that no request has truncated yet. LeaderCommitIndex is therefore
//     never above match, so the follower commits only entries it shares with the leader.
//   - LeaderCommitIndex is also at most the highest index this node's state machine was
//     handed, and Raft hands it committed entries only. The tracked term T is a term
//     this node led (only a leader sends AppendEntries). Raft raises a node's term
//     before it moves the commit index on news from a newer leader, and the term only
//     grows, so reading the term after the hand-over and finding T means this node
//     learned of that commit in term T or earlier. A commit it learned before T was
//     made before T began, and Leader Completeness puts those entries in T's leader's
//     log. In T the only leader, and so the only node that commits, is this one. Either
//     way the entries up to LeaderCommitIndex in T's leader's log are the committed ones.
//     Without the term check, a node that led T and then, as a follower of a later term,
//     applied entries that overwrote T's uncommitted tail could tell a follower still in
//     T to commit that tail.
//   - Whether this node still leads is checked as well, but only to save RPCs: all of
//     the above holds for a notification that arrives after this node lost leadership.
//   - It carries no entries, so the follower never truncates its log because of it, and
//     its commit index only moves forward: arriving before, after or between the
//     library's own RPCs (different connections) changes nothing they do. The answer is
//     discarded, so the library's view of the follower is untouched.
//   - PrevLogEntry is never 0 and LeaderCommitIndex never 0, so the network transport
//     never mistakes it for a heartbeat (whose fast path this package disables anyway).
//
// Cost: at most one notification in flight per follower, coalesced to the newest commit
// index, none while idle, none when the library already carried the index, and none to
// a follower the leader has had no successful exchange with for a heartbeat timeout.
type commitNotifier struct {
	next appendSender
	// fresh is how recently the leader must have had a successful exchange with a
	// follower in the tracked term for it to be notified: a removed or unreachable
	// follower is left to the library.
	fresh   time.Duration
	enabled bool // false: only observe and count (benchmarks compare the library alone)

	state atomic.Pointer[raftStateRef]
	// committed is the highest index the state machine was handed (so committed).
	committed atomic.Uint64
	stop      chan struct{}
	wg        sync.WaitGroup
	// afterRound, when set (tests), is called after each round of a follower's sender.
	afterRound func(raft.ServerID)

	mu      sync.Mutex
	stopped bool
	term    uint64 // the leadership term the tracked state belongs to
	// header is that of the leader's latest request in term: it names the leader (ID,
	// Addr), which is all the follower reads of it besides Term.
	header raft.RPCHeader
	peers  map[raft.ServerID]*notifyPeer
	list   atomic.Pointer[[]*notifyPeer] // the values of peers, for notifyCommit

	appends    atomic.Uint64 // the library's AppendEntries, heartbeats included
	heartbeats atomic.Uint64
	notifies   atomic.Uint64
}

var (
	_ raft.BatchingFSM = commitHookFSM{}
	_ raft.WithPreVote = notifyingTransport{}
	_ raft.WithClose   = notifyingTransport{}
)

// appendSender is the part of the transport the notifier wraps and sends through.
type appendSender interface {
	AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error
	AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error)
}

// raftState is what the notifier reads of the local Raft; *raft.Raft implements it.
type raftState interface {
	State() raft.RaftState
	CurrentTerm() uint64
}

type raftStateRef struct{ raftState }

// notifyPeer is the notifier's view of one follower; its fields are guarded by
// commitNotifier.mu and describe the tracked term only.
type notifyPeer struct {
	id   raft.ServerID
	kick chan struct{} // 1 slot: wakes the sender, coalescing
	addr raft.ServerAddress
	// match and matchTerm are the last entry of an accepted AppendEntries (0: none).
	match, matchTerm uint64
	// told is a commit index the follower is known to have (it accepted a request
	// whose commit index, capped at that request's last entry, was told). A follower
	// that restarts forgets its commit index; until the next commit it is left to the
	// library's next AppendEntries, which carries the index.
	told uint64
	// lastOK is the time of the last successful exchange; zero after a notification
	// failed, until the library succeeds again.
	lastOK time.Time
	// contact is the time of the library's last successful exchange, in any term; unlike
	// lastOK it is never cleared (peerContact).
	contact time.Time
}

func newCommitNotifier(next appendSender, fresh time.Duration, enabled bool) *commitNotifier {
	return &commitNotifier{
		next:    next,
		fresh:   fresh,
		enabled: enabled,
		stop:    make(chan struct{}),
		peers:   make(map[raft.ServerID]*notifyPeer),
	}
}

// setRaft gives the notifier the Raft instance whose term and state it checks; until
// then it sends nothing.
func (cn *commitNotifier) setRaft(s raftState) { cn.state.Store(&raftStateRef{s}) }

// notifyCommit records that the entries up to idx are committed and wakes every
// follower's sender. It never blocks: the state machine's apply path calls it.
func (cn *commitNotifier) notifyCommit(idx uint64) {
	if !cn.enabled {
		return
	}
	for {
		cur := cn.committed.Load()
		if idx <= cur {
			return
		}
		if cn.committed.CompareAndSwap(cur, idx) {
			break
		}
	}
	if l := cn.list.Load(); l != nil {
		for _, p := range *l {
			kick(p)
		}
	}
}

func kick(p *notifyPeer) {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// peerProgress is what the leader knows of one follower in the tracked term.
type peerProgress struct {
	// Term is the tracked leadership term (0: nothing tracked yet).
	Term uint64
	// Match and MatchTerm are the last entry the follower accepted (0: none yet).
	Match, MatchTerm uint64
}

// peerHealth returns what the leader knows of follower id's log in the tracked term:
// the last entry it accepted (peerContact says when it last answered).
func (cn *commitNotifier) peerHealth(id raft.ServerID) peerProgress {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if p, ok := cn.peers[id]; ok {
		return peerProgress{Term: cn.term, Match: p.match, MatchTerm: p.matchTerm}
	}
	return peerProgress{Term: cn.term}
}

// peerContact returns the time of the last successful AppendEntries exchange (a
// heartbeat included) of this node's Raft with server id, in any term this node led
// (zero: none).
func (cn *commitNotifier) peerContact(id raft.ServerID) time.Time {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if p, ok := cn.peers[id]; ok {
		return p.contact
	}
	return time.Time{}
}

// close stops the senders. A notification already in flight ends with its RPC (bounded
// by the transport's timeout); no new one starts.
func (cn *commitNotifier) close() {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if !cn.stopped {
		cn.stopped = true
		close(cn.stop)
	}
}

// counts returns how many AppendEntries the library sent (heartbeats included), how
// many of them were heartbeats, and how many notifications were sent.
func (cn *commitNotifier) counts() (appends, heartbeats, notifies uint64) {
	return cn.appends.Load(), cn.heartbeats.Load(), cn.notifies.Load()
}

// appendEntries sends the library's AppendEntries and learns from a successful answer.
func (cn *commitNotifier) appendEntries(id raft.ServerID, target raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	cn.appends.Add(1)
	if req.PrevLogEntry == 0 && len(req.Entries) == 0 && req.LeaderCommitIndex == 0 {
		cn.heartbeats.Add(1)
	}
	err := cn.next.AppendEntries(id, target, req, resp)
	if err == nil {
		cn.observe(id, target, req, resp)
	}
	return err
}

// appendEntriesPipeline wraps the library's pipeline so that its answers are observed
// as well: once a follower is in sync, most entries reach it through the pipeline.
func (cn *commitNotifier) appendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	inner, err := cn.next.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	in := inner.Consumer()
	p := &notifyPipeline{
		AppendPipeline: inner,
		cn:             cn,
		out:            make(chan raft.AppendFuture, cap(in)),
		done:           make(chan struct{}),
	}
	go p.forward(id, target, in)
	return p, nil
}

// observe updates the follower's state from a request of the leader and its answer.
// Only accepted requests count; a request of an older term than the tracked one is
// ignored and one of a newer term starts tracking afresh.
func (cn *commitNotifier) observe(id raft.ServerID, target raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if !resp.Success || resp.Term != req.Term {
		return
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.stopped || req.Term < cn.term {
		return
	}
	if req.Term > cn.term {
		cn.term = req.Term
		for _, p := range cn.peers {
			p.match, p.matchTerm, p.told, p.lastOK = 0, 0, 0, time.Time{}
		}
	}
	cn.header = req.RPCHeader
	p := cn.peerLocked(id)
	now := time.Now()
	p.addr, p.lastOK, p.contact = target, now, now
	// A heartbeat (no PrevLogEntry, no entries) is accepted without any log check, so
	// it shows the follower is reachable but says nothing about its log.
	var last, lastTerm uint64
	switch {
	case len(req.Entries) > 0:
		e := req.Entries[len(req.Entries)-1]
		last, lastTerm = e.Index, e.Term
	case req.PrevLogEntry > 0:
		last, lastTerm = req.PrevLogEntry, req.PrevLogTerm
	default:
		return
	}
	if last > p.match {
		p.match, p.matchTerm = last, lastTerm
	}
	p.told = max(p.told, min(req.LeaderCommitIndex, last))
	// The follower may confirm an entry after it was committed (the other followers
	// made the quorum): without this kick it would wait for the library.
	if cn.enabled && min(cn.committed.Load(), p.match) > p.told {
		kick(p)
	}
}

// peerLocked returns id's state, creating it and starting its sender the first time.
func (cn *commitNotifier) peerLocked(id raft.ServerID) *notifyPeer {
	if p, ok := cn.peers[id]; ok {
		return p
	}
	p := &notifyPeer{id: id, kick: make(chan struct{}, 1)}
	cn.peers[id] = p
	l := make([]*notifyPeer, 0, len(cn.peers))
	for _, q := range cn.peers {
		l = append(l, q)
	}
	cn.list.Store(&l)
	if cn.enabled {
		cn.wg.Add(1)
		go cn.run(p)
	}
	return p
}

// run is p's sender: one notification at a time, for the newest commit index.
func (cn *commitNotifier) run(p *notifyPeer) {
	defer cn.wg.Done()
	for {
		select {
		case <-cn.stop:
			return
		case <-p.kick:
		}
		cn.send(p)
		if cn.afterRound != nil {
			cn.afterRound(p.id)
		}
	}
}

// send sends p one notification if it is due and safe, and records the answer.
func (cn *commitNotifier) send(p *notifyPeer) {
	addr, req, ok := cn.prepare(p)
	if !ok {
		return
	}
	select {
	case <-cn.stop:
		return
	default:
	}
	var resp raft.AppendEntriesResponse
	err := cn.next.AppendEntries(p.id, addr, req, &resp)
	cn.notifies.Add(1)
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.term != req.Term {
		return
	}
	if err == nil && resp.Success && resp.Term == req.Term {
		p.told = max(p.told, req.LeaderCommitIndex)
		return
	}
	// Unreachable, or it no longer holds match (a snapshot compacted it): leave the
	// follower to the library until one of its RPCs succeeds again.
	p.lastOK = time.Time{}
}

// prepare builds p's notification, or reports that none is due or safe.
func (cn *commitNotifier) prepare(p *notifyPeer) (raft.ServerAddress, *raft.AppendEntriesRequest, bool) {
	ref := cn.state.Load()
	if ref == nil {
		return "", nil, false
	}
	// The commit index must be read before the term: the term check below is what
	// proves the index was committed in a term this node's log agrees with.
	committed := cn.committed.Load()
	term := ref.CurrentTerm()
	if ref.State() != raft.Leader {
		return "", nil, false
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.stopped || cn.term != term || p.match == 0 || p.lastOK.IsZero() || time.Since(p.lastOK) > cn.fresh {
		return "", nil, false
	}
	commit := min(committed, p.match)
	if commit <= p.told {
		return "", nil, false
	}
	return p.addr, &raft.AppendEntriesRequest{
		RPCHeader:         cn.header,
		Term:              term,
		PrevLogEntry:      p.match,
		PrevLogTerm:       p.matchTerm,
		LeaderCommitIndex: commit,
	}, true
}

// notifyPipeline is the library's pipeline with its answers observed on the way to
// the library's decoder.
type notifyPipeline struct {
	raft.AppendPipeline
	cn        *commitNotifier
	out       chan raft.AppendFuture
	done      chan struct{}
	closeOnce sync.Once
}

func (p *notifyPipeline) AppendEntries(req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	p.cn.appends.Add(1)
	return p.AppendPipeline.AppendEntries(req, resp)
}

func (p *notifyPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

func (p *notifyPipeline) Close() error {
	p.closeOnce.Do(func() { close(p.done) })
	return p.AppendPipeline.Close()
}

// forward hands every finished future to the library after observing it, in order,
// until it hands over one that ends the library's decoder; from then on it drains the
// pipeline's answers unread.
//
// hashicorp/raft's pipelineDecode returns at the first answer that is not a success
// (a rejection, a newer term, or a failed RPC, whose zero response reads as a
// rejection), and pipelineReplicate closes the pipeline only once its send loop sees
// that, between two sends. A send made meanwhile waits for the transport to take it,
// and the transport waits for someone to take the previous answer: with the default
// MaxRPCsInFlight of 2 its channels are unbuffered, so one send is enough to block the
// replication to that follower for good (heartbeats go on, so no election heals it;
// hashicorp/raft#612). Draining here frees the transport, the send returns, and the
// library falls back to plain AppendEntries as it means to.
func (p *notifyPipeline) forward(id raft.ServerID, target raft.ServerAddress, in <-chan raft.AppendFuture) {
	decoding := true
	for {
		select {
		case f, ok := <-in:
			if !ok {
				close(p.out)
				return
			}
			if !decoding {
				continue // the library's decoder is gone: nobody reads p.out
			}
			// The future is already answered; Error does not wait.
			if f.Error() == nil {
				p.cn.observe(id, target, f.Request(), f.Response())
			}
			decoding = !endsDecoder(f.Request(), f.Response())
			select {
			case p.out <- f:
			case <-p.done:
				return
			}
		case <-p.done:
			return
		}
	}
}

// endsDecoder reports whether hashicorp/raft's pipelineDecode (v1.7.3, replication.go)
// stops after reading this answer. It tests what the library tests and nothing else: an
// answer of a newer term, or one that is not a success. A failed RPC leaves a response
// that is not a success, so it ends the decoder too.
func endsDecoder(req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) bool {
	return resp.Term > req.Term || !resp.Success
}

// notifyingTransport is the transport Raft gets: the network transport without the
// heartbeat fast path, with the commit notifier on AppendEntries.
type notifyingTransport struct {
	noHeartbeatFastPath
	cn *commitNotifier
	lc *leaderCommit
}

// Consumer is the transport's RPCs, with the leader's commit index noted on the way.
func (t notifyingTransport) Consumer() <-chan raft.RPC {
	return t.lc.tee(t.noHeartbeatFastPath.Consumer())
}

func (t notifyingTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.cn.appendEntries(id, target, args, resp)
}

func (t notifyingTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	return t.cn.appendEntriesPipeline(id, target)
}

// Close stops the notifier, then closes the network transport (Raft calls it on
// Shutdown).
func (t notifyingTransport) Close() error {
	t.cn.close()
	t.lc.close()
	return t.noHeartbeatFastPath.Close()
}

// commitHookFSM is the state machine Raft gets: it tells the notifier about every
// batch of committed entries before applying it, so followers apply in parallel with
// the leader. Raft hands the state machine committed entries only. Raft looks for
// other optional interfaces of its FSM (raft.ConfigurationStore): the FSM implements
// none today, and one added later must be forwarded here too.
type commitHookFSM struct {
	StateMachine
	committed func(idx uint64)
	met       *metrics // times the batches, snapshots and restores
}

func (f commitHookFSM) Apply(l *raft.Log) interface{} {
	f.committed(l.Index)
	start := time.Now()
	res := f.StateMachine.Apply(l)
	f.met.applied(1, time.Since(start))
	return res
}

func (f commitHookFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	if len(logs) > 0 {
		f.committed(logs[len(logs)-1].Index)
	}
	start := time.Now()
	res := f.StateMachine.ApplyBatch(logs)
	f.met.applied(len(logs), time.Since(start))
	return res
}

// Snapshot times the Persist of the snapshot it returns.
func (f commitHookFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := f.StateMachine.Snapshot()
	if err != nil {
		return nil, err
	}
	return timedSnapshot{FSMSnapshot: s, h: f.met.snapPersist}, nil
}

func (f commitHookFSM) Restore(rc io.ReadCloser) error {
	start := time.Now()
	err := f.StateMachine.Restore(rc)
	f.met.snapRestore.Observe(time.Since(start).Seconds())
	return err
}
