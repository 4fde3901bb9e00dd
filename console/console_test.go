package console_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rosterhq/roster/console"
)

func serve(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func newHandler(t *testing.T) *console.Handler {
	t.Helper()
	h, err := console.New()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Every console answer carries the strict policy and nosniff; assets have their own
// types and an ETag, and are revalidated rather than cached blindly.
func TestConsole_AssetsAndHeaders(t *testing.T) {
	h := newHandler(t)
	for path, wantType := range map[string]string{
		"/ui/":                         "text/html; charset=utf-8",
		"/ui/assets/app.js":            "text/javascript; charset=utf-8",
		"/ui/assets/api.js":            "text/javascript; charset=utf-8",
		"/ui/assets/views/services.js": "text/javascript; charset=utf-8",
		"/ui/assets/style.css":         "text/css; charset=utf-8",
		"/ui/assets/favicon.svg":       "image/svg+xml",
	} {
		w := serve(t, h, http.MethodGet, path, nil)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d", path, w.Code)
		}
		if got := w.Header().Get("Content-Type"); got != wantType {
			t.Errorf("%s: Content-Type %q, want %q", path, got, wantType)
		}
		csp := w.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
		if w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", path)
		}
		if w.Header().Get("Cache-Control") != "no-cache" || w.Header().Get("ETag") == "" {
			t.Errorf("%s: Cache-Control %q, ETag %q", path, w.Header().Get("Cache-Control"), w.Header().Get("ETag"))
		}
		// A browser holding the current version gets a 304.
		again := serve(t, h, http.MethodGet, path, map[string]string{"If-None-Match": w.Header().Get("ETag")})
		if again.Code != http.StatusNotModified {
			t.Errorf("%s with its ETag: %d, want 304", path, again.Code)
		}
	}
}

// The page has no inline script (the policy would block it) and loads its module from
// the console's own assets.
func TestConsole_IndexHasNoInlineScript(t *testing.T) {
	body := serve(t, newHandler(t), http.MethodGet, "/ui/", nil).Body.String()
	if !strings.Contains(body, `<script type="module" src="/ui/assets/app.js"></script>`) {
		t.Fatalf("index.html does not load /ui/assets/app.js:\n%s", body)
	}
	if strings.Count(body, "<script") != 1 || strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Fatalf("index.html has another script or an external reference:\n%s", body)
	}
}

// Every /ui/ path that is not an asset is the page (the script picks the view); an
// unknown asset is a 404, not the page.
func TestConsole_ViewsServeTheIndex(t *testing.T) {
	h := newHandler(t)
	index := serve(t, h, http.MethodGet, "/ui/", nil).Body.String()
	for _, p := range []string{"/ui/services", "/ui/cluster", "/ui/namespaces/public/groups/DEFAULT_GROUP/services/orders", "/ui/x"} {
		w := serve(t, h, http.MethodGet, p, nil)
		if w.Code != http.StatusOK || w.Body.String() != index || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
			t.Errorf("%s: %d %q", p, w.Code, w.Header().Get("Content-Type"))
		}
	}
	if w := serve(t, h, http.MethodGet, "/ui/assets/nope.js", nil); w.Code != http.StatusNotFound {
		t.Errorf("unknown asset: %d, want 404", w.Code)
	}
	if w := serve(t, h, http.MethodHead, "/ui/assets/app.js", nil); w.Code != http.StatusOK || w.Body.Len() != 0 {
		t.Errorf("HEAD: %d with %d bytes", w.Code, w.Body.Len())
	}
	if w := serve(t, h, http.MethodPost, "/ui/services", nil); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", w.Code)
	}
}

func TestConsole_WantsPage(t *testing.T) {
	for accept, want := range map[string]bool{
		"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8": true,
		"text/html":        true,
		"application/json": false,
		"*/*":              false,
		"":                 false,
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		if got := console.WantsPage(r); got != want {
			t.Errorf("Accept %q: %v, want %v", accept, got, want)
		}
	}
}
