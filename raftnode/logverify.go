package raftnode

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc64"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/fsm"
)

// Log verification: silent corruption of a node's Raft log — a disk or a log store that
// hands back other bytes than it was given — is found before the node can replicate it
// or rebuild its state from it. The leader writes a LogCheckpoint entry every
// LogVerifyInterval (once every server applies the type). As that entry passes through
// the leader's log store, the verifier there fills the entry's Extensions with the range
// of the log since the previous checkpoint and a checksum of the entries of that range
// as the leader wrote them. Every node, the leader included, that stores the checkpoint
// then reads the range back from its own log store, under the cache, and compares: a
// mismatch is logged as an error, counted (roster_raft_log_checkpoints_total{result=
// "mismatch"}, roster_raft_log_corrupt 1), and raises the node's alarm (ready false with
// reason log_mismatch, no reads, leadership handed over) until its data directory is
// rebuilt. The idea is Consul's (hashicorp/raft-wal's verifier); the checksum covers each
// entry's index, term, type and data.

// DefaultLogVerifyInterval is how often the leader writes a log checkpoint.
const DefaultLogVerifyInterval = time.Minute

// firstLogCheckpoint is how soon after taking office a leader writes the first one.
const firstLogCheckpoint = 10 * time.Second

// checkpointExt is the layout of a checkpoint's Extensions: a version byte, then the
// first and last index of the range and the checksum of its entries, big-endian.
const (
	checkpointExtVersion = 1
	checkpointExtLen     = 1 + 8 + 8 + 8
)

var crcTable = crc64.MakeTable(crc64.ECMA)

// checkpoint is what a checkpoint entry says: entries From to To (none when From > To)
// have checksum Sum.
type checkpoint struct {
	Index, From, To, Sum uint64
}

func (c checkpoint) encode() []byte {
	b := make([]byte, checkpointExtLen)
	b[0] = checkpointExtVersion
	binary.BigEndian.PutUint64(b[1:], c.From)
	binary.BigEndian.PutUint64(b[9:], c.To)
	binary.BigEndian.PutUint64(b[17:], c.Sum)
	return b
}

func decodeCheckpoint(idx uint64, ext []byte) (checkpoint, bool) {
	if len(ext) != checkpointExtLen || ext[0] != checkpointExtVersion {
		return checkpoint{}, false
	}
	return checkpoint{Index: idx, From: binary.BigEndian.Uint64(ext[1:]), To: binary.BigEndian.Uint64(ext[9:]),
		Sum: binary.BigEndian.Uint64(ext[17:])}, true
}

// isCheckpoint reports whether l is a LogCheckpoint entry.
func isCheckpoint(l *raft.Log) bool {
	return l.Type == raft.LogCommand && len(l.Data) > 0 && fsm.MessageType(l.Data[0]) == fsm.LogCheckpointType
}

// hashEntry adds one entry to a checksum.
func hashEntry(h hash.Hash64, l *raft.Log) {
	var hdr [8 + 8 + 1 + 8]byte
	binary.BigEndian.PutUint64(hdr[0:], l.Index)
	binary.BigEndian.PutUint64(hdr[8:], l.Term)
	hdr[16] = byte(l.Type)
	binary.BigEndian.PutUint64(hdr[17:], uint64(len(l.Data)))
	_, _ = h.Write(hdr[:])
	_, _ = h.Write(l.Data)
}

// logVerifier is the log store Raft writes through: it keeps the checksum of the entries
// written since the last checkpoint, fills the checkpoints this node writes as leader,
// and has every checkpoint it stores checked against the store underneath (disk).
type logVerifier struct {
	raft.LogStore // the store Raft reads and writes (the cache)
	// disk is the store under the cache: what a check reads back.
	disk raft.LogStore
	log  *slog.Logger
	met  *logVerifyMetrics
	// mismatch is called once with the error of the first failed check.
	mismatch func(error)

	mu sync.Mutex
	// from is the first index of the running range and next the index the next entry
	// must have to extend it (0: no range yet; the next entry starts one).
	from, next uint64
	sum        hash.Hash64

	checks chan checkpoint
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
	failed bool
}

func newLogVerifier(cache, disk raft.LogStore, met *logVerifyMetrics, log *slog.Logger, mismatch func(error)) *logVerifier {
	v := &logVerifier{LogStore: cache, disk: disk, met: met, log: log, mismatch: mismatch,
		sum: crc64.New(crcTable), checks: make(chan checkpoint, 16), done: make(chan struct{})}
	v.wg.Add(1)
	go v.run()
	return v
}

// close stops the checks (after Raft has stopped writing).
func (v *logVerifier) close() {
	v.once.Do(func() { close(v.done) })
	v.wg.Wait()
}

func (v *logVerifier) StoreLog(l *raft.Log) error { return v.StoreLogs([]*raft.Log{l}) }

func (v *logVerifier) StoreLogs(logs []*raft.Log) error {
	var stored []checkpoint
	v.mu.Lock()
	for _, l := range logs {
		if v.next == 0 || l.Index != v.next {
			// The first entry this process writes, or the log was truncated or replaced
			// (a conflict, a snapshot installed): a new range starts here.
			v.from = l.Index
			v.sum.Reset()
		}
		v.next = l.Index + 1
		if !isCheckpoint(l) {
			hashEntry(v.sum, l)
			continue
		}
		if len(l.Extensions) == 0 {
			// This node's own proposal, as leader: it says what this node wrote.
			l.Extensions = checkpoint{From: v.from, To: l.Index - 1, Sum: v.sum.Sum64()}.encode()
		}
		if c, ok := decodeCheckpoint(l.Index, l.Extensions); ok {
			stored = append(stored, c)
		}
		v.from = l.Index + 1
		v.sum.Reset()
	}
	v.mu.Unlock()
	if err := v.LogStore.StoreLogs(logs); err != nil {
		v.mu.Lock()
		v.next = 0 // what is stored is unknown: start again at the next entry
		v.mu.Unlock()
		return err
	}
	for _, c := range stored {
		select {
		case v.checks <- c:
		default:
			v.met.results.WithLabelValues("skipped").Inc() // checks are behind: this one is dropped
		}
	}
	return nil
}

func (v *logVerifier) DeleteRange(lo, hi uint64) error {
	v.mu.Lock()
	if hi >= v.from {
		v.next = 0 // the running range lost entries (a truncated tail)
	}
	v.mu.Unlock()
	return v.LogStore.DeleteRange(lo, hi)
}

// run checks the stored checkpoints one by one.
func (v *logVerifier) run() {
	defer v.wg.Done()
	for {
		select {
		case <-v.done:
			return
		case c := <-v.checks:
			v.check(c)
		}
	}
}

// errRangeGone says a checkpoint's range is no longer all in the log (compacted after
// a snapshot, or never stored here: a snapshot was installed).
var errRangeGone = errors.New("range not in the log")

// readBack is the checksum of entries from to to as disk holds them.
func (v *logVerifier) readBack(from, to uint64) (uint64, error) {
	h := crc64.New(crcTable)
	var l raft.Log
	for i := from; i <= to && from <= to; i++ {
		if err := v.disk.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				return 0, errRangeGone
			}
			return 0, err
		}
		if l.Index != i {
			return 0, fmt.Errorf("entry %d read back as index %d", i, l.Index)
		}
		hashEntry(h, &l)
	}
	return h.Sum64(), nil
}

func (v *logVerifier) check(c checkpoint) {
	got, err := v.readBack(c.From, c.To)
	switch {
	case errors.Is(err, errRangeGone):
		v.met.results.WithLabelValues("skipped").Inc()
		v.log.Debug("log checkpoint skipped: its range is no longer in the log", "index", c.Index, "from", c.From, "to", c.To)
		return
	case err != nil:
		// A read that fails is not a verdict on the bytes: the disk watch reports it.
		v.met.results.WithLabelValues("skipped").Inc()
		v.log.Warn("log checkpoint: reading the log back failed", "index", c.Index, "from", c.From, "to", c.To, "error", err)
		return
	case got == c.Sum:
		v.met.results.WithLabelValues("ok").Inc()
		v.log.Debug("log checkpoint agrees", "index", c.Index, "from", c.From, "to", c.To)
		return
	}
	merr := fmt.Errorf("log_mismatch: entries %d to %d of this node's Raft log read back with checksum %016x, and the leader wrote %016x (checkpoint at index %d)",
		c.From, c.To, got, c.Sum, c.Index)
	v.log.Error("this node's Raft log differs from what was written: it serves no reads and gives up leadership until its data directory is rebuilt (docs/operations.md)",
		"from", c.From, "to", c.To, "checkpoint_index", c.Index, "error", merr)
	v.mu.Lock()
	first := !v.failed
	v.failed = true
	v.mu.Unlock()
	if first && v.mismatch != nil {
		v.mismatch(merr) // the alarm is up before the metrics say so
	}
	v.met.corrupt.Set(1)
	v.met.results.WithLabelValues("mismatch").Inc()
}

// logVerifyMetrics are roster_raft_log_checkpoints_total{result} and roster_raft_log_corrupt.
type logVerifyMetrics struct {
	results *prometheus.CounterVec
	corrupt prometheus.Gauge
}

func newLogVerifyMetrics() *logVerifyMetrics {
	m := &logVerifyMetrics{
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_raft_log_checkpoints_total",
			Help: "Log checkpoints this node checked its own Raft log against, by result: ok, mismatch (the log read back differs from what the leader wrote), skipped (the range was compacted, or could not be read).",
		}, []string{"result"}),
		corrupt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "roster_raft_log_corrupt",
			Help: "1 once a log checkpoint found this node's Raft log differing from what the leader wrote; it then serves no reads until its data directory is rebuilt.",
		}),
	}
	for _, r := range []string{"ok", "mismatch", "skipped"} {
		m.results.WithLabelValues(r)
	}
	return m
}

// proposeLogCheckpoints runs while this node leads: a LogCheckpoint entry soon after it
// takes office and every LogVerifyInterval after, while every server applies the type
// (during a rolling upgrade from a release without checkpoints none is written).
func (n *Node) proposeLogCheckpoints(ctx context.Context) {
	if n.cfg.LogVerifyInterval < 0 {
		return
	}
	t := time.NewTimer(min(firstLogCheckpoint, n.cfg.LogVerifyInterval))
	defer t.Stop()
	held := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !n.ServersApply(fsm.LogCheckpointType) {
			if !held {
				n.log.Info("log checkpoints wait until every server applies them (a rolling upgrade is under way)")
				held = true
			}
			t.Reset(time.Second)
			continue
		}
		if _, err := n.Apply(ctx, fsm.LogCheckpointRequest{}); err != nil && ctx.Err() == nil {
			n.log.Warn("writing a log checkpoint failed", "error", err)
		}
		t.Reset(n.cfg.LogVerifyInterval)
	}
}

// logMismatch raises the node's alarm for a failed log check and hands leadership over.
func (n *Node) logMismatch(err error) {
	if a, ok := n.sm.(interface{ RaiseAlarm(error) }); ok {
		a.RaiseAlarm(err)
	}
	if n.IsLeader() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if terr := n.TransferLeadership(ctx, ""); terr != nil {
			n.log.Error("handing over leadership after the log alarm failed", "error", terr)
		}
	}
}
