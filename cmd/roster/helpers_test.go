package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// outBuffer is a bytes.Buffer safe for a command writing while a test reads.
type outBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *outBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *outBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cliResult is one command line's outcome.
type cliResult struct {
	code           int
	stdout, stderr string
}

// mapEnv returns a lookup function over env.
func mapEnv(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

// newTestApp returns an app with captured output, the given environment and a
// startNode that fails the test if called.
func newTestApp(t *testing.T, env map[string]string) (*app, *outBuffer, *outBuffer) {
	t.Helper()
	var stdout, stderr outBuffer
	a := newApp(&stdout, &stderr, mapEnv(env))
	a.startNode = nil
	return a, &stdout, &stderr
}

// runCLI runs the root command in-process with args and env.
func runCLI(t *testing.T, env map[string]string, args ...string) cliResult {
	t.Helper()
	a, stdout, stderr := newTestApp(t, env)
	code := run(context.Background(), args, a)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// apiCall is one request the fake API received.
type apiCall struct {
	method, path string // path as sent (escaped)
	query        url.Values
	body         string
}

// fakeRoute is a canned answer.
type fakeRoute struct {
	status int
	body   string
}

// fakeAPI answers "METHOD /escaped/path" routes with canned responses and records every call.
type fakeAPI struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []apiCall
}

func newFakeAPI(t *testing.T, routes map[string]fakeRoute) *fakeAPI {
	t.Helper()
	f := &fakeAPI{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		path := strings.SplitN(r.RequestURI, "?", 2)[0]
		f.mu.Lock()
		f.calls = append(f.calls, apiCall{method: r.Method, path: path, query: r.URL.Query(), body: string(b)})
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		rt, ok := routes[r.Method+" "+path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no such route in the fake"}}`)
			return
		}
		if rt.status == 0 {
			rt.status = http.StatusOK
		}
		w.WriteHeader(rt.status)
		_, _ = io.WriteString(w, rt.body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// addr is the fake's host:port.
func (f *fakeAPI) addr() string { return f.srv.Listener.Addr().String() }

// onlyCall returns the single call the fake received, failing the test otherwise.
func (f *fakeAPI) onlyCall(t *testing.T) apiCall {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) != 1 {
		t.Fatalf("fake API saw %d calls, want 1: %+v", len(f.calls), f.calls)
	}
	return f.calls[0]
}

func (f *fakeAPI) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}
