//go:build linux

package faults

import (
	"context"
	"fmt"
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
	// Stop is how long the process took to exit after SIGTERM; Ready how long after
	// its start it reported ready (caught up with the leader).
	Stop  time.Duration `json:"-"`
	Ready time.Duration `json:"-"`
	// StopMillis and ReadyMillis are Stop and Ready in milliseconds, for reports.
	StopMillis  float64 `json:"stopMillis"`
	ReadyMillis float64 `json:"readyMillis"`
}

// RestartEachNode restarts every node once, one at a time, the way an operator
// upgrades a cluster: SIGTERM, wait for the exit, start it on its data, wait until it
// reports ready, then the next. Followers go first and the leader last, so the
// cluster changes leader once. It returns each step's timings.
func RestartEachNode(ctx context.Context, c *Cluster, logf func(string, ...any)) ([]RestartStep, error) {
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
		start := time.Now()
		if err := c.Stop(n, stopLimit); err != nil {
			return steps, err
		}
		st.Stop = time.Since(start)
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
		logf("rolling restart: %s (leader %v) exited in %s, ready %s after its start",
			n.ID, st.WasLeader, st.Stop.Round(time.Millisecond), st.Ready.Round(time.Millisecond))
		steps = append(steps, st)
	}
	return steps, nil
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
	_, err := RestartEachNode(ctx, env.Cluster, env.Logf)
	return err
}

// Heal has nothing to repair: every node was restarted.
func (f *RollingRestart) Heal(context.Context, *Env) error {
	f.done()
	return nil
}
