package healthcheck

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/internal/mariadbtest"
	"github.com/rosterhq/roster/model"
)

func TestMySQLProbe(t *testing.T) {
	db := mariadbtest.Start(t)
	const password = "pr0be-S3cret-xyzzy"
	db.CreateUser(t, "probe", password)
	c := mustNewChecker(t, Config{})
	probe := func(f func(*model.HealthCheck)) outcome {
		hc := model.HealthCheck{Type: model.CheckMySQL, User: "probe", Password: password,
			Interval: model.Duration(10 * time.Second), Timeout: model.Duration(5 * time.Second), Rise: 1, Fall: 1}
		if f != nil {
			f(&hc)
		}
		if err := model.AdmitHealthCheck(hc.WithDefaults()); err != nil {
			t.Fatal(err)
		}
		return c.probe(context.Background(), newSpec(hc), db.Addr, "")
	}
	noSecret := func(o outcome) {
		t.Helper()
		if strings.Contains(fmt.Sprintf("%+v", o), password) || strings.Contains(o.err, "wrong") {
			t.Fatalf("the outcome shows the password: %+v", o)
		}
	}
	for _, tc := range []struct {
		name  string
		f     func(*model.HealthCheck)
		class string
		err   string
	}{
		{"default query", nil, OutcomeSuccess, ""},
		{"query refused by privileges", func(h *model.HealthCheck) {
			h.Query = "SELECT user, host FROM mysql.user WHERE 1 = 0 UNION SELECT 'a', 'b'"
		}, OutcomeQuery, "query failed (MySQL error 1142)"},
		{"query with rows", func(h *model.HealthCheck) { h.Query = "SELECT 1 UNION SELECT 2" }, OutcomeSuccess, ""},
		{"statement without result", func(h *model.HealthCheck) { h.Query = "DO 1" }, OutcomeSuccess, ""},
		{"wrong password", func(h *model.HealthCheck) { h.Password = "wrong-" + password }, OutcomeAuth, "access denied (MySQL error 1045)"},
		{"no password", func(h *model.HealthCheck) { h.Password = "" }, OutcomeAuth, "access denied (MySQL error 1045)"},
		{"unknown user", func(h *model.HealthCheck) { h.User = "nobody" }, OutcomeAuth, "access denied (MySQL error 1045)"},
		{"query error", func(h *model.HealthCheck) { h.Query = "SELECT * FROM no_such_db.t" }, OutcomeQuery, ""},
		{"syntax error", func(h *model.HealthCheck) { h.Query = "SELEKT 1" }, OutcomeQuery, "query failed (MySQL error 1064)"},
		{"query timeout", func(h *model.HealthCheck) {
			h.Query, h.Timeout = "SELECT SLEEP(5)", model.Duration(300*time.Millisecond)
		}, OutcomeTimeout, "timeout after 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := probe(tc.f)
			if o.class != tc.class || o.ok != (tc.class == OutcomeSuccess) || (tc.err != "" && o.err != tc.err) {
				t.Fatalf("outcome %+v, want class %q error %q", o, tc.class, tc.err)
			}
			noSecret(o)
		})
	}

	db.Stop()
	o := probe(nil)
	if o.ok || o.class != OutcomeRefused {
		t.Fatalf("after the server stopped: %+v", o)
	}
	noSecret(o)
}
