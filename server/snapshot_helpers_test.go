package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
	"github.com/rosterhq/roster/snapshot"
	"github.com/rosterhq/roster/store"
)

// steadyTimeouts are hashicorp/raft's default timers. The snapshot tests assert that
// refused restores leave the Raft log alone, and restore with a member down; shorter
// timers let a busy machine (the race detector, parallel packages) depose leaders.
func steadyTimeouts(c *server.Config) {
	c.Raft.HeartbeatTimeout = time.Second
	c.Raft.ElectionTimeout = time.Second
	c.Raft.LeaderLeaseTimeout = 500 * time.Millisecond
}

// newSnapshotCluster starts a 3-node cluster for the snapshot tests and waits until it
// is settled (every member recorded, every node caught up).
func newSnapshotCluster(t *testing.T, opts ...servertest.Option) *servertest.Cluster {
	t.Helper()
	c := servertest.New(t, 3, append([]servertest.Option{steadyTimeouts}, opts...)...)
	c.MustLeader()
	c.WaitSettled()
	return c
}

// checkTarget serves 200 on /health: the target of the HTTP checks of the test data, so
// that a health prober, if one runs, keeps every instance healthy and the state still.
func checkTarget(t *testing.T) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return p
}

// wrote fails the test if a write failed and returns the write's index:
// wrote(t)(cl.RegisterInstance(...)).
func wrote(t *testing.T) func(uint64, error) uint64 {
	return func(idx uint64, err error) uint64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return idx
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// manual registers an instance in the "manual" cluster, whose check type is NONE: the
// leader's prober never changes its health, so the state stays still.
var manual = api.InstanceRequest{Cluster: ptr("manual")}

// registerUnprobed registers ip:port in service svc of the default namespace and group,
// in a NONE-checked cluster, and returns the index of the registration.
func registerUnprobed(ctx context.Context, t *testing.T, cl *client.Client, svc, ip string, port int) uint64 {
	t.Helper()
	wrote(t)(cl.UpsertCluster(ctx, "", "", svc, "manual", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}))
	return wrote(t)(cl.RegisterInstance(ctx, "", "", svc, ip, port, manual))
}

// fill writes a bit of everything through cl: a second namespace, services with a
// protect threshold and metadata, clusters with HTTP and NONE checks, and instances
// with metadata in both. It returns the index of the last write.
func fill(ctx context.Context, t *testing.T, cl *client.Client, checkPort int) uint64 {
	t.Helper()
	var last uint64
	// Every write here is idempotent: one that met a leader change is sent again.
	w := func(write func() (uint64, error)) {
		t.Helper()
		idx, err := write()
		for attempt := 0; isUnavailable(err) && attempt < 20; attempt++ {
			idx, err = write()
		}
		if err != nil {
			t.Fatal(err)
		}
		last = max(last, idx)
	}
	w(func() (uint64, error) {
		return cl.UpsertNamespace(ctx, "staging", api.NamespaceRequest{Name: "Staging", Description: "pre-production"})
	})
	for _, ns := range []string{model.DefaultNamespace, "staging"} {
		for s := range 3 {
			svc := fmt.Sprintf("svc-%d", s)
			w(func() (uint64, error) {
				return cl.UpsertService(ctx, ns, group, svc, api.ServiceRequest{
					ProtectThreshold: ptr(0.25 * float64(s)),
					Metadata:         map[string]string{"team": "t" + strconv.Itoa(s), "tier": ns},
				})
			})
			w(func() (uint64, error) {
				return cl.UpsertCluster(ctx, ns, group, svc, "web", api.ClusterRequest{
					HealthCheck: &api.HealthCheckSpec{
						Type: "HTTP", Port: checkPort, Path: "/health", Headers: map[string]string{"X-Probe": "roster"},
						ExpectedStatus: []int{200, 204}, Interval: "10s", Timeout: "1s", Rise: 1, Fall: 2,
					},
					Metadata: map[string]string{"zone": "a"},
				})
			})
			w(func() (uint64, error) {
				return cl.UpsertCluster(ctx, ns, group, svc, "manual", api.ClusterRequest{
					HealthCheck: &api.HealthCheckSpec{Type: "NONE"},
				})
			})
			for i := range 4 {
				cluster := "web"
				if i%2 == 1 {
					cluster = "manual"
				}
				w(func() (uint64, error) {
					return cl.RegisterInstance(ctx, ns, group, svc, "127.0.0.1", 20000+i, api.InstanceRequest{
						Cluster:  ptr(cluster),
						Weight:   ptr(float64(i + 1)),
						Enabled:  ptr(i != 3),
						Metadata: map[string]string{"version": "1." + strconv.Itoa(i), "svc": svc},
					})
				})
			}
		}
	}
	// One manual health flip, so the health field carries information.
	w(func() (uint64, error) {
		return cl.SetInstanceHealth(ctx, "staging", group, "svc-1", "127.0.0.1", 20001, false)
	})
	return last
}

// fillBulk registers n instances of service "bulk" with about 900 bytes of random
// (barely compressible) metadata each, through 16 concurrent writers, and returns the
// highest index written.
func fillBulk(ctx context.Context, t *testing.T, cl *client.Client, n int) uint64 {
	t.Helper()
	var (
		mu   sync.Mutex
		last uint64
		wg   sync.WaitGroup
		errs = make(chan error, 16)
	)
	wrote(t)(cl.UpsertCluster(ctx, "", "", "bulk", "manual", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}))
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				blob := make([]byte, 675)
				_, _ = rand.Read(blob)
				req := api.InstanceRequest{Cluster: ptr("manual"), Metadata: map[string]string{"blob": base64.StdEncoding.EncodeToString(blob)}}
				ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
				idx, err := cl.RegisterInstance(ctx, model.DefaultNamespace, group, "bulk", ip, 8080, req)
				// A leader change under this load is possible with the tests' short
				// timeouts; registering again is idempotent.
				for attempt := 0; isUnavailable(err) && attempt < 20; attempt++ {
					idx, err = cl.RegisterInstance(ctx, model.DefaultNamespace, group, "bulk", ip, 8080, req)
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				last = max(last, idx)
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	return last
}

// isUnavailable reports whether err is a 503 or 504 answer (no leader, leadership lost).
func isUnavailable(err error) bool {
	var e *client.APIError
	return errors.As(err, &e) && (e.Status == http.StatusServiceUnavailable || e.Status == http.StatusGatewayTimeout)
}

// logical is the content of a state without its indexes, which legitimately differ
// between a saved state and the same state after a restore.
type logical struct {
	Namespaces []model.Namespace
	Services   []model.Service
	Clusters   []model.Cluster
	Instances  []model.Instance
	Members    []model.Member
}

func logicalOf(st store.State) logical {
	l := logical{Members: st.Members}
	for _, ns := range st.Namespaces {
		ns.CreateIndex, ns.ModifyIndex = 0, 0
		l.Namespaces = append(l.Namespaces, ns)
	}
	for _, s := range st.Services {
		s.CreateIndex, s.ModifyIndex = 0, 0
		l.Services = append(l.Services, s)
	}
	for _, c := range st.Clusters {
		c.CreateIndex, c.ModifyIndex = 0, 0
		l.Clusters = append(l.Clusters, c)
	}
	for _, in := range st.Instances {
		in.CreateIndex, in.ModifyIndex = 0, 0
		l.Instances = append(l.Instances, in)
	}
	return l
}

// withoutMembers drops the member table, which a restore into another cluster keeps
// from that cluster.
func (l logical) withoutMembers() logical {
	l.Members = nil
	return l
}

func dump(t *testing.T, nd *servertest.Node) store.State {
	t.Helper()
	st, err := nd.Server.Store().Dump()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitLogical waits until every running node's state, through view, equals want.
func waitLogical(t *testing.T, c *servertest.Cluster, want logical, view func(logical) logical) {
	t.Helper()
	var diff string
	converged := false
	defer func() {
		if !converged {
			t.Logf("last difference: %s", diff)
		}
	}()
	wait.For(t, 20*time.Second, "every node's state to converge", func() bool {
		diff = ""
		for _, nd := range c.Nodes {
			if !nd.Running() {
				continue
			}
			if got := view(logicalOf(dump(t, nd))); !reflect.DeepEqual(got, want) {
				diff = fmt.Sprintf("node %s:\n got %+v\nwant %+v", nd.ID, got, want)
				return false
			}
		}
		return true
	})
	converged = true
}

func same(l logical) logical { return l }

// save downloads an archive through cl and checks it whole.
func save(ctx context.Context, t *testing.T, cl *client.Client, stale bool) ([]byte, snapshot.Meta, client.SnapshotInfo) {
	t.Helper()
	var buf bytes.Buffer
	info, err := cl.SaveSnapshot(ctx, &buf, stale)
	if err != nil {
		t.Fatalf("save via %s: %v", cl.Addr(), err)
	}
	if info.Bytes != int64(buf.Len()) {
		t.Fatalf("SaveSnapshot reported %d bytes, wrote %d", info.Bytes, buf.Len())
	}
	meta, err := snapshot.Inspect(bytes.NewReader(buf.Bytes()), snapshot.ReadOptions{Dir: t.TempDir(), Check: snapshot.CheckState})
	if err != nil {
		t.Fatalf("saved archive is invalid: %v", err)
	}
	if info.Index != meta.Index {
		t.Fatalf("X-Roster-Index %d, meta.json index %d", info.Index, meta.Index)
	}
	return buf.Bytes(), meta, info
}

// readIndexes reads a few things on every running node (stale, so followers answer
// themselves) and returns the highest and lowest X-Roster-Index seen.
func readIndexes(ctx context.Context, t *testing.T, c *servertest.Cluster) (lo, hi uint64) {
	t.Helper()
	lo = ^uint64(0)
	see := func(m client.Meta, err error) {
		t.Helper()
		if err != nil && !client.IsNotFound(err) {
			t.Fatal(err)
		}
		if err == nil {
			lo, hi = min(lo, m.Index), max(hi, m.Index)
		}
	}
	stale := client.QueryOptions{Consistency: api.ConsistencyStale}
	for _, nd := range c.Nodes {
		if !nd.Running() {
			continue
		}
		cl := nd.Client()
		_, m, err := cl.Namespaces(ctx, stale)
		see(m, err)
		_, m, err = cl.Services(ctx, "staging", client.ServicesQuery{QueryOptions: stale})
		see(m, err)
		_, m, err = cl.Instances(ctx, model.DefaultNamespace, group, "svc-0", client.InstancesQuery{QueryOptions: stale})
		see(m, err)
		_, m, err = cl.Members(ctx, stale)
		see(m, err)
	}
	return lo, hi
}
