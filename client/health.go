package client

import (
	"context"
	"net/http"

	"github.com/rosterhq/roster/api"
)

// Health returns the leader's last probe of each of the service's instances
// (GET .../services/{service}/health; always served by the leader).
func (c *Client) Health(ctx context.Context, ns, group, service string) (api.HealthResponse, error) {
	var out api.HealthResponse
	_, err := c.read(ctx, newPath("v1").service(ns, group, service).lit("health"), QueryOptions{}, nil, &out)
	return out, err
}

// ProbePolicy returns the serving node's probe target policy
// (GET /v1/operator/probe-policy; answered by the node asked, never forwarded).
func (c *Client) ProbePolicy(ctx context.Context) (api.ProbePolicyResponse, error) {
	var out api.ProbePolicyResponse
	_, err := c.do(ctx, request{method: http.MethodGet, path: newPath("v1", "operator", "probe-policy")}, &out)
	return out, err
}

// Settings returns the cluster-wide settings (GET /v1/operator/settings).
func (c *Client) Settings(ctx context.Context, q QueryOptions) (api.SettingsResponse, Meta, error) {
	var out api.SettingsResponse
	meta, err := c.read(ctx, newPath("v1", "operator", "settings"), q, nil, &out)
	return out, meta, err
}

// UpdateSettings changes the cluster-wide settings given in req (PUT /v1/operator/settings).
func (c *Client) UpdateSettings(ctx context.Context, req api.SettingsRequest) (uint64, error) {
	return c.write(ctx, http.MethodPut, newPath("v1", "operator", "settings"), req)
}
