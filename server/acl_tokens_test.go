package server_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
)

// acl: write is not management: a token may only create and delete tokens whose rules
// are within its own (403 naming the right it lacks), never a management token, and the
// cluster's last management token cannot be deleted by anyone (409). No refusal writes.
func TestACL_TokenManagementStaysWithinTheCallersRights(t *testing.T) {
	c := newACLCluster(t)
	ctx := ctxT(t, 60*time.Second)
	admin := c.token(ctx, t, "token admin", api.ACLRules{Namespaces: map[string]string{"dev": "write", "*": "read"}, ACL: "write"})
	operator := c.token(ctx, t, "operator", api.ACLRules{Operator: "write"})
	self, err := c.as(c.MustLeader(), c.mgmt).TokenSelf(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := c.Followers()[0]
	waitToken(t, c, f, admin.SecretID)
	as := c.as(f, admin.SecretID) // through a follower: the leader decides

	// The token table, not the Raft log: the leader writes entries of its own meanwhile
	// (member records, announcements).
	tokens := func() []api.ACLToken {
		resp, _, err := c.as(c.MustLeader(), c.mgmt).Tokens(ctx, client.QueryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Tokens
	}
	before := tokens()
	for _, tc := range []struct {
		rules api.ACLRules
		right string
	}{
		{api.ACLRules{Namespaces: map[string]string{"*": "write"}}, `namespace \"*\": write`},
		{api.ACLRules{Namespaces: map[string]string{"prod": "write"}}, `namespace \"prod\": write`},
		{api.ACLRules{Operator: "read"}, "operator: read"},
		{api.ACLRules{Namespaces: map[string]string{"*": "write", "prod": "none", "public": "none"}, Operator: "write", ACL: "write"}, "operator: write"},
	} {
		_, err := as.CreateToken(ctx, api.ACLTokenRequest{Description: "escalation", Rules: tc.rules})
		if !client.IsPermissionDenied(err) || !strings.Contains(err.Error(), "within its own") || !strings.Contains(err.Error(), strings.ReplaceAll(tc.right, `\"`, `"`)) {
			t.Errorf("creating %+v with acl: write: %v, want 403 naming %s", tc.rules, err, tc.right)
		}
	}
	for _, victim := range []struct{ name, accessor, want string }{
		{"the bootstrap token", self.AccessorID, "only a management token may delete"},
		{"a token with operator write", operator.AccessorID, "operator: write"},
	} {
		if _, err := as.DeleteToken(ctx, victim.accessor); !client.IsPermissionDenied(err) || !strings.Contains(err.Error(), victim.want) {
			t.Errorf("deleting %s with acl: write: %v, want 403 saying %q", victim.name, err, victim.want)
		}
	}
	// The last management token: not even itself.
	code, b := rawDo(t, c.Nodes[c.MustLeader()].HTTPAddr, c.mgmt, http.MethodDelete, "/v1/acl/tokens/"+self.AccessorID, "")
	if code != http.StatusConflict || !strings.Contains(string(b), "last management token") {
		t.Errorf("deleting the last management token: %d %s, want 409", code, b)
	}
	if after := tokens(); !reflect.DeepEqual(after, before) {
		t.Fatalf("refused token changes changed the tokens: %+v, were %+v", after, before)
	}

	// Within its rules it creates and deletes.
	sub, err := as.CreateToken(ctx, api.ACLTokenRequest{Description: "dev reader", Rules: api.ACLRules{Namespaces: map[string]string{"dev": "write", "public": "read"}, ACL: "read"}})
	if err != nil {
		t.Fatalf("creating a token within its own rules: %v", err)
	}
	if _, err := as.DeleteToken(ctx, sub.AccessorID); err != nil {
		t.Fatalf("deleting a token within its own rules: %v", err)
	}
	// A management token still manages everything.
	if _, err := c.as(c.MustLeader(), c.mgmt).DeleteToken(ctx, operator.AccessorID); err != nil {
		t.Fatalf("the management token deleting a token: %v", err)
	}
	if _, err := c.as(c.MustLeader(), c.mgmt).TokenSelf(ctx); err != nil {
		t.Fatalf("the management token after all that: %v", err)
	}
}
