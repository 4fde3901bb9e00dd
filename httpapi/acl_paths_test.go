package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// aclAPI is the native API with ACLs on over a real store that holds the namespaces
// "secret" and "public" (a service svc with a NONE cluster and one instance each) and
// two tokens: reader ("*": read, "secret": none) and writer ("*": write, "secret": read).
type aclAPI struct {
	h              http.Handler
	reader, writer string
}

func newACLAPI(tb testing.TB) *aclAPI { return newACLAPIOn(tb, newLeaderNode("n1")) }

// newACLAPIOn is newACLAPI on the consensus fake node.
func newACLAPIOn(tb testing.TB, node testNode) *aclAPI {
	tb.Helper()
	st, err := store.Open(filepath.Join(tb.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	a := &aclAPI{reader: "11111111-1111-4111-8111-111111111111", writer: "22222222-2222-4222-8222-222222222222"}
	tok := func(accessor, secret string, rules acl.Rules, mgmt bool) acl.Token {
		return acl.Token{AccessorID: accessor, SecretHash: acl.HashSecret(secret), Rules: rules, Management: mgmt}
	}
	err = st.Update(func(tx *store.Txn) error {
		if err := tx.ACLBootstrap(2, tok("33333333-3333-4333-8333-333333333333", "44444444-4444-4444-8444-444444444444", acl.Rules{}, true)); err != nil {
			return err
		}
		if err := tx.CreateToken(3, tok("55555555-5555-4555-8555-555555555555", a.reader,
			acl.Rules{Namespaces: map[string]acl.Access{"*": acl.Read, "secret": acl.None}}, false)); err != nil {
			return err
		}
		return tx.CreateToken(4, tok("66666666-6666-4666-8666-666666666666", a.writer,
			acl.Rules{Namespaces: map[string]acl.Access{"*": acl.Write, "secret": acl.Read}}, false))
	})
	if err != nil {
		tb.Fatal(err)
	}
	idx := uint64(10)
	if err := st.UpsertNamespace(idx, model.Namespace{ID: "secret", Name: "secret"}); err != nil {
		tb.Fatal(err)
	}
	for _, ns := range []string{"secret", "public"} {
		idx++
		c := model.Cluster{Namespace: ns, Group: model.DefaultGroup, Service: "svc", Name: model.DefaultCluster,
			HealthCheck: model.HealthCheck{Type: model.CheckNone}.WithDefaults()}
		if err := st.UpsertCluster(idx, c); err != nil {
			tb.Fatal(err)
		}
		idx++
		in := model.Instance{Namespace: ns, Group: model.DefaultGroup, Service: "svc", IP: "127.0.0.1", Port: 1,
			Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true, Metadata: map[string]string{"k": ns}}
		if err := st.RegisterInstance(idx, in); err != nil {
			tb.Fatal(err)
		}
	}
	reg, err := registry.New(registry.Config{Settings: st, Raft: node, ACLEnabled: true, Tokens: st})
	if err != nil {
		tb.Fatal(err)
	}
	cfg := testConfig(node, st)
	cfg.Registry = reg
	h, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	a.h = h
	return a
}

// aclPathRoutes are the reads of a namespace's data; %s is the namespace segment.
var aclPathRoutes = []string{
	"/v1/namespaces/%s",
	"/v1/namespaces/%s/services",
	"/v1/namespaces/%s/groups/DEFAULT_GROUP/services/svc",
	"/v1/namespaces/%s/groups/DEFAULT_GROUP/services/svc/clusters",
	"/v1/namespaces/%s/groups/DEFAULT_GROUP/services/svc/clusters/DEFAULT",
	"/v1/namespaces/%s/groups/DEFAULT_GROUP/services/svc/instances",
	"/v1/namespaces/%s/groups/DEFAULT_GROUP/services/svc/instances/127.0.0.1:1",
	"/v1/namespaces/%s/groups/DEFAULT_GROUP/services/svc/health",
}

// decision is what the API decided for a request: the status and, for an error, its
// code and field.
type decision struct {
	status      int
	code, field string
}

// decide sends GET target (the request line's target, as a client wrote it) with the
// token secret; ok is false when target is not a request Go's server would accept.
func (a *aclAPI) decide(method, target, secret string) (decision, bool) {
	req, err := http.NewRequest(method, "http://roster.test"+target, nil)
	if err != nil || req.URL.RawQuery != "" || req.URL.Fragment != "" {
		return decision{}, false
	}
	req.Header.Set(api.HeaderToken, secret)
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	d := decision{status: rec.Code}
	if rec.Code != http.StatusOK {
		var e api.ErrorBody
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		d.code, d.field = e.Error.Code, e.Error.Field
	}
	return d, true
}

// FuzzEncodedNamespace: whatever the spelling of the namespace segment of a route, the
// route checker (the permission the route needs, the registry's own check, the
// handler's) decides as it does for the canonical spelling of the name the segment
// decodes to: a percent-encoded "secret" is refused to a token that may not read
// "secret" exactly as "secret" is.
func FuzzEncodedNamespace(f *testing.F) {
	for _, seed := range []string{"secret", "s%65cret", "S%65CRET", "%73%65%63%72%65%74", "%73%45%63%52%65%74",
		"s%2565cret", "%2e%2e", "%2E", "public", "pub%6Cic", "a%2Fb", "s%00", "%ff", "%C3%A9", "s%zz"} {
		f.Add(seed, uint8(0), false)
	}
	a := newACLAPI(f)
	f.Fuzz(func(t *testing.T, seg string, route uint8, writer bool) {
		if seg == "" || strings.ContainsAny(seg, "/?#") {
			return // another path, or not a path segment at all
		}
		secret := a.reader
		if writer {
			secret = a.writer
		}
		tmpl := aclPathRoutes[int(route)%len(aclPathRoutes)]
		name, err := url.PathUnescape(seg)
		if err != nil {
			return // Go's server refuses such a request line before any handler (400)
		}
		got, ok := a.decide(http.MethodGet, strings.Replace(tmpl, "%s", seg, 1), secret)
		if !ok {
			return
		}
		want, ok := a.decide(http.MethodGet, strings.Replace(tmpl, "%s", url.PathEscape(name), 1), secret)
		if !ok {
			t.Fatalf("the canonical spelling %q of %q is no request", url.PathEscape(name), name)
		}
		if got != want {
			t.Fatalf("GET %s: %+v, but %+v for the name it decodes to (%q)", strings.Replace(tmpl, "%s", seg, 1), got, want, name)
		}
		if name == "secret" && !writer && got.status != http.StatusForbidden {
			t.Fatalf("GET %s as a token without read on secret: %+v, want 403", strings.Replace(tmpl, "%s", seg, 1), got)
		}
	})
}

// The route checker, in process: an encoded "secret" is refused like "secret" on every
// read, the same name is granted to a token that may read it, and a path whose raw
// spelling is no valid encoding (which only a proxy or an in-process caller can hand
// over: Go's server refuses such a request line) is a 400 naming the parameter.
func TestRoutes_EncodedNamespaceIsDecidedOnItsName(t *testing.T) {
	a := newACLAPI(t)
	for _, tmpl := range aclPathRoutes {
		for _, seg := range []string{"secret", "s%65cret", "%73ecret", "secre%74", "%73%65%63%72%65%74"} {
			p := strings.Replace(tmpl, "%s", seg, 1)
			if d, _ := a.decide(http.MethodGet, p, a.reader); d.status != http.StatusForbidden || d.code != api.CodePermissionDenied {
				t.Errorf("GET %s as reader: %+v, want 403 permission_denied", p, d)
			}
			if d, _ := a.decide(http.MethodGet, p, a.writer); d.status != http.StatusOK && !(strings.HasSuffix(tmpl, "/health") && d.status == http.StatusServiceUnavailable) {
				t.Errorf("GET %s as writer: %+v, want 200", p, d)
			}
		}
	}
	// Mixed-case hex of a name the reader may read: the same answer as the plain name.
	for _, tmpl := range aclPathRoutes {
		want, _ := a.decide(http.MethodGet, strings.Replace(tmpl, "%s", "public", 1), a.reader)
		for _, seg := range []string{"pub%6cic", "pub%6Cic", "%70%75%62%6C%69%63"} {
			p := strings.Replace(tmpl, "%s", seg, 1)
			if d, _ := a.decide(http.MethodGet, p, a.reader); d != want {
				t.Errorf("GET %s as reader: %+v, want %+v as for public", p, d, want)
			}
		}
	}
	// Writes: a "*" write rule does not reach "secret" through an encoded name either.
	p := "/v1/namespaces/s%65cret/groups/DEFAULT_GROUP/services/svc/instances/127.0.0.1:2"
	req := httptest.NewRequest(http.MethodPut, p, strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(api.HeaderToken, a.writer)
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("PUT %s as writer: %d %s, want 403", p, rec.Code, rec.Body)
	}

	req = httptest.NewRequest(http.MethodGet, "/v1/namespaces/x/services", nil)
	req.URL.RawPath = "/v1/namespaces/s%zzcret/services"
	req.Header.Set(api.HeaderToken, a.writer)
	rec = httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	var e api.ErrorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &e)
	if rec.Code != http.StatusBadRequest || e.Error.Field != "namespace" || !strings.Contains(e.Error.Message, "percent-encoding") {
		t.Fatalf("a path that is no valid encoding: %d %s, want 400 naming the namespace", rec.Code, rec.Body)
	}
}
