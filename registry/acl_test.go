package registry

import (
	"context"
	"errors"
	"testing"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/store"
)

// A read of a namespace's data needs read access to the namespace it reads
// (ReadOptions.Namespace), whatever permission the route recorded: a route check made
// on another spelling of the name cannot lend its permission to the read.
func TestRead_NamespacePermissionIsDerivedFromTheKeyRead(t *testing.T) {
	r, err := New(Config{Settings: defaultSettings{}, Raft: &countingRaft{}, ACLEnabled: true, Tokens: noTokens{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := acl.WithAuthorizer(context.Background(), acl.ForToken(acl.Token{
		Rules: acl.Rules{Namespaces: map[string]acl.Access{"*": acl.Read, "secret": acl.None}}}))
	read := func(o ReadOptions) error {
		_, err := r.Read(ctx, o, func(*store.WatchSet) (uint64, error) { return 1, nil })
		return err
	}
	// The route's permission names a namespace the token may read; the key read is secret.
	o := ReadOptions{Permission: acl.NamespacePermission("s%65cret", acl.Read), Namespace: "secret"}
	if err := read(o); !errors.Is(err, acl.ErrPermissionDenied) {
		t.Fatalf("a read of secret under the route permission of s%%65cret: %v, want permission denied", err)
	}
	if err := read(ReadOptions{Namespace: "public"}); err != nil {
		t.Fatalf("a read of public: %v", err)
	}
	if err := read(ReadOptions{Namespace: "secret"}); !errors.Is(err, acl.ErrPermissionDenied) {
		t.Fatalf("a read of secret: %v, want permission denied", err)
	}
}
