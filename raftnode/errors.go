package raftnode

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/model"
)

// Sentinel errors. Every error a Node returns for one of these conditions wraps the
// sentinel, so callers map them with errors.Is; each is, or is a case of, one of the
// outcomes of model's vocabulary, which is all the layers above need to know.
var (
	// ErrNotLeader means the operation must run on the leader and this node is not
	// it. Nothing was written; the caller may retry on the leader.
	ErrNotLeader = model.ErrNotLeader
	// ErrNoLeader means no leader is known to this node. Errors that wrap it also
	// wrap ErrNotLeader.
	ErrNoLeader = model.ErrNoLeader
	// ErrLeadershipLost means the node lost leadership while the operation was in
	// flight: the write may or may not have been committed.
	ErrLeadershipLost = model.Sentinel("leadership lost", model.ErrUnavailable)
	// ErrTimeout means the operation did not finish before its deadline. A write that
	// timed out after it was enqueued may still be committed.
	ErrTimeout = model.ErrTimeout
	// ErrShutdown means the node is shut down or shutting down.
	ErrShutdown = model.Sentinel("raft node is shut down", model.ErrUnavailable)
	// ErrInvalidConfig marks a Config that Validate rejected; the error is a *ConfigError.
	ErrInvalidConfig = errors.New("invalid raft configuration")
	// ErrNodeRunning means Recover found the node's Raft storage locked by a running
	// process; nothing was changed.
	ErrNodeRunning = errors.New("node appears to be running")
	// ErrClusterMismatch refuses a join from a server of another cluster.
	ErrClusterMismatch = model.Sentinel("the server belongs to another cluster", model.ErrConflict)
	// ErrStorage means the leader could not write the entry to its own Raft log (a full
	// or failing disk): the entry was neither stored nor sent to any other server, so
	// the write was not applied. The leader steps down; the caller may retry once
	// another server leads. Errors that wrap it are *DiskError.
	ErrStorage = model.ErrStorage
)

// ConfigError names the Config field (or the peer entry) that is wrong.
// It matches ErrInvalidConfig with errors.Is.
type ConfigError struct {
	Field   string
	Message string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("raftnode: %s: %s", e.Field, e.Message) }

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

func configErr(field, format string, args ...any) error {
	return &ConfigError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// raftTransferTimeout is the text of hashicorp/raft's error for a leadership transfer
// the target did not complete in time (raft.go, leadershipTransfer).
const raftTransferTimeout = "leadership transfer timeout"

// raftNoTransferTarget is hashicorp/raft's error for a transfer without a target when
// it knows no other voter (raft.go, leaderLoop).
const raftNoTransferTarget = "cannot find peer"

// mapRaftErr translates hashicorp/raft errors into this package's sentinels, keeping
// the original error in the chain.
func (n *Node) mapRaftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return n.notLeaderErr(err)
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w: raft: %w", ErrLeadershipLost, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: raft: %w", ErrTimeout, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: raft: %w", ErrShutdown, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	case err.Error() == raftNoTransferTarget:
		// Raft found no voter to hand leadership to (the configuration changed since
		// TransferLeadership looked).
		return fmt.Errorf("%w: there is no other voter to hand leadership to: raft: %w", model.ErrConflict, err)
	case err.Error() == raftTransferTimeout:
		// The target did not take over within an election timeout; this node still
		// leads. Raft has no sentinel for it.
		return fmt.Errorf("%w: raft: %w", ErrTimeout, err)
	}
	// Raft answers a leader's failed log write with the log store's error flattened
	// into text (raft.LogCache quotes it); the watch below the cache kept the error.
	if _, werr := n.append.failing(); werr != nil && strings.Contains(err.Error(), werr.Error()) {
		return werr
	}
	return err
}

// notLeaderErr returns ErrNotLeader, also wrapping ErrNoLeader when no leader is known.
func (n *Node) notLeaderErr(cause error) error {
	if _, id := n.raft.LeaderWithID(); id == "" {
		if cause != nil {
			return fmt.Errorf("%w: %w: raft: %w", ErrNotLeader, ErrNoLeader, cause)
		}
		return fmt.Errorf("%w: %w", ErrNotLeader, ErrNoLeader)
	}
	if cause != nil {
		return fmt.Errorf("%w: raft: %w", ErrNotLeader, cause)
	}
	return ErrNotLeader
}

// ctxErr wraps a context's error in ErrTimeout (or ErrShutdown when the node stopped).
func (n *Node) ctxErr(ctx context.Context) error {
	if n.isClosed() {
		return ErrShutdown
	}
	return fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
}
