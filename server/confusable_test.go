package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// confusableName is "orders" with a Cyrillic о (U+043E) in front.
const confusableName = "\u043erders"

// send sends a request with a body of the given type and returns the status and body.
func send(ctx context.Context, t *testing.T, method, u, contentType, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// With --refuse-confusable-names on every server, a write under a service name that
// mixes scripts is refused with a 400 naming the field, on the native API and on both
// Nacos HTTP versions, sent to a follower (which forwards it) as to the leader, and
// nothing is written; a plain name is accepted.
func TestConfusableNames_RefusedWithTheFlag(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts(), func(cfg *server.Config) { cfg.RefuseConfusableNames = true })
	l := c.MustLeader()
	ctx := ctxT(t, 30*time.Second)
	c.WaitSettled()
	r := c.Nodes[l].Server.Node().Raft()
	before := r.LastIndex()
	for _, i := range []int{l, c.Followers()[0]} {
		base := c.Nodes[i].URL()
		code, body := send(ctx, t, http.MethodPut, base+"/v1/namespaces/public/groups/DEFAULT_GROUP/services/"+
			url.PathEscape(confusableName)+"/instances/127.100.0.1:80", "application/json", `{"weight":1}`)
		var e api.ErrorBody
		if code != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error.Field != "service" ||
			!strings.Contains(e.Error.Message, "Cyrillic and Latin") || !strings.Contains(e.Error.Message, "--refuse-confusable-names") {
			t.Errorf("node %d, native register: %d %s; want 400 naming the field service", i, code, body)
		}
		code, body = send(ctx, t, http.MethodPut, base+"/v1/namespaces/public/groups/DEFAULT_GROUP/services/"+
			url.PathEscape("\uff4frders"), "application/json", `{}`)
		if code != http.StatusBadRequest || !strings.Contains(string(body), `"field":"service"`) || !strings.Contains(string(body), "fullwidth") {
			t.Errorf("node %d, native service with a fullwidth form: %d %s", i, code, body)
		}
		form := "serviceName=" + url.QueryEscape(confusableName) + "&ip=127.100.0.1&port=80&ephemeral=false"
		code, body = send(ctx, t, http.MethodPost, base+"/nacos/v1/ns/instance", "application/x-www-form-urlencoded", form)
		if code != http.StatusBadRequest || !strings.HasPrefix(string(body), "caused: Param 'serviceName' is illegal: mixes letters of the Cyrillic and Latin scripts") {
			t.Errorf("node %d, Nacos v1 register: %d %s", i, code, body)
		}
		code, body = send(ctx, t, http.MethodPost, base+"/nacos/v2/ns/instance", "application/x-www-form-urlencoded", form)
		var env struct {
			Code int    `json:"code"`
			Data string `json:"data"`
		}
		if code != http.StatusBadRequest || json.Unmarshal(body, &env) != nil || env.Code != 21000 || !strings.Contains(env.Data, "serviceName") {
			t.Errorf("node %d, Nacos v2 register: %d %s; want 400 with code 21000 naming serviceName", i, code, body)
		}
	}
	if after := r.LastIndex(); after != before {
		t.Fatalf("refused writes moved the Raft log from %d to %d", before, after)
	}
	register(ctx, t, c.Nodes[c.Followers()[0]].Client(), "orders", "127.100.0.1", 80)
	register(ctx, t, c.Nodes[l].Client(), "заказы", "127.100.0.1", 81) // one script: not confusable
}

// Without the flag a confusable name is accepted on every route, and the node that
// admits the write logs a warning once per name.
func TestConfusableNames_AcceptedWithAWarningOncePerName(t *testing.T) {
	logs := &syncLog{}
	c := servertest.New(t, 1, servertest.FastTimeouts(), func(cfg *server.Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	l := c.MustLeader()
	ctx := ctxT(t, 30*time.Second)
	cl := c.Nodes[l].Client()
	register(ctx, t, cl, confusableName, "127.100.0.1", 80)
	register(ctx, t, cl, confusableName, "127.100.0.1", 81)
	form := "serviceName=" + url.QueryEscape(confusableName) + "&ip=127.100.0.1&port=82&ephemeral=false"
	if code, body := send(ctx, t, http.MethodPost, c.Nodes[l].URL()+"/nacos/v1/ns/instance", "application/x-www-form-urlencoded", form); code != http.StatusOK {
		t.Fatalf("Nacos register: %d %s", code, body)
	}
	register(ctx, t, cl, "orders", "127.100.0.1", 80)
	const warning = "a service was registered under a confusable name"
	if n := logs.count(warning); n != 1 {
		t.Fatalf("%d warnings for one confusable name, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `reason="mixes letters of the Cyrillic and Latin scripts"`) {
		t.Fatalf("the warning does not say why:\n%s", logs.String())
	}
	register(ctx, t, cl, "p\u0430yments", "127.100.0.1", 80)
	if n := logs.count(warning); n != 2 {
		t.Fatalf("%d warnings for two confusable names, want 2", n)
	}
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
