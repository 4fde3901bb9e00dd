package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/rosterhq/roster/api"
)

// Leader returns the current leader as the serving node knows it (GET /v1/status/leader).
// Without a known leader the server answers an error (IsNoLeader).
func (c *Client) Leader(ctx context.Context) (api.Leader, error) {
	var out api.Leader
	_, err := c.do(ctx, request{method: http.MethodGet, path: newPath("v1", "status", "leader")}, &out)
	return out, err
}

// Ready reports the serving node's readiness (GET /v1/status/ready). A node that is not
// ready answers 503 with the same body: that is returned with Ready false and a nil
// error. An error is returned only when the node could not be asked or answered
// something else.
func (c *Client) Ready(ctx context.Context) (api.Ready, error) {
	resp, err := c.roundTrip(ctx, request{method: http.MethodGet, path: newPath("v1", "status", "ready")})
	if err != nil {
		return api.Ready{}, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusServiceUnavailable:
	default:
		return api.Ready{}, decodeError(resp)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return api.Ready{}, fmt.Errorf("roster client: read readiness: %w", err)
	}
	var body struct {
		api.Ready
		Error *api.Error `json:"error"`
		Seen  *bool      `json:"ready"`
	}
	if err := json.Unmarshal(raw, &body); err != nil || body.Error != nil || body.Seen == nil {
		if resp.StatusCode == http.StatusOK {
			return api.Ready{}, errors.New("roster client: readiness response is not a readiness body")
		}
		return api.Ready{}, errorFromBody(resp.StatusCode, raw)
	}
	r := body.Ready
	r.Ready = *body.Seen && resp.StatusCode == http.StatusOK
	return r, nil
}

// Members lists the Raft servers (GET /v1/cluster/members); the index is the member
// table's, so q.WaitIndex blocks until membership changes. Use api.ConsistencyStale to
// ask a node that knows no leader.
func (c *Client) Members(ctx context.Context, q QueryOptions) (api.MembersResponse, Meta, error) {
	var out api.MembersResponse
	meta, err := c.read(ctx, newPath("v1", "cluster", "members"), q, nil, &out)
	return out, meta, err
}

// MembersWithStatus is Members with each member's own readiness, applied and commit
// indexes and lag, asked by the node that answers (GET /v1/cluster/members?detail=true).
func (c *Client) MembersWithStatus(ctx context.Context, q QueryOptions) (api.MembersResponse, Meta, error) {
	var out api.MembersResponse
	meta, err := c.read(ctx, newPath("v1", "cluster", "members"), q, url.Values{"detail": {"true"}}, &out)
	return out, meta, err
}

// Join asks the cluster to add (or re-announce) a server (POST /v1/cluster/join); it
// returns the member table's index afterwards.
func (c *Client) Join(ctx context.Context, req api.JoinRequest) (uint64, error) {
	return c.write(ctx, http.MethodPost, newPath("v1", "cluster", "join"), req)
}

// RemoveMember removes server id from the cluster (DELETE /v1/cluster/members/{id}); it
// returns the member table's index afterwards.
func (c *Client) RemoveMember(ctx context.Context, id string) (uint64, error) {
	return c.write(ctx, http.MethodDelete, newPath("v1", "cluster", "members").param("id", id), nil)
}

// TransferLeadership asks the leader to hand leadership to server id, or to any
// up-to-date voter when id is "" (POST /v1/cluster/leadership-transfer).
func (c *Client) TransferLeadership(ctx context.Context, id string) error {
	var q url.Values
	if id != "" {
		q = url.Values{"id": {id}}
	}
	_, err := c.do(ctx, request{method: http.MethodPost, path: newPath("v1", "cluster", "leadership-transfer"), query: q}, nil)
	return err
}
