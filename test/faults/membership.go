//go:build linux

package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rosterhq/roster/client"
)

// ReplaceMember decommissions a random follower under the workload and adds it back
// as a new server: Inject removes it from the Raft configuration through the API
// (DELETE /v1/cluster/members/{id}), stops it and wipes its data directory; Heal
// starts it empty with --join, so that the cluster adds it as a non-voter, sends it
// the state, and promotes it once it has stayed caught up. Heal returns when it votes
// again. Both membership changes happen while the clients keep writing and reading,
// and the round's history is checked as any other.
type ReplaceMember struct {
	node *Node
	done func()
}

// memberChangeWait bounds each step of ReplaceMember (removal, promotion).
const memberChangeWait = 45 * time.Second

// Name is "replace-member".
func (*ReplaceMember) Name() string { return "replace-member" }

// Inject removes a follower from the cluster and wipes it.
func (f *ReplaceMember) Inject(ctx context.Context, env *Env) error {
	n, err := env.follower(ctx)
	if err != nil {
		return err
	}
	f.node = n
	f.done = env.event(fmt.Sprintf("remove %s from the cluster, wipe it and add it back", n.ID))
	deadline := time.Now().Add(memberChangeWait)
	for {
		l, err := env.leader(ctx)
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = l.Client().RemoveMember(cctx, n.ID)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("removing %s: %w", n.ID, err)
		}
		env.Logf("fault: removing %s via %s: %v; retrying", n.ID, l.ID, err)
	}
	env.Cluster.Kill(n)
	if err := os.RemoveAll(n.DataDir); err != nil {
		return err
	}
	if err := os.MkdirAll(n.DataDir, 0o755); err != nil {
		return err
	}
	env.Logf("fault: removed %s, stopped it and wiped its data", n.ID)
	return nil
}

// Heal starts the wiped node with --join through another node and waits until the
// leader lists it as a voter.
func (f *ReplaceMember) Heal(ctx context.Context, env *Env) error {
	defer f.done()
	n := f.node
	var via *Node
	for _, o := range env.Cluster.Nodes {
		if o != n && o.Running() && !o.Paused() {
			via = o
			break
		}
	}
	if via == nil {
		return errors.New("no running node to join through")
	}
	n.joinVia = via.http.Addr()
	if err := env.Cluster.Start(n); err != nil {
		return err
	}
	deadline := time.Now().Add(memberChangeWait)
	var last string
	for {
		if l, err := env.leader(ctx); err == nil {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			ms, _, err := l.Client().Members(cctx, client.QueryOptions{})
			cancel()
			last = fmt.Sprint(err)
			for _, m := range ms.Members {
				if m.ID == n.ID {
					last = fmt.Sprintf("a member, voter %v", m.Voter)
					if m.Voter {
						env.Logf("fault: %s joined again and votes", n.ID)
						return nil
					}
				}
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not become a voter again within %s (last: %s)", n.ID, memberChangeWait, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
