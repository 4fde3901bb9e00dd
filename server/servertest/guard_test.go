package servertest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
)

// recordingTB records Errorf calls instead of failing.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestGuardDial_FailsTheTestOnNonLoopback(t *testing.T) {
	var dialed []string
	next := func(_ context.Context, _, address string) (net.Conn, error) {
		dialed = append(dialed, address)
		return nil, fmt.Errorf("not dialing in this test")
	}
	for _, tc := range []struct {
		addr  string
		fires bool
	}{
		{"10.0.0.3:5432", true},
		{"192.168.1.10:80", true},
		{"169.254.169.254:80", true},
		{"[2001:db8::1]:80", true},
		{"db.example.com:5432", true},
		{"localhost.localdomain:80", true},
		{"127.0.0.1:8080", false},
		{"127.45.6.7:9000", false},
		{"[::1]:80", false},
		{"localhost:80", false},
	} {
		rec := &recordingTB{TB: t}
		dialed = nil
		_, err := GuardDial(rec, next)(context.Background(), "tcp", tc.addr)
		if tc.fires {
			if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], tc.addr) {
				t.Errorf("%s: guard errors %q, want one naming the address", tc.addr, rec.errors)
			}
			if len(dialed) != 0 || err == nil {
				t.Errorf("%s: guarded address was dialed (%v) or not refused (%v)", tc.addr, dialed, err)
			}
			continue
		}
		if len(rec.errors) != 0 || len(dialed) != 1 {
			t.Errorf("%s: loopback address: guard errors %q, dialed %v", tc.addr, rec.errors, dialed)
		}
	}
}

// Every node of a Cluster probes through the guard and the loopback-only policy.
func TestNew_NodesProbeThroughTheGuard(t *testing.T) {
	rec := &recordingTB{TB: t}
	c := New(rec, 1, FastTimeouts())
	cfg := c.Nodes[0].cfg.Health
	if cfg.Dial == nil || cfg.Policy.IsZero() || strings.Join(cfg.Policy.Allow(), ",") != "127.0.0.0/8,::1/128" {
		t.Fatalf("node probe config: dial set %v, policy %s", cfg.Dial != nil, cfg.Policy)
	}
	_, _ = cfg.Dial(context.Background(), "tcp", "10.1.2.3:80")
	if len(rec.errors) != 1 {
		t.Fatalf("guard errors %q, want one", rec.errors)
	}
}
