package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// withBody is r's context with b as the buffered body, as nacosBody leaves it.
func withBody(r *http.Request, b []byte) context.Context {
	return httpx.WithBody(r.Context(), b)
}

// nacosDo sends one Nacos request to h in process; a non-empty form is sent as an
// application/x-www-form-urlencoded body.
func nacosDo(t *testing.T, h http.Handler, method, target, form string) response {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(form))
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{Code: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}

// nacosHTTP sends one Nacos request over the network.
func nacosHTTP(t *testing.T, method, url, form string) response {
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
	return response{Code: resp.StatusCode, Header: resp.Header, Body: b}
}

// mustNacos sends a Nacos request and checks its status.
func mustNacos(t *testing.T, h http.Handler, method, target, form string, want int) response {
	t.Helper()
	resp := nacosDo(t, h, method, target, form)
	if resp.Code != want {
		t.Fatalf("%s %s %s: %d %s, want %d", method, target, form, resp.Code, resp.Body, want)
	}
	return resp
}

// mustOK sends a v1 write and checks it answered the text "ok".
func mustOK(t *testing.T, h http.Handler, method, target, form string) {
	t.Helper()
	resp := mustNacos(t, h, method, target, form, http.StatusOK)
	if string(resp.Body) != "ok" {
		t.Fatalf("%s %s: body %q, want ok", method, target, resp.Body)
	}
}

// envelope decodes a v2 answer.
func (r response) envelope(t *testing.T) (code int, message string, data json.RawMessage) {
	t.Helper()
	var env struct {
		Code    *int            `json:"code"`
		Message *string         `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &env); err != nil || env.Code == nil || env.Message == nil {
		t.Fatalf("not a v2 envelope: %q (%v)", r.Body, err)
	}
	return *env.Code, *env.Message, env.Data
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

// appliedTypes lists the command types a fake node applied.
func appliedTypes(n *fakeNode) []fsm.MessageType {
	var out []fsm.MessageType
	for _, c := range n.calls() {
		out = append(out, c.Type)
	}
	return out
}

// mustInstance reads one instance from the store.
func mustInstance(t *testing.T, st *store.Store, ref model.InstanceRef) model.Instance {
	t.Helper()
	_, in, err := st.Instance(nil, ref)
	if err != nil {
		t.Fatalf("instance %+v: %v", ref, err)
	}
	return in
}
