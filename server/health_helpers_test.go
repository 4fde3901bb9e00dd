package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rosterhq/roster/internal/clock"
	"github.com/rosterhq/roster/server/servertest"
)

// newManualClock is a clock that moves only when the test advances it: the prober
// dispatches probes and flushes its batches when the test says so (probe timeouts still
// run on real time); StallNext holds the prober's scheduler between two steps.
func newManualClock() *clock.Manual {
	return clock.NewManual(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
}

// heldDials is a probe dialer that connects nowhere: it holds every dial until the test
// releases its address, then fails it as refused. A probe stays in flight for as long
// as the test needs and fails when the test says so.
type heldDials struct {
	mu   sync.Mutex
	held map[string]chan struct{} // by address; closed to release
}

func newHeldDials() *heldDials { return &heldDials{held: make(map[string]chan struct{})} }

func (h *heldDials) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	rel := make(chan struct{})
	h.mu.Lock()
	h.held[addr] = rel
	h.mu.Unlock()
	select {
	case <-rel:
		return nil, fmt.Errorf("dial %s: %w", addr, syscall.ECONNREFUSED)
	case <-ctx.Done():
		h.mu.Lock()
		if h.held[addr] == rel {
			delete(h.held, addr)
		}
		h.mu.Unlock()
		return nil, ctx.Err()
	}
}

// holding reports whether a dial of every address is held.
func (h *heldDials) holding(addrs ...string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range addrs {
		if h.held[a] == nil {
			return false
		}
	}
	return true
}

// release fails the held dial of addr; the test fails if none is held (its probe
// timed out, or was never started).
func (h *heldDials) release(t *testing.T, addr string) {
	t.Helper()
	h.mu.Lock()
	rel := h.held[addr]
	delete(h.held, addr)
	h.mu.Unlock()
	if rel == nil {
		t.Fatalf("no probe of %s is in flight", addr)
	}
	close(rel)
}

// metricValue reads one series from a node's GET /metrics, e.g.
// `roster_health_transitions_committed_total{to="unhealthy"}`; a series not exported
// yet is 0.
func metricValue(ctx context.Context, t *testing.T, nd *servertest.Node, series string) float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nd.HTTPAddr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || name != series {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metric %s: %v", series, err)
		}
		return v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return 0
}
