package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/datadir"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/store"
)

// State integrity. A node's state file is its own copy of what the log decided; a disk
// that flips bits, or anybody who edits the file, makes it disagree with its peers while
// every read from it still looks right. Two checks find that:
//
//   - Between nodes: the leader writes a CheckState entry every StateCheckInterval (and
//     soon after it takes office). Every node hashes its state as of that entry — the
//     same point in the log everywhere — and asks the other voters for theirs. A node
//     whose hash a majority of the voters contradicts raises an alarm: it reports itself
//     not ready (state_mismatch), stops serving reads, gives up leadership, and
//     roster_state_corrupt is 1 until it restarts. It is rebuilt by removing its data
//     directory and letting it catch up from the others (docs/operations.md).
//   - Across a restart: a clean shutdown records the hash of the state and its applied
//     index in the data directory (stateCheckFile); the next start hashes the state again
//     and raises the alarm when the file changed while the node was down.
//
// This is etcd's corruption check (etcd compares hashes of its key space at the same
// revision), made for a state that keeps no history: the log entry fixes the point.

// Defaults of the state checks.
const (
	// DefaultStateCheckInterval is how often the leader asks for a state check.
	DefaultStateCheckInterval = 5 * time.Minute
	// stateCheckFirst is how soon after taking office a leader asks for the first one.
	stateCheckFirst = 10 * time.Second
	// stateCheckPeerWait bounds how long a node waits for a peer to have applied a check.
	stateCheckPeerWait = 30 * time.Second
)

// stateCheckFile, in the data directory, records the state's hash at a clean shutdown.
const stateCheckFile = "state-check.json"

type shutdownRecord struct {
	AppliedIndex uint64    `json:"appliedIndex"`
	Hash         string    `json:"hash"`
	At           time.Time `json:"at"`
}

// recordShutdownState writes the state's hash and applied index into the data directory
// (the node has stopped applying).
func recordShutdownState(dataDir string, st *store.Store) error {
	idx, sum, err := st.StateHash()
	if err != nil {
		return err
	}
	b, err := json.Marshal(shutdownRecord{AppliedIndex: idx, Hash: sum, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	path := filepath.Join(dataDir, stateCheckFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, datadir.FileMode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// verifyShutdownState compares the state with the record of the last clean shutdown,
// and removes the record: it is only valid until the node applies anything again. It
// returns a non-nil error when the state changed while the node was down.
func verifyShutdownState(dataDir string, st *store.Store) (error, error) {
	path := filepath.Join(dataDir, stateCheckFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil {
		return nil, err
	}
	var rec shutdownRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", stateCheckFile, err)
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

// proposeStateChecks runs while this node leads: it writes a CheckState entry soon after
// taking office and every interval after, while every server applies the type (during a
// rolling upgrade from a release without state checks, none is written).
func (s *Server) proposeStateChecks(ctx context.Context) {
	first := min(stateCheckFirst, s.cfg.StateCheckInterval)
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.node.ServersApply(fsm.CheckStateType) {
			t.Reset(time.Second) // the first check follows the last server's upgrade closely
			continue
		}
		if _, err := s.node.Apply(ctx, fsm.CheckStateRequest{}); err != nil && ctx.Err() == nil {
			s.log.Warn("writing a state check failed", "error", err)
		}
		t.Reset(s.cfg.StateCheckInterval)
	}
}

// compareStateChecks runs on every node until stop closes: after each state check this
// node applies, it compares its hash with the other voters'.
func (s *Server) compareStateChecks(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.fsm.Checked():
		}
		chk, ok := s.fsm.LatestStateCheck()
		if !ok || s.fsm.Alarm() != nil {
			continue
		}
		s.compareStateCheck(ctx, chk)
	}
}

// compareStateCheck asks every other voter for its hash at chk.Index and raises the
// alarm when a majority of the voters agree on another hash than this node's.
func (s *Server) compareStateCheck(ctx context.Context, chk fsm.StateCheck) {
	members, err := s.node.Members(ctx)
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
		if m.ID == s.cfg.NodeID {
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
			h, _ := s.peerStateCheck(ctx, m.HTTPAddr, chk.Index)
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
		s.log.Debug("state check agrees with the other voters", "index", chk.Index, "hash", chk.Hash)
		return
	}
	for h, n := range votes {
		if h != chk.Hash && n > voters/2 {
			err := fmt.Errorf("state_mismatch: at index %d this node's state hash is %s, and %d of %d voters have %s", chk.Index, chk.Hash, n, voters, h)
			s.raiseStateAlarm(err)
			return
		}
	}
	s.log.Warn("state check: other voters hold another state at the same index, and no majority contradicts this node",
		"index", chk.Index, "hash", chk.Hash, "differing", differ)
}

// peerStateCheck fetches a peer's hash at index, waiting while the peer has not applied
// it yet ("" when it never answers with one).
func (s *Server) peerStateCheck(ctx context.Context, httpAddr string, index uint64) (string, error) {
	if httpAddr == "" {
		return "", errors.New("no HTTP address recorded")
	}
	ctx, cancel := context.WithTimeout(ctx, stateCheckPeerWait)
	defer cancel()
	path := fmt.Sprintf("/v1/status/state-check?index=%d", index)
	for wait := 100 * time.Millisecond; ; wait = min(wait*2, 2*time.Second) {
		var sc api.StateCheck
		err := s.peerJSON(ctx, http.MethodGet, httpAddr, path, nil, &sc, http.StatusOK)
		switch {
		case err == nil && sc.Index == index:
			return sc.Hash, nil
		case err == nil:
			return "", fmt.Errorf("unreadable state check: index %d where %d was asked for", sc.Index, index)
		case errors.Is(err, errUnreadableAnswer):
			return "", err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(wait):
		}
	}
}

// raiseStateAlarm marks this node's state as wrong: not ready, no reads, no leadership.
func (s *Server) raiseStateAlarm(err error) {
	s.fsm.RaiseAlarm(err)
	s.log.Error("this node's state differs from its peers': it serves no reads until its data directory is rebuilt (docs/operations.md)", "error", err)
	if s.node.IsLeader() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if terr := s.node.TransferLeadership(ctx, ""); terr != nil {
			s.log.Error("handing over leadership after the state alarm failed", "error", terr)
		}
	}
}

// stateCorruptGauge is roster_state_corrupt: 1 once the alarm is raised.
func stateCorruptGauge(f *fsm.FSM) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "roster_state_corrupt",
		Help: "1 when this node's state was found to differ from its peers' or to have changed while it was stopped; it then serves no reads.",
	}, func() float64 {
		if f.Alarm() != nil {
			return 1
		}
		return 0
	})
}

// haltedGauge is 1 while this node's state machine is stopped at a committed entry its
// build cannot apply (the index and type are in /v1/status/ready and the log).
func haltedGauge(f *fsm.FSM) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "roster_state_machine_halted",
		Help: "1 when this node stopped applying at a committed entry its release cannot apply (needs_upgrade: restart it on a newer release), else 0.",
	}, func() float64 {
		if f.Halted() != nil {
			return 1
		}
		return 0
	})
}

// peerReady asks a peer for its readiness (GET /v1/status/ready, which answers 503 with
// the same body when the peer is not ready).
func (s *Server) peerReady(ctx context.Context, httpAddr string) (api.Ready, error) {
	var rd api.Ready
	err := s.peerJSON(ctx, http.MethodGet, httpAddr, "/v1/status/ready", nil, &rd, http.StatusOK, http.StatusServiceUnavailable)
	return rd, err
}
