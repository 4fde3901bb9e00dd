package raftnode

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
)

// A rolling upgrade in one process: n3 plays a release of the first generation (it
// applies types 1 to 12 only). The leader writes only what n3 applies — older encodings
// where they exist, refusals naming n3 otherwise, and no cluster id or state check of
// its own — so n3 keeps applying everything. An entry n3 cannot apply that reaches it
// anyway (written past the gate here) halts it without a panic: not ready, reason needs
// upgrade, and it hands over any leadership it gets. Restarted on the current build it
// resumes from that entry, the gate opens, the leader writes what it held back, and
// every node holds the same state.
func TestUpgrade_GateHaltAndResume(t *testing.T) {
	c := newTestCluster(t, 3, true)
	old := c.nodes[2]
	old.newest = fsm.LegacyNewestType
	for _, tn := range c.nodes {
		c.start(tn, "")
	}
	leader := c.waitForLeader(15 * time.Second)
	if leader == old {
		if err := old.N().TransferLeadership(ctxTimeout(t, 10*time.Second), c.nodes[0].id); err != nil {
			t.Fatal(err)
		}
		leader = c.waitForLeader(15 * time.Second)
	}
	ln := leader.N()
	wait.For(t, 10*time.Second, "the leader to know every server's build", func() bool {
		bs, err := ln.ServerBuilds()
		if err != nil || len(bs) != 3 {
			return false
		}
		for _, b := range bs {
			if b.ID == old.id && b.NewestCommand != uint8(fsm.LegacyNewestType) || b.ID != old.id && b.Version == "" {
				return false
			}
		}
		return true
	})
	wait.For(t, 5*time.Second, "the gate to follow the oldest server", func() bool {
		return !ln.ServersApply(fsm.CheckStateType) && ln.ServersApply(fsm.LegacyNewestType)
	})

	// What n3 cannot apply in any encoding is refused, naming it.
	ctx := ctxTimeout(t, 30*time.Second)
	_, err := ln.Apply(ctx, fsm.UpdateSettingsRequest{Settings: model.Settings{MetadataMaxBytes: 2048}})
	var up *UpgradeRequiredError
	if !errors.As(err, &up) || !errors.Is(err, ErrUpgradeRequired) || len(up.Servers) != 1 || up.Servers[0].ID != old.id ||
		up.Command != fsm.UpdateSettingsType || !strings.Contains(err.Error(), old.id+" runs a release before v0.2.0 (newest command type 12)") {
		t.Fatalf("settings with an old server: %v, want an UpgradeRequiredError naming %s", err, old.id)
	}
	cas, err := fsm.NewCAS(0, false, fsm.UpsertServiceRequest{Service: model.Service{Namespace: "public", Group: "g", Name: "cas"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ln.Apply(ctx, cas); !errors.Is(err, ErrUpgradeRequired) {
		t.Fatalf("a conditional write with an old server: %v", err)
	}
	// What it applies in an older encoding goes in that encoding.
	mustApplyNamespace(t, ln, "mixed")
	in := model.Instance{Namespace: "mixed", Group: "g", Service: "s", IP: "127.0.0.1", Port: 9, Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true}
	if _, err := ln.Apply(ctx, fsm.UpsertClusterRequest{Cluster: model.Cluster{Namespace: "mixed", Group: "g", Service: "s", Name: model.DefaultCluster,
		HealthCheck: model.HealthCheck{Type: model.CheckNone}}}); err != nil {
		t.Fatal(err)
	}
	epoch, err := ln.Apply(ctx, fsm.RegisterInstanceRequest{Instance: in})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ln.Apply(ctx, fsm.SetHealthManualAtRequest{Ref: in.Ref(), Healthy: false, At: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	last := epoch + 1
	for _, tn := range c.nodes {
		wait.For(t, 10*time.Second, tn.id+" to apply the writes", func() bool { return tn.sm.AppliedIndex() >= last })
		if h := tn.sm.Halted(); h != nil {
			t.Fatalf("%s halted: %v", tn.id, h)
		}
		_, got, err := tn.st.Instance(nil, in.Ref())
		if err != nil || got.Healthy || got.UnhealthySince != 0 {
			t.Fatalf("%s: instance %+v (%v), want unhealthy without a time (the older encoding)", tn.id, got, err)
		}
	}
	if id := ln.ClusterID(); id != "" {
		t.Fatalf("cluster id %q set while a server cannot apply it", id)
	}
	// Records written before n3 was recorded may carry newest types; the leader rewrites
	// them without once it knows n3 (syncMembers, every second).
	wait.For(t, 5*time.Second, "the leader's record to drop the newest type "+old.id+" cannot store", func() bool {
		rec, _ := ln.member(leader.id)
		return rec.NewestCommand == 0
	})

	// An entry n3 cannot apply, written past the gate, halts it.
	data, err := fsm.Encode(fsm.UpdateSettingsRequest{Settings: model.Settings{MetadataMaxBytes: 2048}})
	if err != nil {
		t.Fatal(err)
	}
	f := ln.Raft().Apply(data, 5*time.Second)
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, old.id+" to halt at the settings entry", func() bool {
		h := old.sm.Halted()
		return h != nil && h.Index == f.Index() && h.Reason == fsm.HaltNeedsUpgrade && h.Type == fsm.UpdateSettingsType
	})
	ready, rep := old.N().Ready()
	if ready || rep.Halt == nil || !strings.Contains(rep.Reason, "needs upgrade") || rep.AppliedIndex >= f.Index() {
		t.Fatalf("halted node: ready %v, report %+v", ready, rep)
	}
	for _, tn := range c.nodes[:2] {
		wait.For(t, 10*time.Second, tn.id+" to apply the settings", func() bool { return tn.sm.AppliedIndex() >= f.Index() })
	}
	// Given leadership, the halted node hands it over at once.
	if err := ln.TransferLeadership(ctxTimeout(t, 10*time.Second), old.id); err != nil {
		t.Logf("transfer to the halted node: %v", err)
	}
	leader = c.waitForLeader(20 * time.Second)
	if leader == old {
		t.Fatal("the halted node leads")
	}
	if !strings.Contains(c.logs.String(), "this node cannot lead") {
		t.Fatal("the halted node never handed leadership over")
	}

	// On the current build it resumes from the entry, and the gate opens.
	c.stop(old)
	old.newest = 0
	c.start(old, "")
	wait.For(t, 15*time.Second, old.id+" to apply the settings after its upgrade", func() bool {
		return old.sm.AppliedIndex() >= f.Index() && old.sm.Halted() == nil
	})
	if _, set, err := old.st.Settings(nil); err != nil || set.MetadataMaxBytes != 2048 {
		t.Fatalf("settings on the upgraded node: %+v, %v", set, err)
	}
	ln = leader.N()
	wait.For(t, 15*time.Second, "the gate to open once every server runs the current build", func() bool {
		return ln.ServersApply(fsm.NewestType)
	})
	if _, err := ln.Apply(ctxTimeout(t, 10*time.Second), cas); err != nil {
		t.Fatalf("a conditional write after the upgrade: %v", err)
	}
	wait.For(t, 15*time.Second, "the cluster id and the member records' newest types", func() bool {
		if ln.ClusterID() == "" {
			return false
		}
		for _, tn := range c.nodes {
			if rec, ok := ln.member(tn.id); !ok || rec.NewestCommand != uint8(fsm.NewestType) {
				return false
			}
		}
		return true
	})
	final := ln.Raft().AppliedIndex()
	var want string
	for _, tn := range c.nodes {
		wait.For(t, 10*time.Second, tn.id+" to catch up", func() bool { return tn.sm.AppliedIndex() >= final })
	}
	wait.For(t, 10*time.Second, "every node to hold the same state", func() bool {
		want = ""
		for _, tn := range c.nodes {
			_, h, err := tn.st.StateHash()
			if err != nil {
				return false
			}
			if want == "" {
				want = h
			} else if h != want {
				return false
			}
		}
		return true
	})
}
