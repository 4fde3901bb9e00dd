// Package fsm is Roster's Raft state machine: the command encoding, the dispatch of
// committed entries to the store, and the snapshot format (a copy of the state file).
package fsm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// Result is what Apply and ApplyBatch return for every entry: the entry's index and, for
// a command the state refused, the store's error (matchable with errors.Is against
// model.ErrInvalid, model.ErrNotFound and model.ErrConflict).
type Result struct {
	Index uint64
	Err   error
	// Batch holds, for a BatchRequest entry, the result of each of its commands in
	// order (nil for one that applied); Err is then nil.
	Batch []error
}

// decodeFunc decodes the payload of one command type; a payload that cannot be decoded
// is a *Halt (see ApplyBatch).
type decodeFunc func(t MessageType, idx uint64, payload []byte) (Command, error)

// FSM applies committed Raft entries to a store. It implements raft.FSM and
// raft.BatchingFSM. Applying is idempotent: the applied index is stored in the same
// transaction as the entries' effects, and entries at or below it are skipped, so
// replaying the log after a restart changes nothing.
type FSM struct {
	store    *store.Store
	logger   *slog.Logger
	codec    msgCodec
	decoders map[MessageType]decodeFunc // the command table, built in New

	mu sync.Mutex
	// appliedCh is closed and replaced after every batch and restore.
	appliedCh chan struct{}
	// stallErr is the storage failure the apply path is waiting out (nil: none).
	stallErr error
	// stop ends a stalled apply's retries (Stop).
	stop     chan struct{}
	stopOnce sync.Once
	// retryMin and retryMax bound the wait between retries of a stalled batch.
	retryMin, retryMax time.Duration

	// checks are the latest state hashes taken at CheckState entries, oldest first.
	checks []StateCheck
	// checked is signalled (capacity 1) when a check is recorded.
	checked chan struct{}
	// alarm, once set, says the state is known to be wrong (RaiseAlarm).
	alarm error
	// halt, once set, is the entry this node cannot apply: nothing is applied after it
	// in this process (Halted).
	halt *Halt
	// newest is the newest command type this FSM applies (NewestType but in tests that
	// play an older build).
	newest MessageType
}

// StateCheck is the hash of the state as of a CheckState entry.
type StateCheck struct {
	Index uint64
	Hash  string
}

// maxChecks is how many state checks a node remembers.
const maxChecks = 16

// recordCheck keeps the hash taken at idx (a batch retried after a storage failure
// records it again, with the same value).
func (f *FSM) recordCheck(idx uint64, sum string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.checks {
		if f.checks[i].Index == idx {
			f.checks[i].Hash = sum
			return
		}
	}
	f.checks = append(f.checks, StateCheck{Index: idx, Hash: sum})
	if len(f.checks) > maxChecks {
		f.checks = f.checks[len(f.checks)-maxChecks:]
	}
	select {
	case f.checked <- struct{}{}:
	default:
	}
}

// StateCheck returns the hash recorded at index idx, if this node still remembers it.
func (f *FSM) StateCheck(idx uint64) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.checks {
		if c.Index == idx {
			return c.Hash, true
		}
	}
	return "", false
}

// LatestStateCheck returns the newest recorded check (ok false: none yet).
func (f *FSM) LatestStateCheck() (StateCheck, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.checks) == 0 {
		return StateCheck{}, false
	}
	return f.checks[len(f.checks)-1], true
}

// Checked is signalled when a state check is recorded.
func (f *FSM) Checked() <-chan struct{} { return f.checked }

// RaiseAlarm records that this node's state is known to differ from its peers'. It
// stays raised until the process restarts: the node reports itself not ready and stops
// serving reads.
func (f *FSM) RaiseAlarm(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.alarm == nil {
		f.alarm = err
	}
}

// Alarm returns the raised alarm, or nil.
func (f *FSM) Alarm() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.alarm
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// New returns an FSM that applies entries to s. A nil logger discards logs.
func New(s *store.Store, logger *slog.Logger) *FSM { return newFSM(s, logger, NewestType) }

// newFSM returns an FSM that applies the command types up to newest only, as a build
// whose NewestType is newest would (tests of rolling upgrades play older builds so).
func newFSM(s *store.Store, logger *slog.Logger, newest MessageType) *FSM {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	f := &FSM{
		store:     s,
		logger:    logger,
		codec:     newMsgCodec(),
		appliedCh: make(chan struct{}),
		stop:      make(chan struct{}),
		checked:   make(chan struct{}, 1),
		retryMin:  50 * time.Millisecond,
		retryMax:  5 * time.Second,
		newest:    newest,
	}
	f.decoders = map[MessageType]decodeFunc{}
	register[RegisterInstanceRequest](f)
	register[DeregisterInstanceRequest](f)
	register[UpdateInstanceRequest](f)
	register[UpsertServiceRequest](f)
	register[DeleteServiceRequest](f)
	register[UpsertClusterRequest](f)
	register[UpsertNamespaceRequest](f)
	register[DeleteNamespaceRequest](f)
	register[SetHealthRequest](f)
	register[SetHealthManualRequest](f)
	register[UpsertMemberRequest](f)
	register[RemoveMemberRequest](f)
	register[UpdateSettingsRequest](f)
	register[CASRequest](f)
	register[SetClusterIDRequest](f)
	register[CheckStateRequest](f)
	register[ACLBootstrapRequest](f)
	register[CreateTokenRequest](f)
	register[DeleteTokenRequest](f)
	register[SetHealthAtRequest](f)
	register[SetHealthManualAtRequest](f)
	register[AutoDeregisterRequest](f)
	register[BatchRequest](f)
	register[LogCheckpointRequest](f)
	for t := range f.decoders {
		if t > newest {
			delete(f.decoders, t)
		}
	}
	return f
}

// register adds command type C to f's command table.
func register[C Command](f *FSM) {
	var zero C
	f.decoders[zero.MessageType()] = func(t MessageType, idx uint64, payload []byte) (Command, error) {
		var c C
		if err := f.codec.decode(payload, &c); err != nil {
			return nil, &Halt{Index: idx, Type: t, Reason: HaltUndecodable, Err: err}
		}
		return c, nil
	}
}

// NewestType is the newest command type this FSM applies (fsm.NewestType, except for
// one made by NewOlder).
func (f *FSM) NewestType() MessageType { return f.newest }

// NewOlder returns an FSM that applies the command types up to newest only, as a build
// whose NewestType was newest does: for tests of rolling upgrades, which play older
// builds with it.
func NewOlder(s *store.Store, logger *slog.Logger, newest MessageType) *FSM {
	return newFSM(s, logger, min(newest, NewestType))
}

// Store returns the store the FSM applies to.
func (f *FSM) Store() *store.Store { return f.store }

// AppliedIndex returns the index of the last applied entry, as stored in the state.
func (f *FSM) AppliedIndex() uint64 { return f.store.AppliedIndex() }

// Apply applies one entry; it is ApplyBatch of that entry alone. It returns a *Result.
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies a batch of entries in one store transaction, which also stores the
// batch's last index as the applied index. It returns one *Result per entry, in order.
//
//   - Entries at or below the stored applied index are skipped (already applied).
//   - LogConfiguration entries (and any non-command entry) only advance the applied index.
//   - A command the state refuses (validation, not found, conflict) gets Result.Err and
//     does not affect the other entries of the batch.
//   - An unknown command type with IgnoreUnknownFlag is skipped.
//   - An entry this node cannot apply — a command type newer than this build (a rolling
//     upgrade that wrote it too early), an empty entry, a payload that cannot be decoded
//     — halts the state machine: the entries before it are applied, it and every later
//     entry are not, ever, in this process; Halted says why, the node reports itself
//     not ready, and a restart on a build that applies the entry resumes from it (the
//     entries are in the log). The entry is never skipped and the node never panics, so
//     its state never silently diverges and it never crash-loops.
//   - A storage failure (a full disk, an I/O error) rolls the transaction back and the
//     batch is tried again, with backoff, until it applies: the node stops applying —
//     Stalled says why, and the node reports itself not ready — instead of crashing or
//     skipping entries, and carries on once the failure is cured. Stop ends the retries
//     for a shutdown; the entries are then applied after the restart, from the log.
//
// After Stop, or once halted, nothing more is applied: every result is ErrStopped.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	if len(logs) == 0 {
		return []interface{}{}
	}
	results := make([]interface{}, len(logs))
	if f.stopped() || f.Halted() != nil {
		stoppedResults(results, logs)
		return results
	}
	cmds, halt := f.decodeAll(logs)
	n := len(logs)
	if halt != nil {
		n = f.haltPosition(logs, halt)
	}
	if n > 0 && !f.applyWithRetry(logs[:n], cmds[:n], results[:n]) {
		stoppedResults(results, logs)
		return results
	}
	if halt == nil {
		return results
	}
	f.setHalt(halt)
	stoppedResults(results[n:], logs[n:])
	// Raft hands the state machine the next entries as soon as this call returns: wait
	// for the shutdown instead, so that nothing after the entry is ever applied.
	<-f.stop
	return results
}

// stoppedResults fills results with ErrStopped for logs.
func stoppedResults(results []interface{}, logs []*raft.Log) {
	for i := range results {
		results[i] = &Result{Index: logs[i].Index, Err: ErrStopped}
	}
}

// haltPosition is the position in logs of the entry halt names.
func (f *FSM) haltPosition(logs []*raft.Log, halt *Halt) int {
	for i, l := range logs {
		if l.Index == halt.Index {
			return i
		}
	}
	return 0
}

// applyWithRetry applies logs (decoded as cmds) into results, retrying storage failures
// until they apply (true) or the FSM is stopped (false).
func (f *FSM) applyWithRetry(logs []*raft.Log, cmds []Command, results []interface{}) bool {
	wait := f.retryMin
	for attempt := 1; ; attempt++ {
		err := f.applyOnce(logs, cmds, results)
		if errors.Is(err, store.ErrClosed) {
			// The node is shutting down: the entries are applied from the log next time.
			return false
		}
		if err == nil {
			if attempt > 1 {
				f.setStall(nil)
				f.logger.Warn("applying resumed after a storage failure", "first", logs[0].Index, "last", logs[len(logs)-1].Index, "attempts", attempt)
			}
			f.notifyApplied()
			return true
		}
		if attempt == 1 || attempt%20 == 0 {
			f.logger.Error("applying committed entries failed; retrying until the storage recovers",
				"first", logs[0].Index, "last", logs[len(logs)-1].Index, "attempt", attempt, "error", err)
		}
		f.setStall(err)
		select {
		case <-f.stop:
			return false
		case <-time.After(wait):
		}
		wait = min(wait*2, f.retryMax)
	}
}

// ErrStopped is the result of entries left unapplied because the FSM was stopped while
// its storage failed; they are applied from the log after the restart.
var ErrStopped = errors.New("fsm: stopped before the entry could be applied")

// applyOnce applies logs, decoded as cmds (nil for entries that carry no command), in
// one transaction and fills results; an error is a storage failure (nothing applied).
func (f *FSM) applyOnce(logs []*raft.Log, cmds []Command, results []interface{}) error {
	return f.store.Update(func(tx *store.Txn) error {
		applied := tx.AppliedIndex()
		last := applied
		for i, l := range logs {
			res := &Result{Index: l.Index}
			results[i] = res
			if l.Index <= applied {
				continue
			}
			last = max(last, l.Index)
			if l.Type != raft.LogCommand {
				continue
			}
			if b, ok := cmds[i].(decodedBatch); ok {
				errs, err := f.applyBatch(tx, l.Index, b)
				if err != nil {
					return fmt.Errorf("entry %d: %w", l.Index, err)
				}
				res.Batch = errs
				continue
			}
			if err := f.applyDecoded(tx, l.Index, cmds[i]); err != nil {
				if !isDomainError(err) {
					return fmt.Errorf("entry %d: %w", l.Index, err)
				}
				f.logger.Debug("command refused", "index", l.Index, "type", MessageType(l.Data[0]), "error", err)
				res.Err = err
			}
		}
		return tx.SetAppliedIndex(last)
	})
}

// decodedBatch is a BatchRequest entry with its commands decoded.
type decodedBatch struct {
	BatchRequest
	cmds []Command
}

// decodeAll decodes the command entries of logs that are above the applied index. It
// stops at the first entry this node cannot apply and returns its *Halt.
func (f *FSM) decodeAll(logs []*raft.Log) ([]Command, *Halt) {
	cmds := make([]Command, len(logs))
	applied := f.store.AppliedIndex()
	for i, l := range logs {
		if l.Index <= applied || l.Type != raft.LogCommand {
			continue
		}
		cmd, err := f.decodeCommand(l.Index, l.Data)
		if b, ok := cmd.(BatchRequest); ok && err == nil {
			cmd, err = f.decodeBatch(l.Index, b)
		}
		if err != nil {
			var h *Halt
			if !errors.As(err, &h) {
				h = &Halt{Index: l.Index, Reason: HaltUndecodable, Err: err}
			}
			return cmds, h
		}
		cmds[i] = cmd
	}
	return cmds, nil
}

// decodeBatch decodes every command of a batch: a batch with a command this node cannot
// apply halts before any of it applies.
func (f *FSM) decodeBatch(idx uint64, b BatchRequest) (Command, error) {
	if len(b.Commands) > MaxBatchCommands {
		return nil, &Halt{Index: idx, Type: BatchType, Reason: HaltUndecodable,
			Err: fmt.Errorf("batch of %d commands (at most %d)", len(b.Commands), MaxBatchCommands)}
	}
	d := decodedBatch{BatchRequest: b, cmds: make([]Command, len(b.Commands))}
	for i, data := range b.Commands {
		cmd, err := f.decodeCommand(idx, data)
		if err != nil {
			return nil, err
		}
		d.cmds[i] = cmd
	}
	return d, nil
}

// Stalled returns the storage failure that keeps committed entries from being applied,
// or nil.
func (f *FSM) Stalled() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stallErr
}

func (f *FSM) setStall(err error) {
	f.mu.Lock()
	f.stallErr = err
	f.mu.Unlock()
}

// Stop ends the retries of a stalled apply (the node is shutting down). It is idempotent.
func (f *FSM) Stop() { f.stopOnce.Do(func() { close(f.stop) }) }

// decodeCommand is decodeEntry, with the command a CASRequest wraps decoded too.
func (f *FSM) decodeCommand(idx uint64, data []byte) (Command, error) {
	cmd, err := f.decodeEntry(idx, data)
	if c, ok := cmd.(CASRequest); ok && err == nil {
		return f.decodeCAS(idx, c)
	}
	return cmd, err
}

// decodeEntry decodes one command (type byte, then payload) of entry idx. It returns
// nil for an unknown type marked ignorable, and a *Halt for an unknown type, empty data
// or a payload that cannot be decoded.
func (f *FSM) decodeEntry(idx uint64, data []byte) (Command, error) {
	if len(data) == 0 {
		return nil, &Halt{Index: idx, Reason: HaltUndecodable, Err: errors.New("empty command")}
	}
	t := MessageType(data[0])
	dec, ok := f.decoders[t&^IgnoreUnknownFlag]
	if !ok {
		if t&IgnoreUnknownFlag != 0 {
			f.logger.Warn("skipping unknown ignorable command", "index", idx, "type", t)
			return nil, nil
		}
		return nil, &Halt{Index: idx, Type: t, Reason: HaltNeedsUpgrade}
	}
	return dec(t, idx, data[1:])
}

// applyDecoded applies cmd (nil: a skipped ignorable command) at idx.
func (f *FSM) applyDecoded(tx *store.Txn, idx uint64, cmd Command) error {
	if cmd == nil {
		return nil
	}
	return cmd.apply(f, tx, idx)
}

// applyBatch applies the decoded commands of a BatchRequest in order at idx and returns
// each one's domain error. A storage failure is returned as err: the caller rolls the
// whole transaction back.
func (f *FSM) applyBatch(tx *store.Txn, idx uint64, b decodedBatch) (errs []error, err error) {
	errs = make([]error, len(b.cmds))
	for i, cmd := range b.cmds {
		err := f.applyDecoded(tx, idx, cmd)
		if err == nil {
			continue
		}
		if !isDomainError(err) {
			return nil, fmt.Errorf("command %d of the batch: %w", i, err)
		}
		f.logger.Debug("command refused", "index", idx, "batch_position", i, "type", cmd.MessageType(), "error", err)
		errs[i] = err
	}
	return errs, nil
}

// isDomainError reports whether err is the state refusing a command, as opposed to a
// storage failure.
func isDomainError(err error) bool {
	return errors.Is(err, model.ErrInvalid) || errors.Is(err, model.ErrNotFound) ||
		errors.Is(err, model.ErrConflict) || errors.Is(err, model.ErrCASMismatch)
}

func (f *FSM) notifyApplied() {
	f.mu.Lock()
	close(f.appliedCh)
	f.appliedCh = make(chan struct{})
	f.mu.Unlock()
}

// WaitApplied returns nil once the applied index is at least idx, or ctx's error.
// It waits for the FSM's notifications; it does not poll.
func (f *FSM) WaitApplied(ctx context.Context, idx uint64) error {
	for {
		f.mu.Lock()
		ch := f.appliedCh
		f.mu.Unlock()
		if f.store.AppliedIndex() >= idx {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Snapshot returns a point-in-time view of the state. Raft calls it on the apply
// goroutine; it only opens a read transaction, and Persist does the copying.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	sn, err := f.store.Snapshot()
	if err != nil {
		return nil, err
	}
	return &fsmSnapshot{sn: sn}, nil
}

// Restore replaces the state with a snapshot written by Persist (see store.Restore: a
// bad snapshot changes nothing and returns an error wrapping store.ErrCorrupt).
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	err := f.store.Restore(rc)
	f.notifyApplied()
	if err != nil {
		return err
	}
	f.logger.Info("state restored from snapshot", "applied_index", f.store.AppliedIndex())
	return nil
}

// fsmSnapshot streams a store snapshot into a Raft snapshot sink.
type fsmSnapshot struct {
	sn *store.Snapshot
}

// Persist writes the state file of the view to sink, cancelling the sink on error.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.sn.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release closes the view.
func (s *fsmSnapshot) Release() { _ = s.sn.Close() }
