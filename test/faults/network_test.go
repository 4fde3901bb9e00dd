//go:build linux

package faults

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/api"
)

// mustTransport starts a raft TCP transport on loopback that answers every
// AppendEntries with success until the test ends.
func mustTransport(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case rpc := <-tr.Consumer():
				rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		_ = tr.Close()
	})
	return tr
}

func appendEntries(tr *raft.NetworkTransport, from, to string, addr raft.ServerAddress) error {
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte(from), Addr: []byte(tr.LocalAddr())}, Term: 1}
	var resp raft.AppendEntriesResponse
	return tr.AppendEntries(raft.ServerID(to), addr, req, &resp)
}

func TestNetwork_PartitionCutsRaftLinks(t *testing.T) {
	a, b := mustTransport(t), mustTransport(t)
	nw := NewNetwork()
	p, err := newRaftProxy("b", nw, func() string { return string(b.LocalAddr()) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nw.closeAll(); p.close() })
	to := raft.ServerAddress(p.Addr())

	if err := appendEntries(a, "a", "b", to); err != nil {
		t.Fatalf("through the proxy before the partition: %v", err)
	}
	nw.Partition([]string{"a"}, []string{"b"})
	if nw.Allowed("a", "b") || nw.Allowed("b", "a") {
		t.Fatal("a partition left a link up")
	}
	// The pooled connection was cut and new ones are dropped.
	for i := 0; i < 3; i++ {
		if err := appendEntries(a, "a", "b", to); err == nil {
			t.Fatalf("attempt %d crossed the partition", i)
		}
	}
	// Another sender on b's side is not affected.
	c := mustTransport(t)
	if err := appendEntries(c, "c", "b", to); err != nil {
		t.Fatalf("an uninvolved node was cut off: %v", err)
	}
	nw.Heal()
	if err := appendEntries(a, "a", "b", to); err != nil {
		t.Fatalf("after healing: %v", err)
	}
}

func TestNetwork_PartitionHoldsForwardedRequests(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "served")
	}))
	t.Cleanup(upstream.Close)
	nw := NewNetwork()
	p, err := newHTTPProxy("b", nw, func() string { return strings.TrimPrefix(upstream.URL, "http://") })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	send := func(from string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Addr()+"/v1/status/leader", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(api.HeaderForwardedBy, from)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && string(body) != "served" {
			t.Fatalf("body %q", body)
		}
		return err
	}
	if err := send("a"); err != nil {
		t.Fatalf("before the partition: %v", err)
	}
	nw.Partition([]string{"a"}, []string{"b"})
	start := time.Now()
	if err := send("a"); err == nil {
		t.Fatal("a forwarded request crossed the partition")
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("a blocked request failed after %s instead of being held until its sender gave up", d)
	}
	if err := send("c"); err != nil {
		t.Fatalf("an uninvolved node's request failed: %v", err)
	}
	nw.Heal()
	if err := send("a"); err != nil {
		t.Fatalf("after healing: %v", err)
	}
}
