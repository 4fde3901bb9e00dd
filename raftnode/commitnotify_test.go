package raftnode

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fakeSender stands in for the network transport. The library's requests (the test
// sends them itself) are answered with accept(req); every empty request with a
// PrevLogEntry, which only the notifier sends here, goes to notified and is answered
// once release yields an answer.
type fakeSender struct {
	mu       sync.Mutex
	accept   func(req *raft.AppendEntriesRequest) bool
	notified chan *raft.AppendEntriesRequest
	release  chan error // nil: notifications are answered at once, with success
}

func newFakeSender() *fakeSender {
	return &fakeSender{
		accept:   func(*raft.AppendEntriesRequest) bool { return true },
		notified: make(chan *raft.AppendEntriesRequest, 16),
	}
}

func (f *fakeSender) setAccept(fn func(*raft.AppendEntriesRequest) bool) {
	f.mu.Lock()
	f.accept = fn
	f.mu.Unlock()
}

func (f *fakeSender) AppendEntries(_ raft.ServerID, _ raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if len(req.Entries) == 0 && req.PrevLogEntry > 0 {
		f.notified <- req
		if f.release != nil {
			if err := <-f.release; err != nil {
				return err
			}
		}
		*resp = raft.AppendEntriesResponse{Term: req.Term, Success: true}
		return nil
	}
	f.mu.Lock()
	ok := f.accept(req)
	f.mu.Unlock()
	*resp = raft.AppendEntriesResponse{Term: req.Term, Success: ok}
	return nil
}

func (f *fakeSender) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return &fakePipeline{f: f, done: make(chan raft.AppendFuture, 8)}, nil
}

type fakePipeline struct {
	f    *fakeSender
	done chan raft.AppendFuture
}

func (p *fakePipeline) AppendEntries(req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	if err := p.f.AppendEntries("", "", req, resp); err != nil {
		return nil, err
	}
	fut := fakeFuture{req: req, resp: resp}
	p.done <- fut
	return fut, nil
}

func (p *fakePipeline) Consumer() <-chan raft.AppendFuture { return p.done }
func (p *fakePipeline) Close() error                       { return nil }

type fakeFuture struct {
	req  *raft.AppendEntriesRequest
	resp *raft.AppendEntriesResponse
}

func (f fakeFuture) Error() error                          { return nil }
func (f fakeFuture) Start() time.Time                      { return time.Time{} }
func (f fakeFuture) Request() *raft.AppendEntriesRequest   { return f.req }
func (f fakeFuture) Response() *raft.AppendEntriesResponse { return f.resp }

// fakeRaft is the local Raft's state as the notifier sees it.
type fakeRaft struct {
	mu    sync.Mutex
	state raft.RaftState
	term  uint64
}

func (r *fakeRaft) set(state raft.RaftState, term uint64) {
	r.mu.Lock()
	r.state, r.term = state, term
	r.mu.Unlock()
}

func (r *fakeRaft) State() raft.RaftState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

func (r *fakeRaft) CurrentTerm() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.term
}

// notifierHarness is a notifier over a fakeSender whose senders report each round.
type notifierHarness struct {
	t      *testing.T
	cn     *commitNotifier
	f      *fakeSender
	r      *fakeRaft
	rounds chan raft.ServerID
}

func newNotifierHarness(t *testing.T, f *fakeSender) *notifierHarness {
	h := &notifierHarness{t: t, f: f, r: &fakeRaft{state: raft.Leader, term: 3}, rounds: make(chan raft.ServerID, 64)}
	h.cn = newCommitNotifier(f, time.Hour, true)
	h.cn.afterRound = func(id raft.ServerID) { h.rounds <- id }
	h.cn.setRaft(h.r)
	t.Cleanup(func() {
		if f.release != nil {
			close(f.release)
		}
		h.cn.close()
		h.cn.wg.Wait()
	})
	return h
}

var testHeader = raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte("127.0.0.1:1")}

// appendReq is a request of the library's in term carrying entries first..last (of
// entryTerm) after prev/prevTerm.
func appendReq(term, prev, prevTerm, first, last, entryTerm, commit uint64) *raft.AppendEntriesRequest {
	req := &raft.AppendEntriesRequest{
		RPCHeader: testHeader, Term: term,
		PrevLogEntry: prev, PrevLogTerm: prevTerm, LeaderCommitIndex: commit,
	}
	for i := first; i <= last && first > 0; i++ {
		req.Entries = append(req.Entries, &raft.Log{Index: i, Term: entryTerm, Type: raft.LogCommand})
	}
	return req
}

// send makes the library's plain AppendEntries to id through the notifier.
func (h *notifierHarness) send(id raft.ServerID, req *raft.AppendEntriesRequest) {
	h.t.Helper()
	var resp raft.AppendEntriesResponse
	if err := h.cn.appendEntries(id, raft.ServerAddress(id+":addr"), req, &resp); err != nil {
		h.t.Fatal(err)
	}
}

// notification waits for the next notification and, when notifications are answered
// at once, for the end of the round that sent it, so that no round is left queued.
func (h *notifierHarness) notification() *raft.AppendEntriesRequest {
	h.t.Helper()
	var req *raft.AppendEntriesRequest
	select {
	case req = <-h.f.notified:
	case <-time.After(5 * time.Second):
		h.t.Fatal("no notification sent")
	}
	if h.f.release == nil {
		h.waitRound()
	}
	return req
}

func (h *notifierHarness) waitRound() raft.ServerID {
	h.t.Helper()
	select {
	case id := <-h.rounds:
		return id
	case <-time.After(5 * time.Second):
		h.t.Fatal("no round of the sender")
		return ""
	}
}

// roundWithoutNotification waits until id's sender finished a round, then checks that
// it sent nothing and that no other round is queued.
func (h *notifierHarness) roundWithoutNotification(id raft.ServerID) {
	h.t.Helper()
	if got := h.waitRound(); got != id {
		h.t.Fatalf("round of %s, want %s", got, id)
	}
	select {
	case req := <-h.f.notified:
		h.t.Fatalf("unexpected notification %+v", *req)
	case got := <-h.rounds:
		h.t.Fatalf("unexpected second round of %s", got)
	default:
	}
}

func checkNotification(t *testing.T, req *raft.AppendEntriesRequest, term, prev, prevTerm, commit uint64) {
	t.Helper()
	if req.Term != term || req.PrevLogEntry != prev || req.PrevLogTerm != prevTerm || req.LeaderCommitIndex != commit || len(req.Entries) != 0 {
		t.Fatalf("notification {Term %d Prev %d/%d Commit %d, %d entries}, want {Term %d Prev %d/%d Commit %d, no entries}",
			req.Term, req.PrevLogEntry, req.PrevLogTerm, req.LeaderCommitIndex, len(req.Entries), term, prev, prevTerm, commit)
	}
	if req.LeaderCommitIndex > req.PrevLogEntry {
		t.Fatalf("commit index %d above PrevLogEntry %d", req.LeaderCommitIndex, req.PrevLogEntry)
	}
	if string(req.ID) != "n1" || string(req.Addr) != "127.0.0.1:1" {
		t.Fatalf("notification does not name the leader: ID %q Addr %q", req.ID, req.Addr)
	}
}

// After an accepted append the follower is told the commit index, capped at the last
// entry it is known to hold; the pipeline's answers count like plain ones, and an
// entry confirmed after its commit is notified at once.
func TestCommitNotifier_NotifiesUpToMatch(t *testing.T) {
	h := newNotifierHarness(t, newFakeSender())
	h.send("n2", appendReq(3, 4, 2, 5, 7, 3, 4))
	h.cn.notifyCommit(10)
	checkNotification(t, h.notification(), 3, 7, 3, 7)

	// Entries 8 and 9 through the pipeline; the test plays the library's decoder.
	pl, err := h.cn.appendEntriesPipeline("n2", "n2:addr")
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	if _, err := pl.AppendEntries(appendReq(3, 7, 3, 8, 9, 3, 7), new(raft.AppendEntriesResponse)); err != nil {
		t.Fatal(err)
	}
	if fut := <-pl.Consumer(); fut.Request().Entries[1].Index != 9 {
		t.Fatalf("pipeline handed the library another future: %+v", fut.Request())
	}
	checkNotification(t, h.notification(), 3, 9, 3, 9)

	// Nothing new to tell: an older commit, a heartbeat, a commit beyond what it holds.
	h.cn.notifyCommit(9)
	h.send("n2", appendReq(3, 0, 0, 0, 0, 0, 0))
	h.cn.notifyCommit(11)
	h.roundWithoutNotification("n2")
	// The library's own request already carried commit 11 (capped at its last entry).
	h.send("n2", appendReq(3, 9, 3, 10, 11, 3, 11))
	h.cn.notifyCommit(12)
	h.roundWithoutNotification("n2")
	h.send("n2", appendReq(3, 11, 3, 12, 12, 3, 11))
	checkNotification(t, h.notification(), 3, 12, 3, 12)
}

// Nothing is sent while this node is not the leader, nor when Raft's term is not the
// term the tracked state belongs to; answers to an older term's requests and rejected
// requests are not learned from, and a new term starts from scratch.
func TestCommitNotifier_NoNotifyForStaleTermOrFollower(t *testing.T) {
	f := newFakeSender()
	h := newNotifierHarness(t, f)
	h.send("n2", appendReq(3, 4, 3, 5, 7, 3, 4))

	h.r.set(raft.Follower, 3)
	h.cn.notifyCommit(7)
	h.roundWithoutNotification("n2")

	h.r.set(raft.Leader, 4) // leader again in a later term, nothing learned in it yet
	h.cn.notifyCommit(8)
	h.roundWithoutNotification("n2")

	h.send("n2", appendReq(4, 7, 3, 8, 8, 4, 7)) // term 4: tracking starts afresh
	checkNotification(t, h.notification(), 4, 8, 4, 8)

	// A late answer to a term-3 request claims entries up to 20: ignored.
	h.send("n2", appendReq(3, 7, 3, 8, 20, 3, 7))
	h.cn.notifyCommit(20)
	h.roundWithoutNotification("n2")

	// A rejected request teaches nothing, not even that the follower exists.
	f.setAccept(func(*raft.AppendEntriesRequest) bool { return false })
	h.send("n3", appendReq(4, 8, 4, 9, 9, 4, 8))
	f.setAccept(func(*raft.AppendEntriesRequest) bool { return true })
	h.cn.notifyCommit(21)
	h.roundWithoutNotification("n2")
	h.cn.mu.Lock()
	_, known := h.cn.peers["n3"]
	h.cn.mu.Unlock()
	if known {
		t.Fatal("a rejected request created follower state")
	}

	h.r.set(raft.Leader, 5) // the term moved on again
	h.send("n2", appendReq(4, 8, 4, 9, 12, 4, 8))
	h.roundWithoutNotification("n2")
}

// At most one notification is in flight per follower; commits meanwhile coalesce into
// one more with the newest index. A failed notification leaves the follower to the
// library until one of its requests succeeds again.
func TestCommitNotifier_OneInFlightCoalesced(t *testing.T) {
	f := newFakeSender()
	f.release = make(chan error)
	h := newNotifierHarness(t, f)
	h.send("n2", appendReq(3, 0, 0, 1, 50, 3, 0))
	h.cn.notifyCommit(10)
	checkNotification(t, h.notification(), 3, 50, 3, 10)
	for i := uint64(11); i <= 30; i++ {
		h.cn.notifyCommit(i)
	}
	select {
	case req := <-f.notified:
		t.Fatalf("second notification in flight: %+v", *req)
	default:
	}
	f.release <- nil
	h.waitRound()
	checkNotification(t, h.notification(), 3, 50, 3, 30)
	f.release <- errors.New("connection reset")
	h.waitRound()

	h.cn.notifyCommit(31)
	h.roundWithoutNotification("n2")
	h.send("n2", appendReq(3, 0, 0, 0, 0, 0, 0)) // a heartbeat gets through: reachable again
	h.cn.notifyCommit(32)
	checkNotification(t, h.notification(), 3, 50, 3, 32)
	f.release <- nil
	h.waitRound()
}

// With notifications off the notifier only observes.
func TestCommitNotifier_Disabled(t *testing.T) {
	f := newFakeSender()
	cn := newCommitNotifier(f, time.Hour, false)
	cn.setRaft(&fakeRaft{state: raft.Leader, term: 3})
	var resp raft.AppendEntriesResponse
	if err := cn.appendEntries("n2", "n2:addr", appendReq(3, 0, 0, 1, 5, 3, 0), &resp); err != nil {
		t.Fatal(err)
	}
	cn.notifyCommit(5)
	cn.close()
	cn.wg.Wait()
	if appends, _, notifies := cn.counts(); appends != 1 || notifies != 0 || len(f.notified) != 0 {
		t.Fatalf("appends %d, notifies %d, %d notifications", appends, notifies, len(f.notified))
	}
}

// answered is a finished pipeline future.
type answered struct {
	req  *raft.AppendEntriesRequest
	resp *raft.AppendEntriesResponse
}

func (a answered) Error() error                          { return nil }
func (a answered) Start() time.Time                      { return time.Time{} }
func (a answered) Request() *raft.AppendEntriesRequest   { return a.req }
func (a answered) Response() *raft.AppendEntriesResponse { return a.resp }

// The pipeline wrapper keeps taking the transport's answers once it has handed the
// library one that ends the library's decoder (a rejection): otherwise the transport,
// whose channels are unbuffered with the default two RPCs in flight, blocks the next
// pipelined send for good and the follower gets no entry again (hashicorp/raft#612,
// seen in the fault suite after a full disk).
func TestNotifyPipeline_DrainsAfterTheDecoderStops(t *testing.T) {
	cn := newCommitNotifier(newFakeSender(), time.Hour, false)
	in := make(chan raft.AppendFuture) // unbuffered, as the transport's with MaxRPCsInFlight 2
	p := &notifyPipeline{cn: cn, out: make(chan raft.AppendFuture), done: make(chan struct{})}
	go p.forward("n2", "127.0.0.1:1", in)
	t.Cleanup(func() { close(p.done) })

	give := func(f raft.AppendFuture) bool {
		select {
		case in <- f:
			return true
		case <-time.After(5 * time.Second):
			return false
		}
	}
	req := &raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 10, Entries: []*raft.Log{{Index: 11, Term: 3}}}
	// A success goes through to the library's decoder.
	if !give(answered{req, &raft.AppendEntriesResponse{Term: 3, Success: true}}) {
		t.Fatal("the first answer was not taken")
	}
	if f := <-p.out; !f.Response().Success {
		t.Fatal("the decoder got another answer")
	}
	// A rejection goes through too, and the decoder stops reading after it.
	if !give(answered{req, &raft.AppendEntriesResponse{Term: 3, Success: false}}) {
		t.Fatal("the rejection was not taken")
	}
	if f := <-p.out; f.Response().Success {
		t.Fatal("the decoder did not get the rejection")
	}
	// Answers to the sends made before the library noticed are taken all the same.
	for i := range 3 {
		if !give(answered{req, &raft.AppendEntriesResponse{Term: 3, Success: false}}) {
			t.Fatalf("answer %d after the decoder stopped was not taken: the transport would block", i+1)
		}
	}
}

// endsDecoder matches what hashicorp/raft's pipelineDecode stops on.
func TestEndsDecoder(t *testing.T) {
	req := &raft.AppendEntriesRequest{Term: 4}
	for _, tc := range []struct {
		resp raft.AppendEntriesResponse
		want bool
	}{
		{raft.AppendEntriesResponse{Term: 4, Success: true}, false},
		{raft.AppendEntriesResponse{Term: 4, Success: false}, true},
		{raft.AppendEntriesResponse{Term: 5, Success: true}, true},
		{raft.AppendEntriesResponse{}, true}, // a failed RPC's response
	} {
		if got := endsDecoder(req, &tc.resp); got != tc.want {
			t.Errorf("endsDecoder(%+v) = %v, want %v", tc.resp, got, tc.want)
		}
	}
}
