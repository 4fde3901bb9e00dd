//go:build linux

package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/snapshot"
	"github.com/rosterhq/roster/store"
)

// Fault is one kind of failure the schedule injects. Inject breaks something and
// returns; Heal repairs it (the runner then waits until the cluster is healthy again).
// A fault keeps what Heal needs in its own fields; the runner uses each value for one
// Inject/Heal pair at a time.
type Fault interface {
	Name() string
	Inject(ctx context.Context, env *Env) error
	Heal(ctx context.Context, env *Env) error
}

// Env is what faults act on.
type Env struct {
	Cluster  *Cluster
	History  *History
	Workload *Workload
	Rand     *rand.Rand
	// TempDir receives scratch files.
	TempDir string
	// PreviousBinary is the previous release's binary ("" when the run has none: the
	// previous-release fault is then left out).
	PreviousBinary string
	Logf           func(string, ...any)
}

// AllFaults returns a fresh instance of every fault, in a fixed order. New faults are
// added here.
func AllFaults() []Fault {
	return []Fault{
		&KillLeader{},
		&KillFollower{},
		&PauseLeader{},
		&PauseFollower{},
		&PartitionLeader{},
		&FlappingPartition{},
		&SnapshotRestore{},
		&TransferLeadership{},
		&DiskFull{},
		&ReplaceMember{},
		&RollingRestart{},
		&OnPreviousRelease{},
	}
}

// event records the start of a fault; the returned function records its end.
func (e *Env) event(desc string) func() {
	start := e.History.Now()
	e.Logf("fault: %s", desc)
	return func() {
		e.History.AddEvent(Event{At: start, End: e.History.Now(), Description: desc})
	}
}

// leader returns the current leader, waiting for one.
func (e *Env) leader(ctx context.Context) (*Node, error) { return e.Cluster.Leader(ctx) }

// follower returns a random running node other than the leader.
func (e *Env) follower(ctx context.Context) (*Node, error) {
	l, err := e.leader(ctx)
	if err != nil {
		return nil, err
	}
	var fs []*Node
	for _, n := range e.Cluster.Nodes {
		if n != l && n.Running() {
			fs = append(fs, n)
		}
	}
	if len(fs) == 0 {
		return nil, fmt.Errorf("no follower is running")
	}
	return fs[e.Rand.IntN(len(fs))], nil
}

// killFault kills a node with SIGKILL and restarts it on Heal.
type killFault struct {
	node *Node
	done func()
}

func (f *killFault) kill(env *Env, n *Node, what string) {
	f.node = n
	f.done = env.event(fmt.Sprintf("SIGKILL %s (%s)", n.ID, what))
	env.Cluster.Kill(n)
}

func (f *killFault) Heal(_ context.Context, env *Env) error {
	defer f.done()
	return env.Cluster.Start(f.node)
}

// KillLeader kills the leader's process with SIGKILL; Heal restarts it on its data.
type KillLeader struct{ killFault }

// Name is "kill-leader".
func (*KillLeader) Name() string { return "kill-leader" }

// Inject kills the current leader.
func (f *KillLeader) Inject(ctx context.Context, env *Env) error {
	l, err := env.leader(ctx)
	if err != nil {
		return err
	}
	f.kill(env, l, "leader")
	return nil
}

// KillFollower kills a random follower with SIGKILL; Heal restarts it.
type KillFollower struct{ killFault }

// Name is "kill-follower".
func (*KillFollower) Name() string { return "kill-follower" }

// Inject kills a follower.
func (f *KillFollower) Inject(ctx context.Context, env *Env) error {
	n, err := env.follower(ctx)
	if err != nil {
		return err
	}
	f.kill(env, n, "follower")
	return nil
}

// pauseFault stops a node with SIGSTOP and continues it on Heal.
type pauseFault struct {
	node *Node
	done func()
}

func (f *pauseFault) pause(env *Env, n *Node, what string) error {
	f.node = n
	f.done = env.event(fmt.Sprintf("SIGSTOP %s (%s)", n.ID, what))
	return env.Cluster.Pause(n)
}

func (f *pauseFault) Heal(_ context.Context, env *Env) error {
	defer f.done()
	return env.Cluster.Resume(f.node)
}

// PauseLeader freezes the leader with SIGSTOP; on SIGCONT it resumes believing it
// still leads, with requests queued in its sockets.
type PauseLeader struct{ pauseFault }

// Name is "pause-leader".
func (*PauseLeader) Name() string { return "pause-leader" }

// Inject pauses the leader.
func (f *PauseLeader) Inject(ctx context.Context, env *Env) error {
	l, err := env.leader(ctx)
	if err != nil {
		return err
	}
	return f.pause(env, l, "leader")
}

// PauseFollower freezes a random follower with SIGSTOP.
type PauseFollower struct{ pauseFault }

// Name is "pause-follower".
func (*PauseFollower) Name() string { return "pause-follower" }

// Inject pauses a follower.
func (f *PauseFollower) Inject(ctx context.Context, env *Env) error {
	n, err := env.follower(ctx)
	if err != nil {
		return err
	}
	return f.pause(env, n, "follower")
}

// PartitionLeader cuts the leader off from every other node (Raft and HTTP
// forwarding, both directions). The leader is alone in the minority, so from the
// moment of the cut it must not acknowledge any write or linearizable read.
type PartitionLeader struct {
	node  *Node
	start int64
	done  func()
}

// Name is "partition-leader".
func (*PartitionLeader) Name() string { return "partition-leader" }

// Inject isolates the leader.
func (f *PartitionLeader) Inject(ctx context.Context, env *Env) error {
	l, err := env.leader(ctx)
	if err != nil {
		return err
	}
	f.node = l
	f.done = env.event("isolate leader " + l.ID)
	env.Cluster.Net.Partition([]string{l.ID}, others(env.Cluster, l.ID))
	f.start = env.History.Now()
	return nil
}

// Heal reconnects it.
func (f *PartitionLeader) Heal(_ context.Context, env *Env) error {
	end := env.History.Now()
	env.Cluster.Net.Heal()
	env.History.AddWindow(Window{Node: f.node.ID, Start: f.start, End: end})
	f.done()
	return nil
}

func others(c *Cluster, id string) []string {
	var out []string
	for _, n := range c.Nodes {
		if n.ID != id {
			out = append(out, n.ID)
		}
	}
	return out
}

// FlappingPartition splits the cluster into two random sides every few hundred
// milliseconds, the leader's side chosen at random, until healed. Each node on a side
// without a majority is recorded as in the minority for that flip.
type FlappingPartition struct {
	stop chan struct{}
	wg   sync.WaitGroup
	done func()
}

// Name is "flapping-partition".
func (*FlappingPartition) Name() string { return "flapping-partition" }

// Inject starts flipping.
func (f *FlappingPartition) Inject(_ context.Context, env *Env) error {
	f.stop = make(chan struct{})
	f.done = env.event("flapping partition")
	seed := env.Rand.Uint64()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		rng := rand.New(rand.NewPCG(seed, 1))
		ids := env.Cluster.IDs()
		for {
			perm := rng.Perm(len(ids))
			cut := 1 + rng.IntN(len(ids)-1)
			var a, b []string
			for i, p := range perm {
				if i < cut {
					a = append(a, ids[p])
				} else {
					b = append(b, ids[p])
				}
			}
			env.Cluster.Net.Heal()
			env.Cluster.Net.Partition(a, b)
			start := env.History.Now()
			env.Logf("fault: flapping partition %v | %v", a, b)
			hold := time.Duration(200+rng.IntN(600)) * time.Millisecond
			t := time.NewTimer(hold)
			stopped := false
			select {
			case <-t.C:
			case <-f.stop:
				t.Stop()
				stopped = true
			}
			end := env.History.Now()
			for _, side := range [][]string{a, b} {
				if 2*len(side) <= len(ids) {
					for _, id := range side {
						env.History.AddWindow(Window{Node: id, Start: start, End: end})
					}
				}
			}
			if stopped {
				return
			}
		}
	}()
	return nil
}

// Heal stops flipping and reconnects everything.
func (f *FlappingPartition) Heal(_ context.Context, env *Env) error {
	close(f.stop)
	f.wg.Wait()
	env.Cluster.Net.Heal()
	f.done()
	return nil
}

// TransferLeadership hands leadership to a random follower through the API while
// writes continue. During the transfer the leader refuses writes as not-leader, which
// the API documents as "not applied"; the checker holds it to that.
type TransferLeadership struct{ done func() }

// Name is "transfer-leadership".
func (*TransferLeadership) Name() string { return "transfer-leadership" }

// Inject asks a random node to move leadership to a follower.
func (f *TransferLeadership) Inject(ctx context.Context, env *Env) error {
	to, err := env.follower(ctx)
	if err != nil {
		return err
	}
	f.done = env.event("transfer leadership to " + to.ID)
	via := env.Cluster.Nodes[env.Rand.IntN(len(env.Cluster.Nodes))]
	if cl := via.Client(); cl != nil {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = cl.TransferLeadership(tctx, to.ID)
		cancel()
		env.Logf("fault: leadership transfer to %s via %s: %v", to.ID, via.ID, err)
	}
	return nil
}

// Heal has nothing to repair.
func (f *TransferLeadership) Heal(context.Context, *Env) error {
	f.done()
	return nil
}

// SnapshotRestore downloads a backup archive on Inject (while the workload runs) and,
// on Heal, restores the cluster from it: the workload is paused, the archive uploaded
// with PUT /v1/snapshot, and the history split there. The next segment starts from the
// archive's state, read from the archive itself.
type SnapshotRestore struct {
	archive []byte
	initial map[int]SvcState
	done    func()
}

// Name is "snapshot-restore".
func (*SnapshotRestore) Name() string { return "snapshot-restore" }

// MaxPerRound is 1: every restore starts a history segment into which the unknown
// writes before it are carried, and the checker's cost grows with their number.
func (*SnapshotRestore) MaxPerRound() int { return 1 }

// Inject saves an archive through a random node.
func (f *SnapshotRestore) Inject(ctx context.Context, env *Env) error {
	f.done = env.event("snapshot save, then restore")
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		if _, err = env.Cluster.Leader(ctx); err != nil {
			return err
		}
		n := env.Cluster.Nodes[env.Rand.IntN(len(env.Cluster.Nodes))]
		cl := n.Client()
		if cl == nil || n.Paused() {
			err = fmt.Errorf("%s: %w", n.ID, errNotRunning)
			continue
		}
		var buf bytes.Buffer
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		info, err := cl.SaveSnapshot(sctx, &buf, false)
		cancel()
		if err == nil {
			f.archive = buf.Bytes()
			f.initial, err = archiveState(f.archive, env.TempDir, env.Workload.cfg.Services)
			if err != nil {
				return fmt.Errorf("reading the saved archive: %w", err)
			}
			env.Logf("fault: saved a snapshot at index %d via %s (%d bytes)", info.Index, n.ID, len(f.archive))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		env.Logf("fault: snapshot save via %s: %v; retrying", n.ID, err)
	}
	return fmt.Errorf("snapshot save: %w", err)
}

// Heal restores the archive with the workload paused and starts a history segment.
func (f *SnapshotRestore) Heal(ctx context.Context, env *Env) error {
	defer f.done()
	env.Workload.Pause()
	defer env.Workload.Resume()
	start := env.History.Now()
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		if _, err = env.Cluster.Leader(ctx); err != nil {
			return err
		}
		n := env.Cluster.Nodes[env.Rand.IntN(len(env.Cluster.Nodes))]
		cl := n.Client()
		if cl == nil || n.Paused() {
			err = fmt.Errorf("%s: %w", n.ID, errNotRunning)
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = cl.RestoreSnapshot(rctx, bytes.NewReader(f.archive))
		cancel()
		if err == nil {
			env.Logf("fault: restored the snapshot via %s", n.ID)
			break
		}
		env.Logf("fault: snapshot restore via %s: %v; retrying", n.ID, err)
	}
	if err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	env.History.AddSegment(Segment{Start: start, End: env.History.Now(), Initial: f.initial})
	return nil
}

// archiveState extracts the state file of a backup archive and reads each workload
// service's instances from it.
func archiveState(archive []byte, dir string, services int) (map[int]SvcState, error) {
	ar, err := snapshot.Read(bytes.NewReader(archive), snapshot.ReadOptions{Dir: dir, Check: snapshot.CheckState})
	if err != nil {
		return nil, err
	}
	defer func() { _ = ar.Close() }()
	path := filepath.Join(dir, fmt.Sprintf("archive-%d.db", time.Now().UnixNano()))
	if err := os.Rename(ar.StatePath, path); err != nil {
		return nil, err
	}
	defer func() { _ = os.Remove(path) }()
	s, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = s.Close() }()
	out := make(map[int]SvcState, services)
	for i := 0; i < services; i++ {
		_, list, err := s.Instances(nil, model.ServiceKey{Namespace: namespace, Group: group, Service: ServiceName(i)})
		if err != nil && !errors.Is(err, model.ErrNotFound) {
			return nil, err
		}
		var st SvcState
		for _, in := range list {
			if in.IP != InstanceIP || in.Port < 1 || in.Port > MaxPorts || in.Metadata["v"] == "" {
				return nil, fmt.Errorf("archive holds unexpected instance %s of %s", in.Addr(), ServiceName(i))
			}
			st[in.Port-1] = in.Metadata["v"]
		}
		out[i] = st
	}
	return out, nil
}
