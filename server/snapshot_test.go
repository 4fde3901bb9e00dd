package server_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/buildinfo"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/server/servertest"
	"github.com/rosterhq/roster/snapshot"
	"github.com/rosterhq/roster/store"
)

// A saved archive restored after the cluster changed brings back exactly the saved
// state on every node; every index served afterwards is above every index served
// before; blocked queries wake; the change feed tells subscribers to rescan.
func TestSnapshot_RoundTripRestoresExactState(t *testing.T) {
	c := newSnapshotCluster(t)
	ctx := ctxT(t, 90*time.Second)
	leader := c.MustLeader()
	f := c.Followers()[0]
	last := fill(ctx, t, c.Nodes[f].Client(), checkTarget(t))
	noErr(t, c.WaitApplied(ctx, last))
	saved := logicalOf(dump(t, c.Nodes[leader]))

	// Saved through a follower: the leader serves it.
	archive, meta, info := save(ctx, t, c.Nodes[f].Client(), false)
	if info.ServedBy != c.Nodes[leader].ID {
		t.Errorf("archive served by %q, want the leader %s", info.ServedBy, c.Nodes[leader].ID)
	}
	wantCounts := snapshot.Counts{Namespaces: 2, Services: 6, Instances: 24}
	if meta.Counts != wantCounts || meta.RosterVersion != buildinfo.Get().Version || meta.FormatVersion != snapshot.FormatVersion {
		t.Errorf("meta = %+v, want counts %+v and version %s", meta, wantCounts, buildinfo.Get().Version)
	}
	if meta.Index < last || meta.Index > c.Nodes[leader].Server.Node().Raft().LastIndex() {
		t.Errorf("meta index %d, want between the last write %d and the leader's last index", meta.Index, last)
	}
	if meta.Term == 0 || meta.Term > c.Nodes[leader].Server.Node().Raft().CurrentTerm() {
		t.Errorf("meta term %d, current term %d", meta.Term, c.Nodes[leader].Server.Node().Raft().CurrentTerm())
	}
	if time.Since(meta.CreatedAt) > time.Minute {
		t.Errorf("createdAt %v", meta.CreatedAt)
	}

	// Change things: add, delete, modify.
	lc := c.Nodes[leader].Client()
	wrote(t)(lc.RegisterInstance(ctx, "staging", group, "svc-2", "127.109.9.9", 1, manual))
	wrote(t)(lc.DeregisterInstance(ctx, model.DefaultNamespace, group, "svc-0", "127.0.0.1", 20000))
	wrote(t)(lc.UpsertService(ctx, model.DefaultNamespace, group, "svc-1", api.ServiceRequest{Metadata: map[string]string{"changed": "yes"}}))
	wrote(t)(lc.UpsertNamespace(ctx, "extra", api.NamespaceRequest{}))
	mutatedIdx := wrote(t)(lc.UpdateInstance(ctx, "staging", group, "svc-0", "127.0.0.1", 20002, api.InstanceRequest{Weight: ptr(9.0)}))
	noErr(t, c.WaitApplied(ctx, mutatedIdx))
	if reflect.DeepEqual(logicalOf(dump(t, c.Nodes[leader])), saved) {
		t.Fatal("the mutations changed nothing")
	}
	_, before := readIndexes(ctx, t, c)
	before = max(before, mutatedIdx)

	// Park watchers: a store-level watch on every node (registered for sure before the
	// restore) and a blocking HTTP query on a follower.
	var woken []chan bool
	for _, nd := range c.Nodes {
		ws := store.NewWatchSet()
		if _, _, err := nd.Server.Store().ServiceView(ws, model.ServiceKey{Namespace: "staging", Group: group, Service: "svc-0"}); err != nil {
			t.Fatal(err)
		}
		ch := make(chan bool, 1)
		go func() { ch <- ws.Wait(ctx) }()
		woken = append(woken, ch)
	}
	_, svcMeta, err := c.Nodes[f].Client().Instances(ctx, "staging", group, "svc-0", client.InstancesQuery{})
	if err != nil {
		t.Fatal(err)
	}
	type blocked struct {
		resp api.InstancesResponse
		meta client.Meta
		err  error
		took time.Duration
	}
	blockedCh := make(chan blocked, 1)
	go func() {
		start := time.Now()
		resp, m, err := c.Nodes[f].Client().Instances(ctx, "staging", group, "svc-0", client.InstancesQuery{
			QueryOptions: client.QueryOptions{WaitIndex: svcMeta.Index, WaitTime: time.Minute},
		})
		blockedCh <- blocked{resp, m, err, time.Since(start)}
	}()
	// Subscribers of the change feed on every node.
	var feeds []<-chan []store.Event
	for _, nd := range c.Nodes {
		ch, cancel := nd.Server.Store().Subscribe(64)
		t.Cleanup(cancel)
		feeds = append(feeds, ch)
	}

	// Restored through the other follower, which streams the body to the leader.
	other := c.Followers()[1]
	if err := c.Nodes[other].Client().RestoreSnapshot(ctx, bytes.NewReader(archive)); err != nil {
		t.Fatalf("restore: %v", err)
	}
	waitLogical(t, c, saved, same)

	lo, _ := readIndexes(ctx, t, c)
	if lo <= before {
		t.Errorf("an index read after the restore (%d) is not above every index read before (%d)", lo, before)
	}
	for i, ch := range woken {
		select {
		case ok := <-ch:
			if !ok {
				t.Errorf("node %d: watch ended without firing", i)
			}
		case <-ctx.Done():
			t.Fatalf("node %d: watch parked before the restore never woke", i)
		}
	}
	b := <-blockedCh
	switch {
	case b.err != nil:
		t.Fatalf("blocking query: %v", b.err)
	case b.took > 30*time.Second:
		t.Errorf("blocking query returned after %v: the restore did not wake it", b.took)
	case b.meta.Index <= svcMeta.Index || b.resp.Index <= before:
		t.Errorf("blocking query index %d/%d, want above %d and %d", b.meta.Index, b.resp.Index, svcMeta.Index, before)
	case len(b.resp.Instances) != 4 || b.resp.Instances[2].Weight != 3:
		t.Errorf("blocking query returned %+v, want the restored instances", b.resp.Instances)
	}
	for i, ch := range feeds {
		if !waitReset(ctx, ch) {
			t.Errorf("node %d: no EventReset on the change feed after the restore", i)
		}
	}

	// The cluster keeps working, forwarding included (the member table is intact).
	idx := wrote(t)(c.Nodes[f].Client().RegisterInstance(ctx, "staging", group, "svc-2", "127.101.1.1", 2, manual))
	if idx <= before {
		t.Errorf("write after the restore at index %d, not above %d", idx, before)
	}
	// A new save reflects a position past the restore.
	_, meta2, _ := save(ctx, t, c.Nodes[leader].Client(), false)
	if meta2.Index < idx || meta2.Counts.Instances != 25 {
		t.Errorf("save after restore: index %d (want ≥ %d), %d instances (want 25)", meta2.Index, idx, meta2.Counts.Instances)
	}
}

// waitReset reports whether an EventReset arrives on ch before ctx ends.
func waitReset(ctx context.Context, ch <-chan []store.Event) bool {
	for {
		select {
		case evs, ok := <-ch:
			if !ok {
				return false
			}
			for _, e := range evs {
				if e.Kind == store.EventReset {
					return true
				}
			}
		case <-ctx.Done():
			return false
		}
	}
}

// An archive restored into a different, freshly bootstrapped cluster gives that
// cluster the archived registry; the new cluster keeps its own members, and its
// indexes continue above the archive's.
func TestSnapshot_RestoreIntoFreshCluster(t *testing.T) {
	src := newSnapshotCluster(t)
	ctx := ctxT(t, 90*time.Second)
	last := fill(ctx, t, src.Nodes[src.MustLeader()].Client(), checkTarget(t))
	noErr(t, src.WaitApplied(ctx, last))
	archive, meta, _ := save(ctx, t, src.Nodes[0].Client(), false)
	want := logicalOf(dump(t, src.Nodes[src.MustLeader()]))
	src.Close()

	dst := newSnapshotCluster(t)
	dl := dst.MustLeader()
	dstIdx := registerUnprobed(ctx, t, dst.Nodes[dl].Client(), "only-in-dst", "127.100.0.1", 1)
	noErr(t, dst.WaitApplied(ctx, dstIdx))
	_, before := readIndexes(ctx, t, dst)
	before = max(before, dstIdx)
	dstMembers := dump(t, dst.Nodes[dl]).Members
	if err := dst.Nodes[dl].Client().RestoreSnapshot(ctx, bytes.NewReader(archive)); err != nil {
		t.Fatalf("restore: %v", err)
	}
	waitLogical(t, dst, want.withoutMembers(), logical.withoutMembers)
	dst.WaitSettled()
	for _, nd := range dst.Nodes {
		if got := dump(t, nd).Members; !reflect.DeepEqual(got, dstMembers) {
			t.Errorf("node %s: members after restore %+v, want the cluster's own %+v", nd.ID, got, dstMembers)
		}
	}
	// Writes through a follower work (forwarding needs the member table) and land past
	// the archive's index.
	f := dst.Followers()[0]
	idx := registerUnprobed(ctx, t, dst.Nodes[f].Client(), "after", "127.100.0.2", 2)
	if idx <= meta.Index {
		t.Errorf("write after restore at %d, not above the archive's index %d", idx, meta.Index)
	}
	if lo, _ := readIndexes(ctx, t, dst); lo <= before {
		t.Errorf("an index read after the restore (%d) is not above every index read before (%d)", lo, before)
	}
}

// A follower that is down while the cluster is restored installs the restored state
// when it comes back.
func TestSnapshot_FollowerDownDuringRestoreCatchesUp(t *testing.T) {
	c := newSnapshotCluster(t)
	ctx := ctxT(t, 90*time.Second)
	leader := c.MustLeader()
	last := fill(ctx, t, c.Nodes[leader].Client(), checkTarget(t))
	noErr(t, c.WaitApplied(ctx, last))
	archive, _, _ := save(ctx, t, c.Nodes[leader].Client(), false)
	want := logicalOf(dump(t, c.Nodes[leader]))

	down := c.Followers()[0]
	c.Stop(down)
	lc := c.Nodes[leader].Client()
	wrote(t)(lc.DeregisterInstance(ctx, "staging", group, "svc-1", "127.0.0.1", 20003))
	wrote(t)(lc.UpsertNamespace(ctx, "gone", api.NamespaceRequest{}))
	if err := lc.RestoreSnapshot(ctx, bytes.NewReader(archive)); err != nil {
		t.Fatalf("restore with a follower down: %v", err)
	}
	waitLogical(t, c, want, same)

	c.Start(down)
	waitLogical(t, c, want, same)
	c.WaitSettled()
	// It serves the restored state itself.
	resp, _, err := c.Nodes[down].Client().Namespaces(ctx, client.QueryOptions{Consistency: api.ConsistencyStale})
	if err != nil || len(resp.Namespaces) != 2 {
		t.Fatalf("returned follower's namespaces %+v, %v", resp.Namespaces, err)
	}
}

// ?consistency=stale lets a follower serve its own state, even with no leader.
func TestSnapshot_StaleSaveFromFollowerWithoutLeader(t *testing.T) {
	c := newSnapshotCluster(t)
	ctx := ctxT(t, 60*time.Second)
	leader := c.MustLeader()
	last := fill(ctx, t, c.Nodes[leader].Client(), checkTarget(t))
	noErr(t, c.WaitApplied(ctx, last))
	f := c.Followers()[0]
	want := logicalOf(dump(t, c.Nodes[f]))

	_, meta, info := save(ctx, t, c.Nodes[f].Client(), true)
	if info.ServedBy != c.Nodes[f].ID || meta.Index < last {
		t.Errorf("stale save served by %s at index %d, want %s at ≥ %d", info.ServedBy, meta.Index, c.Nodes[f].ID, last)
	}

	for _, i := range c.Followers() {
		if i != f {
			c.Stop(i)
		}
	}
	c.Stop(leader)
	// A linearizable save has no leader to go to.
	var sink bytes.Buffer
	short, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err := c.Nodes[f].Client().SaveSnapshot(short, &sink, false)
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("save without a leader: %v, want a 503", err)
	}
	archive, _, _ := save(ctx, t, c.Nodes[f].Client(), true)
	ar, err := snapshot.Read(bytes.NewReader(archive), snapshot.ReadOptions{Dir: t.TempDir(), Check: snapshot.CheckState})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ar.Close() }()
	st, err := store.Open(ar.StatePath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	got, err := st.Dump()
	noErr(t, err)
	if got := logicalOf(got); !reflect.DeepEqual(got, want) {
		t.Fatalf("stale archive holds %+v, want %+v", got, want)
	}
}

// The index and term in an archive are those of the Raft log: after a Raft snapshot
// the view's position is the snapshot's; after a write, the write's entry.
func TestSnapshotState_PositionMatchesRaft(t *testing.T) {
	c := newSnapshotCluster(t)
	ctx := ctxT(t, 60*time.Second)
	leader := c.MustLeader()
	node := c.Nodes[leader].Server.Node()
	idx := registerUnprobed(ctx, t, c.Nodes[leader].Client(), "pos", "127.100.0.1", 1)
	view, err := node.SnapshotState()
	noErr(t, err)
	if view.Index != idx || view.Term != node.Raft().CurrentTerm() {
		t.Errorf("after a write at %d (term %d): view at %d term %d", idx, node.Raft().CurrentTerm(), view.Index, view.Term)
	}
	_ = view.Close()

	// A barrier moves Raft past the last state-changing entry; a Raft snapshot then
	// covers it, and the view takes the snapshot's position.
	if err := node.Raft().Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	sf := node.Raft().Snapshot()
	if err := sf.Error(); err != nil {
		t.Fatal(err)
	}
	sm, rc, err := sf.Open()
	if err != nil {
		t.Fatal(err)
	}
	_ = rc.Close()
	view, err = node.SnapshotState()
	noErr(t, err)
	defer func() { _ = view.Close() }()
	if sm.Index <= idx || view.Index != sm.Index || view.Term != sm.Term {
		t.Errorf("raft snapshot at %d term %d (last write %d): view at %d term %d", sm.Index, sm.Term, idx, view.Index, view.Term)
	}
	if n := view.Counts(); n.Instances != 1 || n.Namespaces != 1 || n.Members != 3 {
		t.Errorf("view counts %+v", n)
	}
}

// A restore archive larger than the API's 1 MiB body limit passes through a follower,
// streamed both ways.
func TestSnapshot_LargeArchiveThroughFollower(t *testing.T) {
	c := newSnapshotCluster(t)
	ctx := ctxT(t, 120*time.Second)
	leader := c.MustLeader()
	last := fillBulk(ctx, t, c.Nodes[leader].Client(), 2000)
	noErr(t, c.WaitApplied(ctx, last))
	want := logicalOf(dump(t, c.Nodes[leader]))
	f := c.Followers()[0]
	archive, meta, _ := save(ctx, t, c.Nodes[f].Client(), false)
	if len(archive) <= 1<<20 || meta.Counts.Instances != 2000 {
		t.Fatalf("archive of %d bytes with %d instances; the test needs more than 1 MiB", len(archive), meta.Counts.Instances)
	}
	for i := range 50 {
		wrote(t)(c.Nodes[leader].Client().DeregisterInstance(ctx, "", "", "bulk", "10.0.0."+strconv.Itoa(i), 8080))
	}
	// Installing a restore makes every follower load a snapshot of more than 1 MiB; on a
	// loaded machine (the race detector) the leader can lose its lease meanwhile and answer
	// 503. An operator retries the same archive, and so does the test: what it checks is
	// that a large archive goes through a follower and ends up on every node.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = c.Nodes[f].Client().RestoreSnapshot(ctx, bytes.NewReader(archive)); err == nil || !unavailable(err) {
			break
		}
		t.Logf("restore attempt %d: %v; retrying", attempt+1, err)
		c.MustLeader()
	}
	if err != nil {
		t.Fatalf("restore through a follower: %v", err)
	}
	waitLogical(t, c, want, same)
}

// unavailable reports whether err is a 503 answer (no leader, or leadership lost).
func unavailable(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable
}

// The leader's health prober learns the restored instances (the store's EventReset
// makes it rescan): instances that exist only in the archive are probed after the
// restore.
func TestSnapshot_RestoreReschedulesProber(t *testing.T) {
	c := newSnapshotCluster(t)
	ctx := ctxT(t, 60*time.Second)
	lc := c.Nodes[c.MustLeader()].Client()
	wrote(t)(lc.UpsertCluster(ctx, "", "", "probed", "web", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{
		Type: "HTTP", Port: checkTarget(t), Path: "/health", Interval: "1s", Timeout: "500ms", Rise: 1, Fall: 1,
	}}))
	web := api.InstanceRequest{Cluster: ptr("web")}
	wrote(t)(lc.RegisterInstance(ctx, "", "", "probed", "127.0.0.1", 30001, web))
	wrote(t)(lc.RegisterInstance(ctx, "", "", "probed", "127.0.0.1", 30002, web))
	archive, _, _ := save(ctx, t, lc, false)
	wrote(t)(lc.DeregisterInstance(ctx, "", "", "probed", "127.0.0.1", 30001))
	wrote(t)(lc.DeregisterInstance(ctx, "", "", "probed", "127.0.0.1", 30002))
	waitProbes(ctx, t, lc, func(h api.HealthResponse) bool { return len(h.Results) == 0 })

	restored := time.Now()
	if err := lc.RestoreSnapshot(ctx, bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	waitProbes(ctx, t, lc, func(h api.HealthResponse) bool {
		probed := 0
		for _, r := range h.Results {
			if r.Outcome == "success" && r.LastCheck.After(restored) {
				probed++
			}
		}
		return probed == 2
	})
}

// waitProbes polls the leader's probe results of service "probed" until ok accepts them.
func waitProbes(ctx context.Context, t *testing.T, cl *client.Client, ok func(api.HealthResponse) bool) {
	t.Helper()
	var last api.HealthResponse
	var err error
	matched := false
	defer func() {
		if !matched {
			t.Logf("last probe results %+v (error %v)", last, err)
		}
	}()
	wait.For(t, 30*time.Second, "the leader's probe results", func() bool {
		last, err = cl.Health(ctx, "", "", "probed")
		return err == nil && ok(last)
	})
	matched = true
}

// Restoring cluster A's archive into a running cluster B changes neither cluster's
// membership: B keeps its id and members (the archive's member table is replaced before
// Raft sees it), and no node of B ever talks to A — A receives no join request at all.
// (Before, B's followers read A's addresses from the restored table, announced
// themselves to A, and A replaced a voter with B's node.)
func TestSnapshot_RestoreFromAnotherLiveClusterChangesNoMembership(t *testing.T) {
	a := newSnapshotCluster(t)
	ctx := ctxT(t, 90*time.Second)
	al := a.MustLeader()
	last := registerUnprobed(ctx, t, a.Nodes[al].Client(), "in-a", "127.100.0.1", 1)
	noErr(t, a.WaitApplied(ctx, last))
	archive, _, _ := save(ctx, t, a.Nodes[al].Client(), false)

	b := newSnapshotCluster(t)
	bl := b.MustLeader()
	var aID, bID string
	wait.For(t, 10*time.Second, "both clusters' ids", func() bool {
		aID, bID = a.Nodes[al].Server.Node().ClusterID(), b.Nodes[bl].Server.Node().ClusterID()
		return aID != "" && bID != ""
	})
	membersOf := func(c *servertest.Cluster, i int) []raftnode.Member {
		ms, err := c.Nodes[i].Server.Node().Members(ctx)
		noErr(t, err)
		for j := range ms {
			ms[j].LastContact, ms[j].Leader = 0, false
		}
		return ms
	}
	aBefore, bBefore := membersOf(a, al), membersOf(b, bl)
	aTable, bTable := dump(t, a.Nodes[al]).Members, dump(t, b.Nodes[bl]).Members
	joinsOnA := func() float64 {
		var n float64
		for _, nd := range a.Nodes {
			for _, status := range []string{"200", "400", "409", "503"} {
				n += metricValue(ctx, t, nd, `roster_http_requests_total{method="POST",route="/v1/cluster/join",status="`+status+`"}`)
			}
		}
		return n
	}
	joins := joinsOnA()

	if err := b.Nodes[bl].Client().RestoreSnapshot(ctx, bytes.NewReader(archive)); err != nil {
		t.Fatalf("restore A's archive into B: %v", err)
	}
	b.WaitSettled()
	// Watch A through a dozen registration rounds of B's followers (every 250 ms).
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for end := time.After(3 * time.Second); ; {
		if got := membersOf(a, al); !reflect.DeepEqual(got, aBefore) {
			t.Fatalf("A's membership changed: %+v, was %+v", got, aBefore)
		}
		select {
		case <-tick.C:
			continue
		case <-end:
		}
		break
	}
	if got := joinsOnA(); got != joins {
		t.Fatalf("A received %v join requests during B's restore", got-joins)
	}
	if got := dump(t, a.Nodes[al]).Members; !reflect.DeepEqual(got, aTable) {
		t.Fatalf("A's member table changed: %+v, was %+v", got, aTable)
	}
	for _, nd := range b.Nodes {
		if got := dump(t, nd); !reflect.DeepEqual(got.Members, bTable) || got.ClusterID != bID {
			t.Errorf("B's node %s after the restore: members %+v, cluster %q; want %+v, %q", nd.ID, got.Members, got.ClusterID, bTable, bID)
		}
	}
	if got := membersOf(b, b.MustLeader()); !reflect.DeepEqual(got, bBefore) {
		t.Fatalf("B's membership changed: %+v, was %+v", got, bBefore)
	}
	if a.Nodes[al].Server.Node().ClusterID() != aID {
		t.Fatal("A's cluster id changed")
	}
}
