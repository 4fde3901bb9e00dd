package nacostest

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/internal/testnet"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/server/servertest"
)

// backend is a TCP listener on loopback standing in for an instance, so that a TCP
// probe of it succeeds while it is open.
type backend = testnet.Backend

func newBackend(t *testing.T) *backend { return testnet.New(t, "127.0.0.1") }

// newCluster starts an n-node cluster with short Raft timers and waits until it has a
// leader every node knows and every member's HTTP address is recorded, so that no
// membership write is still in flight when a test counts log entries.
func newCluster(t *testing.T, n int) (*servertest.Cluster, int) {
	t.Helper()
	c := servertest.New(t, n, servertest.FastTimeouts())
	leader := c.MustLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	waitFor(t, ctx, "every member's HTTP address", func() bool {
		_, members, err := c.Nodes[leader].Server.Store().Members(nil)
		if err != nil || len(members) != n {
			return false
		}
		for _, m := range members {
			if m.HTTPAddr == "" {
				return false
			}
		}
		return true
	})
	return c, leader
}

// waitFor polls cond until it holds or ctx ends (which fails the test).
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// lastIndex is the leader's last Raft log index.
func lastIndex(c *servertest.Cluster, leader int) uint64 {
	return c.Nodes[leader].Server.Node().Raft().LastIndex()
}

// instances lists a service's instances on the leader (nil when the service is missing).
func instances(t *testing.T, c *servertest.Cluster, leader int, key model.ServiceKey) []model.Instance {
	t.Helper()
	_, list, err := c.Nodes[leader].Server.Store().Instances(nil, key)
	if err != nil {
		return nil
	}
	return list
}

// reply is an HTTP answer.
type reply struct {
	status int
	body   string
	header http.Header
}

// call sends one request with form as an application/x-www-form-urlencoded body.
func call(t *testing.T, method, url, form string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded;charset=utf-8")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, body: string(b), header: resp.Header}
}
