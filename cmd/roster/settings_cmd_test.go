package main

import (
	"net/url"
	"strings"
	"testing"
)

func TestSettings_ShowAndChange(t *testing.T) {
	routes := map[string]fakeRoute{
		"GET /v1/operator/settings": {body: `{"index":9,"metadataMaxBytes":4096,"modifyIndex":9}`},
		"PUT /v1/operator/settings": {body: `{"index":9}`},
	}
	f := newFakeAPI(t, routes)
	r := runCLI(t, nil, "settings", "--addr", f.addr(), "--consistency", "stale")
	wantExit(t, r, 0)
	assertCall(t, f, "GET", "/v1/operator/settings", url.Values{"consistency": {"stale"}}, "")
	want := "SETTING           VALUE\nmetadataMaxBytes  4096\nmodifyIndex       9\n"
	if r.stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", r.stdout, want)
	}

	f = newFakeAPI(t, routes)
	r = runCLI(t, nil, "settings", "--addr", f.addr(), "--metadata-max-bytes", "4096")
	wantExit(t, r, 0)
	f.mu.Lock()
	calls := append([]apiCall(nil), f.calls...)
	f.mu.Unlock()
	if len(calls) != 2 || calls[0].method != "PUT" || strings.TrimSpace(calls[0].body) != `{"metadataMaxBytes":4096}` {
		t.Fatalf("calls %+v, want the PUT of the new value, then the read", calls)
	}
	if !strings.Contains(r.stderr, "settings changed at index 9") {
		t.Fatalf("stderr %q", r.stderr)
	}
}
