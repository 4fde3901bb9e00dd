package registry

import (
	"context"
	"errors"
	"testing"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// oneCluster is a ClusterSource holding at most one cluster.
type oneCluster struct{ c *model.Cluster }

func (o oneCluster) Cluster(_ *store.WatchSet, key model.ServiceKey, name string) (uint64, model.Cluster, error) {
	if o.c == nil || o.c.Name != name || o.c.Service != key.Service {
		return 1, model.Cluster{}, model.ErrNotFound
	}
	return 1, *o.c, nil
}

type noTokens struct{}

func (noTokens) TokenBySecretHash(string) (acl.Token, bool, error) { return acl.Token{}, false, nil }
func (noTokens) ACLBootstrapIndex() (uint64, error)                { return 0, nil }
func (noTokens) Token(*store.WatchSet, string) (uint64, acl.Token, error) {
	return 1, acl.Token{}, model.ErrNotFound
}
func (noTokens) Tokens(*store.WatchSet) (uint64, []acl.Token, error) { return 1, nil, nil }

func mysqlCluster(password string) model.Cluster {
	return model.Cluster{Namespace: "public", Group: "g", Service: "orders", Name: "db",
		HealthCheck: model.HealthCheck{Type: model.CheckMySQL, User: "probe", Password: password}.WithDefaults()}
}

// TestUpsertCluster_Password: "***" keeps the stored password (and is refused when
// there is none), and with ACLs a write that sets, keeps, changes or drops a password
// needs operator write besides the namespace's write.
func TestUpsertCluster_Password(t *testing.T) {
	stored := mysqlCluster("s3cret")
	nsWriter := acl.WithAuthorizer(context.Background(), acl.ForToken(acl.Token{
		Rules: acl.Rules{Namespaces: map[string]acl.Access{"public": acl.Write}}}))
	operator := acl.WithAuthorizer(context.Background(), acl.ForToken(acl.Token{
		Rules: acl.Rules{Namespaces: map[string]acl.Access{"public": acl.Write}, Operator: acl.Write}}))
	tcp := model.Cluster{Namespace: "public", Group: "g", Service: "orders", Name: "db", HealthCheck: model.DefaultHealthCheck()}

	for _, tc := range []struct {
		name     string
		stored   *model.Cluster
		ctx      context.Context
		write    model.Cluster
		applied  string // the password of the applied spec
		wantErr  error
		errField string
	}{
		{"keep with ***", &stored, operator, mysqlCluster("***"), "s3cret", nil, ""},
		{"change", &stored, operator, mysqlCluster("n3w"), "n3w", nil, ""},
		{"*** without a stored password", nil, operator, mysqlCluster("***"), "", nil, "healthCheck.password"},
		{"set needs operator write", nil, nsWriter, mysqlCluster("s3cret"), "", acl.ErrPermissionDenied, ""},
		{"keep needs operator write", &stored, nsWriter, mysqlCluster("***"), "", acl.ErrPermissionDenied, ""},
		{"drop needs operator write", &stored, nsWriter, tcp, "", acl.ErrPermissionDenied, ""},
		{"no password: namespace write suffices", nil, nsWriter, mysqlCluster(""), "", nil, ""},
		{"set with operator write", nil, operator, mysqlCluster("s3cret"), "s3cret", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raft := &countingRaft{}
			r, err := New(Config{Settings: defaultSettings{}, Raft: raft, ACLEnabled: true, Tokens: noTokens{},
				Clusters: oneCluster{tc.stored}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.UpsertCluster(tc.ctx, tc.write, Condition{})
			switch {
			case tc.errField != "":
				var ve *model.ValidationError
				if !errors.As(err, &ve) || ve.Field != tc.errField {
					t.Fatalf("err %v, want a validation error of %s", err, tc.errField)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			}
			if tc.wantErr != nil || tc.errField != "" {
				if len(raft.applied) != 0 {
					t.Fatalf("applied %v", raft.applied)
				}
				return
			}
			if len(raft.applied) != 1 {
				t.Fatalf("applied %d commands", len(raft.applied))
			}
			got := raft.applied[0].(fsm.UpsertClusterRequest).Cluster.HealthCheck.Password
			if got != tc.applied {
				t.Fatalf("applied password %q, want %q", got, tc.applied)
			}
		})
	}
}
