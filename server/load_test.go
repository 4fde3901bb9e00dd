package server_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// connectionsTo counts the established TCP connections whose far end is port on
// 127.0.0.1 (from /proc/net/tcp: the nodes of a test cluster share this process).
func connectionsTo(t *testing.T, port int) int {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	defer f.Close()
	want := fmt.Sprintf("0100007F:%04X", port)
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 3 && fields[2] == want && fields[3] == "01" {
			n++
		}
	}
	return n
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Many blocking queries on a follower: those beyond --max-watchers are answered 429
// with Retry-After at once; the others wait on the follower's own state, so the leader
// holds no connection for them (each used to hold a follower→leader connection for its
// whole wait: 10,000 of them starved the leader's heartbeats and an election followed);
// one write wakes every one of them with the leader's answer; the leader never changes.
func TestLoad_BlockingQueriesOnAFollower(t *testing.T) {
	const limit, extra = 150, 30
	// Raft's timers at twice their defaults: the test's fast ones, and on a 2-core machine
	// running other packages' tests under the race detector even the defaults, turn a
	// burst of CPU load into an election whatever the queries do. What the queries must
	// not do, hold connections to the leader, is checked directly below.
	c := servertest.New(t, 3, func(cfg *server.Config) {
		cfg.MaxWatchers = limit
		cfg.Raft.HeartbeatTimeout, cfg.Raft.ElectionTimeout, cfg.Raft.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	})
	leader := c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	lc := c.Nodes[leader].Client()
	idx, err := lc.RegisterInstance(ctx, "", "", "orders", "127.100.0.1", 8080, api.InstanceRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	term := c.Nodes[leader].Server.Node().Raft().CurrentTerm()
	f := c.Nodes[c.Followers()[0]]
	leaderPort := portOf(t, c.Nodes[leader].HTTPAddr)
	before := connectionsTo(t, leaderPort)

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: limit + extra}}
	defer hc.CloseIdleConnections()
	url := fmt.Sprintf("http://%s/v1/namespaces/public/groups/DEFAULT_GROUP/services/orders/instances?index=%d&wait=50s", f.HTTPAddr, idx)
	type result struct {
		status int
		index  uint64
		retry  string
		at     time.Time
	}
	results := make(chan result, limit+extra)
	var wg sync.WaitGroup
	for range limit + extra {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := hc.Do(req)
			if err != nil {
				results <- result{}
				return
			}
			resp.Body.Close()
			i, _ := strconv.ParseUint(resp.Header.Get(api.HeaderIndex), 10, 64)
			results <- result{status: resp.StatusCode, index: i, retry: resp.Header.Get("Retry-After"), at: time.Now()}
		}()
	}
	// The ones over the limit come back at once.
	for range extra {
		select {
		case r := <-results:
			if r.status != http.StatusTooManyRequests || r.retry == "" {
				t.Fatalf("a query over the limit: %d (Retry-After %q), want 429 with Retry-After", r.status, r.retry)
			}
		case <-ctx.Done():
			t.Fatal("the queries over the limit were not refused")
		}
	}
	wait.For(t, 10*time.Second, "the follower to hold its limit of queries", func() bool {
		return metricValue(ctx, t, f, "roster_watchers") == limit
	})
	if got := connectionsTo(t, leaderPort) - before; got > 8 {
		t.Fatalf("%d more connections to the leader with %d queries parked on a follower", got, limit)
	}
	written := time.Now()
	next, err := lc.RegisterInstance(ctx, "", "", "orders", "127.100.0.2", 8080, api.InstanceRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for range limit {
		select {
		case r := <-results:
			if r.status != http.StatusOK || r.index < next {
				t.Fatalf("a woken query: %d at index %d, want 200 at %d or later", r.status, r.index, next)
			}
			if r.at.Before(written) {
				t.Fatal("a parked query returned before the write")
			}
		case <-ctx.Done():
			t.Fatal("the write did not wake every parked query")
		}
	}
	wg.Wait()
	if got := c.Nodes[leader].Server.Node().Raft().CurrentTerm(); got != term || !c.Nodes[leader].Server.Node().IsLeader() {
		t.Fatalf("leadership changed under the load (term %d → %d)", term, got)
	}
}
