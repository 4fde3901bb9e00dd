package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rosterhq/roster/server/servertest"
)

// A node serves repeated instance lists from its read cache and counts the hits on /metrics.
func TestServer_ReadCacheMetrics(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	base := "http://" + c.Nodes[0].HTTPAddr + "/v1/namespaces/public/groups/DEFAULT_GROUP/services/cached/instances"
	req, err := http.NewRequest(http.MethodPut, base+"/127.0.0.1:8080", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("register: %s", resp.Status)
	}
	for range 3 {
		resp, err := http.Get(base)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("list: %s", resp.Status)
		}
	}
	resp, err = http.Get("http://" + c.Nodes[0].HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	const series = `roster_read_cache_hits_total{layer="encoded"} `
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series); ok {
			var hits float64
			if _, err := fmt.Sscan(v, &hits); err != nil || hits < 2 {
				t.Fatalf("%q: want at least 2 hits", line)
			}
			return
		}
	}
	t.Fatalf("no %s on /metrics", series)
}
