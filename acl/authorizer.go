package acl

import (
	"context"
	"errors"
	"fmt"
	"sort"
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
	all    bool
	token  *Token
	secret string // what the request presented (ForSecret)
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

// Granting rights. A token may only create tokens whose rights are within its own, and
// delete only those (Authorizer.CheckGrant): `acl: write` lets a token hand out and take
// back what it holds, never more.

// Exceeds returns a right that rules r grant and have does not (ok false when r is
// within have). r is within have when, for operator and for acl, r's level is at most
// have's, and for every namespace — each key of either and, for every namespace named
// by neither, the "*" key — r's level (its own key, else its "*" key, else none) is at
// most have's, resolved the same way. A "*" rule is thereby a right over every
// namespace without a key of its own: "*": write is within have only if have writes
// every such namespace too.
func (r Rules) Exceeds(have Rules) (Permission, bool) {
	if r.Operator > have.Operator {
		return Permission{Resource: ResourceOperator, Access: r.Operator}, true
	}
	if r.ACL > have.ACL {
		return Permission{Resource: ResourceACL, Access: r.ACL}, true
	}
	keys := map[string]bool{AnyNamespace: true}
	for k := range r.Namespaces {
		keys[k] = true
	}
	for k := range have.Namespaces {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, ns := range sorted {
		if a := r.Namespace(ns); a > have.Namespace(ns) {
			return NamespacePermission(ns, a), true
		}
	}
	return Permission{}, false
}

// GrantError is ErrPermissionDenied for a token change that would hand out (or take
// away) a right the caller's token lacks.
type GrantError struct {
	// Action is what was refused: "create", "delete".
	Action string
	// Right is the right the other token has and the caller's lacks; zero when the
	// other token is a management token.
	Right      Permission
	Management bool
}

func (e *GrantError) Error() string {
	if e.Management {
		return fmt.Sprintf("permission denied: only a management token may %s a management token", e.Action)
	}
	return fmt.Sprintf("permission denied: a token may only %s tokens whose rules are within its own, and this one does not grant %s",
		e.Action, e.Right)
}

// Is makes errors.Is(err, ErrPermissionDenied) true.
func (e *GrantError) Is(target error) bool { return target == ErrPermissionDenied }

// CheckGrant returns nil when the request may create or delete (action) token t: with
// ACLs off, with a management token, or when t is no management token and its rules are
// within the caller's (Rules.Exceeds); else a *GrantError naming the right at fault.
func (a *Authorizer) CheckGrant(action string, t Token) error {
	switch {
	case a == nil:
		return &DeniedError{Permission: ACLWrite}
	case a.all:
		return nil
	case a.token == nil:
		return &DeniedError{Permission: ACLWrite}
	case a.token.Management:
		return nil
	case t.Management:
		return &GrantError{Action: action, Management: true}
	}
	if p, ok := t.Rules.Exceeds(a.token.Rules); ok {
		return &GrantError{Action: action, Right: p}
	}
	return nil
}

// ForSecret grants what t grants, for a request that presented secret: a server that
// hands the request to the leader sends the secret along, so that the leader checks the
// token itself (Secret).
func ForSecret(t Token, secret string) *Authorizer { return &Authorizer{token: &t, secret: secret} }

// Secret is the secret the request presented ("" when none, or with ACLs off).
func (a *Authorizer) Secret() string {
	if a == nil {
		return ""
	}
	return a.secret
}
