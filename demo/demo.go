// Package demo is a tiny HTTP backend for trying Roster out: something to register and
// for the leader to probe. It is what `roster demo-backend` runs in the compose demo
// profile.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// HealthPath is the path that answers 200 while the backend is serving; point an HTTP
// health check at it.
const HealthPath = "/healthz"

// shutdownTimeout bounds how long Serve waits for in-flight requests after ctx is done.
const shutdownTimeout = 5 * time.Second

// Hello is the JSON body of GET /: who answered and how many requests it has served.
type Hello struct {
	Message  string `json:"message"`
	Hostname string `json:"hostname"`
	Requests uint64 `json:"requests"`
}

// NewHandler returns the backend's routes: GET / answers a Hello naming host, GET
// /healthz answers 200 "ok", anything else is a 404. The handler is safe for concurrent use.
func NewHandler(host string) http.Handler {
	var served atomic.Uint64
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Hello{
			Message:  "hello from the Roster demo backend",
			Hostname: host,
			Requests: served.Add(1),
		})
	})
	return mux
}

// Serve listens on addr (for example ":8080") and serves NewHandler until ctx is done,
// then shuts down gracefully and returns nil. It returns an error if addr cannot be
// listened on or the server fails.
func Serve(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("demo backend: listen %s: %w", addr, err)
	}
	return ServeListener(ctx, ln)
}

// ServeListener is Serve on a listener the caller opened; it closes ln before returning.
func ServeListener(ctx context.Context, ln net.Listener) error {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	srv := &http.Server{
		Handler:           NewHandler(host),
		ReadHeaderTimeout: 5 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("demo backend: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("demo backend: shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("demo backend: %w", err)
	}
	return nil
}
