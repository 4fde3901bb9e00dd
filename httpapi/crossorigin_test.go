package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rosterhq/roster/api"
)

// TestCrossOrigin_BrowserWritesFromOtherSitesRefused: a page on another site cannot make
// an operator's browser change anything (here: add a member): the write is refused with
// 403 and applies nothing, whether the browser says so with Sec-Fetch-Site or only with
// Origin. Reads, clients that are not browsers, same-origin pages and configured origins
// pass.
func TestCrossOrigin_BrowserWritesFromOtherSitesRefused(t *testing.T) {
	node := newLeaderNode("n1")
	cfg := testConfig(node, seededReader())
	cfg.TrustedOrigins = []string{"https://console.example.com"}
	h := mustNew(t, cfg)
	join := `{"id":"evil","raftAddr":"127.0.0.66:7848","httpAddr":"127.0.0.66:8848"}`
	send := func(method, path, body string, header map[string]string) *httptest.ResponseRecorder {
		t.Helper()
		req := newRequest(t, method, path, body)
		req.Host = "roster.internal:8848"
		for k, v := range header {
			req.Header.Set(k, v)
		}
		rec := newRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for name, hdr := range map[string]map[string]string{
		"sec-fetch-site cross-site": {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
		"sec-fetch-site same-site":  {"Sec-Fetch-Site": "same-site", "Origin": "https://other.roster.internal"},
		"origin only":               {"Origin": "https://evil.example"},
	} {
		rec := send(http.MethodPost, "/v1/cluster/join", join, hdr)
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), `"code":"`+api.CodeForbidden+`"`) {
			t.Errorf("%s: %d %s, want 403 forbidden", name, rec.Code, rec.Body)
		}
		rec = send(http.MethodDelete, instPath, "", hdr)
		if rec.Code != http.StatusForbidden {
			t.Errorf("%s: DELETE %d, want 403", name, rec.Code)
		}
	}
	if n := node.joinCount(); n != 0 || len(node.calls()) != 0 {
		t.Fatalf("refused requests reached the node: %d joins, %d commands", n, len(node.calls()))
	}

	// Reads from anywhere; writes from non-browsers, the same origin and trusted origins.
	if rec := send(http.MethodGet, "/v1/namespaces", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}); rec.Code != http.StatusOK {
		t.Fatalf("cross-site read: %d %s", rec.Code, rec.Body)
	}
	for name, hdr := range map[string]map[string]string{
		"no browser headers": nil,
		"same origin":        {"Sec-Fetch-Site": "same-origin", "Origin": "http://roster.internal:8848"},
		"typed by the user":  {"Sec-Fetch-Site": "none"},
		"trusted origin":     {"Sec-Fetch-Site": "cross-site", "Origin": "https://console.example.com"},
	} {
		if rec := send(http.MethodPost, "/v1/cluster/join", join, hdr); rec.Code != http.StatusOK {
			t.Errorf("%s: %d %s, want 200", name, rec.Code, rec.Body)
		}
	}
	if n := node.joinCount(); n != 4 {
		t.Fatalf("%d joins, want 4", n)
	}

	bad := testConfig(node, seededReader())
	bad.TrustedOrigins = []string{"not an origin"}
	if _, err := New(bad); err == nil {
		t.Fatal("an invalid trusted origin was accepted")
	}
}

// joinCount is how many joins reached the node.
func (n *fakeNode) joinCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.joins)
}
