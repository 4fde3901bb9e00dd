package raftnode

import (
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the node's Prometheus collectors. The histograms and the counters are fed
// where the events happen (Apply, the state machine hand-over, snapshots, leader
// observations); everything else is read from Raft and the state machine at scrape time
// (RegisterMetrics), so no goroutine keeps them up to date. They exist from New on and
// are exported once RegisterMetrics puts them on a registry.
type metrics struct {
	apply         prometheus.Histogram     // roster_raft_apply_duration_seconds
	batchSize     prometheus.Histogram     // roster_raft_apply_batch_size
	fsmApply      prometheus.Histogram     // roster_fsm_apply_duration_seconds
	snapshot      *prometheus.HistogramVec // roster_snapshot_duration_seconds{op}
	snapSave      prometheus.Observer      // snapshot{op="save"}
	snapRestore   prometheus.Observer      // snapshot{op="restore"}
	snapPersist   prometheus.Observer      // snapshot{op="persist"}
	leaderChanges prometheus.Counter       // roster_raft_leader_changes_total
	readRounds    prometheus.Counter       // roster_raft_read_confirmations_total
	readsJoined   prometheus.Counter       // roster_raft_linearizable_reads_total
	tlsRefused    prometheus.Counter       // roster_raft_tls_handshake_failures_total
	logVerify     *logVerifyMetrics        // roster_raft_log_checkpoints_total, roster_raft_log_corrupt
}

// Snapshot operations, the op label of roster_snapshot_duration_seconds.
const (
	snapOpSave    = "save"    // a backup archive streamed from a state view (SnapshotState)
	snapOpRestore = "restore" // the state machine replacing its state from a snapshot
	snapOpPersist = "persist" // a Raft snapshot of the state written to the snapshot store
)

func newMetrics() *metrics {
	m := &metrics{
		logVerify: newLogVerifyMetrics(),
		apply: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "roster_raft_apply_duration_seconds",
			Help:    "Time from submitting a command to Raft on the leader to its result from the leader's state machine (every outcome).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "roster_raft_apply_batch_size",
			Help:    "Entries handed to the state machine in one batch (one store transaction).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
		}),
		fsmApply: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "roster_fsm_apply_duration_seconds",
			Help:    "Time the state machine took to apply one batch of committed entries (retries after a storage failure included).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		snapshot: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "roster_snapshot_duration_seconds",
			Help: "Snapshot durations by op: save (a backup archive streamed), restore (the state replaced from a snapshot), " +
				"persist (a Raft snapshot written to the snapshot store).",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"op"}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_raft_leader_changes_total",
			Help: "Times this node learned of a newly elected leader (itself included).",
		}),
		readRounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_raft_read_confirmations_total",
			Help: "Leadership confirmations (a heartbeat round answered by a quorum) the leader ran for linearizable reads; concurrent reads share one.",
		}),
		readsJoined: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_raft_linearizable_reads_total",
			Help: "Linearizable reads that waited for a leadership confirmation on this node.",
		}),
		tlsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_raft_tls_handshake_failures_total",
			Help: "Connections to the Raft port refused because their TLS handshake failed (no certificate of the cluster's CA, plain text, scanners).",
		}),
	}
	m.snapSave = m.snapshot.WithLabelValues(snapOpSave)
	m.snapRestore = m.snapshot.WithLabelValues(snapOpRestore)
	m.snapPersist = m.snapshot.WithLabelValues(snapOpPersist)
	return m
}

// applied records one batch handed to the state machine.
func (m *metrics) applied(entries int, took time.Duration) {
	m.batchSize.Observe(float64(entries))
	m.fsmApply.Observe(took.Seconds())
}

// leaderObserver is a Raft observer without a channel: its filter, which Raft calls
// synchronously for every observation, counts the leader changes and delivers nothing.
func (m *metrics) leaderObserver() *raft.Observer {
	return raft.NewObserver(nil, false, func(o *raft.Observation) bool {
		if lo, ok := o.Data.(raft.LeaderObservation); ok && lo.LeaderID != "" {
			m.leaderChanges.Inc()
		}
		return false
	})
}

// timedSnapshot times the Persist of a Raft snapshot.
type timedSnapshot struct {
	raft.FSMSnapshot
	h prometheus.Observer
}

func (s timedSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	err := s.FSMSnapshot.Persist(sink)
	s.h.Observe(time.Since(start).Seconds())
	return err
}

// RegisterMetrics registers the node's Raft, state machine and snapshot metrics on reg:
//
//   - roster_raft_is_leader, roster_raft_term, roster_raft_commit_index,
//     roster_raft_applied_index (the state machine's), roster_raft_last_index and
//     roster_raft_last_contact_seconds (0 on the leader, -1 before any contact), read at
//     each scrape;
//   - roster_raft_peer_last_contact_seconds{peer}, on the leader only: for every other
//     server of the configuration, the time since the leader's last successful
//     AppendEntries exchange (heartbeats included) with it in this leadership, or since
//     the leadership began when there was none;
//   - roster_store_size_bytes and roster_raft_log_size_bytes, the sizes of the state
//     file and of raft.db (-1: unknown);
//   - the histograms roster_raft_apply_duration_seconds, roster_raft_apply_batch_size,
//     roster_fsm_apply_duration_seconds and roster_snapshot_duration_seconds{op}, and
//     the counters roster_raft_leader_changes_total, roster_raft_read_confirmations_total,
//     roster_raft_linearizable_reads_total and roster_raft_tls_handshake_failures_total.
//
// It fails if reg already holds collectors of these names.
func (n *Node) RegisterMetrics(reg prometheus.Registerer) error {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	fileSize := func(path string) func() float64 {
		return func() float64 {
			fi, err := os.Stat(path)
			if err != nil {
				return -1
			}
			return float64(fi.Size())
		}
	}
	cs := []prometheus.Collector{
		gauge("roster_raft_is_leader", "1 while this node is the Raft leader, else 0.", func() float64 {
			if n.IsLeader() {
				return 1
			}
			return 0
		}),
		gauge("roster_raft_term", "This node's current Raft term.", func() float64 { return float64(n.raft.CurrentTerm()) }),
		gauge("roster_raft_commit_index", "The highest log index this node knows to be committed.",
			func() float64 { return float64(n.raft.CommitIndex()) }),
		gauge("roster_raft_applied_index", "The index of the last entry whose effects are in this node's state.",
			func() float64 { return float64(n.sm.AppliedIndex()) }),
		gauge("roster_raft_last_index", "The last index in this node's Raft log (or of its last snapshot).",
			func() float64 { return float64(n.raft.LastIndex()) }),
		gauge("roster_raft_last_contact_seconds", "Seconds since this node last heard from the leader: 0 on the leader, -1 if it never has.",
			func() float64 {
				d := n.LastContact()
				if d < 0 {
					return -1
				}
				return d.Seconds()
			}),
		gauge("roster_store_size_bytes", "Size of the state file (state.db) in bytes (-1: unknown).", fileSize(StatePath(n.cfg.DataDir))),
		gauge("roster_raft_log_size_bytes", "Size of the Raft log store (raft/raft.db) in bytes (-1: unknown).",
			fileSize(filepath.Join(n.cfg.DataDir, raftDirName, raftDBName))),
		peerContactCollector{n: n, desc: prometheus.NewDesc("roster_raft_peer_last_contact_seconds",
			"On the leader: seconds since its last successful AppendEntries exchange (heartbeats included) with each other server "+
				"in this leadership, or since the leadership began when there was none.", []string{"peer"}, nil)},
		n.met.apply, n.met.batchSize, n.met.fsmApply, n.met.snapshot, n.met.leaderChanges,
		n.met.readRounds, n.met.readsJoined, n.met.tlsRefused,
		n.met.logVerify.results, n.met.logVerify.corrupt,
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// peerContactCollector exports roster_raft_peer_last_contact_seconds from the commit
// notifier's record of the leader's exchanges, which sees every AppendEntries the
// leader sends (commitnotify.go).
type peerContactCollector struct {
	n    *Node
	desc *prometheus.Desc
}

func (c peerContactCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c peerContactCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	n.mu.Lock()
	active, since := n.lead.active, n.lead.since
	n.mu.Unlock()
	if !active || n.raft.State() != raft.Leader {
		return
	}
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return
	}
	now := time.Now()
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == n.cfg.NodeID {
			continue
		}
		last := n.notify.peerContact(s.ID)
		if last.Before(since) {
			last = since // nothing yet in this leadership (or an earlier one's)
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, now.Sub(last).Seconds(), string(s.ID))
	}
}
