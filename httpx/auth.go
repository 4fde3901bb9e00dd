package httpx

import (
	"context"
	"net/http"
	"strings"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/api"
)

// Authenticator resolves a request's token secret ("" when it carries none) into what
// the request may do (*registry.Registry implements it).
type Authenticator interface {
	Authenticate(secret string) (*acl.Authorizer, error)
}

// TokenOf returns the token secret a request carries: the X-Roster-Token header, else
// an "Authorization: Bearer" header, else "".
func TokenOf(r *http.Request) string {
	if t := strings.TrimSpace(r.Header.Get(api.HeaderToken)); t != "" {
		return t
	}
	if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// Authenticate resolves the token of every request with auth (tokenOf finds it; nil:
// TokenOf) and hands the request on with the result in its context
// (acl.WithAuthorizer); a request auth refuses (no token, an unknown one, a node that
// disagrees with the cluster on ACLs) is answered through fail and goes no further. A
// follower resolves the token before it forwards anything, and forwards the token
// with the request, so the leader checks it again: no node acts on a request with more
// rights than its caller's.
func Authenticate(auth Authenticator, tokenOf func(*http.Request) string, fail ErrorWriter) func(http.Handler) http.Handler {
	if tokenOf == nil {
		tokenOf = TokenOf
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a, err := auth.Authenticate(tokenOf(r))
			if err != nil {
				fail(w, r, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(acl.WithAuthorizer(r.Context(), a)))
		})
	}
}

// NodeCertificate reports whether r came over TLS with a client certificate the server
// verified against its client CAs — the cluster's CA, whose certificates are the nodes'.
func NodeCertificate(r *http.Request) bool { return r.TLS != nil && len(r.TLS.VerifiedChains) > 0 }

// NodeOr lets a request that presents a node certificate (NodeCertificate) through with
// every permission, and hands every other request to guard: for the requests nodes make
// of each other, such as joins, which a cluster with TLS authenticates by certificate.
func NodeOr(guard func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		guarded := guard(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if NodeCertificate(r) {
				next.ServeHTTP(w, r.WithContext(acl.WithAuthorizer(r.Context(), acl.AllowAll())))
				return
			}
			guarded.ServeHTTP(w, r)
		})
	}
}

// Authorizer checks a permission for the request whose context is ctx
// (*registry.Registry implements it).
type Authorizer interface {
	Authorize(ctx context.Context, p acl.Permission) error
}

type permissionKey struct{}

// Require makes a route need the permission perm(r) names: it is checked with auth
// before the route does anything (before a follower forwards the request, and again
// on the node that serves it), refused through fail, and recorded in the request for
// Read, which the registry checks once more before it reads.
func Require(auth Authorizer, perm func(*http.Request) acl.Permission, fail ErrorWriter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := perm(r)
			if err := auth.Authorize(r.Context(), p); err != nil {
				fail(w, r, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), permissionKey{}, p)))
		})
	}
}

// PermissionOf returns the permission Require recorded in r (the zero Permission when none).
func PermissionOf(r *http.Request) acl.Permission {
	p, _ := r.Context().Value(permissionKey{}).(acl.Permission)
	return p
}

// Fixed returns a perm function of Require for a permission that does not depend on
// the request.
func Fixed(p acl.Permission) func(*http.Request) acl.Permission {
	return func(*http.Request) acl.Permission { return p }
}
