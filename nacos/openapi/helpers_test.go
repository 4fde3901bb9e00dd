package openapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos/internal/nacostesting"
	"github.com/rosterhq/roster/store"
)

// withBody is r's context with b as the buffered body, as bufferBodyAfterToken leaves it.
func withBody(r *http.Request, b []byte) context.Context {
	return httpx.WithBody(r.Context(), b)
}

// overHTTP sends one Nacos request over the network.
func overHTTP(t *testing.T, method, url, form string) nacostesting.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return nacostesting.Response{Code: resp.StatusCode, Header: resp.Header, Body: b}
}

// sameShape checks that got has every field of the documented example doc, with the
// same JSON type, recursively (arrays through their first element). A null in doc
// matches anything.
func sameShape(t *testing.T, path string, doc, got any) {
	t.Helper()
	if doc == nil {
		return
	}
	switch d := doc.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			t.Errorf("%s: got %T, documented as an object", path, got)
			return
		}
		for k, dv := range d {
			gv, ok := g[k]
			if !ok {
				t.Errorf("%s.%s: missing (documented)", path, k)
				continue
			}
			sameShape(t, path+"."+k, dv, gv)
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			t.Errorf("%s: got %T, documented as an array", path, got)
			return
		}
		if len(d) > 0 && len(g) > 0 {
			sameShape(t, path+"[0]", d[0], g[0])
		}
	default:
		if got == nil {
			t.Errorf("%s: got null, documented as %T", path, doc)
			return
		}
		if dt, gt := jsonType(doc), jsonType(got); dt != gt {
			t.Errorf("%s: got a %s, documented as a %s", path, gt, dt)
		}
	}
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "null"
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return v
}

// newTestAPI is the Nacos API of node id over a fresh store; leader is the member the
// node takes for the leader (itself when nil).
func newTestAPI(t testing.TB, id string, leader *model.Member) (http.Handler, *store.Store, *nacostesting.Node) {
	t.Helper()
	return newTestAPIWith(t, id, leader, nil)
}

// newTestAPIWith is newTestAPI with configure (nil: none) adjusting the configuration.
func newTestAPIWith(t testing.TB, id string, leader *model.Member, configure func(*store.Store, *Config)) (http.Handler, *store.Store, *nacostesting.Node) {
	t.Helper()
	e := nacostesting.NewEnv(t, id, leader)
	cfg := Config{NodeID: id, Store: e.Store, Node: e.Node, Registry: e.Registry, Forwarder: e.Forwarder, Metrics: e.Metrics,
		Logger: slog.New(slog.DiscardHandler)}
	if configure != nil {
		configure(e.Store, &cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h, e.Store, e.Node
}

// newStoreAPI is the Nacos API of a leader over a fresh store.
func newStoreAPI(t testing.TB) (http.Handler, *store.Store, *nacostesting.Node) {
	t.Helper()
	return newTestAPI(t, "n1", nil)
}

// newRequest builds a Nacos request with a form body, as BufferBody leaves it.
func newRequest(t *testing.T, method, target string, form string) *http.Request {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(form))
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return req.WithContext(httpx.WithBody(req.Context(), []byte(form)))
}
