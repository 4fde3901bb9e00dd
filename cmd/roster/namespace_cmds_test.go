package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/server/servertest"
)

// namespaceOf reads namespace id (ok false when it does not exist).
func namespaceOf(ctx context.Context, t *testing.T, c *client.Client, id string) (api.Namespace, bool) {
	t.Helper()
	res, _, err := c.Namespace(ctx, id, client.QueryOptions{})
	if client.IsNotFound(err) {
		return api.Namespace{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return res.Namespace, true
}

func TestNamespacesCLI_ListCreateUpdateDelete(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	ctx := cliCtx(t)
	cl := c.Nodes[0].Client()
	addr := c.Nodes[0].HTTPAddr

	r := runCLI(t, nil, "namespaces", "create", "staging", "--name", "Staging", "--description", "pre-production", "--addr", addr)
	wantExit(t, r, 0)
	if !strings.HasPrefix(r.stdout, "created namespace staging (index ") {
		t.Fatalf("stdout %q", r.stdout)
	}
	if ns, ok := namespaceOf(ctx, t, cl, "staging"); !ok || ns.Name != "Staging" || ns.Description != "pre-production" {
		t.Fatalf("namespace %+v (exists %v)", ns, ok)
	}

	r = runCLI(t, nil, "namespaces", "--addr", addr)
	wantExit(t, r, 0)
	if squeezed := strings.Join(strings.Fields(r.stdout), " "); !strings.Contains(squeezed, "public public -") ||
		!strings.Contains(squeezed, "staging Staging pre-production") {
		t.Fatalf("namespaces table:\n%s", r.stdout)
	}
	r = runCLI(t, nil, "namespaces", "--addr", addr, "-o", "json")
	wantExit(t, r, 0)
	var list api.NamespacesResponse
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Namespaces) != 2 || list.Namespaces[1].ID != "staging" {
		t.Fatalf("namespaces -o json: %v\n%s", err, r.stdout)
	}

	// Creating it again fails and changes nothing.
	before, _ := namespaceOf(ctx, t, cl, "staging")
	r = runCLI(t, nil, "namespaces", "create", "staging", "--name", "Other", "--addr", addr)
	wantExit(t, r, exitError)
	if !strings.Contains(r.stderr, "namespace staging exists already") {
		t.Fatalf("stderr %q", r.stderr)
	}

	// Bad command lines exit 2 and change nothing either.
	for _, args := range [][]string{
		{"namespaces", "update", "staging"},
		{"namespaces", "create"},
		{"namespaces", "delete", "staging", "extra"},
		{"namespaces", "frobnicate"},
		{"namespaces", "create", " "},
	} {
		if r := runCLI(t, nil, append(args, "--addr", addr)...); r.code != exitUsage || !strings.HasPrefix(r.stderr, "roster: ") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2", args, r.code, r.stderr)
		}
	}
	if after, _ := namespaceOf(ctx, t, cl, "staging"); after != before {
		t.Fatalf("namespace changed: %+v, was %+v", after, before)
	}

	// update changes what is given and keeps the rest.
	r = runCLI(t, nil, "namespaces", "update", "staging", "--description", "pre-production, EU", "--addr", addr, "-o", "json")
	wantExit(t, r, 0)
	var res api.WriteResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Index == 0 {
		t.Fatalf("update -o json: %v\n%s", err, r.stdout)
	}
	if ns, _ := namespaceOf(ctx, t, cl, "staging"); ns.Name != "Staging" || ns.Description != "pre-production, EU" {
		t.Fatalf("after update: %+v", ns)
	}
	wantExit(t, runCLI(t, nil, "namespaces", "update", "missing", "--name", "M", "--addr", addr), exitError)
	if _, ok := namespaceOf(ctx, t, cl, "missing"); ok {
		t.Fatal("update created a namespace")
	}

	// delete refuses public and a namespace with services, then deletes an empty one.
	r = runCLI(t, nil, "namespaces", "delete", "public", "--addr", addr)
	wantExit(t, r, exitError)
	if !strings.Contains(r.stderr, "cannot be deleted") {
		t.Fatalf("stderr %q", r.stderr)
	}
	if _, err := cl.UpsertCluster(ctx, "staging", "", "orders", "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: api.CheckNone}}); err != nil {
		t.Fatal(err)
	}
	wantExit(t, runCLI(t, nil, "namespaces", "delete", "staging", "--addr", addr), exitError)
	if _, err := cl.DeleteService(ctx, "staging", "", "orders"); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "namespaces", "delete", "staging", "--addr", addr)
	wantExit(t, r, 0)
	if !strings.HasPrefix(r.stdout, "deleted namespace staging (index ") {
		t.Fatalf("stdout %q", r.stdout)
	}
	if _, ok := namespaceOf(ctx, t, cl, "staging"); ok {
		t.Fatal("staging still exists")
	}
}
