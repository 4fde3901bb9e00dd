package registry

import (
	"context"
	"fmt"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// Access control. Every surface finds the token in its own wire format and hands it to
// Authenticate, which resolves it against the replicated tokens of this node's state
// and returns the request's Authorizer; the surface puts it in the request's context.
// From there every permission is checked here: writes of registry data by the write
// methods, reads by Read (ReadOptions.Permission), everything else — operator actions,
// ACL management — by Authorize, which the surfaces call before acting.

// TokenSource reads the replicated ACL state (*store.Store implements it).
type TokenSource interface {
	ACLBootstrapIndex() (uint64, error)
	TokenBySecretHash(hash string) (acl.Token, bool, error)
	// Token is the token of an accessor id (model.ErrNotFound when there is none).
	Token(ws *store.WatchSet, accessor string) (uint64, acl.Token, error)
	// Tokens lists every token.
	Tokens(ws *store.WatchSet) (uint64, []acl.Token, error)
}

// ACLEnabled reports whether this node enforces ACLs (roster server --acl-enabled).
func (r *Registry) ACLEnabled() bool { return r.aclOn }

// StillAllowed returns, with ACLs on, a check that secret still resolves to a token
// granting p; a long-lived answer (an SSE stream, a UDP or gRPC push subscription) runs
// it before each send, so that a deleted token's streams and subscriptions end at their
// next event. nil with ACLs off: everything stays allowed.
func (r *Registry) StillAllowed(secret string, p acl.Permission) func() bool {
	if !r.aclOn {
		return nil
	}
	return func() bool {
		a, err := r.Authenticate(secret)
		return err == nil && a.Allows(p)
	}
}

// Authenticated is the permission of reads that show each caller only what its token
// may see (lists across namespaces): any valid token passes; the caller filters.
var Authenticated = acl.Permission{Resource: "authenticated"}

// Authenticate resolves the secret a request presented ("" when none) into what it
// may do. With ACLs off every request may do everything, unless the cluster has
// ACLs bootstrapped: then this node disagrees with the cluster and serves nothing
// (acl.ErrMismatch). With ACLs on, a missing or unknown secret is acl.ErrUnauthenticated,
// and before the bootstrap every request is acl.ErrNotBootstrapped.
func (r *Registry) Authenticate(secret string) (*acl.Authorizer, error) {
	if err := r.ACLGate(); err != nil {
		return nil, err
	}
	if !r.aclOn {
		return acl.AllowAll(), nil
	}
	boot, err := r.tokens.ACLBootstrapIndex()
	if err != nil {
		return nil, err
	}
	if boot == 0 {
		return nil, fmt.Errorf("%w: create the first token with POST /v1/acl/bootstrap (roster acl bootstrap)", acl.ErrNotBootstrapped)
	}
	if secret == "" {
		return nil, fmt.Errorf("%w: this request needs a token (X-Roster-Token: SECRET or Authorization: Bearer SECRET)", acl.ErrUnauthenticated)
	}
	t, ok, err := r.tokens.TokenBySecretHash(acl.HashSecret(secret))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: the token is not known to the cluster (deleted, or never created)", acl.ErrUnauthenticated)
	}
	return acl.ForSecret(t, secret), nil
}

// ACLGate returns acl.ErrMismatch when this node runs without ACLs while the cluster
// has them bootstrapped: such a node must serve nothing, or it would let anyone do
// anything on a cluster whose operators turned access control on.
func (r *Registry) ACLGate() error {
	if r.aclOn || r.tokens == nil {
		return nil
	}
	boot, err := r.tokens.ACLBootstrapIndex()
	if err != nil {
		return err
	}
	if boot != 0 {
		return fmt.Errorf("%w: the cluster has ACLs enabled (bootstrapped at index %d) but this node was started without --acl-enabled; restart it with --acl-enabled",
			acl.ErrMismatch, boot)
	}
	return nil
}

// Authorize returns nil when the request whose context is ctx has permission p, a
// *acl.DeniedError when its token lacks it, and acl.ErrUnauthenticated when ctx carries
// no Authorizer while ACLs are on. With ACLs off a context without an Authorizer (an
// internal caller) may do everything.
func (r *Registry) Authorize(ctx context.Context, p acl.Permission) error {
	a := acl.FromContext(ctx)
	if a == nil {
		if !r.aclOn {
			return nil
		}
		return fmt.Errorf("%w: no token was checked for this request", acl.ErrUnauthenticated)
	}
	if p == Authenticated {
		return nil
	}
	return a.Check(p)
}

// Bootstrap creates the first, management token, once per cluster: a second call is
// refused with model.ErrConflict, and a node without --acl-enabled refuses it as
// invalid. The secret is drawn at random unless the caller gives one (a UUID, for
// automation that prepared it beforehand). It returns the token and its secret; the
// cluster keeps only the secret's hash.
func (r *Registry) Bootstrap(ctx context.Context, secret string) (acl.Token, string, uint64, error) {
	if !r.aclOn {
		return acl.Token{}, "", 0, model.Invalid("acl", "ACLs are not enabled on this server: start every node with --acl-enabled first")
	}
	if secret != "" && !acl.IsID(secret) {
		return acl.Token{}, "", 0, model.Invalid("secretId", "must be a UUID in lowercase hexadecimal (such as the output of uuidgen | tr A-F a-f)")
	}
	t, drawn, err := newToken("bootstrap management token", acl.Rules{}, true)
	if err != nil {
		return acl.Token{}, "", 0, err
	}
	if secret == "" {
		secret = drawn
	} else {
		t.SecretHash = acl.HashSecret(secret)
	}
	idx, err := r.submit(ctx, fsm.ACLBootstrapRequest{Token: t})
	if err != nil {
		return acl.Token{}, "", 0, err
	}
	t.CreateIndex = idx
	return t, secret, idx, nil
}

// CreateToken creates a token with rules (acl: write, and rules within the caller's
// own: acl.Authorizer.CheckGrant, a 403 naming the right the caller lacks). It returns
// the token and its secret, which exists nowhere else.
func (r *Registry) CreateToken(ctx context.Context, description string, rules acl.Rules) (acl.Token, string, uint64, error) {
	if err := acl.ValidateDescription(description); err != nil {
		return acl.Token{}, "", 0, err
	}
	if err := rules.Validate(); err != nil {
		return acl.Token{}, "", 0, err
	}
	// The ids are drawn where the request arrived (the secret is answered from here);
	// the checks run where the token is written, the leader.
	t, secret, err := newToken(description, rules, false)
	if err != nil {
		return acl.Token{}, "", 0, err
	}
	idx, err := r.write(ctx, fsm.CreateTokenRequest{Token: t}, Condition{}, func() (uint64, error) { return r.createToken(ctx, t) })
	if err != nil {
		return acl.Token{}, "", 0, err
	}
	t.CreateIndex = idx
	return t, secret, idx, nil
}

// createToken checks and writes a new token t (CreateToken's, or one another server
// forwarded: its fields are checked again here).
func (r *Registry) createToken(ctx context.Context, t acl.Token) (uint64, error) {
	if err := r.Authorize(ctx, acl.ACLWrite); err != nil {
		return 0, err
	}
	if t.Management || t.CreateIndex != 0 || !acl.IsID(t.AccessorID) || t.SecretHash == "" {
		return 0, fmt.Errorf("%w: a created token is a new one that is not a management token", errBadForward)
	}
	if err := acl.ValidateDescription(t.Description); err != nil {
		return 0, err
	}
	if err := t.Rules.Validate(); err != nil {
		return 0, err
	}
	if err := r.checkGrant(ctx, "create", acl.Token{Rules: t.Rules}); err != nil {
		return 0, err
	}
	return r.submit(ctx, fsm.CreateTokenRequest{Token: t})
}

// DeleteToken deletes a token by accessor id (acl: write, and the token's rights
// within the caller's own: acl.Authorizer.CheckGrant); model.ErrNotFound when there is
// none. The cluster's last management token is never deleted (model.ErrConflict), so
// that a cluster with ACLs always keeps a token that may do everything. Every node
// refuses a deleted token from the moment it applies the deletion.
//
// The checks read the leader's state, which holds every token write it acknowledged
// (a follower hands the deletion to it); deletions on one node are serialized, so two
// deletions of the last two management tokens cannot both pass the check.
func (r *Registry) DeleteToken(ctx context.Context, accessor string) (uint64, error) {
	if !acl.IsID(accessor) {
		return 0, model.Invalid("accessorId", "must be a UUID")
	}
	return r.write(ctx, fsm.DeleteTokenRequest{AccessorID: accessor}, Condition{}, func() (uint64, error) {
		return r.deleteToken(ctx, accessor)
	})
}

func (r *Registry) deleteToken(ctx context.Context, accessor string) (uint64, error) {
	if err := r.Authorize(ctx, acl.ACLWrite); err != nil {
		return 0, err
	}
	if !acl.IsID(accessor) {
		return 0, model.Invalid("accessorId", "must be a UUID")
	}
	if r.tokens == nil {
		return r.submit(ctx, fsm.DeleteTokenRequest{AccessorID: accessor})
	}
	r.tokenMu.Lock()
	defer r.tokenMu.Unlock()
	_, t, err := r.tokens.Token(nil, accessor)
	if err != nil {
		return 0, err
	}
	if err := r.checkGrant(ctx, "delete", t); err != nil {
		return 0, err
	}
	if t.Management {
		_, all, err := r.tokens.Tokens(nil)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, o := range all {
			if o.Management {
				n++
			}
		}
		if n <= 1 {
			return 0, fmt.Errorf("%w: token %s is the cluster's last management token and cannot be deleted: a cluster with ACLs must keep a token that may do everything", model.ErrConflict, accessor)
		}
	}
	return r.submit(ctx, fsm.DeleteTokenRequest{AccessorID: accessor})
}

// checkGrant refuses a token change (action) of t whose rights exceed the caller's.
func (r *Registry) checkGrant(ctx context.Context, action string, t acl.Token) error {
	a := acl.FromContext(ctx)
	if a == nil && !r.aclOn {
		return nil // an internal caller with ACLs off
	}
	return a.CheckGrant(action, t)
}

// newToken makes a token with fresh random ids; the record keeps the secret's hash.
func newToken(description string, rules acl.Rules, management bool) (acl.Token, string, error) {
	accessor, err := acl.NewID()
	if err != nil {
		return acl.Token{}, "", err
	}
	secret, err := acl.NewID()
	if err != nil {
		return acl.Token{}, "", err
	}
	return acl.Token{AccessorID: accessor, SecretHash: acl.HashSecret(secret), Description: description,
		Rules: rules, Management: management}, secret, nil
}
