package client

import (
	"context"
	"net/http"

	"github.com/rosterhq/roster/api"
)

// ACLBootstrap creates the cluster's first, management token (POST /v1/acl/bootstrap),
// once per cluster (IsConflict afterwards). The answer is the only place its secret
// appears.
func (c *Client) ACLBootstrap(ctx context.Context) (api.ACLToken, error) {
	return c.ACLBootstrapWith(ctx, "")
}

// ACLBootstrapWith is ACLBootstrap with a secret the caller chose (a UUID; "" lets the
// cluster draw one).
func (c *Client) ACLBootstrapWith(ctx context.Context, secret string) (api.ACLToken, error) {
	var out api.ACLToken
	var body any
	if secret != "" {
		body = api.ACLBootstrapRequest{SecretID: secret}
	}
	_, err := c.do(ctx, request{method: http.MethodPost, path: newPath("v1", "acl", "bootstrap"), body: body}, &out)
	return out, err
}

// CreateToken creates a token (POST /v1/acl/tokens); the answer is the only place its
// secret appears.
func (c *Client) CreateToken(ctx context.Context, req api.ACLTokenRequest) (api.ACLToken, error) {
	var out api.ACLToken
	_, err := c.do(ctx, request{method: http.MethodPost, path: newPath("v1", "acl", "tokens"), body: req}, &out)
	return out, err
}

// Tokens lists the tokens, without secrets (GET /v1/acl/tokens).
func (c *Client) Tokens(ctx context.Context, q QueryOptions) (api.ACLTokensResponse, Meta, error) {
	var out api.ACLTokensResponse
	meta, err := c.read(ctx, newPath("v1", "acl", "tokens"), q, nil, &out)
	return out, meta, err
}

// Token reads one token by accessor id (GET /v1/acl/tokens/{accessor}).
func (c *Client) Token(ctx context.Context, accessor string, q QueryOptions) (api.ACLToken, Meta, error) {
	var out api.ACLToken
	meta, err := c.read(ctx, newPath("v1", "acl", "tokens").param("accessor", accessor), q, nil, &out)
	return out, meta, err
}

// TokenSelf reads the token the client presents (GET /v1/acl/token/self).
func (c *Client) TokenSelf(ctx context.Context) (api.ACLToken, error) {
	var out api.ACLToken
	_, err := c.do(ctx, request{method: http.MethodGet, path: newPath("v1", "acl", "token", "self")}, &out)
	return out, err
}

// DeleteToken deletes a token by accessor id (DELETE /v1/acl/tokens/{accessor}).
func (c *Client) DeleteToken(ctx context.Context, accessor string) (uint64, error) {
	return c.write(ctx, http.MethodDelete, newPath("v1", "acl", "tokens").param("accessor", accessor), nil)
}
