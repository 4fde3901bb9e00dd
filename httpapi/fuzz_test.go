package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// fuzzAPI is the native API over a real store, on a fake leader whose Apply applies
// each command to that store. It records the last command and the store's answer.
type fuzzAPI struct {
	h     http.Handler
	store *store.Store
	node  *fakeNode
	last  applyCall
	// applyErr is the store's answer to the last command.
	applyErr error
}

func newFuzzAPI(tb testing.TB) *fuzzAPI {
	tb.Helper()
	st, err := store.Open(filepath.Join(tb.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	a := &fuzzAPI{store: st, node: newLeaderNode("n1")}
	var idx uint64 = 10
	a.node.applyFn = func(t fsm.MessageType, msg any) (uint64, error) {
		idx++
		a.last = applyCall{Type: t, Msg: msg}
		switch m := msg.(type) {
		case fsm.RegisterInstanceRequest:
			a.applyErr = st.RegisterInstance(idx, m.Instance)
		case fsm.UpdateInstanceRequest:
			a.applyErr = st.UpdateInstance(idx, m.Ref, m.Patch)
		case fsm.UpsertClusterRequest:
			a.applyErr = st.UpsertCluster(idx, m.Cluster)
		default:
			a.applyErr = nil
		}
		return idx, a.applyErr
	}
	cfg := testConfig(a.node, st)
	h, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	a.h = h
	return a
}

// serve sends one request; ok is false when the fuzzer's path is not even a URL.
func (a *fuzzAPI) serve(method, path string, body []byte) (*httptest.ResponseRecorder, bool) {
	req, err := http.NewRequest(method, "http://roster.test"+path, bytes.NewReader(body))
	if err != nil {
		return nil, false
	}
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	return rec, true
}

// checkAnswer fails on a 5xx and on a refusal that is not a JSON error body.
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body.Bytes())
	}
	if rec.Code != http.StatusOK {
		var eb api.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code == "" {
			t.Fatalf("status %d without an error body: %q", rec.Code, rec.Body.Bytes())
		}
	}
}

// checkStoreAccepted fails if the store refused a command the API accepted: validation
// belongs before the log, so an accepted request must never be a store ErrInvalid.
func (a *fuzzAPI) checkStoreAccepted(t *testing.T) {
	t.Helper()
	if errors.Is(a.applyErr, model.ErrInvalid) {
		t.Fatalf("the API accepted %s %+v but the store refused it: %v", a.last.Type, a.last.Msg, a.applyErr)
	}
}

func instancePath(ns, group, service, addr string) string {
	return "/v1/namespaces/" + url.PathEscape(ns) + "/groups/" + url.PathEscape(group) +
		"/services/" + url.PathEscape(service) + "/instances/" + url.PathEscape(addr)
}

// cleanText fails unless every string is valid UTF-8 without control characters: what
// the API accepts never carries bytes a client's terminal or JSON decoder would
// mangle.
func cleanText(t *testing.T, what string, ss ...string) {
	t.Helper()
	for _, s := range ss {
		if !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
			t.Fatalf("accepted %s holds %q", what, s)
		}
	}
}

// mapText lists a map's keys and values.
func mapText(m map[string]string) []string {
	out := make([]string, 0, 2*len(m))
	for k, v := range m {
		out = append(out, k, v)
	}
	return out
}

// FuzzDecodeInstanceRequest sends arbitrary instance PUTs and PATCHes (path parts and
// JSON body) through the native API's routing and decoding. The API never answers a
// 5xx or panics; every refusal is a JSON error; and every request it accepts has a body
// of valid Unicode text and becomes a command whose instance (or patch) passes the
// admission rules, holds no invalid UTF-8 or control character, and is accepted by the
// store.
func FuzzDecodeInstanceRequest(f *testing.F) {
	seeds := []struct {
		patch                    bool
		ns, group, service, addr string
		body                     string
	}{
		{false, "public", "DEFAULT_GROUP", "orders", "127.100.0.1:8080", `{"weight":2,"metadata":{"v":"1"}}`},
		{false, "dev", "g1", "orders", "[::1]:80", `{"cluster":"blue","enabled":false,"healthy":false}`},
		{false, "public", "g", "s", "host.example:1", ``},
		{true, "public", "DEFAULT_GROUP", "orders", "127.100.0.1:8080", `{"metadata":{}}`},
		{true, "public", "DEFAULT_GROUP", "orders", "127.100.0.1:8080", `{"weight":10000,"cluster":"c-1","enabled":true}`},
		{true, "public", "DEFAULT_GROUP", "orders", "127.100.0.1:8080", `{"healthy":true}`},
		{false, "public", "DEFAULT_GROUP", "orders", "127.100.0.1:0", `{"weight":-1}`},
		{false, "public", "DEFAULT_GROUP", "orders", "127.100.0.1:8080", `{"metadata":{"":"x"}}`},
		{false, "public", "DEFAULT_GROUP", "a@@b", "1.2.3.4:5", `{"weight":1e309}`},
		{false, "public", "DEFAULT_GROUP", "orders", "127.100.0.1:8080", `{"cluster":"bad name"} {}`},
		{true, "public", "DEFAULT_GROUP", "orders", "127.100.0.1:8080", `{"unknown":1}`},
	}
	for _, s := range seeds {
		f.Add(s.patch, s.ns, s.group, s.service, s.addr, []byte(s.body))
	}
	a := newFuzzAPI(f)
	limits := model.DefaultLimits()
	f.Fuzz(func(t *testing.T, patch bool, ns, group, service, addr string, body []byte) {
		method := http.MethodPut
		if patch {
			method = http.MethodPatch
		}
		a.last, a.applyErr = applyCall{}, nil
		rec, ok := a.serve(method, instancePath(ns, group, service, addr), body)
		if !ok {
			return
		}
		checkAnswer(t, rec)
		if rec.Code != http.StatusOK {
			return
		}
		if off, what := httpx.LossyJSONString(body); off >= 0 || !utf8.Valid(body) {
			t.Fatalf("accepted a body with %s at offset %d: %q", what, off, body)
		}
		switch m := a.last.Msg.(type) {
		case fsm.RegisterInstanceRequest:
			if patch {
				t.Fatalf("a PATCH became %T", m)
			}
			if err := limits.AdmitInstance(m.Instance); err != nil {
				t.Fatalf("accepted registration %+v fails admission: %v", m.Instance, err)
			}
			cleanText(t, "registration", append(mapText(m.Instance.Metadata),
				m.Instance.Namespace, m.Instance.Group, m.Instance.Service, m.Instance.IP, m.Instance.Cluster)...)
			if m.Instance.Namespace != ns || m.Instance.Group != group || m.Instance.Service != service {
				t.Fatalf("registration names %v, the path %q/%q/%q", m.Instance.ServiceKey(), ns, group, service)
			}
		case fsm.UpdateInstanceRequest:
			if !patch {
				t.Fatalf("a PUT became %T", m)
			}
			if err := model.ValidateInstanceRef(m.Ref); err != nil {
				t.Fatalf("accepted patch names an invalid instance %+v: %v", m.Ref, err)
			}
			base := model.Instance{Namespace: m.Ref.Namespace, Group: m.Ref.Group, Service: m.Ref.Service,
				IP: m.Ref.IP, Port: m.Ref.Port, Cluster: model.DefaultCluster, Weight: 1, Enabled: true}
			if err := limits.ValidateInstance(m.Patch.ApplyTo(base)); err != nil {
				t.Fatalf("accepted patch %+v makes a valid instance invalid: %v", m.Patch, err)
			}
			if err := limits.AdmitPatch(m.Patch); err != nil {
				t.Fatalf("accepted patch %+v fails admission: %v", m.Patch, err)
			}
			if m.Patch.Metadata != nil {
				cleanText(t, "patch", mapText(*m.Patch.Metadata)...)
			}
		default:
			t.Fatalf("a 200 for %s without a command (last %T)", method, a.last.Msg)
		}
		a.checkStoreAccepted(t)
	})
}

// FuzzDecodeClusterRequest sends arbitrary cluster PUTs (cluster name and JSON body,
// health-check spec included) through the native API. The API never answers a 5xx or
// panics, and every accepted cluster carries a complete health check (defaults
// filled), passes the admission rules, holds no invalid UTF-8 or control character in
// its path, headers or metadata, and is stored exactly as accepted.
func FuzzDecodeClusterRequest(f *testing.F) {
	seeds := []struct{ name, body string }{
		{"DEFAULT", `{"healthCheck":{"type":"none"}}`},
		{"c1", `{"healthCheck":{"type":"HTTP","path":"/health","headers":{"Host":"x"},"expectedStatus":[200,204],"interval":"10s","timeout":"1s","rise":1,"fall":10}}`},
		{"c2", `{"healthCheck":{"type":"tcp","port":9000},"metadata":{"a":"b"}}`},
		{"c3", `{"healthCheck":{"interval":"1s"}}`},
		{"c4", `{"healthCheck":{"interval":"500ms"}}`},
		{"c5", `{"healthCheck":{"timeout":"5s"}}`},
		{"c6", `{"healthCheck":{"expectedStatus":[99]}}`},
		{"c7", `{"healthCheck":{"type":"HTTP","path":"no-slash"}}`},
		{"c8", `{"healthCheck":{"headers":{"a:b":"c"}}}`},
		{"c9", `{}`},
		{"bad name", `{}`},
	}
	for _, s := range seeds {
		f.Add(s.name, []byte(s.body))
	}
	a := newFuzzAPI(f)
	limits := model.DefaultLimits()
	key := model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "fuzz"}
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		a.last, a.applyErr = applyCall{}, nil
		path := "/v1/namespaces/public/groups/DEFAULT_GROUP/services/fuzz/clusters/" + url.PathEscape(name)
		rec, ok := a.serve(http.MethodPut, path, body)
		if !ok {
			return
		}
		checkAnswer(t, rec)
		if rec.Code != http.StatusOK {
			return
		}
		m, ok := a.last.Msg.(fsm.UpsertClusterRequest)
		if !ok {
			t.Fatalf("a 200 without a cluster command (last %T)", a.last.Msg)
		}
		c := m.Cluster
		if err := limits.AdmitCluster(c); err != nil {
			t.Fatalf("accepted cluster %+v fails admission: %v", c, err)
		}
		cleanText(t, "cluster", append(append(mapText(c.Metadata), mapText(c.HealthCheck.Headers)...), c.HealthCheck.Path)...)
		if d := c.HealthCheck.WithDefaults(); !reflect.DeepEqual(d, c.HealthCheck) {
			t.Fatalf("accepted health check %+v lacks defaults (%+v)", c.HealthCheck, d)
		}
		a.checkStoreAccepted(t)
		_, stored, err := a.store.Cluster(nil, key, c.Name)
		if err != nil {
			t.Fatalf("accepted cluster %q not stored: %v", c.Name, err)
		}
		if !sameHealthCheck(stored.HealthCheck, c.HealthCheck) {
			t.Fatalf("stored health check %+v, accepted %+v", stored.HealthCheck, c.HealthCheck)
		}
	})
}

// sameHealthCheck compares two specs, an empty map or list equal to a missing one.
func sameHealthCheck(a, b model.HealthCheck) bool {
	norm := func(h model.HealthCheck) model.HealthCheck {
		if len(h.Headers) == 0 {
			h.Headers = nil
		}
		if len(h.ExpectedStatus) == 0 {
			h.ExpectedStatus = nil
		}
		return h
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// FuzzHealthCheckSpec converts arbitrary health-check specs with healthCheckFromSpec.
// A refusal is a validation error naming a healthCheck field. An accepted spec is
// complete (its defaults are a fixed point), passes the admission rules, holds no
// invalid UTF-8 or control character, survives a JSON round trip unchanged, behaves the
// same when sent as JSON through the cluster route, and is stored by the store exactly
// as accepted.
func FuzzHealthCheckSpec(f *testing.F) {
	type seed struct {
		typ            string
		port           int
		path, hk, hv   string
		status         int
		interval, tout string
		rise, fall     int
	}
	for _, s := range []seed{
		{"", 0, "", "", "", 0, "", "", 0, 0},
		{"http", 8080, "/health", "Host", "svc.local", 204, "10s", "3s", 1, 5},
		{"TCP", 0, "", "", "", 0, "1s", "", 0, 0},
		{" none ", 70000, "", "", "", 0, "2h", "1h", 11, 0},
		{"HTTP", 0, "x", "a b", "c\r\n", 600, "1s", "1s", 0, -1},
		{"http", 1, "/", "k", "v", 100, "1m", "9ms", 10, 10},
		{"udp", 0, "", "", "", 0, "5", "x", 0, 0},
	} {
		f.Add(s.typ, s.port, s.path, s.hk, s.hv, s.status, s.interval, s.tout, s.rise, s.fall)
	}
	a := newFuzzAPI(f)
	key := model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "spec"}
	f.Fuzz(func(t *testing.T, typ string, port int, path, hk, hv string, status int, interval, tout string, rise, fall int) {
		spec := &api.HealthCheckSpec{Type: typ, Port: port, Path: path, Interval: interval, Timeout: tout, Rise: rise, Fall: fall}
		if hk != "" || hv != "" {
			spec.Headers = map[string]string{hk: hv}
		}
		if status != 0 {
			spec.ExpectedStatus = []int{status}
		}
		hc, err := healthCheckFromSpec(spec)
		if err != nil {
			var ve *model.ValidationError
			if !errors.As(err, &ve) || !strings.HasPrefix(ve.Field, "healthCheck.") {
				t.Fatalf("refusal %v is not a validation error naming a healthCheck field", err)
			}
			return
		}
		if err := model.AdmitHealthCheck(hc); err != nil {
			t.Fatalf("accepted %+v fails AdmitHealthCheck: %v", hc, err)
		}
		cleanText(t, "health check", append(mapText(hc.Headers), hc.Path)...)
		if d := hc.WithDefaults(); !reflect.DeepEqual(d, hc) {
			t.Fatalf("accepted %+v is not complete: WithDefaults gives %+v", hc, d)
		}
		raw, err := json.Marshal(hc)
		if err != nil {
			t.Fatalf("accepted %+v does not encode: %v", hc, err)
		}
		if !utf8Clean(spec) {
			t.Fatalf("accepted %+v, whose strings do not survive JSON (invalid UTF-8)", spec)
		}
		var back model.HealthCheck
		if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(back, hc) {
			t.Fatalf("JSON round trip of %+v gives %+v (%v)", hc, back, err)
		}

		// The same spec as JSON through the route is accepted and stored unchanged.
		body, err := json.Marshal(api.ClusterRequest{HealthCheck: spec})
		if err != nil {
			t.Fatal(err)
		}
		a.last, a.applyErr = applyCall{}, nil
		name := fmt.Sprintf("c%d", len(raw)%50)
		rec, _ := a.serve(http.MethodPut, "/v1/namespaces/public/groups/DEFAULT_GROUP/services/spec/clusters/"+name, body)
		if rec.Code != http.StatusOK {
			t.Fatalf("the route refused a spec the converter accepts: %d %s", rec.Code, rec.Body.Bytes())
		}
		a.checkStoreAccepted(t)
		_, stored, err := a.store.Cluster(nil, key, name)
		if err != nil {
			t.Fatal(err)
		}
		if !sameHealthCheck(stored.HealthCheck, hc) {
			t.Fatalf("stored %+v, converter gave %+v", stored.HealthCheck, hc)
		}
	})
}

// utf8Clean reports whether every string of spec survives JSON encoding unchanged
// (encoding/json replaces invalid UTF-8 with U+FFFD).
func utf8Clean(spec *api.HealthCheckSpec) bool {
	raw, err := json.Marshal(spec)
	if err != nil {
		return false
	}
	var back api.HealthCheckSpec
	return json.Unmarshal(raw, &back) == nil && reflect.DeepEqual(&back, spec)
}
