package openapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/nacos/internal/nacostesting"
	"github.com/rosterhq/roster/nacos/udppush"
	"github.com/rosterhq/roster/store"
)

// withACL makes a test API's registry enforce ACLs against the API's store.
func withACL(t testing.TB) func(*store.Store, *Config) {
	return func(st *store.Store, cfg *Config) {
		cfg.Registry = nacostesting.NewRegistry(t, st, cfg.Node.(*nacostesting.Node), true)
	}
}

// newACLAPI is the Nacos API of a leader with ACLs on and bootstrapped; its debug log
// goes to the returned buffer.
func newACLAPI(t *testing.T) (http.Handler, *store.Store, *nacostesting.Node, nacostesting.Tokens, *nacostesting.SyncBuffer) {
	t.Helper()
	logs := &nacostesting.SyncBuffer{}
	h, st, node := newTestAPIWith(t, "n1", nil, func(st *store.Store, cfg *Config) {
		withACL(t)(st, cfg)
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	return h, st, node, nacostesting.BootstrapTokens(t, node), logs
}

// checkRefused checks an access-control refusal in Nacos's shape: 403 and msg, as
// Spring's error body on v1 and as the envelope with code 10001 on v2.
func checkRefused(t *testing.T, what string, resp nacostesting.Response, v2 bool, path, msg string) {
	t.Helper()
	if resp.Code != http.StatusForbidden {
		t.Errorf("%s: %d %s, want 403 %q", what, resp.Code, resp.Body, msg)
		return
	}
	if v2 {
		var env nacos.Result
		if err := json.Unmarshal(resp.Body, &env); err != nil || env.Code != nacos.CodeAccessDenied || env.Message != "access denied" || env.Data != msg {
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
			tok   nacostesting.Token
			admin bool
		}{{tok.Mgmt, true}, {tok.Reader, false}} {
			resp := nacostesting.MustNacos(t, h, http.MethodPost, path, "username="+tc.tok.Accessor+"&password="+tc.tok.Secret, http.StatusOK)
			var got map[string]any
			resp.Decode(t, &got)
			want := map[string]any{"accessToken": tc.tok.Secret, "tokenTtl": float64(tokenTTL), "globalAdmin": tc.admin, "username": tc.tok.Accessor}
			if mustJSON(t, got) != mustJSON(t, want) {
				t.Fatalf("login at %s: %s, want %s", path, resp.Body, mustJSON(t, want))
			}
			if resp.Header.Get("Cache-Control") != "no-store" {
				t.Fatalf("login answer cacheable: %v", resp.Header)
			}
		}
		// Credentials in the query string are read as Nacos's @RequestParam reads them.
		nacostesting.MustNacos(t, h, http.MethodPost, path+"?username="+tok.Reader.Accessor+"&password="+tok.Reader.Secret, "", http.StatusOK)

		other, _ := acl.NewID()
		for name, form := range map[string]string{
			"wrong password":              "username=" + tok.Reader.Accessor + "&password=" + other,
			"unknown username":            "username=" + other + "&password=" + tok.Reader.Secret,
			"another token's accessor id": "username=" + tok.Mgmt.Accessor + "&password=" + tok.Reader.Secret,
			"secret as username":          "username=" + tok.Reader.Secret + "&password=" + tok.Reader.Secret,
			"no password":                 "username=" + tok.Reader.Accessor,
			"blank password":              "username=" + tok.Reader.Accessor + "&password=",
			"no username":                 "password=" + tok.Reader.Secret,
			"nothing":                     "",
		} {
			resp := nacostesting.Do(t, h, http.MethodPost, path, form)
			if resp.Code != http.StatusForbidden || string(resp.Body) != "user not found!" ||
				!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
				t.Errorf("login with %s: %d %q (%s), want 403 user not found!", name, resp.Code, resp.Body, resp.Header.Get("Content-Type"))
			}
		}
	}
	// The token answered is the token every route takes.
	var login loginAnswer
	nacostesting.MustNacos(t, h, http.MethodPost, "/nacos/v1/auth/login", "username="+tok.Reader.Accessor+"&password="+tok.Reader.Secret, http.StatusOK).Decode(t, &login)
	if resp := nacostesting.As(t, h, http.MethodGet, "/nacos/v1/ns/service/list?pageNo=1&pageSize=10", "", "query", login.AccessToken); resp.Code != http.StatusOK {
		t.Fatalf("a read with the login's token: %d %s", resp.Code, resp.Body)
	}
	for _, s := range []string{tok.Mgmt.Secret, tok.Reader.Secret} {
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
	resp := nacostesting.Do(t, h, http.MethodPost, "/nacos/v1/auth/login", "username="+secret+"&password="+secret)
	if resp.Code != http.StatusForbidden || string(resp.Body) != "user not found!" {
		t.Fatalf("login before the bootstrap: %d %s", resp.Code, resp.Body)
	}
	checkRefused(t, "a read before the bootstrap", nacostesting.Do(t, h, http.MethodGet, "/nacos/v1/ns/instance/list?serviceName=a", ""),
		false, "/nacos/v1/ns/instance/list", "user not found!")
	checkRefused(t, "a read with a token before the bootstrap", nacostesting.As(t, h, http.MethodGet, "/nacos/v2/ns/instance/list?serviceName=a", "", "query", secret),
		true, "", "token invalid!")
	if n := len(node.Applied()); n != 0 {
		t.Fatalf("%d entries applied", n)
	}
}

// TestNacosACL_TokenPlacesAndShapes: every place a Nacos client or a Roster client puts
// a token is read — accessToken in the query string or the form body, X-Roster-Token,
// Authorization: Bearer — and every refusal (no token, an unknown one, one without the
// right) is Nacos's 403 with its text, before anything is written.
func TestNacosACL_TokenPlacesAndShapes(t *testing.T) {
	h, st, node, tok, _ := newACLAPI(t)
	register := func(place string, tk nacostesting.Token, port string) nacostesting.Response {
		return nacostesting.As(t, h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.0.0.1&ephemeral=false&port="+port, place, tk.Secret)
	}
	for i, place := range []string{"query", "form", "header", "bearer"} {
		port := []string{"1", "2", "3", "4"}[i]
		if resp := register(place, tok.PublicWriter, port); resp.Code != http.StatusOK || string(resp.Body) != "ok" {
			t.Fatalf("register with the token in the %s: %d %s", place, resp.Code, resp.Body)
		}
		resp := nacostesting.As(t, h, http.MethodGet, "/nacos/v1/ns/instance/list?serviceName=orders", "", place, tok.Reader.Secret)
		var info nacos.ServiceInfo
		resp.Decode(t, &info)
		if resp.Code != http.StatusOK || len(info.Hosts) != i+1 {
			t.Fatalf("list with the token in the %s: %d %s", place, resp.Code, resp.Body)
		}
	}
	// The query string's token wins over the form's, as every parameter does.
	if resp := nacostesting.As(t, h, http.MethodPost, "/nacos/v1/ns/instance?accessToken="+tok.Reader.Secret,
		"serviceName=orders&ip=127.0.0.1&ephemeral=false&port=9", "form", tok.PublicWriter.Secret); resp.Code != http.StatusForbidden {
		t.Fatalf("a write whose query token may only read: %d %s", resp.Code, resp.Body)
	}

	applied := len(node.Applied())
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
		checkRefused(t, tc.name+" without a token", nacostesting.Do(t, h, tc.method, tc.path, tc.form), tc.v2, tc.path, "user not found!")
		checkRefused(t, tc.name+" with an unknown token", nacostesting.As(t, h, tc.method, tc.path, tc.form, "form", unknown), tc.v2, tc.path, "token invalid!")
		checkRefused(t, tc.name+" with a read token", nacostesting.As(t, h, tc.method, tc.path, tc.form, "query", tok.Reader.Secret), tc.v2, tc.path, "authorization failed!")
		checkRefused(t, tc.name+" with a token for dev only", nacostesting.As(t, h, tc.method, tc.path, tc.form, "header", tok.DevWriter.Secret), tc.v2, tc.path, "authorization failed!")
		// namespaceId decides: the dev writer may write dev, not public.
		checkRefused(t, tc.name+" in public named explicitly", nacostesting.As(t, h, tc.method, tc.path, tc.form+"&namespaceId=public", "bearer", tok.DevWriter.Secret),
			tc.v2, tc.path, "authorization failed!")
	}
	if got := len(node.Applied()); got != applied {
		t.Fatalf("refused writes applied %d entries", got-applied)
	}
	if _, list, err := st.Instances(nil, model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders"}); err != nil || len(list) != 4 {
		t.Fatalf("instances after the refusals: %v %v", list, err)
	}
	// The dev writer writes dev (the namespace must exist first: an operator's write).
	mustNacosAs := func(method, target, form string, tk nacostesting.Token) {
		t.Helper()
		if resp := nacostesting.As(t, h, method, target, form, "form", tk.Secret); resp.Code != http.StatusOK {
			t.Fatalf("%s %s as %s: %d %s", method, target, tk.Accessor, resp.Code, resp.Body)
		}
	}
	if _, err := node.Apply(context.Background(), fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "dev"}}); err != nil {
		t.Fatal(err)
	}
	mustNacosAs(http.MethodPost, "/nacos/v2/ns/instance", "namespaceId=dev&serviceName=orders&ip=127.0.0.1&port=1&ephemeral=false", tok.DevWriter)
	// Reads of dev by the dev writer, of anything by the reader; not of public by the dev writer.
	mustNacosAs(http.MethodGet, "/nacos/v1/ns/instance/list?namespaceId=dev&serviceName=orders", "", tok.DevWriter)
	checkRefused(t, "a read of public by the dev writer", nacostesting.As(t, h, http.MethodGet, "/nacos/v1/ns/instance/list?serviceName=orders", "", "query", tok.DevWriter.Secret),
		false, "/nacos/v1/ns/instance/list", "authorization failed!")
	// Operator routes need operator access, whatever the namespace rights.
	mustNacosAs(http.MethodGet, "/nacos/v1/ns/operator/metrics", "", tok.Reader)
	checkRefused(t, "metrics by a namespace writer", nacostesting.As(t, h, http.MethodGet, "/nacos/v2/ns/operator/metrics", "", "query", tok.PublicWriter.Secret),
		true, "", "authorization failed!")
	checkRefused(t, "a switch change by a reader", nacostesting.As(t, h, http.MethodPut, "/nacos/v1/ns/operator/switches", "entry=a&value=b", "query", tok.Reader.Secret),
		false, "/nacos/v1/ns/operator/switches", "authorization failed!")
	// With the right the switch change gets its own refusal: the switches are read-only.
	if resp := nacostesting.As(t, h, http.MethodPut, "/nacos/v1/ns/operator/switches", "entry=a&value=b", "query", tok.Mgmt.Secret); resp.Code != http.StatusForbidden ||
		!strings.Contains(string(resp.Body), "read-only") {
		t.Fatalf("a switch change by the management token: %d %s", resp.Code, resp.Body)
	}
	var sw switches
	nacostesting.As(t, h, http.MethodGet, "/nacos/v1/ns/operator/switches", "", "query", tok.Reader.Secret).Decode(t, &sw)
	if !sw.EnableAuthentication {
		t.Fatalf("switches with ACLs on: %+v", sw)
	}
	// Malformed parameters of a caller with a token are answered as the route answers them.
	if resp := nacostesting.As(t, h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.0.0.1&port=1&metadata=%ff", "header", tok.PublicWriter.Secret); resp.Code != http.StatusBadRequest ||
		!strings.Contains(string(resp.Body), "metadata") {
		t.Fatalf("a malformed form with a token: %d %s", resp.Code, resp.Body)
	}
}

// TestNacosACL_PushOnlyForReaders: a v1 instance list by a caller that may not read
// the namespace records no UDP subscriber; one by a reader does and is pushed the next
// change; once the reader's token is deleted, the subscriber is dropped at the next
// change instead of pushed.
func TestNacosACL_PushOnlyForReaders(t *testing.T) {
	a := newPushAPIWith(t, "n1", nil, udppush.Options{}, false, withACL(t))
	tok := nacostesting.BootstrapTokens(t, a.node)
	if resp := nacostesting.As(t, a.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.0.0.1&port=1&ephemeral=false", "form", tok.Mgmt.Secret); resp.Code != http.StatusOK {
		t.Fatalf("register: %d %s", resp.Code, resp.Body)
	}
	c := nacostesting.NewPushClient(t, "127.0.0.1")
	query := func(token string) nacostesting.Response {
		u := a.url + "/nacos/v1/ns/instance/list?serviceName=orders&udpPort=" + strconv.Itoa(int(c.Addr().Port()))
		if token != "" {
			u += "&accessToken=" + token
		}
		return getAs(t, u, nacostesting.GoAgent)
	}
	for name, token := range map[string]string{"no token": "", "a token for dev only": tok.DevWriter.Secret, "an unknown token": tok.Reader.Accessor} {
		if resp := query(token); resp.Code != http.StatusForbidden {
			t.Fatalf("list with %s: %d %s", name, resp.Code, resp.Body)
		}
		if n := a.push.Count(); n != 0 {
			t.Fatalf("list with %s recorded %d subscribers", name, n)
		}
	}
	if resp := query(tok.Reader.Secret); resp.Code != http.StatusOK {
		t.Fatalf("list by a reader: %d %s", resp.Code, resp.Body)
	}
	if n := a.push.Count(); n != 1 {
		t.Fatalf("a reader's list recorded %d subscribers", n)
	}
	if resp := nacostesting.As(t, a.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.0.0.1&port=2&ephemeral=false", "form", tok.Mgmt.Secret); resp.Code != http.StatusOK {
		t.Fatal(resp.Code)
	}
	r := c.Next()
	c.Ack(r)
	if len(r.Info.Hosts) != 2 {
		t.Fatalf("push %+v", r.Info)
	}
	wait.For(t, 5*time.Second, "the ack", func() bool { return nacostesting.Counter(t, a.reg, "roster_nacos_push_acked_total") == 1 })

	nacostesting.DeleteToken(t, a.node, tok.Reader)
	sent := nacostesting.Counter(t, a.reg, "roster_nacos_push_sent_total")
	if resp := nacostesting.As(t, a.h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.0.0.1&port=3&ephemeral=false", "form", tok.Mgmt.Secret); resp.Code != http.StatusOK {
		t.Fatal(resp.Code)
	}
	wait.For(t, 5*time.Second, "the subscriber of the deleted token to be dropped", func() bool { return a.push.Count() == 0 })
	if got := nacostesting.Counter(t, a.reg, "roster_nacos_push_sent_total"); got != sent {
		t.Fatalf("%v pushes sent after the token was deleted", got-sent)
	}
}
