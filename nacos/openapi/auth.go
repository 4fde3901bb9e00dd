package openapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
)

// Access control on the Nacos surfaces (docs/nacos-compatibility.md, "Authentication").
// A Nacos client logs in with a token's accessor id as username and its secret as
// password and is answered the secret as accessToken, which it then sends with every
// request: as the accessToken parameter over HTTP, as the accessToken header of every
// gRPC request. Each request's token is resolved by the registry (Authenticate) and the
// permission the request needs is checked before anything is forwarded, recorded or
// written; refusals take Nacos's own shapes and texts.

// authenticator resolves the tokens of Nacos requests through the registry and turns its
// refusals into Nacos's: no token is "user not found!", an unknown one "token invalid!"
// (both 403). A node that disagrees with the cluster on ACLs still answers 503.
type authenticator struct{ s *API }

func (a authenticator) Authenticate(secret string) (*acl.Authorizer, error) {
	az, err := a.s.reg.Authenticate(secret)
	if err == nil {
		return az, nil
	}
	return nil, nacos.AuthError(secret, err)
}

// tokenOf returns the token a Nacos request presents: the native API's headers
// (X-Roster-Token, Authorization: Bearer), else the accessToken parameter of the query
// string, else that of an application/x-www-form-urlencoded body (buffered by the
// router); "" when none.
func tokenOf(r *http.Request) string {
	if t := tokenOutsideBody(r); t != "" {
		return t
	}
	body := httpx.Body(r)
	if len(body) == 0 {
		return ""
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/x-www-form-urlencoded" {
			return ""
		}
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(form.Get(nacos.AccessTokenParam))
}

// tokenOutsideBody is the token of a Nacos request's headers or query string, ""
// when neither has one.
func tokenOutsideBody(r *http.Request) string {
	if t := httpx.TokenOf(r); t != "" {
		return t
	}
	if q, err := url.ParseQuery(r.URL.RawQuery); err == nil {
		if t := strings.TrimSpace(q.Get(nacos.AccessTokenParam)); t != "" {
			return t
		}
	}
	return ""
}

// namespaceKey carries, in a request's context, the namespace its parameters name.
type namespaceKey struct{}

// namespaceOf is the namespace a Nacos request is about, as its route reads it:
// namespaceId, public when absent or blank.
func namespaceOf(p params) string {
	if ns := p.str("namespaceId"); ns != "" {
		return ns
	}
	return model.DefaultNamespace
}

// resourceOf is the resource kind of the route serving path, for the codes of
// errors answered before the route runs.
func resourceOf(path string) nacos.Resource {
	switch {
	case strings.Contains(path, "/ns/instance"), strings.Contains(path, "/ns/health"):
		return nacos.ResourceInstance
	case strings.Contains(path, "/ns/service"):
		return nacos.ResourceService
	}
	return nacos.ResourceOther
}

// nsNeed makes a route need access a to the namespace its parameters name. The
// parameters are parsed first: malformed ones are answered as the route would answer
// them (400), and nothing else is done.
func (s *API) nsNeed(a acl.Access) func(http.Handler) http.Handler {
	fail := func(w http.ResponseWriter, r *http.Request, err error) {
		s.writeNacosError(w, r, err, nacos.ResourceOther)
	}
	require := httpx.Require(s.reg, func(r *http.Request) acl.Permission {
		ns, _ := r.Context().Value(namespaceKey{}).(string)
		return acl.NamespacePermission(ns, a)
	}, fail)
	return func(next http.Handler) http.Handler {
		checked := require(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, err := parseNacosParams(r)
			if err != nil {
				s.writeNacosError(w, r, err, resourceOf(r.URL.Path))
				return
			}
			ctx := context.WithValue(r.Context(), namespaceKey{}, namespaceOf(p))
			checked.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// loginAnswer is the answer to a successful Nacos login while ACLs are on, as
// Nacos's UserController answers it. nacos-sdk-go (v1 and v2) stores accessToken and
// reads tokenTtl as a number, and logs in again after tokenTtl minus a tenth of it.
// tokenTtl is tokenTTL: a Roster token is valid until it is deleted, and the TTL
// only makes the SDKs log in again now and then.
type loginAnswer struct {
	AccessToken string `json:"accessToken"`
	TokenTTL    int64  `json:"tokenTtl"`
	GlobalAdmin bool   `json:"globalAdmin"`
	// Username is the accessor id that logged in, as Nacos echoes the user.
	Username string `json:"username"`
}

// login serves POST /nacos/v1/auth/login and /nacos/v1/auth/users/login on the
// node that receives it (it needs no token). With ACLs on, username is a token's
// accessor id and password its secret: the secret is resolved against this node's
// replicated tokens and must belong to that accessor id; the answer's accessToken is
// the secret (Roster keeps no sessions) and globalAdmin says whether the token is a
// management token. Wrong, missing or mismatched credentials are all answered as Nacos
// answers a failed login (403, text "user not found!"), without saying which part was
// wrong. With ACLs off every login succeeds with an empty token. Neither credential is
// ever logged.
func (s *API) login(w http.ResponseWriter, r *http.Request) {
	fail := func(err error) { s.writeNacosError(w, r, err, nacos.ResourceOther) }
	p, err := parseNacosParams(r)
	if err != nil {
		fail(err)
		return
	}
	if !s.reg.ACLEnabled() {
		if err := s.reg.ACLGate(); err != nil {
			fail(err)
			return
		}
		writeJSON(w, http.StatusOK, loginDisabled())
		return
	}
	username, password := p.str("username"), p.str("password")
	refuse := func() {
		w.Header().Set("Cache-Control", "no-store")
		writeText(w, http.StatusForbidden, nacos.MessageNoUser)
	}
	if username == "" || password == "" {
		refuse()
		return
	}
	a, err := s.reg.Authenticate(password)
	if errors.Is(err, acl.ErrUnauthenticated) || errors.Is(err, acl.ErrNotBootstrapped) {
		refuse()
		return
	}
	if err != nil {
		fail(err)
		return
	}
	t := a.Token()
	if t == nil || subtle.ConstantTimeCompare([]byte(t.AccessorID), []byte(username)) != 1 {
		refuse()
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, loginAnswer{
		AccessToken: password, TokenTTL: tokenTTL, GlobalAdmin: t.Management, Username: t.AccessorID,
	})
}
