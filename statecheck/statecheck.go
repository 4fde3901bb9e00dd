// Package statecheck finds a node whose state file disagrees with its peers'. A node's
// state file is its own copy of what the log decided; a disk that flips bits, or
// anybody who edits the file, makes it disagree with its peers while every read from it
// still looks right. Two checks find that:
//
//   - Between nodes: the leader writes a CheckState entry every Interval (and soon after
//     it takes office: Checker.Propose). Every node hashes its state as of that entry —
//     the same point in the log everywhere — and asks the other voters for theirs
//     (Checker.Compare). A node whose hash a majority of the voters contradicts raises
//     an alarm: it reports itself not ready (state_mismatch), stops serving reads, gives
//     up leadership, and roster_state_corrupt is 1 until it restarts. It is rebuilt by
//     removing its data directory and letting it catch up from the others
//     (docs/operations.md).
//   - Across a restart: a clean shutdown records the hash of the state and its applied
//     index in the data directory (File, RecordShutdown); the next start hashes the
//     state again and raises the alarm when the file changed while the node was down
//     (VerifyShutdown).
//
// This is etcd's corruption check (etcd compares hashes of its key space at the same
// revision), made for a state that keeps no history: the log entry fixes the point.
package statecheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/datadir"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/store"
)

const (
	// DefaultInterval is how often the leader asks for a state check.
	DefaultInterval = 5 * time.Minute
	// first is how soon after taking office a leader asks for the first one.
	first = 10 * time.Second
)

// File, in the data directory, records the state's hash at a clean shutdown.
const File = "state-check.json"

// ShutdownRecord is what File holds.
type ShutdownRecord struct {
	AppliedIndex uint64    `json:"appliedIndex"`
	Hash         string    `json:"hash"`
	At           time.Time `json:"at"`
}

// RecordShutdown writes the state's hash and applied index into the data directory (the
// node has stopped applying).
func RecordShutdown(dataDir string, st *store.Store) error {
	idx, sum, err := st.StateHash()
	if err != nil {
		return err
	}
	b, err := json.Marshal(ShutdownRecord{AppliedIndex: idx, Hash: sum, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	path := filepath.Join(dataDir, File)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, datadir.FileMode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadShutdownRecord reads the record of the last clean shutdown (an error wrapping
// os.ErrNotExist when there is none).
func ReadShutdownRecord(dataDir string) (ShutdownRecord, error) {
	var rec ShutdownRecord
	b, err := os.ReadFile(filepath.Join(dataDir, File))
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("%s: %w", File, err)
	}
	return rec, nil
}

// VerifyShutdown compares the state with the record of the last clean shutdown, and
// removes the record: it is only valid until the node applies anything again. alarm is
// non-nil when the state changed while the node was down.
func VerifyShutdown(dataDir string, st *store.Store) (alarm, err error) {
	rec, err := ReadShutdownRecord(dataDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if rmErr := os.Remove(filepath.Join(dataDir, File)); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		return nil, rmErr
	}
	if err != nil {
		return nil, err
	}
	idx, sum, err := st.StateHash()
	if err != nil {
		return nil, err
	}
	if idx != rec.AppliedIndex || sum == rec.Hash {
		// Another applied index: the state was rebuilt from the log, which is the truth.
		return nil, nil
	}
	return fmt.Errorf("state_mismatch: the state file changed while the node was stopped (at applied index %d its hash is %s; the clean shutdown of %s recorded %s)",
		idx, sum, rec.At.Format(time.RFC3339), rec.Hash), nil
}

// Node is what the checks need of the consensus layer (*raftnode.Node implements it).
type Node interface {
	Apply(ctx context.Context, cmd fsm.Command) (uint64, error)
	ServersApply(t fsm.MessageType) bool
	Members(ctx context.Context) ([]raftnode.Member, error)
	IsLeader() bool
	TransferLeadership(ctx context.Context, id string) error
}

// Config configures a Checker. Every field but Logger is required.
type Config struct {
	NodeID string
	// Interval is how often the leader writes a CheckState entry.
	Interval time.Duration
	Node     Node
	FSM      *fsm.FSM
	// PeerHash asks the peer at httpAddr for its state hash at index, waiting while it
	// has not applied the index ("" when it never answers with one).
	PeerHash func(ctx context.Context, httpAddr string, index uint64) (string, error)
	Logger   *slog.Logger
}

// Checker runs the checks between nodes.
type Checker struct{ cfg Config }

// New returns a Checker.
func New(cfg Config) *Checker {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Checker{cfg: cfg}
}

// Propose runs while this node leads (raftnode's OnLeadership): it writes a CheckState
// entry soon after taking office and every Interval after, while every server applies
// the type (during a rolling upgrade from a release without state checks, none is
// written).
func (c *Checker) Propose(ctx context.Context) {
	t := time.NewTimer(min(first, c.cfg.Interval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !c.cfg.Node.ServersApply(fsm.CheckStateType) {
			t.Reset(time.Second) // the first check follows the last server's upgrade closely
			continue
		}
		if _, err := c.cfg.Node.Apply(ctx, fsm.CheckStateRequest{}); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("writing a state check failed", "error", err)
		}
		t.Reset(c.cfg.Interval)
	}
}

// Compare runs on every node until ctx ends: after each state check this node applies,
// it compares its hash with the other voters'.
func (c *Checker) Compare(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.cfg.FSM.Checked():
		}
		chk, ok := c.cfg.FSM.LatestStateCheck()
		if !ok || c.cfg.FSM.Alarm() != nil {
			continue
		}
		c.compare(ctx, chk)
	}
}

// compare asks every other voter for its hash at chk.Index and raises the alarm when a
// majority of the voters agree on another hash than this node's.
func (c *Checker) compare(ctx context.Context, chk fsm.StateCheck) {
	members, err := c.cfg.Node.Members(ctx)
	if err != nil {
		return
	}
	voters := 0
	votes := map[string]int{}
	var others []raftnode.Member
	for _, m := range members {
		if !m.Voter {
			continue
		}
		voters++
		if m.ID == c.cfg.NodeID {
			votes[chk.Hash]++
			continue
		}
		others = append(others, m)
	}
	type answer struct {
		id, hash string
	}
	answers := make(chan answer, len(others))
	for _, m := range others {
		go func() {
			h, _ := c.cfg.PeerHash(ctx, m.HTTPAddr, chk.Index)
			answers <- answer{m.ID, h}
		}()
	}
	var differ []string
	for range others {
		a := <-answers
		if a.hash == "" {
			continue
		}
		votes[a.hash]++
		if a.hash != chk.Hash {
			differ = append(differ, a.id)
		}
	}
	if len(differ) == 0 {
		c.cfg.Logger.Debug("state check agrees with the other voters", "index", chk.Index, "hash", chk.Hash)
		return
	}
	for h, n := range votes {
		if h != chk.Hash && n > voters/2 {
			c.RaiseAlarm(fmt.Errorf("state_mismatch: at index %d this node's state hash is %s, and %d of %d voters have %s", chk.Index, chk.Hash, n, voters, h))
			return
		}
	}
	c.cfg.Logger.Warn("state check: other voters hold another state at the same index, and no majority contradicts this node",
		"index", chk.Index, "hash", chk.Hash, "differing", differ)
}

// RaiseAlarm marks this node's state as wrong: not ready, no reads, no leadership.
func (c *Checker) RaiseAlarm(err error) {
	c.cfg.FSM.RaiseAlarm(err)
	c.cfg.Logger.Error("this node's state differs from its peers': it serves no reads until its data directory is rebuilt (docs/operations.md)", "error", err)
	if c.cfg.Node.IsLeader() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if terr := c.cfg.Node.TransferLeadership(ctx, ""); terr != nil {
			c.cfg.Logger.Error("handing over leadership after the state alarm failed", "error", terr)
		}
	}
}

// Collectors are roster_state_corrupt (1 once the alarm is raised) and
// roster_state_machine_halted (1 while the state machine is stopped at a committed
// entry its build cannot apply).
func Collectors(f *fsm.FSM) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "roster_state_corrupt",
			Help: "1 when this node's state was found to differ from its peers' or to have changed while it was stopped; it then serves no reads.",
		}, func() float64 {
			if f.Alarm() != nil {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "roster_state_machine_halted",
			Help: "1 when this node stopped applying at a committed entry its release cannot apply (needs_upgrade: restart it on a newer release), else 0.",
		}, func() float64 {
			if f.Halted() != nil {
				return 1
			}
			return 0
		}),
	}
}
