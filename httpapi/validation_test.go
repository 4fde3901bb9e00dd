package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/rosterhq/roster/api"
)

// TestValidation_BadInputIs400NamingTheFieldAndNothingApplied checks every validation
// rule on every route: 400 invalid_argument naming the field, and no command applied
// and no membership change made.
func TestValidation_BadInputIs400NamingTheFieldAndNothingApplied(t *testing.T) {
	const (
		nsPrefix  = "/v1/namespaces/public/groups/DEFAULT_GROUP/services/"
		svc       = nsPrefix + "orders"
		inst      = svc + "/instances/127.100.0.1:8080"
		bigMDJSON = `{"k":"` // completed below
	)
	long := func(n int) string { return strings.Repeat("a", n) }
	bigMD := bigMDJSON + long(1100) + `"}`
	esc := url.PathEscape

	type tc struct {
		method, path string
		body         any
		field        string
	}
	var tests []tc
	// Path names on every route that has them.
	routes := []struct {
		method, tmpl, body string
	}{
		{http.MethodPut, "/v1/namespaces/{ns}", `{}`},
		{http.MethodGet, "/v1/namespaces/{ns}", ""},
		{http.MethodDelete, "/v1/namespaces/{ns}", ""},
		{http.MethodGet, "/v1/namespaces/{ns}/services", ""},
		{http.MethodPut, "/v1/namespaces/{ns}/groups/{group}/services/{service}", `{}`},
		{http.MethodGet, "/v1/namespaces/{ns}/groups/{group}/services/{service}", ""},
		{http.MethodDelete, "/v1/namespaces/{ns}/groups/{group}/services/{service}", ""},
		{http.MethodGet, "/v1/namespaces/{ns}/groups/{group}/services/{service}/clusters", ""},
		{http.MethodPut, "/v1/namespaces/{ns}/groups/{group}/services/{service}/clusters/{cluster}", `{}`},
		{http.MethodGet, "/v1/namespaces/{ns}/groups/{group}/services/{service}/clusters/{cluster}", ""},
		{http.MethodGet, "/v1/namespaces/{ns}/groups/{group}/services/{service}/instances", ""},
		{http.MethodPut, "/v1/namespaces/{ns}/groups/{group}/services/{service}/instances/{addr}", `{}`},
		{http.MethodGet, "/v1/namespaces/{ns}/groups/{group}/services/{service}/instances/{addr}", ""},
		{http.MethodPatch, "/v1/namespaces/{ns}/groups/{group}/services/{service}/instances/{addr}", `{}`},
		{http.MethodDelete, "/v1/namespaces/{ns}/groups/{group}/services/{service}/instances/{addr}", ""},
		{http.MethodPut, "/v1/namespaces/{ns}/groups/{group}/services/{service}/instances/{addr}/health", `{"healthy":true}`},
	}
	good := map[string]string{"{ns}": "public", "{group}": "DEFAULT_GROUP", "{service}": "orders", "{cluster}": "DEFAULT", "{addr}": "127.100.0.1:8080"}
	bad := map[string][]struct{ value, field string }{
		"{ns}":    {{"bad!ns", "namespace"}, {long(65), "namespace"}, {esc("a b"), "namespace"}},
		"{group}": {{esc("bad group"), "group"}, {long(129), "group"}, {"a@b", "group"}},
		"{service}": {{"@svc", "service"}, {"a@@b", "service"}, {long(513), "service"}, {esc("服务"), "service"},
			{esc("a b"), "service"}, {"%2Fx", "service"}},
		"{cluster}": {{"bad.cluster", "cluster"}, {long(65), "cluster"}},
		"{addr}": {{"not_an_ip!:80", "ip"}, {"999.1.1.1:80", "ip"}, {long(254) + ":80", "ip"}, {"127.100.0.1:0", "port"},
			{"127.100.0.1:70000", "port"}, {"127.100.0.1", "port"}, {"127.100.0.1:abc", "port"}, {"[::1", "ip"}},
	}
	for _, rt := range routes {
		for param, values := range bad {
			if !strings.Contains(rt.tmpl, param) {
				continue
			}
			for _, v := range values {
				p := rt.tmpl
				for k, g := range good {
					if k == param {
						p = strings.ReplaceAll(p, k, v.value)
					} else {
						p = strings.ReplaceAll(p, k, g)
					}
				}
				var body any
				if rt.body != "" {
					body = rt.body
				}
				tests = append(tests, tc{rt.method, p, body, v.field})
			}
		}
	}
	// Bodies and query parameters.
	tests = append(tests, []tc{
		{http.MethodPut, "/v1/namespaces/dev", `{"description":"` + long(257) + `"}`, "description"},
		{http.MethodPut, "/v1/namespaces/dev", `{"name":"` + long(129) + `"}`, "name"},
		{http.MethodPut, "/v1/namespaces/dev", `{"name":"a\u0001b"}`, "name"},
		{http.MethodPut, "/v1/namespaces/dev", `{"name":5}`, "name"},
		{http.MethodPut, svc, `{"protectThreshold":1.5}`, "protectThreshold"},
		{http.MethodPut, svc, `{"protectThreshold":-0.1}`, "protectThreshold"},
		{http.MethodPut, svc, `{"protectThreshold":"high"}`, "protectThreshold"},
		{http.MethodPut, svc, `{"metadata":` + bigMD + `}`, "metadata"},
		{http.MethodPut, svc, `{"metadata":{"":"v"}}`, "metadata"},
		{http.MethodPut, svc, `{"metadata":{"a":1}}`, "metadata"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"type":"ICMP"}}`, "healthCheck.type"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"port":-1}}`, "healthCheck.port"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"port":70000}}`, "healthCheck.port"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"interval":"500ms"}}`, "healthCheck.interval"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"interval":"2h"}}`, "healthCheck.interval"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"interval":"soon"}}`, "healthCheck.interval"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"interval":5}}`, "healthCheck.interval"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"interval":"5s","timeout":"5s"}}`, "healthCheck.timeout"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"timeout":"5ms"}}`, "healthCheck.timeout"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"timeout":"x"}}`, "healthCheck.timeout"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"deregisterAfter":"500ms"}}`, "healthCheck.deregisterAfter"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"interval":"10s","deregisterAfter":"5s"}}`, "healthCheck.deregisterAfter"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"deregisterAfter":"8761h"}}`, "healthCheck.deregisterAfter"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"deregisterAfter":"-1s"}}`, "healthCheck.deregisterAfter"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"deregisterAfter":"soon"}}`, "healthCheck.deregisterAfter"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"rise":11}}`, "healthCheck.rise"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"rise":-1}}`, "healthCheck.rise"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"fall":11}}`, "healthCheck.fall"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"confirm":"quorum"}}`, "healthCheck.confirm"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"type":"HTTP","path":"noslash"}}`, "healthCheck.path"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"type":"HTTP","path":"/` + long(1100) + `"}}`, "healthCheck.path"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"headers":{"bad:key":"v"}}}`, "healthCheck.headers"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"headers":{"k":"a\r\nb"}}}`, "healthCheck.headers"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"expectedStatus":[99]}}`, "healthCheck.expectedStatus"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"expectedStatus":[600]}}`, "healthCheck.expectedStatus"},
		{http.MethodPut, svc + "/clusters/web", `{"metadata":` + bigMD + `}`, "metadata"},
		{http.MethodPut, inst, `{"weight":-1}`, "weight"},
		{http.MethodPut, inst, `{"weight":10001}`, "weight"},
		{http.MethodPut, inst, `{"cluster":"bad.c"}`, "cluster"},
		{http.MethodPut, inst, `{"cluster":""}`, "cluster"},
		{http.MethodPut, inst, `{"metadata":` + bigMD + `}`, "metadata"},
		{http.MethodPut, inst, `{"enabled":"yes"}`, "enabled"},
		{http.MethodPatch, inst, `{"healthy":true}`, "healthy"},
		{http.MethodPatch, inst, `{"weight":20000}`, "weight"},
		{http.MethodPatch, inst, `{"cluster":"bad.c"}`, "cluster"},
		{http.MethodPatch, inst, `{"metadata":` + bigMD + `}`, "metadata"},
		{http.MethodPut, inst + "/health", `{}`, "healthy"},
		{http.MethodPut, inst + "/health", ``, "healthy"},
		{http.MethodPut, inst + "/health", `{"healthy":"yes"}`, "healthy"},
		{http.MethodPost, "/v1/cluster/join", `{"raftAddr":"127.100.0.2:7848"}`, "id"},
		{http.MethodPost, "/v1/cluster/join", `{"id":"a b","raftAddr":"127.100.0.2:7848"}`, "id"},
		{http.MethodPost, "/v1/cluster/join", `{"id":"n2"}`, "raftAddr"},
		{http.MethodPost, "/v1/cluster/join", `{"id":"n2","raftAddr":"nope"}`, "raftAddr"},
		{http.MethodPost, "/v1/cluster/join", `{"id":"n2","raftAddr":"127.100.0.2:7848","httpAddr":"x"}`, "httpAddr"},
		{http.MethodDelete, "/v1/cluster/members/" + esc("a b"), nil, "id"},
		{http.MethodPost, "/v1/cluster/leadership-transfer?id=" + url.QueryEscape("a b"), nil, "id"},
		// Unknown fields on every body.
		{http.MethodPut, "/v1/namespaces/dev", `{"nme":"x"}`, "nme"},
		{http.MethodPut, svc, `{"protectthreshhold":0.1}`, "protectthreshhold"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"intervl":"5s"}}`, "healthCheck.intervl"},
		{http.MethodPut, inst, `{"ephemeral":true}`, "ephemeral"},
		{http.MethodPatch, inst, `{"ephemeral":true}`, "ephemeral"},
		{http.MethodPut, inst + "/health", `{"healthy":true,"why":"x"}`, "why"},
		{http.MethodPost, "/v1/cluster/join", `{"id":"n2","raftAddr":"127.100.0.2:7848","voter":true}`, "voter"},
		// Malformed bodies.
		{http.MethodPut, inst, `{"weight":`, "body"},
		{http.MethodPut, inst, `{"weight":1}{}`, "body"},
		{http.MethodPut, inst, `[1]`, "body"},
		{http.MethodPut, inst, `{weight:1}`, "body"},
		// Query parameters.
		{http.MethodGet, "/v1/namespaces/public/services?page=0", nil, "page"},
		{http.MethodGet, "/v1/namespaces/public/services?page=x", nil, "page"},
		{http.MethodGet, "/v1/namespaces/public/services?size=1001", nil, "size"},
		{http.MethodGet, "/v1/namespaces/public/services?size=0", nil, "size"},
		{http.MethodGet, "/v1/namespaces/public/services?group=" + url.QueryEscape("bad group"), nil, "group"},
		{http.MethodGet, "/v1/namespaces/public/services?name=" + strings.Repeat("x", 513), nil, "name"},
		{http.MethodGet, "/v1/namespaces/public/services?name=%ff", nil, "name"},
		{http.MethodGet, svc + "/instances?healthy=maybe", nil, "healthy"},
		{http.MethodGet, svc + "/instances?cluster=DEFAULT,bad.c", nil, "cluster"},
		{http.MethodGet, svc + "?consistency=strong", nil, "consistency"},
		{http.MethodGet, svc + "?index=-1", nil, "index"},
		{http.MethodGet, svc + "?index=1&wait=soon", nil, "wait"},
		{http.MethodGet, svc + "?index=1&wait=-1s", nil, "wait"},
		{http.MethodGet, "/v1/cluster/members?consistency=", nil, "consistency"},
		{http.MethodGet, "/v1/cluster/members?detail=maybe", nil, "detail"},
		{http.MethodPost, "/v1/cluster/probe", `{"check":{"type":"TCP","interval":"1s","timeout":"1s","rise":1,"fall":1},"ip":"127.0.0.1","port":80}`, "healthCheck.timeout"},
		{http.MethodPost, "/v1/cluster/probe", `{"check":{"type":"TCP","interval":"1s","timeout":"100ms","rise":1,"fall":1},"ip":"not an ip","port":80}`, "ip"},
		{http.MethodPost, "/v1/cluster/probe", `{"check":{"type":"TCP","interval":"1s","timeout":"100ms","rise":1,"fall":1},"ip":"127.0.0.1","port":70000}`, "port"},
	}...)

	for _, tc := range tests {
		name := fmt.Sprintf("%s %s", tc.method, tc.path)
		if len(name) > 120 {
			name = name[:120]
		}
		t.Run(name, func(t *testing.T) {
			node := newLeaderNode("n1")
			h := mustNew(t, testConfig(node, seededReader()))
			resp := do(t, h, tc.method, tc.path, tc.body)
			if resp.Code != http.StatusBadRequest {
				t.Fatalf("status %d, body %s", resp.Code, resp.Body)
			}
			e := resp.errorBody(t)
			if e.Code != api.CodeInvalid || e.Field != tc.field || e.Message == "" {
				t.Fatalf("error %+v, want field %q", e, tc.field)
			}
			if n := len(node.calls()); n != 0 {
				t.Fatalf("%d commands applied", n)
			}
			node.mu.Lock()
			defer node.mu.Unlock()
			if len(node.joins)+len(node.removed)+len(node.transfers) != 0 {
				t.Fatal("membership changed")
			}
		})
	}
}

// TestValidation_BodyLimitsAndMediaType checks 413 above MaxBodyBytes and 415 for a
// body that is not JSON, with nothing applied.
func TestValidation_BodyLimitsAndMediaType(t *testing.T) {
	node := newLeaderNode("n1")
	h := mustNew(t, testConfig(node, seededReader()))

	big := `{"metadata":{"k":"` + strings.Repeat("x", DefaultMaxBodyBytes) + `"}}`
	resp := do(t, h, http.MethodPut, instPath, big)
	if resp.Code != http.StatusRequestEntityTooLarge || resp.errorBody(t).Code != api.CodeTooLarge {
		t.Fatalf("big body: %d %s", resp.Code, resp.Body)
	}

	// Only JSON: a form, text/plain or a body without a Content-Type is what a page on
	// another site can make a browser send unasked (a "simple" request), so each is a
	// 415, even when the body is valid JSON.
	for _, ct := range []string{"application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x", "text/xml", ""} {
		req := newRequest(t, http.MethodPut, instPath, `{}`)
		req.Header.Del("Content-Type")
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		rec := newRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnsupportedMediaType || !strings.Contains(rec.Body.String(), api.CodeUnsupportedMedia) {
			t.Fatalf("JSON body sent as %q: %d %s", ct, rec.Code, rec.Body)
		}
	}

	req := newRequest(t, http.MethodPut, instPath, `{}`)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	rec := newRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("json with charset: %d %s", rec.Code, rec.Body)
	}
	// No body needs no Content-Type.
	req = newRequest(t, http.MethodDelete, instPath, ``)
	req.Header.Del("Content-Type")
	rec = newRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("DELETE without a body: %d %s", rec.Code, rec.Body)
	}

	if n := len(node.calls()); n != 2 {
		t.Fatalf("%d commands applied, want the 2 good ones", n)
	}

	// The limit is configurable.
	cfg := testConfig(node, seededReader())
	cfg.MaxBodyBytes = 16
	h = mustNew(t, cfg)
	if resp := do(t, h, http.MethodPut, instPath, `{"metadata":{"a":"bcdefgh"}}`); resp.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("configured limit: %d %s", resp.Code, resp.Body)
	}
}

// TestValidation_DeletePublicNamespaceIsConflict checks "public" cannot be deleted and
// the refusal never reaches the log.
func TestValidation_DeletePublicNamespaceIsConflict(t *testing.T) {
	node := newLeaderNode("n1")
	h := mustNew(t, testConfig(node, seededReader()))
	resp := do(t, h, http.MethodDelete, "/v1/namespaces/public", nil)
	if resp.Code != http.StatusConflict || resp.errorBody(t).Code != api.CodeConflict {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
	if n := len(node.calls()); n != 0 {
		t.Fatalf("%d applies", n)
	}
}
