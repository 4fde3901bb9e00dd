package httpapi

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// bootstrapACL serves POST /v1/acl/bootstrap: the cluster's first, management token,
// once (409 afterwards). It is the one ACL route that needs no token.
func (s *server) bootstrapACL(w http.ResponseWriter, r *http.Request) error {
	var req api.ACLBootstrapRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	t, secret, idx, err := s.reg.Bootstrap(r.Context(), req.SecretID)
	if err != nil {
		return err
	}
	s.log.WarnContext(r.Context(), "ACLs bootstrapped: a management token was created", "accessor_id", t.AccessorID, "index", idx)
	setIndex(w, idx)
	out := wireToken(t)
	out.SecretID = secret
	writeJSON(w, http.StatusOK, out)
	return nil
}

// createToken serves POST /v1/acl/tokens: a token with the rules of the body; the
// answer is the only place its secret ever appears.
func (s *server) createToken(w http.ResponseWriter, r *http.Request) error {
	var req api.ACLTokenRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	rules, err := parseRules(req.Rules)
	if err != nil {
		return err
	}
	t, secret, idx, err := s.reg.CreateToken(r.Context(), req.Description, rules)
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "ACL token created", "accessor_id", t.AccessorID, "rules", t.Rules.String(), "index", idx)
	setIndex(w, idx)
	out := wireToken(t)
	out.SecretID = secret
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deleteToken serves DELETE /v1/acl/tokens/{accessor}.
func (s *server) deleteToken(w http.ResponseWriter, r *http.Request) error {
	accessor := chi.URLParam(r, "accessor")
	idx, err := s.reg.DeleteToken(r.Context(), accessor)
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "ACL token deleted", "accessor_id", accessor, "index", idx)
	writeResult(w, idx)
	return nil
}

// listTokens serves GET /v1/acl/tokens (no secrets: the cluster has none).
func (s *server) listTokens(w http.ResponseWriter, r *http.Request) error {
	idx, list, err := readValue(s, w, r, func(ws *store.WatchSet) (uint64, []acl.Token, error) {
		return s.store.Tokens(ws)
	})
	if err != nil {
		return err
	}
	out := api.ACLTokensResponse{Index: idx, Tokens: make([]api.ACLToken, 0, len(list))}
	for _, t := range list {
		out.Tokens = append(out.Tokens, wireToken(t))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getToken serves GET /v1/acl/tokens/{accessor}.
func (s *server) getToken(w http.ResponseWriter, r *http.Request) error {
	accessor := chi.URLParam(r, "accessor")
	if !acl.IsID(accessor) {
		return invalid("accessorId", "must be a UUID, got %q", accessor)
	}
	_, t, err := readValue(s, w, r, func(ws *store.WatchSet) (uint64, acl.Token, error) {
		return s.store.Token(ws, accessor)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireToken(t))
	return nil
}

// getTokenSelf serves GET /v1/acl/token/self: the token the request presented, as this
// node resolved it (404 with ACLs off: there is none).
func (s *server) getTokenSelf(w http.ResponseWriter, r *http.Request) error {
	t := acl.FromContext(r.Context()).Token()
	if t == nil {
		return fmt.Errorf("ACLs are not enabled on this node, so requests carry no token: %w", model.ErrNotFound)
	}
	writeJSON(w, http.StatusOK, wireToken(*t))
	return nil
}

// parseRules converts the API's rules, naming the field of a bad level.
func parseRules(in api.ACLRules) (acl.Rules, error) {
	var out acl.Rules
	var err error
	if len(in.Namespaces) > 0 {
		out.Namespaces = make(map[string]acl.Access, len(in.Namespaces))
		for ns, v := range in.Namespaces {
			a, perr := acl.ParseAccess(v)
			if perr != nil {
				return out, invalid("rules.namespaces", "key %q: %v", ns, perr)
			}
			out.Namespaces[ns] = a
		}
	}
	if out.Operator, err = acl.ParseAccess(in.Operator); err != nil {
		return out, invalid("rules.operator", "%v", err)
	}
	if out.ACL, err = acl.ParseAccess(in.ACL); err != nil {
		return out, invalid("rules.acl", "%v", err)
	}
	return out, out.Validate()
}

// wireRules is the API form of rules: every level spelled out.
func wireRules(r acl.Rules) api.ACLRules {
	out := api.ACLRules{Operator: r.Operator.String(), ACL: r.ACL.String()}
	if len(r.Namespaces) > 0 {
		out.Namespaces = make(map[string]string, len(r.Namespaces))
		for ns, a := range r.Namespaces {
			out.Namespaces[ns] = a.String()
		}
	}
	return out
}

// wireToken is the API form of a token, without a secret.
func wireToken(t acl.Token) api.ACLToken {
	return api.ACLToken{AccessorID: t.AccessorID, Description: t.Description, Rules: wireRules(t.Rules),
		Management: t.Management, CreateIndex: t.CreateIndex}
}
