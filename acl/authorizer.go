package acl

import (
	"context"
	"errors"
	"fmt"
)

// Errors of access control. Every error a check returns wraps one of them.
var (
	// ErrUnauthenticated: ACLs are on and the request carried no token, or one that no
	// longer exists or never did (401).
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrPermissionDenied: the token lacks the permission the request needs (403); the
	// error is a *DeniedError naming it.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrNotBootstrapped: ACLs are on and no token exists yet (401): POST
	// /v1/acl/bootstrap creates the first one.
	ErrNotBootstrapped = errors.New("ACLs are enabled but not bootstrapped")
	// ErrMismatch: this node and the cluster disagree on whether ACLs are enabled
	// (503); the node serves nothing until they agree.
	ErrMismatch = errors.New("acl_mismatch")
)

// Resource kinds a permission is about.
const (
	ResourceNamespace = "namespace"
	ResourceOperator  = "operator"
	ResourceACL       = "acl"
)

// Permission is what a request needs: an access level to a namespace's data, to
// operator actions, or to ACL management.
type Permission struct {
	Resource  string
	Namespace string // ResourceNamespace only
	Access    Access
}

// NamespacePermission is access a to namespace ns.
func NamespacePermission(ns string, a Access) Permission {
	return Permission{Resource: ResourceNamespace, Namespace: ns, Access: a}
}

// Operator and ACL permissions.
var (
	OperatorRead  = Permission{Resource: ResourceOperator, Access: Read}
	OperatorWrite = Permission{Resource: ResourceOperator, Access: Write}
	ACLRead       = Permission{Resource: ResourceACL, Access: Read}
	ACLWrite      = Permission{Resource: ResourceACL, Access: Write}
)

// String names the permission as rules spell it: `namespace "public": write`,
// `operator: read`, `acl: write`.
func (p Permission) String() string {
	if p.Resource == ResourceNamespace {
		return fmt.Sprintf("namespace %q: %s", p.Namespace, p.Access)
	}
	return fmt.Sprintf("%s: %s", p.Resource, p.Access)
}

// DeniedError is ErrPermissionDenied for one permission.
type DeniedError struct {
	Permission Permission
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("permission denied: the token does not grant %s", e.Permission)
}

// Is makes errors.Is(err, ErrPermissionDenied) true.
func (e *DeniedError) Is(target error) bool { return target == ErrPermissionDenied }

// Authorizer is what a request may do: everything (ACLs off), or what its token grants.
// The zero value grants nothing.
type Authorizer struct {
	all   bool
	token *Token
}

// AllowAll grants everything: the Authorizer of every request while ACLs are off.
func AllowAll() *Authorizer { return &Authorizer{all: true} }

// ForToken grants what t grants.
func ForToken(t Token) *Authorizer { return &Authorizer{token: &t} }

// Token returns the token the request presented (nil with ACLs off).
func (a *Authorizer) Token() *Token {
	if a == nil {
		return nil
	}
	return a.token
}

// Allows reports whether p is granted.
func (a *Authorizer) Allows(p Permission) bool {
	switch {
	case a == nil:
		return false
	case a.all:
		return true
	case a.token == nil:
		return false
	case a.token.Management:
		return true
	}
	r := a.token.Rules
	switch p.Resource {
	case ResourceNamespace:
		return r.Namespace(p.Namespace) >= p.Access
	case ResourceOperator:
		return r.Operator >= p.Access
	case ResourceACL:
		return r.ACL >= p.Access
	}
	return false
}

// Check returns nil when p is granted, else a *DeniedError.
func (a *Authorizer) Check(p Permission) error {
	if a.Allows(p) {
		return nil
	}
	return &DeniedError{Permission: p}
}

// CanRead reports whether the namespace's data may be read (for filtering lists).
func (a *Authorizer) CanRead(ns string) bool { return a.Allows(NamespacePermission(ns, Read)) }

type ctxKey struct{}

// WithAuthorizer returns ctx carrying a.
func WithAuthorizer(ctx context.Context, a *Authorizer) context.Context {
	return context.WithValue(ctx, ctxKey{}, a)
}

// FromContext returns the Authorizer ctx carries, or nil.
func FromContext(ctx context.Context) *Authorizer {
	a, _ := ctx.Value(ctxKey{}).(*Authorizer)
	return a
}
