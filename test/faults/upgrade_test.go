//go:build linux

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/wait"
)

var (
	releaseMu   sync.Mutex
	releaseBins = map[string]string{}
)

// releaseBinary builds rel once per test run (BuildRelease). A checkout without the
// release in its history fails the test (.ci/run fetches the history of a shallow clone).
func releaseBinary(t *testing.T, rel Release) string {
	t.Helper()
	releaseMu.Lock()
	defer releaseMu.Unlock()
	if bin, ok := releaseBins[rel.Commit]; ok {
		return bin
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	bin, err := BuildRelease(ctx, root, binDir, rel)
	switch {
	case errors.Is(err, ErrNoHistory):
		t.Fatalf("%v: the mixed-version tests build %s from this checkout's history; fetch it (git fetch --unshallow --tags)", err, rel.Version)
	case err != nil:
		t.Fatal(err)
	}
	t.Logf("built %s (%s) in %s", rel.Version, rel.Commit[:12], time.Since(start).Round(time.Millisecond))
	releaseBins[rel.Commit] = bin
	return bin
}

// versionOf is what `bin version -o json` says of bin.
func versionOf(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	var v struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s version: %v (%s)", bin, err, out)
	}
	return v.Version
}

// upgradeCase is one rolling upgrade: from an older release to this build.
type upgradeCase struct {
	from Release
	// refusedWhileMixed: the older release lacks settings, conditional writes and the
	// health checks added after v0.1.0, so they are refused until its last node is gone.
	refusedWhileMixed bool
}

var upgradeCases = []upgradeCase{
	{from: FirstRelease, refusedWhileMixed: true},
	{from: PreviousRelease},
}

// TestUpgrade_MixedVersions upgrades a 3-node cluster of real processes from an older
// release to this build, as an operator does: followers first, each stopped and
// started on the new binary with its data; then leadership moves to an upgraded node
// (the old leader stops and comes back, still on the old binary); writes of every kind
// follow, through the leader and through the old node. Throughout, the old node stays up
// and applies every entry (the new leader writes only what it applies, and refuses the
// rest with 503 upgrade_in_progress naming it); once the last node is upgraded the
// refused writes succeed, and every node holds the same state (its state hash at the
// same state check).
func TestUpgrade_MixedVersions(t *testing.T) {
	for _, uc := range upgradeCases {
		t.Run("from-"+uc.from.Version, func(t *testing.T) { testUpgrade(t, uc) })
	}
}

func testUpgrade(t *testing.T, uc upgradeCase) {
	old := releaseBinary(t, uc.from)
	newVersion := versionOf(t, binary)
	c, err := StartCluster(ClusterConfig{Binary: old, Dir: t.TempDir(), Nodes: 3, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dir := artifactsDir("upgrade-from-" + uc.from.Version)
			if err := c.CopyLogs(dir); err == nil {
				t.Logf("node logs in %s", dir)
			}
		}
		c.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := &upgradeWriter{t: t, ctx: ctx}
	w.seed(leader.Client())

	// Followers first, then the leader's turn: stopped, it hands over to an upgraded
	// node, and comes back on its old binary.
	for _, n := range c.Nodes {
		if n != leader {
			restartNode(ctx, t, c, n, binary)
		}
	}
	if uc.refusedWhileMixed {
		// The old leader still leads: an upgraded follower does not forward it a
		// conditional write, which it would apply unconditionally.
		f := otherThan(c, leader)
		w.refusedUpgrade(errOf(patient(f).UpdateInstanceIf(ctx, "mixed", "g", "db", "127.0.0.1", 5432, 1, api.InstanceRequest{Weight: ptr(9.0)})), leader.ID)
	}
	// The old leader fails (stopped): the upgraded nodes elect one of them, and the old
	// node comes back on its old binary as a follower.
	oldNode := leader
	if err := c.Stop(oldNode, stopLimit); err != nil {
		t.Fatal(err)
	}
	if _, err = c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	restartNode(ctx, t, c, oldNode, old)
	if leader, err = c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	if leader == oldNode {
		t.Fatalf("the old node %s leads again after its restart", oldNode.ID)
	}

	// Writes of every kind through the new leader and through the old node.
	if uc.refusedWhileMixed {
		wait.For(t, 20*time.Second, "the leader to know "+oldNode.ID+" runs "+uc.from.Version, func() bool {
			return memberBuild(ctx, leader, oldNode.ID).NewestCommand == uint8(fsm.LegacyNewestType)
		})
	}
	w.everyKind(leader.Client(), oldNode.Client())
	if uc.refusedWhileMixed {
		w.refusedUpgrade(errOf(patient(leader).UpdateSettings(ctx, api.SettingsRequest{MetadataMaxBytes: ptr(2048)})), oldNode.ID)
		w.refusedUpgrade(errOf(patient(leader).UpdateInstanceIf(ctx, "mixed", "g", "db", "127.0.0.1", 5432, 1, api.InstanceRequest{Weight: ptr(9.0)})), oldNode.ID)
		w.refusedUpgrade(errOf(patient(oldNode).UpdateInstanceIf(ctx, "mixed", "g", "db", "127.0.0.1", 5432, 1, api.InstanceRequest{Weight: ptr(9.0)})), oldNode.ID)
		w.refusedUpgrade(errOf(patient(leader).UpsertCluster(ctx, "mixed", "g", "db", "east", api.ClusterRequest{
			HealthCheck: &api.HealthCheckSpec{Type: "TCP", DeregisterAfter: "72h"}})), oldNode.ID)
		w.refusedUpgrade(errOf(patient(leader).UpsertCluster(ctx, "mixed", "g", "db", "east", api.ClusterRequest{
			HealthCheck: &api.HealthCheckSpec{Type: "TCP", Confirm: "leader"}})), oldNode.ID)
		w.refusedBody(leader, oldNode.ID)
	} else {
		w.must(leader.Client().UpdateSettings(ctx, api.SettingsRequest{MetadataMaxBytes: ptr(2048)}))
		w.must(oldNode.Client().UpdateInstanceIf(ctx, "mixed", "g", "db", "127.0.0.1", 5432, w.index(leader, "127.0.0.1", 5432), api.InstanceRequest{Weight: ptr(9.0)}))
	}
	// The old node applied every entry and reads what the leader reads.
	w.sameInstances(c, leader, oldNode)
	if !oldNode.Running() {
		t.Fatalf("the old node %s exited", oldNode.ID)
	}
	if err := waitReady(ctx, oldNode, 10*time.Second); err != nil {
		t.Fatal(err)
	}

	// The last node: now every node runs this build, and what was refused succeeds.
	restartNode(ctx, t, c, oldNode, binary)
	if uc.refusedWhileMixed {
		w.eventually(func() error {
			_, err := leader.Client().UpdateSettings(ctx, api.SettingsRequest{MetadataMaxBytes: ptr(2048)})
			return err
		})
		w.eventually(func() error {
			_, err := oldNode.Client().UpdateInstanceIf(ctx, "mixed", "g", "db", "127.0.0.1", 5432, w.index(leader, "127.0.0.1", 5432), api.InstanceRequest{Weight: ptr(9.0)})
			return err
		})
		w.must(leader.Client().UpsertCluster(ctx, "mixed", "g", "db", "east", api.ClusterRequest{
			HealthCheck: &api.HealthCheckSpec{Type: "TCP", DeregisterAfter: "72h", Confirm: "leader"}}))
	}
	if s, _, err := leader.Client().Settings(ctx, client.QueryOptions{}); err != nil || s.MetadataMaxBytes != 2048 {
		t.Fatalf("settings after the upgrade: %+v, %v", s, err)
	}
	// Every member reports this build.
	wait.For(t, 20*time.Second, "every member to report "+newVersion, func() bool {
		ms, _, err := leader.Client().Members(ctx, client.QueryOptions{})
		if err != nil || len(ms.Members) != 3 {
			return false
		}
		for _, m := range ms.Members {
			if m.Version != newVersion || m.NewestCommand != uint8(fsm.NewestType) {
				return false
			}
		}
		return true
	})
	// A new leader writes a state check soon after it takes office; every node's hash
	// at it must agree.
	next := otherThan(c, leader)
	if err := leader.Client().TransferLeadership(ctx, next.ID); err != nil {
		t.Fatal(err)
	}
	sameState(ctx, t, c)
	w.sameInstances(c, next, oldNode)
}

// restartNode restarts n on bin (Cluster.RestartOn) and waits until it is ready.
func restartNode(ctx context.Context, t *testing.T, c *Cluster, n *Node, bin string) {
	t.Helper()
	if err := c.RestartOn(ctx, n, bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s runs %s", n.ID, bin)
}

// otherThan returns a running node other than n.
func otherThan(c *Cluster, n *Node) *Node {
	for _, o := range c.Nodes {
		if o != n && o.Running() {
			return o
		}
	}
	return nil
}

// memberBuild is what node's /v1/cluster/members says of member id.
func memberBuild(ctx context.Context, node *Node, id string) api.Member {
	cl := node.Client()
	if cl == nil {
		return api.Member{}
	}
	ms, _, err := cl.Members(ctx, client.QueryOptions{})
	if err != nil {
		return api.Member{}
	}
	for _, m := range ms.Members {
		if m.ID == id {
			return m
		}
	}
	return api.Member{}
}

// sameState waits until every node reports the same newest state check and the same
// hash at it.
func sameState(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	wait.For(t, 60*time.Second, "every node's state hash at one state check", func() bool {
		var idx uint64
		var hash string
		for _, n := range c.Nodes {
			r, err := n.Client().Ready(ctx)
			if err != nil || r.LastStateCheck == nil {
				return false
			}
			if idx == 0 {
				idx, hash = r.LastStateCheck.Index, r.LastStateCheck.Hash
				continue
			}
			if r.LastStateCheck.Index != idx {
				return false
			}
			if r.LastStateCheck.Hash != hash {
				t.Fatalf("state hashes differ at check %d: %s has %s, another node %s", idx, n.ID, r.LastStateCheck.Hash, hash)
			}
		}
		t.Logf("every node's state hash at index %d is %s", idx, hash)
		return true
	})
}

// upgradeWriter writes through the API during an upgrade and checks the answers.
type upgradeWriter struct {
	t   *testing.T
	ctx context.Context
}

func ptr[T any](v T) *T { return &v }

func (w *upgradeWriter) must(_ uint64, err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

// errOf is the error of a write.
func errOf(_ uint64, err error) error { return err }

// patient is a client for n that waits out a leadership's first seconds, in which a
// leader waits for servers to announce their builds before it refuses a write some
// server may lack (raftnode's announceGrace).
func patient(n *Node) *client.Client {
	return client.New(n.upstreamHTTP(), client.WithTimeout(10*time.Second))
}

// refusedUpgrade asserts a 503 upgrade_in_progress that names node.
func (w *upgradeWriter) refusedUpgrade(err error, node string) {
	w.t.Helper()
	var e *client.APIError
	if !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable || e.Code != api.CodeUpgradeInProgress || !strings.Contains(e.Message, node+" runs") {
		w.t.Fatalf("got %v, want 503 upgrade_in_progress naming %s", err, node)
	}
}

// refusedBody checks the whole body of a refusal: the nodes it names, and that nothing
// was written.
func (w *upgradeWriter) refusedBody(leader *Node, node string) {
	w.t.Helper()
	before, _, err := leader.Client().Settings(w.ctx, client.QueryOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(w.ctx, http.MethodPut, "http://"+leader.upstreamHTTP()+"/v1/operator/settings", strings.NewReader(`{"metadataMaxBytes":4096}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var body api.ErrorBody
	if err := json.Unmarshal(raw, &body); err != nil || resp.StatusCode != http.StatusServiceUnavailable || body.Error.Code != api.CodeUpgradeInProgress ||
		len(body.Error.Nodes) != 1 || body.Error.Nodes[0].ID != node || body.Error.Nodes[0].NewestCommand != uint8(fsm.LegacyNewestType) ||
		body.Error.Nodes[0].Release != "a release before v0.2.0" {
		w.t.Fatalf("settings refusal: %d %s", resp.StatusCode, raw)
	}
	after, _, err := leader.Client().Settings(w.ctx, client.QueryOptions{})
	if err != nil || after.MetadataMaxBytes != before.MetadataMaxBytes || after.ModifyIndex != before.ModifyIndex {
		w.t.Fatalf("a refused write changed the settings: %+v, then %+v (%v)", before, after, err)
	}
}

// eventually retries fn while it is refused for an upgrade in progress (the leader
// learns of the last node's upgrade within a few seconds).
func (w *upgradeWriter) eventually(fn func() error) {
	w.t.Helper()
	var last error
	wait.For(w.t, 20*time.Second, "the refused write to succeed after the upgrade", func() bool {
		last = fn()
		var e *client.APIError
		if last != nil && !(errors.As(last, &e) && e.Code == api.CodeUpgradeInProgress) {
			w.t.Fatal(last)
		}
		return last == nil
	})
}

// index is the modify index of an instance, as the leader reads it.
func (w *upgradeWriter) index(leader *Node, ip string, port int) uint64 {
	w.t.Helper()
	in, _, err := leader.Client().Instance(w.ctx, "mixed", "g", "db", ip, port, client.QueryOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return in.Instance.ModifyIndex
}

// seed writes what every release applies, before the upgrade.
func (w *upgradeWriter) seed(cl *client.Client) {
	w.t.Helper()
	w.must(cl.UpsertNamespace(w.ctx, "mixed", api.NamespaceRequest{Description: "rolling upgrade"}))
	w.must(cl.UpsertCluster(w.ctx, "mixed", "g", "db", "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}))
	for _, ip := range []string{"127.0.0.1", "127.0.0.2"} {
		w.must(cl.RegisterInstance(w.ctx, "mixed", "g", "db", ip, 5432, api.InstanceRequest{Metadata: map[string]string{"role": "seed"}}))
	}
}

// everyKind writes each kind of change an older release applies, alternating the node
// it is sent to (a follower forwards to the leader).
func (w *upgradeWriter) everyKind(a, b *client.Client) {
	w.t.Helper()
	ctx := w.ctx
	w.must(a.UpsertNamespace(ctx, "scratch", api.NamespaceRequest{Description: "deleted below"}))
	w.must(b.UpsertService(ctx, "mixed", "g", "db", api.ServiceRequest{ProtectThreshold: ptr(0.25), Metadata: map[string]string{"tier": "1"}}))
	w.must(a.UpsertCluster(ctx, "mixed", "g", "db", "probed", api.ClusterRequest{
		HealthCheck: &api.HealthCheckSpec{Type: "TCP", Interval: "2s", Timeout: "500ms", Rise: 1, Fall: 2}}))
	w.must(b.UpsertCluster(ctx, "mixed", "g", "db", "web", api.ClusterRequest{
		HealthCheck: &api.HealthCheckSpec{Type: "HTTP", Path: "/healthz", ExpectedStatus: []int{200, 204}}, Metadata: map[string]string{"zone": "a"}}))
	for i, cl := range []*client.Client{a, b, a} {
		w.must(cl.RegisterInstance(ctx, "mixed", "g", "db", fmt.Sprintf("127.0.0.%d", 10+i), 5432, api.InstanceRequest{
			Weight: ptr(float64(i + 1)), Metadata: map[string]string{"i": fmt.Sprint(i)}}))
	}
	w.must(b.UpdateInstance(ctx, "mixed", "g", "db", "127.0.0.1", 5432, api.InstanceRequest{Weight: ptr(3.0), Enabled: ptr(false)}))
	w.must(a.SetInstanceHealth(ctx, "mixed", "g", "db", "127.0.0.2", 5432, false))
	w.must(b.SetInstanceHealth(ctx, "mixed", "g", "db", "127.0.0.11", 5432, false))
	w.must(a.DeregisterInstance(ctx, "mixed", "g", "db", "127.0.0.12", 5432))
	w.must(b.RegisterInstance(ctx, "mixed", "g", "gone", "127.0.0.20", 80, api.InstanceRequest{}))
	w.must(a.DeregisterInstance(ctx, "mixed", "g", "gone", "127.0.0.20", 80))
	w.must(b.DeleteService(ctx, "mixed", "g", "gone"))
	w.must(a.DeleteNamespace(ctx, "scratch"))
	// The Nacos 1.x Open API, as its persistent-instance clients call it.
	form := url.Values{"serviceName": {"g@@nacos-db"}, "groupName": {"g"}, "namespaceId": {"mixed"}, "ip": {"127.0.0.30"},
		"port": {"3306"}, "ephemeral": {"false"}, "weight": {"2"}, "metadata": {`{"from":"nacos"}`}}
	resp, err := http.Post(b.Addr()+"/nacos/v1/ns/instance", "application/x-www-form-urlencoded", bytes.NewBufferString(form.Encode()))
	if err != nil {
		w.t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(raw)) != "ok" {
		w.t.Fatalf("Nacos registration: %d %s", resp.StatusCode, raw)
	}
}

// sameInstances waits until old has applied what the leader committed, and compares
// what both read of the services written.
func (w *upgradeWriter) sameInstances(c *Cluster, leader, old *Node) {
	w.t.Helper()
	read := func(n *Node, svc string) ([]string, uint64, error) {
		resp, meta, err := n.Client().Instances(w.ctx, "mixed", "g", svc, client.InstancesQuery{QueryOptions: client.QueryOptions{Consistency: api.ConsistencyStale}})
		if err != nil {
			return nil, 0, err
		}
		var out []string
		for _, in := range resp.Instances {
			meta, _ := json.Marshal(in.Metadata)
			out = append(out, fmt.Sprintf("%s:%d cluster=%s weight=%g enabled=%v healthy=%v meta=%s", in.IP, in.Port, in.Cluster, in.Weight, in.Enabled, in.Healthy, meta))
		}
		sort.Strings(out)
		return out, meta.Index, nil
	}
	for _, svc := range []string{"db", "nacos-db"} {
		var want, got []string
		wait.For(w.t, 20*time.Second, old.ID+" to read what the leader reads of "+svc, func() bool {
			var err error
			if want, _, err = read(leader, svc); err != nil {
				return false
			}
			got, _, err = read(old, svc)
			return err == nil && reflect.DeepEqual(got, want)
		})
		if len(want) == 0 {
			w.t.Fatalf("no instances of %s", svc)
		}
	}
}
