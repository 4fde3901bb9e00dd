package raftnode

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// What keeps a node from being ready besides the leader: it cannot write its Raft log
// (a full disk), its state machine cannot apply (the same, for the state file), or it
// lags what the leader has committed. A follower whose log cannot grow still receives
// the leader's commit index but commits only what its own log holds, so comparing the
// applied index with its own commit index would call it ready while it falls ever
// further behind; the leader's commit index, as the leader last sent it, shows the lag.

// DefaultMaxLag is how many entries a node may have applied fewer than the leader has
// committed and still be ready.
const DefaultMaxLag = 1024

// appendWatch is the log store Raft writes to, recording whether the last write failed.
// A failed write's error becomes a *DiskError, which names no file.
type appendWatch struct {
	raft.LogStore
	mu      sync.Mutex
	lastErr error
	since   time.Time
	// fault, when set (tests), fails every write as a full disk would.
	fault atomic.Pointer[error]
}

func (a *appendWatch) record(err error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		err = &DiskError{Op: "cannot write the Raft log", Err: err}
	}
	switch {
	case err == nil:
		a.lastErr = nil
	case a.lastErr == nil:
		a.lastErr, a.since = err, time.Now()
	default:
		a.lastErr = err
	}
	return err
}

// DiskError is a failed write to this node's storage. Its message names what failed
// and the system's reason (such as "no space left on device"), never a file path, so
// it can be shown to clients; Unwrap gives the original error.
type DiskError struct {
	Op  string
	Err error
}

func (e *DiskError) Error() string { return e.Op + ": " + Pathless(e.Err) }

// Unwrap returns the storage's own error.
func (e *DiskError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrStorage) true.
func (e *DiskError) Is(target error) bool { return target == ErrStorage }

// Pathless is err's message without the file paths of the *fs.PathError and
// *os.LinkError in it: the operation and the system's reason only.
func Pathless(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Op + ": " + le.Err.Error()
	}
	return err.Error()
}

// StoreLog writes one entry.
func (a *appendWatch) StoreLog(l *raft.Log) error { return a.StoreLogs([]*raft.Log{l}) }

// StoreLogs writes entries.
func (a *appendWatch) StoreLogs(ls []*raft.Log) error {
	if f := a.fault.Load(); f != nil {
		return a.record(*f)
	}
	return a.record(a.LogStore.StoreLogs(ls))
}

// failing returns since when writes fail and the error of the last one, when it failed.
func (a *appendWatch) failing() (time.Time, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.since, a.lastErr
}

// leaderCommit records the highest commit index a leader has sent this node.
type leaderCommit struct {
	idx       atomic.Uint64
	once      sync.Once
	out       chan raft.RPC
	stop      chan struct{}
	stopOnce  sync.Once
	closeOnce sync.Once

	// installing is the snapshot installation the main Raft loop is busy with (nil:
	// none); only the tee goroutine and the installation's answer touch it.
	installing atomic.Pointer[installation]
	// self is this node's RPC header, for the heartbeats the tee answers.
	self raft.RPCHeader
}

// installation is an InstallSnapshot RPC the main Raft loop took and has not answered.
type installation struct {
	term   uint64
	leader []byte // the sender's server id
}

// tee hands Raft the transport's RPCs through a channel of its own, noting the commit
// index of every AppendEntries on the way.
//
// It also answers, itself, the heartbeats of the leader whose snapshot the main loop is
// installing. Without the heartbeat fast path (transport.go) a heartbeat waits for the
// main loop, and hashicorp/raft's follower runs a whole InstallSnapshot there, receiving
// the snapshot and waiting for the state machine to restore it. Installing a large state
// takes longer than the leader lease; when every follower installs at once, as after a
// restore on the leader (PUT /v1/snapshot), the leader hears from none of them and steps
// down, and the restore fails with "leadership lost". The answer the tee gives is the
// one the loop would give: the follower accepted the leader's term with the
// InstallSnapshot (its term cannot change while the loop is busy), and a heartbeat
// carries no entries, no log position and no commit index, so accepting it changes
// nothing but the follower's last contact. Heartbeats of any other term or sender still
// wait for the loop.
func (lc *leaderCommit) tee(in <-chan raft.RPC) <-chan raft.RPC {
	lc.once.Do(func() {
		lc.out = make(chan raft.RPC)
		stop := lc.stopCh()
		go func() {
			for {
				var rpc raft.RPC
				select {
				case rpc = <-in:
				case <-stop:
					return
				}
				switch req := rpc.Command.(type) {
				case *raft.AppendEntriesRequest:
					lc.note(req.LeaderCommitIndex)
					if lc.answerDuringInstall(rpc, req) {
						continue
					}
				case *raft.InstallSnapshotRequest:
					rpc = lc.trackInstall(rpc, req)
				}
				select {
				case lc.out <- rpc:
				case <-stop:
					return
				}
			}
		}()
	})
	return lc.out
}

// trackInstall marks the installation in progress until the main loop answers rpc.
func (lc *leaderCommit) trackInstall(rpc raft.RPC, req *raft.InstallSnapshotRequest) raft.RPC {
	inst := &installation{term: req.Term, leader: append([]byte(nil), req.RPCHeader.ID...)}
	answer := rpc.RespChan
	relay := make(chan raft.RPCResponse, 1)
	rpc.RespChan = relay
	lc.installing.Store(inst)
	go func() {
		resp := <-relay
		lc.installing.CompareAndSwap(inst, nil)
		answer <- resp
	}()
	return rpc
}

// answerDuringInstall answers rpc, a heartbeat of the leader whose snapshot is being
// installed, with what the main loop would answer; false: the loop must see it.
func (lc *leaderCommit) answerDuringInstall(rpc raft.RPC, req *raft.AppendEntriesRequest) bool {
	inst := lc.installing.Load()
	if inst == nil || !isHeartbeat(req) || req.Term != inst.term || !bytes.Equal(req.RPCHeader.ID, inst.leader) {
		return false
	}
	rpc.Respond(&raft.AppendEntriesResponse{RPCHeader: lc.self, Term: req.Term, Success: true}, nil)
	return true
}

// isHeartbeat is hashicorp/raft's test for a heartbeat (net_transport.go).
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	return req.Term != 0 && req.RPCHeader.Addr != nil && req.PrevLogEntry == 0 && req.PrevLogTerm == 0 &&
		len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}

func (lc *leaderCommit) stopCh() chan struct{} {
	lc.stopOnce.Do(func() { lc.stop = make(chan struct{}) })
	return lc.stop
}

// close ends the tee (the transport is closing). It is idempotent.
func (lc *leaderCommit) close() {
	ch := lc.stopCh()
	lc.closeOnce.Do(func() { close(ch) })
}

func (lc *leaderCommit) note(idx uint64) {
	for {
		cur := lc.idx.Load()
		if idx <= cur || lc.idx.CompareAndSwap(cur, idx) {
			return
		}
	}
}
