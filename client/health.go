package client

import (
	"context"

	"github.com/rosterhq/roster/api"
)

// Health returns the leader's last probe of each of the service's instances
// (GET .../services/{service}/health; always served by the leader).
func (c *Client) Health(ctx context.Context, ns, group, service string) (api.HealthResponse, error) {
	var out api.HealthResponse
	_, err := c.read(ctx, newPath("v1").service(ns, group, service).lit("health"), QueryOptions{}, nil, &out)
	return out, err
}
