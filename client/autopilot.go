package client

import (
	"context"
	"net/http"

	"github.com/rosterhq/roster/api"
)

// AutopilotHealth returns the leader's view of every server's health, the failure
// tolerance and the autopilot settings in force (GET /v1/operator/autopilot/health;
// always served by the leader).
func (c *Client) AutopilotHealth(ctx context.Context) (api.AutopilotHealth, error) {
	var out api.AutopilotHealth
	_, err := c.do(ctx, request{method: http.MethodGet, path: newPath("v1", "operator", "autopilot", "health")}, &out)
	return out, err
}
