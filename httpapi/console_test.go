package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rosterhq/roster/api"
)

// The API mounts the web console: a browser's GET / goes to /ui/, /ui to /ui/, /ui/...
// serves the page without a token; every other request to / is still the API's JSON 404.
func TestConsole_Mounted(t *testing.T) {
	h := mustNew(t, testConfig(newLeaderNode("n1"), seededReader()))
	send := func(method, path, accept string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := send(http.MethodGet, "/", "text/html,application/xhtml+xml,*/*;q=0.8"); w.Code != http.StatusFound || w.Header().Get("Location") != "/ui/" {
		t.Fatalf("browser GET /: %d Location %q, want 302 /ui/", w.Code, w.Header().Get("Location"))
	}
	for _, accept := range []string{"", "application/json", "*/*"} {
		w := send(http.MethodGet, "/", accept)
		var body api.ErrorBody
		if w.Code != http.StatusNotFound || json.Unmarshal(w.Body.Bytes(), &body) != nil || body.Error.Code != api.CodeNotFound {
			t.Fatalf("GET / with Accept %q: %d %s, want the JSON 404", accept, w.Code, w.Body)
		}
	}
	if w := send(http.MethodGet, "/ui", "text/html"); w.Code != http.StatusFound || w.Header().Get("Location") != "/ui/" {
		t.Fatalf("GET /ui: %d Location %q", w.Code, w.Header().Get("Location"))
	}
	for _, p := range []string{"/ui/", "/ui/services", "/ui/assets/app.js"} {
		w := send(http.MethodGet, p, "")
		if w.Code != http.StatusOK || !strings.Contains(w.Header().Get("Content-Security-Policy"), "default-src 'self'") {
			t.Fatalf("GET %s: %d %v", p, w.Code, w.Header())
		}
	}
	// Unknown API routes are unchanged.
	if w := send(http.MethodGet, "/v2/nothing", "text/html"); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), `"not_found"`) {
		t.Fatalf("GET /v2/nothing: %d %s", w.Code, w.Body)
	}
}
