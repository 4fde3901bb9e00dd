//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/nacosrpc"
	"github.com/rosterhq/roster/internal/wait"
)

// Writes sent to followers right after the leader's process is killed (SIGKILL: no
// hand-over, the others notice only when its heartbeats stop) wait for the next leader
// and are applied by it: the followers still name the dead node as leader for a while,
// their forwards to it are never sent (refused), and the registry holds them until a
// leader exists. Native REST (a client with no retries of its own), the Nacos HTTP Open
// API and the Nacos gRPC API, through both followers, throughout the election: none
// fails, every one is on the new leader.
func TestForward_WritesThroughFollowersAcrossALeaderKill(t *testing.T) {
	c, err := StartCluster(ClusterConfig{Binary: binary, Dir: t.TempDir(), Nodes: 3, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Client().UpsertCluster(ctx, "public", "DEFAULT_GROUP", "fwd", "DEFAULT",
		api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}); err != nil {
		t.Fatal(err)
	}
	// Each surface of each follower, with a client timeout far above the election's
	// length: a write that fails fails on its answer, not on the client's patience.
	type surface struct {
		name  string
		write func(ctx context.Context, port int) error
	}
	var followers []*Node
	var surfaces []surface
	for _, n := range c.Nodes {
		if n == old {
			continue
		}
		followers = append(followers, n)
		httpAddr := n.upstreamHTTP()
		rest := client.New(httpAddr, client.WithTimeout(20*time.Second))
		hc := &http.Client{Timeout: 20 * time.Second}
		rpc, err := nacosrpc.Dial(ctx, n.GRPCAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rpc.Close() })
		surfaces = append(surfaces,
			surface{n.ID + " REST", func(ctx context.Context, port int) error {
				_, err := rest.RegisterInstance(ctx, "public", "DEFAULT_GROUP", "fwd", "127.0.0.1", port, api.InstanceRequest{})
				return err
			}},
			surface{n.ID + " Nacos HTTP", func(ctx context.Context, port int) error {
				form := url.Values{"serviceName": {"fwd"}, "groupName": {"DEFAULT_GROUP"}, "ip": {"127.0.0.1"},
					"port": {strconv.Itoa(port)}, "ephemeral": {"false"}, "clusterName": {"DEFAULT"}}
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+httpAddr+"/nacos/v2/ns/instance", strings.NewReader(form.Encode()))
				if err != nil {
					return err
				}
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				resp, err := hc.Do(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				var out struct {
					Code int `json:"code"`
				}
				if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil || out.Code != 0 {
					return fmt.Errorf("%d %s", resp.StatusCode, body)
				}
				return nil
			}},
			surface{n.ID + " Nacos gRPC", func(ctx context.Context, port int) error {
				m, err := rpc.RegisterPersistent(ctx, "DEFAULT_GROUP", "fwd", "DEFAULT", "127.0.0.1", port, 1, nil)
				if err != nil {
					return err
				}
				if m["resultCode"] != float64(200) {
					return fmt.Errorf("answer %v", m)
				}
				return nil
			}})
	}
	// One write through every surface first: the followers hold peer connections to the
	// leader, as in steady operation.
	port := 20000
	for _, s := range surfaces {
		if err := s.write(ctx, port); err != nil {
			t.Fatalf("%s before the kill: %v", s.name, err)
		}
		port++
	}

	c.Kill(old)
	killed := time.Now()
	// The kernel closed the dead process's connections; the proxies carry those closes on
	// to the followers, whose idle connections to it are then known closed.
	wait.For(t, 10*time.Second, "the proxied connections to "+old.ID+" to close", func() bool { return c.Net.links(old.ID) == 0 })

	// A write through every surface every 100 ms from the kill until a leader is known
	// and a few rounds after, so that some land before the election, some during it and
	// some after it.
	type result struct {
		name string
		port int
		took time.Duration
		err  error
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
		elected time.Duration
	)
	for round, after := 0, 0; after < 3 && round < 100; round++ {
		for _, s := range surfaces {
			wg.Add(1)
			go func(s surface, port int) {
				defer wg.Done()
				start := time.Now()
				err := s.write(ctx, port)
				mu.Lock()
				results = append(results, result{s.name, port, time.Since(start), err})
				mu.Unlock()
			}(s, port)
			port++
		}
		if elected == 0 {
			rctx, rcancel := context.WithTimeout(ctx, 100*time.Millisecond)
			r, err := followers[0].Client().Ready(rctx)
			rcancel()
			if err == nil && r.Leader != "" && r.Leader != old.ID {
				elected = time.Since(killed)
			}
		} else {
			after++
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	wg.Wait()
	if elected == 0 {
		t.Fatalf("no new leader within 10 s of killing %s", old.ID)
	}
	var failed []string
	var slowest time.Duration
	for _, r := range results {
		slowest = max(slowest, r.took)
		if r.err != nil {
			failed = append(failed, fmt.Sprintf("%s port %d after %s: %v", r.name, r.port, r.took.Round(time.Millisecond), r.err))
		}
	}
	t.Logf("%d writes through %d surfaces; a follower knew the new leader %s after the kill; the slowest write took %s",
		len(results), len(surfaces), elected.Round(time.Millisecond), slowest.Round(time.Millisecond))
	if len(failed) > 0 {
		t.Fatalf("%d of %d writes sent during the election failed:\n%s", len(failed), len(results), strings.Join(failed, "\n"))
	}

	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := leader.Client().Instances(ctx, "public", "DEFAULT_GROUP", "fwd", client.InstancesQuery{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[int]bool{}
	for _, in := range res.Instances {
		have[in.Port] = true
	}
	for _, r := range results {
		if !have[r.port] {
			t.Errorf("%s port %d was acknowledged but is not on the new leader %s", r.name, r.port, leader.ID)
		}
	}
	if len(res.Instances) != port-20000 {
		t.Errorf("the new leader holds %d instances, want %d", len(res.Instances), port-20000)
	}
}
