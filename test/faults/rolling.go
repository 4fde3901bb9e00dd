//go:build linux

package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// stopLimit is how long a node may take to exit after SIGTERM: the leadership
// hand-over and the drain of its requests are bounded well below it.
const stopLimit = 15 * time.Second

// RestartStep is one node's turn in a rolling restart.
type RestartStep struct {
	Node string `json:"node"`
	// WasLeader says whether the node led when it was stopped.
	WasLeader bool `json:"wasLeader"`
	// Binary is what the node ran after its restart (its release in a rolling upgrade).
	Binary string `json:"binary,omitempty"`
	// Transferred says leadership was moved to an upgraded node before the node (the
	// leader, on an older release) was stopped, as docs/operations.md's upgrade steps say.
	Transferred bool `json:"transferred,omitempty"`
	// Stop is how long the process took to exit after SIGTERM; Ready how long after
	// its start it reported ready (caught up with the leader).
	Stop  time.Duration `json:"-"`
	Ready time.Duration `json:"-"`
	// StopMillis and ReadyMillis are Stop and Ready in milliseconds, for reports.
	StopMillis  float64 `json:"stopMillis"`
	ReadyMillis float64 `json:"readyMillis"`
}

// RestartEachNode restarts every node once, one at a time, the way an operator
// upgrades a cluster: SIGTERM, wait for the exit, start it on its data (on binary bin
// when it is not empty: a rolling upgrade), wait until it reports ready, then the next.
// Followers go first and the leader last, so the cluster changes leader once. It
// returns each step's timings.
func RestartEachNode(ctx context.Context, c *Cluster, bin string, logf func(string, ...any)) ([]RestartStep, error) {
	leader, err := c.Leader(ctx)
	if err != nil {
		return nil, err
	}
	order := make([]*Node, 0, len(c.Nodes))
	for _, n := range c.Nodes {
		if n != leader {
			order = append(order, n)
		}
	}
	order = append(order, leader)
	var steps []RestartStep
	for _, n := range order {
		st := RestartStep{Node: n.ID}
		if l, err := c.Leader(ctx); err == nil {
			st.WasLeader = l == n
		}
		if st.WasLeader && bin != "" && c.Binary(n) != bin {
			// An older release's leader may close its connections without handing
			// over (v0.1.x): move leadership to an upgraded node first.
			if err := transferTo(ctx, c, n, bin); err != nil {
				return steps, err
			}
			st.Transferred = true
		}
		start := time.Now()
		if err := c.Stop(n, stopLimit); err != nil {
			return steps, err
		}
		st.Stop = time.Since(start)
		if bin != "" {
			c.SetBinary(n, bin)
		}
		st.Binary = filepath.Base(c.Binary(n))
		start = time.Now()
		if err := c.Start(n); err != nil {
			return steps, err
		}
		if err := waitReady(ctx, n, 30*time.Second); err != nil {
			return steps, err
		}
		st.Ready = time.Since(start)
		st.StopMillis = float64(st.Stop.Microseconds()) / 1000
		st.ReadyMillis = float64(st.Ready.Microseconds()) / 1000
		logf("rolling restart: %s (leader %v) exited in %s, ready on %s %s after its start",
			n.ID, st.WasLeader, st.Stop.Round(time.Millisecond), st.Binary, st.Ready.Round(time.Millisecond))
		steps = append(steps, st)
	}
	return steps, nil
}

// transferTo moves leadership from n to a running node on bin and waits until that
// node leads.
func transferTo(ctx context.Context, c *Cluster, n *Node, bin string) error {
	var to *Node
	for _, o := range c.Nodes {
		if o != n && o.Running() && c.Binary(o) == bin {
			to = o
			break
		}
	}
	if to == nil {
		return fmt.Errorf("no upgraded node to transfer leadership to")
	}
	cl := n.Client()
	if cl == nil {
		return fmt.Errorf("%s is not running", n.ID)
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cl.TransferLeadership(tctx, to.ID); err != nil {
		return fmt.Errorf("transfer leadership from %s to %s: %w", n.ID, to.ID, err)
	}
	for {
		if l, err := c.Leader(tctx); err == nil && l == to {
			return nil
		}
		select {
		case <-tctx.Done():
			return fmt.Errorf("%s did not take over leadership from %s: %w", to.ID, n.ID, tctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitReady polls the node's readiness until it reports ready.
func waitReady(ctx context.Context, n *Node, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	why := "not polled"
	for {
		if cl := n.Client(); cl != nil {
			rctx, rcancel := context.WithTimeout(ctx, time.Second)
			r, err := cl.Ready(rctx)
			rcancel()
			switch {
			case err != nil:
				why = err.Error()
			case r.Ready:
				return nil
			default:
				why = r.Reason
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s: %s", n.ID, limit, why)
		}
	}
}

// RollingRestart restarts every node in turn with SIGTERM (a clean shutdown, the
// leader handing leadership over), under the workload.
type RollingRestart struct{ done func() }

// Name is "rolling-restart".
func (*RollingRestart) Name() string { return "rolling-restart" }

// MaxPerRound is 2: one restart takes a few seconds per node.
func (*RollingRestart) MaxPerRound() int { return 2 }

// Inject runs the whole rolling restart.
func (f *RollingRestart) Inject(ctx context.Context, env *Env) error {
	f.done = env.event("rolling restart (SIGTERM, restart, wait ready; followers first)")
	_, err := RestartEachNode(ctx, env.Cluster, "", env.Logf)
	return err
}

// Heal has nothing to repair: every node was restarted.
func (f *RollingRestart) Heal(context.Context, *Env) error {
	f.done()
	return nil
}

// OnPreviousRelease runs one node on the release before this one for a while (a rolling
// upgrade caught half-way, or rolled back on one node) under the workload: SIGTERM, the
// node restarted on its data with the previous release's binary, and on Heal restarted
// on the current one. Every write the workload makes is one both releases apply; the
// previous release must apply every entry the current leader writes meanwhile. It runs
// only when the run has the previous release's binary (RunConfig.PreviousBinary).
type OnPreviousRelease struct {
	node *Node
	done func()
}

// Name is "previous-release".
func (*OnPreviousRelease) Name() string { return "previous-release" }

// Inject restarts a random node, the leader or a follower, on the previous release.
func (f *OnPreviousRelease) Inject(ctx context.Context, env *Env) error {
	if env.PreviousBinary == "" {
		return fmt.Errorf("previous-release: the run has no previous release binary")
	}
	var running []*Node
	for _, n := range env.Cluster.Nodes {
		if n.Running() {
			running = append(running, n)
		}
	}
	if len(running) == 0 {
		return fmt.Errorf("previous-release: no node is running")
	}
	f.node = running[env.Rand.IntN(len(running))]
	f.done = env.event(fmt.Sprintf("%s restarted on the previous release (%s)", f.node.ID, filepath.Base(env.PreviousBinary)))
	return f.swap(ctx, env, env.PreviousBinary)
}

// Heal restarts the node on the current release.
func (f *OnPreviousRelease) Heal(ctx context.Context, env *Env) error {
	defer f.done()
	return f.swap(ctx, env, env.Cluster.cfg.Binary)
}

func (f *OnPreviousRelease) swap(ctx context.Context, env *Env, bin string) error {
	return env.Cluster.RestartOn(ctx, f.node, bin)
}

// RestartOn stops n if it runs (SIGTERM), starts it on its data with binary bin, and
// waits until it reports ready: one node's step of an upgrade or a downgrade.
func (c *Cluster) RestartOn(ctx context.Context, n *Node, bin string) error {
	if n.Running() {
		if err := c.Stop(n, stopLimit); err != nil {
			return err
		}
	}
	c.SetBinary(n, bin)
	if err := c.Start(n); err != nil {
		return err
	}
	return waitReady(ctx, n, 30*time.Second)
}
