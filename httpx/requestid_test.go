package httpx

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestValidRequestID_Bounds(t *testing.T) {
	for id, want := range map[string]bool{
		"":                        false,
		"a":                       true,
		"A-z_0.9":                 true,
		strings.Repeat("x", 64):   true,
		strings.Repeat("x", 65):   false,
		"with space":              false,
		"slash/":                  false,
		"new\nline":               false,
		"ünï":                     false,
		NewRequestID():            true,
		"550e8400-e29b-41d4-a716": true,
	} {
		if got := ValidRequestID(id); got != want {
			t.Errorf("ValidRequestID(%q) = %v, want %v", id, got, want)
		}
	}
}

// The middleware keeps a sane id, replaces another, answers it, and lines logged with
// the request's context carry it; lines logged without it do not.
func TestRequestIDs_ContextAndLogs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(RequestIDLogs(slog.NewTextHandler(&buf, nil))).With("node", "n1")
	var seen string
	h := RequestIDs(log)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = RequestIDOf(r.Context())
		log.InfoContext(r.Context(), "inside")
		log.Info("no context")
	}))
	for in, keep := range map[string]bool{"trace-1": true, "bad id": false, "": false} {
		buf.Reset()
		req := httptest.NewRequest(http.MethodGet, "/x", nil)
		if in != "" {
			req.Header.Set(HeaderRequestID, in)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		got := rec.Header().Get(HeaderRequestID)
		if (got == in) != keep || !ValidRequestID(got) || got != seen {
			t.Fatalf("incoming %q: answered %q, context %q (keep %v)", in, got, seen, keep)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], "request_id="+got) || strings.Contains(lines[1], "request_id") {
			t.Fatalf("incoming %q: log\n%s", in, buf.String())
		}
	}
	if w := RequestIDLogs(slog.NewTextHandler(&buf, nil)); RequestIDLogs(w) != w {
		t.Fatal("a wrapped handler was wrapped again")
	}
}

// The debug access line is written only at debug level and carries the id.
func TestRequestIDs_DebugAccessLine(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(RequestIDLogs(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	h := RequestIDs(log)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	req := httptest.NewRequest(http.MethodPut, "/v1/x", nil)
	req.Header.Set(HeaderRequestID, "abc")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if out := buf.String(); !strings.Contains(out, `msg="http request"`) || !strings.Contains(out, "status=418") ||
		!strings.Contains(out, "request_id=abc") || !strings.Contains(out, "path=/v1/x") {
		t.Fatalf("access line: %s", out)
	}
}
