package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/demo"
	"github.com/rosterhq/roster/internal/wait"
)

// demoBuffer is a bytes.Buffer safe for a command writing while the test reads.
type demoBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *demoBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *demoBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func demoNoEnv(string) (string, bool) { return "", false }

func TestDemoBackendCmd_ServesHealthUntilCancelled(t *testing.T) {
	var out demoBuffer
	a := newApp(&out, io.Discard, demoNoEnv)
	cmd := a.demoBackendCmd()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetArgs([]string{"--addr", "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(cancel)

	const prefix = "demo backend listening on "
	wait.For(t, 10*time.Second, "the listening line", func() bool { return strings.Contains(out.String(), "\n") })
	addr := strings.TrimSpace(strings.TrimPrefix(out.String(), prefix))
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + addr + demo.HealthPath)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", demo.HealthPath, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s = %d, want 200", demo.HealthPath, resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo-backend after cancel = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("demo-backend did not stop after its context was cancelled")
	}
}

func TestDemoBackendCmd_RegisterSetsHTTPCheckThenRegistersRetryingNoLeader(t *testing.T) {
	type call struct{ method, path, body string }
	var (
		mu    sync.Mutex
		calls []call
		first = true
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if first {
			first = false
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: api.Error{Code: api.CodeNoLeader, Message: "no leader"}})
			return
		}
		calls = append(calls, call{r.Method, r.URL.EscapedPath(), string(b)})
		_ = json.NewEncoder(w).Encode(api.WriteResult{Index: uint64(len(calls))})
	}))
	defer srv.Close()

	var out demoBuffer
	a := newApp(&out, io.Discard, demoNoEnv)
	cmd := a.demoBackendCmd()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetArgs([]string{"register", "demo", "demo-backend:8080", "--addr", srv.Listener.Addr().String(), "--wait", "20s"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("demo-backend register: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 {
		t.Fatalf("server saw %d accepted calls %+v, want 2 (cluster, then instance)", len(calls), calls)
	}
	const base = "/v1/namespaces/public/groups/DEFAULT_GROUP/services/demo"
	if c := calls[0]; c.method != http.MethodPut || c.path != base+"/clusters/DEFAULT" {
		t.Fatalf("first call %s %s, want PUT %s/clusters/DEFAULT", c.method, c.path, base)
	}
	var cr api.ClusterRequest
	if err := json.Unmarshal([]byte(calls[0].body), &cr); err != nil || cr.HealthCheck == nil {
		t.Fatalf("cluster body %q: %v", calls[0].body, err)
	}
	if hc := cr.HealthCheck; hc.Type != "HTTP" || hc.Path != demo.HealthPath || len(hc.ExpectedStatus) != 1 || hc.ExpectedStatus[0] != 200 {
		t.Fatalf("health check %+v, want HTTP %s expecting 200", *hc, demo.HealthPath)
	}
	if c := calls[1]; c.method != http.MethodPut || c.path != base+"/instances/demo-backend:8080" {
		t.Fatalf("second call %s %s, want PUT %s/instances/demo-backend:8080", c.method, c.path, base)
	}
	if !strings.Contains(out.String(), "registered demo demo-backend:8080") {
		t.Fatalf("output %q does not report the registration", out.String())
	}
}

func TestDemoBackendCmd_RegisterStopsOnInvalidArgument(t *testing.T) {
	var hits int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: api.Error{Code: api.CodeInvalid, Message: "bad", Field: "path"}})
	}))
	defer srv.Close()

	a := newApp(io.Discard, io.Discard, demoNoEnv)
	cmd := a.demoBackendCmd()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetArgs([]string{"register", "demo", "demo-backend:8080", "--addr", srv.Listener.Addr().String(), "--wait", "20s"})
	start := time.Now()
	if err := cmd.ExecuteContext(context.Background()); err == nil {
		t.Fatal("demo-backend register succeeded against a server answering 400")
	}
	mu.Lock()
	defer mu.Unlock()
	if hits != 1 || time.Since(start) > 10*time.Second {
		t.Fatalf("server hit %d times in %v, want exactly 1 (no retry on 400)", hits, time.Since(start))
	}
}
