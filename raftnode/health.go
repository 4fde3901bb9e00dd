package raftnode

import (
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
}

// tee hands Raft the transport's RPCs through a channel of its own, noting the commit
// index of every AppendEntries on the way.
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
				if req, ok := rpc.Command.(*raft.AppendEntriesRequest); ok {
					lc.note(req.LeaderCommitIndex)
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
