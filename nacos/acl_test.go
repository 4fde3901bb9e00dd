package nacos

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// testToken is a token of a test API: the login's username and password.
type testToken struct {
	accessor, secret string
}

// aclTokens are the tokens an ACL test API starts with: the management token, one
// that reads every namespace (and operator read), one that writes public and reads the
// rest, and one that writes only namespace dev.
type aclTokens struct {
	mgmt, reader, publicWriter, devWriter testToken
}

// withACL makes a test API's registry enforce ACLs against the API's store.
func withACL(t testing.TB) func(*store.Store, *Config) {
	return func(st *store.Store, cfg *Config) {
		reg, err := registry.New(registry.Config{Settings: st, Raft: cfg.Node.(*testNode), RequestTimeout: 2 * time.Second,
			ACLEnabled: true, Tokens: st})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Registry = reg
	}
}

// newToken commits a token to the test node's state (the bootstrap when bootstrap is
// set) and returns its credentials.
func newToken(t testing.TB, node *testNode, rules acl.Rules, management, bootstrap bool) testToken {
	t.Helper()
	accessor, err := acl.NewID()
	if err != nil {
		t.Fatal(err)
	}
	secret, err := acl.NewID()
	if err != nil {
		t.Fatal(err)
	}
	tok := acl.Token{AccessorID: accessor, SecretHash: acl.HashSecret(secret), Description: "test", Rules: rules, Management: management}
	var cmd fsm.Command = fsm.CreateTokenRequest{Token: tok}
	if bootstrap {
		cmd = fsm.ACLBootstrapRequest{Token: tok}
	}
	if _, err := node.Apply(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
	return testToken{accessor: accessor, secret: secret}
}

// deleteToken deletes a token from the test node's state.
func deleteToken(t testing.TB, node *testNode, tok testToken) {
	t.Helper()
	if _, err := node.Apply(context.Background(), fsm.DeleteTokenRequest{AccessorID: tok.accessor}); err != nil {
		t.Fatal(err)
	}
}

// bootstrapTokens bootstraps ACLs on the test node and creates the other tokens.
func bootstrapTokens(t testing.TB, node *testNode) aclTokens {
	t.Helper()
	return aclTokens{
		mgmt:         newToken(t, node, acl.Rules{}, true, true),
		reader:       newToken(t, node, acl.Rules{Namespaces: map[string]acl.Access{"*": acl.Read}, Operator: acl.Read}, false, false),
		publicWriter: newToken(t, node, acl.Rules{Namespaces: map[string]acl.Access{"public": acl.Write, "*": acl.Read}}, false, false),
		devWriter:    newToken(t, node, acl.Rules{Namespaces: map[string]acl.Access{"dev": acl.Write}}, false, false),
	}
}

// syncBuffer is a log sink tests read while the API writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newACLAPI is the Nacos API of a leader with ACLs on and bootstrapped; its debug log
// goes to the returned buffer.
func newACLAPI(t *testing.T) (http.Handler, *store.Store, *testNode, aclTokens, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	h, st, node := newTestAPIWith(t, "n1", nil, func(st *store.Store, cfg *Config) {
		withACL(t)(st, cfg)
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	return h, st, node, bootstrapTokens(t, node), logs
}

// nacosAs sends a Nacos request presenting token in the named place: "query" and
// "form" (accessToken), "header" (X-Roster-Token), "bearer" (Authorization), or "" for
// no token.
func nacosAs(t *testing.T, h http.Handler, method, target, form, place, token string) response {
	t.Helper()
	switch place {
	case "query":
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + "accessToken=" + url.QueryEscape(token)
	case "form":
		if form != "" {
			form += "&"
		}
		form += "accessToken=" + url.QueryEscape(token)
	}
	req := httptest.NewRequest(method, target, strings.NewReader(form))
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	switch place {
	case "header":
		req.Header.Set("X-Roster-Token", token)
	case "bearer":
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{Code: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}

// checkRefused checks an access-control refusal in Nacos's shape: 403 and msg, as
// Spring's error body on v1 and as the envelope with code 10001 on v2.
func checkRefused(t *testing.T, what string, resp response, v2 bool, path, msg string) {
	t.Helper()
	if resp.Code != http.StatusForbidden {
		t.Errorf("%s: %d %s, want 403 %q", what, resp.Code, resp.Body, msg)
		return
	}
	if v2 {
		var env Result
		if err := json.Unmarshal(resp.Body, &env); err != nil || env.Code != CodeAccessDenied || env.Message != "access denied" || env.Data != msg {
			t.Errorf("%s: v2 body %s, want code 10001, message access denied, data %q", what, resp.Body, msg)
		}
		return
	}
	var body springErrorBody
	if err := json.Unmarshal(resp.Body, &body); err != nil || body.Status != 403 || body.Error != "Forbidden" || body.Message != msg ||
		body.Path != path || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("%s: v1 body %s (%s), want Spring's error body with message %q and path %s", what, resp.Body, resp.Header.Get("Content-Type"), msg, path)
	}
	if _, err := time.Parse(springTimestamp, body.Timestamp); err != nil {
		t.Errorf("%s: timestamp %q: %v", what, body.Timestamp, err)
	}
}

// TestNacosACL_Login: with ACLs on, username is a token's accessor id and password its
// secret; the answer carries the secret as accessToken, tokenTtl and whether the token
// is a management token. Any wrong, missing or mismatched credential is Nacos's failed
// login (403 "user not found!"), the same whichever part was wrong, and no credential
// reaches the log.
func TestNacosACL_Login(t *testing.T) {
	h, _, _, tok, logs := newACLAPI(t)
	for _, path := range []string{"/nacos/v1/auth/login", "/nacos/v1/auth/users/login"} {
		for _, tc := range []struct {
			tok   testToken
			admin bool
		}{{tok.mgmt, true}, {tok.reader, false}} {
			resp := mustNacos(t, h, http.MethodPost, path, "username="+tc.tok.accessor+"&password="+tc.tok.secret, http.StatusOK)
			var got map[string]any
			resp.decode(t, &got)
			want := map[string]any{"accessToken": tc.tok.secret, "tokenTtl": float64(nacosTokenTTL), "globalAdmin": tc.admin, "username": tc.tok.accessor}
			if mustJSON(t, got) != mustJSON(t, want) {
				t.Fatalf("login at %s: %s, want %s", path, resp.Body, mustJSON(t, want))
			}
			if resp.Header.Get("Cache-Control") != "no-store" {
				t.Fatalf("login answer cacheable: %v", resp.Header)
			}
		}
		// Credentials in the query string are read as Nacos's @RequestParam reads them.
		mustNacos(t, h, http.MethodPost, path+"?username="+tok.reader.accessor+"&password="+tok.reader.secret, "", http.StatusOK)

		other, _ := acl.NewID()
		for name, form := range map[string]string{
			"wrong password":              "username=" + tok.reader.accessor + "&password=" + other,
			"unknown username":            "username=" + other + "&password=" + tok.reader.secret,
			"another token's accessor id": "username=" + tok.mgmt.accessor + "&password=" + tok.reader.secret,
			"secret as username":          "username=" + tok.reader.secret + "&password=" + tok.reader.secret,
			"no password":                 "username=" + tok.reader.accessor,
			"blank password":              "username=" + tok.reader.accessor + "&password=",
			"no username":                 "password=" + tok.reader.secret,
			"nothing":                     "",
		} {
			resp := nacosDo(t, h, http.MethodPost, path, form)
			if resp.Code != http.StatusForbidden || string(resp.Body) != "user not found!" ||
				!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
				t.Errorf("login with %s: %d %q (%s), want 403 user not found!", name, resp.Code, resp.Body, resp.Header.Get("Content-Type"))
			}
		}
	}
	// The token answered is the token every route takes.
	var login nacosLoginAnswer
	mustNacos(t, h, http.MethodPost, "/nacos/v1/auth/login", "username="+tok.reader.accessor+"&password="+tok.reader.secret, http.StatusOK).decode(t, &login)
	if resp := nacosAs(t, h, http.MethodGet, "/nacos/v1/ns/service/list?pageNo=1&pageSize=10", "", "query", login.AccessToken); resp.Code != http.StatusOK {
		t.Fatalf("a read with the login's token: %d %s", resp.Code, resp.Body)
	}
	for _, s := range []string{tok.mgmt.secret, tok.reader.secret} {
		if strings.Contains(logs.String(), s) {
			t.Fatalf("a secret reached the log:\n%s", logs.String())
		}
	}
}

// TestNacosACL_LoginBeforeBootstrap: with ACLs on and no token yet, a login and every
// route are refused as Nacos refuses an unknown user.
func TestNacosACL_LoginBeforeBootstrap(t *testing.T) {
	h, _, node := newTestAPIWith(t, "n1", nil, withACL(t))
	secret, _ := acl.NewID()
	resp := nacosDo(t, h, http.MethodPost, "/nacos/v1/auth/login", "username="+secret+"&password="+secret)
	if resp.Code != http.StatusForbidden || string(resp.Body) != "user not found!" {
		t.Fatalf("login before the bootstrap: %d %s", resp.Code, resp.Body)
	}
	checkRefused(t, "a read before the bootstrap", nacosDo(t, h, http.MethodGet, "/nacos/v1/ns/instance/list?serviceName=a", ""),
		false, "/nacos/v1/ns/instance/list", "user not found!")
	checkRefused(t, "a read with a token before the bootstrap", nacosAs(t, h, http.MethodGet, "/nacos/v2/ns/instance/list?serviceName=a", "", "query", secret),
		true, "", "token invalid!")
	if n := len(appliedTypes(node)); n != 0 {
		t.Fatalf("%d entries applied", n)
	}
}

// TestNacosACL_TokenPlacesAndShapes: every place a Nacos client or a Roster client puts
// a token is read — accessToken in the query string or the form body, X-Roster-Token,
// Authorization: Bearer — and every refusal (no token, an unknown one, one without the
// right) is Nacos's 403 with its text, before anything is written.
func TestNacosACL_TokenPlacesAndShapes(t *testing.T) {
	h, st, node, tok, _ := newACLAPI(t)
	register := func(place string, tk testToken, port string) response {
		return nacosAs(t, h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.0.0.1&ephemeral=false&port="+port, place, tk.secret)
	}
	for i, place := range []string{"query", "form", "header", "bearer"} {
		port := []string{"1", "2", "3", "4"}[i]
		if resp := register(place, tok.publicWriter, port); resp.Code != http.StatusOK || string(resp.Body) != "ok" {
			t.Fatalf("register with the token in the %s: %d %s", place, resp.Code, resp.Body)
		}
		resp := nacosAs(t, h, http.MethodGet, "/nacos/v1/ns/instance/list?serviceName=orders", "", place, tok.reader.secret)
		var info nacosServiceInfo
		resp.decode(t, &info)
		if resp.Code != http.StatusOK || len(info.Hosts) != i+1 {
			t.Fatalf("list with the token in the %s: %d %s", place, resp.Code, resp.Body)
		}
	}
	// The query string's token wins over the form's, as every parameter does.
	if resp := nacosAs(t, h, http.MethodPost, "/nacos/v1/ns/instance?accessToken="+tok.reader.secret,
		"serviceName=orders&ip=127.0.0.1&ephemeral=false&port=9", "form", tok.publicWriter.secret); resp.Code != http.StatusForbidden {
		t.Fatalf("a write whose query token may only read: %d %s", resp.Code, resp.Body)
	}

	applied := len(appliedTypes(node))
	unknown, _ := acl.NewID()
	for _, tc := range []struct {
		name, method, path, form string
		v2                       bool
	}{
		{"v1 register", http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.0.0.1&port=10&ephemeral=false", false},
		{"v2 register", http.MethodPost, "/nacos/v2/ns/instance", "serviceName=orders&ip=127.0.0.1&port=10&ephemeral=false", true},
		{"v1 deregister", http.MethodDelete, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.0.0.1&port=1", false},
		{"v2 service delete", http.MethodDelete, "/nacos/v2/ns/service", "serviceName=orders", true},
		{"v1 cluster", http.MethodPut, "/nacos/v1/ns/cluster", `serviceName=orders&clusterName=c&healthChecker={"type":"NONE"}`, false},
		{"v1 health", http.MethodPut, "/nacos/v1/ns/health/instance", "serviceName=orders&ip=127.0.0.1&port=1&healthy=false", false},
	} {
		checkRefused(t, tc.name+" without a token", nacosDo(t, h, tc.method, tc.path, tc.form), tc.v2, tc.path, "user not found!")
		checkRefused(t, tc.name+" with an unknown token", nacosAs(t, h, tc.method, tc.path, tc.form, "form", unknown), tc.v2, tc.path, "token invalid!")
		checkRefused(t, tc.name+" with a read token", nacosAs(t, h, tc.method, tc.path, tc.form, "query", tok.reader.secret), tc.v2, tc.path, "authorization failed!")
		checkRefused(t, tc.name+" with a token for dev only", nacosAs(t, h, tc.method, tc.path, tc.form, "header", tok.devWriter.secret), tc.v2, tc.path, "authorization failed!")
		// namespaceId decides: the dev writer may write dev, not public.
		checkRefused(t, tc.name+" in public named explicitly", nacosAs(t, h, tc.method, tc.path, tc.form+"&namespaceId=public", "bearer", tok.devWriter.secret),
			tc.v2, tc.path, "authorization failed!")
	}
	if got := len(appliedTypes(node)); got != applied {
		t.Fatalf("refused writes applied %d entries", got-applied)
	}
	if _, list, err := st.Instances(nil, model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders"}); err != nil || len(list) != 4 {
		t.Fatalf("instances after the refusals: %v %v", list, err)
	}
	// The dev writer writes dev (the namespace must exist first: an operator's write).
	mustNacosAs := func(method, target, form string, tk testToken) {
		t.Helper()
		if resp := nacosAs(t, h, method, target, form, "form", tk.secret); resp.Code != http.StatusOK {
			t.Fatalf("%s %s as %s: %d %s", method, target, tk.accessor, resp.Code, resp.Body)
		}
	}
	if _, err := node.Apply(context.Background(), fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "dev"}}); err != nil {
		t.Fatal(err)
	}
	mustNacosAs(http.MethodPost, "/nacos/v2/ns/instance", "namespaceId=dev&serviceName=orders&ip=127.0.0.1&port=1&ephemeral=false", tok.devWriter)
	// Reads of dev by the dev writer, of anything by the reader; not of public by the dev writer.
	mustNacosAs(http.MethodGet, "/nacos/v1/ns/instance/list?namespaceId=dev&serviceName=orders", "", tok.devWriter)
	checkRefused(t, "a read of public by the dev writer", nacosAs(t, h, http.MethodGet, "/nacos/v1/ns/instance/list?serviceName=orders", "", "query", tok.devWriter.secret),
		false, "/nacos/v1/ns/instance/list", "authorization failed!")
	// Operator routes need operator access, whatever the namespace rights.
	mustNacosAs(http.MethodGet, "/nacos/v1/ns/operator/metrics", "", tok.reader)
	checkRefused(t, "metrics by a namespace writer", nacosAs(t, h, http.MethodGet, "/nacos/v2/ns/operator/metrics", "", "query", tok.publicWriter.secret),
		true, "", "authorization failed!")
	checkRefused(t, "a switch change by a reader", nacosAs(t, h, http.MethodPut, "/nacos/v1/ns/operator/switches", "entry=a&value=b", "query", tok.reader.secret),
		false, "/nacos/v1/ns/operator/switches", "authorization failed!")
	// With the right the switch change gets its own refusal: the switches are read-only.
	if resp := nacosAs(t, h, http.MethodPut, "/nacos/v1/ns/operator/switches", "entry=a&value=b", "query", tok.mgmt.secret); resp.Code != http.StatusForbidden ||
		!strings.Contains(string(resp.Body), "read-only") {
		t.Fatalf("a switch change by the management token: %d %s", resp.Code, resp.Body)
	}
	var sw nacosSwitches
	nacosAs(t, h, http.MethodGet, "/nacos/v1/ns/operator/switches", "", "query", tok.reader.secret).decode(t, &sw)
	if !sw.EnableAuthentication {
		t.Fatalf("switches with ACLs on: %+v", sw)
	}
	// Malformed parameters of a caller with a token are answered as the route answers them.
	if resp := nacosAs(t, h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.0.0.1&port=1&metadata=%ff", "header", tok.publicWriter.secret); resp.Code != http.StatusBadRequest ||
		!strings.Contains(string(resp.Body), "metadata") {
		t.Fatalf("a malformed form with a token: %d %s", resp.Code, resp.Body)
	}
}

// TestNacosACL_PushOnlyForReaders: a v1 instance list by a caller that may not read
// the namespace records no UDP subscriber; one by a reader does and is pushed the next
// change; once the reader's token is deleted, the subscriber is dropped at the next
// change instead of pushed.
func TestNacosACL_PushOnlyForReaders(t *testing.T) {
	a := newPushAPIWith(t, "n1", nil, pushOptions{}, false, withACL(t))
	tok := bootstrapTokens(t, a.node)
	if resp := nacosAs(t, a.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.0.0.1&port=1&ephemeral=false", "form", tok.mgmt.secret); resp.Code != http.StatusOK {
		t.Fatalf("register: %d %s", resp.Code, resp.Body)
	}
	c := newPushClient(t, "127.0.0.1")
	query := func(token string) response {
		u := a.url + "/nacos/v1/ns/instance/list?serviceName=orders&udpPort=" + strconv.Itoa(int(c.addr().Port()))
		if token != "" {
			u += "&accessToken=" + token
		}
		return getAs(t, u, goAgent)
	}
	for name, token := range map[string]string{"no token": "", "a token for dev only": tok.devWriter.secret, "an unknown token": tok.reader.accessor} {
		if resp := query(token); resp.Code != http.StatusForbidden {
			t.Fatalf("list with %s: %d %s", name, resp.Code, resp.Body)
		}
		if n := a.push.count(); n != 0 {
			t.Fatalf("list with %s recorded %d subscribers", name, n)
		}
	}
	if resp := query(tok.reader.secret); resp.Code != http.StatusOK {
		t.Fatalf("list by a reader: %d %s", resp.Code, resp.Body)
	}
	if n := a.push.count(); n != 1 {
		t.Fatalf("a reader's list recorded %d subscribers", n)
	}
	if resp := nacosAs(t, a.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.0.0.1&port=2&ephemeral=false", "form", tok.mgmt.secret); resp.Code != http.StatusOK {
		t.Fatal(resp.Code)
	}
	r := c.next()
	c.ack(r)
	if len(r.info.Hosts) != 2 {
		t.Fatalf("push %+v", r.info)
	}
	wait.For(t, 5*time.Second, "the ack", func() bool { return testutil.ToFloat64(a.push.m.acked) == 1 })

	deleteToken(t, a.node, tok.reader)
	sent := testutil.ToFloat64(a.push.m.sent)
	if resp := nacosAs(t, a.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.0.0.1&port=3&ephemeral=false", "form", tok.mgmt.secret); resp.Code != http.StatusOK {
		t.Fatal(resp.Code)
	}
	wait.For(t, 5*time.Second, "the subscriber of the deleted token to be dropped", func() bool { return a.push.count() == 0 })
	if got := testutil.ToFloat64(a.push.m.sent); got != sent {
		t.Fatalf("%v pushes sent after the token was deleted", got-sent)
	}
}
