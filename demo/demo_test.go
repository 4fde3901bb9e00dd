package demo

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestHandler_HealthAnswersOK(t *testing.T) {
	rec := httptest.NewRecorder()
	NewHandler("h1").ServeHTTP(rec, httptest.NewRequest(http.MethodGet, HealthPath, nil))
	if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != "ok" {
		t.Fatalf("GET %s = %d %q, want 200 ok", HealthPath, rec.Code, rec.Body.String())
	}
}

func TestHandler_RootSaysHelloAndCounts(t *testing.T) {
	h := NewHandler("h1")
	for want := uint64(1); want <= 2; want++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET / = %d, want 200", rec.Code)
		}
		var got Hello
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("decode %q: %v", rec.Body.String(), err)
		}
		if got.Hostname != "h1" || got.Requests != want || got.Message == "" {
			t.Fatalf("GET / = %+v, want hostname h1, requests %d", got, want)
		}
	}
}

func TestHandler_UnknownPathIs404(t *testing.T) {
	rec := httptest.NewRecorder()
	NewHandler("h1").ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/nope", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("GET /nope = %d, want 404", rec.Code)
	}
}

func TestServeListener_ServesUntilContextDone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeListener(ctx, ln) }()

	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + ln.Addr().String() + HealthPath)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", HealthPath, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("GET %s = %d %q", HealthPath, resp.StatusCode, body)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeListener after cancel = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeListener did not return after its context was cancelled")
	}
	if _, err := hc.Get("http://" + ln.Addr().String() + HealthPath); err == nil {
		t.Fatal("backend still answers after ServeListener returned")
	}
}

func TestServe_ReportsListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = Serve(context.Background(), ln.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("Serve on a busy address = %v, want a listen error", err)
	}
}
