package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/rosterhq/roster/api"
)

// SnapshotInfo describes a downloaded backup archive.
type SnapshotInfo struct {
	// Index is the Raft index the archived state reflects.
	Index uint64
	// Bytes is the number of archive bytes written.
	Bytes int64
	// ServedBy is the node that produced the archive.
	ServedBy string
}

// SaveSnapshot downloads a backup archive of the whole state (GET /v1/snapshot) and
// streams it into w. By default the leader produces it (the node asked forwards the
// request), holding every write acknowledged before the call; stale lets the node
// asked serve its own state, even without a leader. Only ctx bounds the download: the
// client's request timeout does not apply. On error w may hold part of an archive.
// SaveSnapshot does not verify the archive; snapshot.Inspect does.
func (c *Client) SaveSnapshot(ctx context.Context, w io.Writer, stale bool) (SnapshotInfo, error) {
	var q url.Values
	if stale {
		q = url.Values{"consistency": {api.ConsistencyStale}}
	}
	resp, err := c.snapshotRequest(ctx, http.MethodGet, q, nil)
	if err != nil {
		return SnapshotInfo{}, err
	}
	defer resp.Body.Close()
	info := SnapshotInfo{ServedBy: resp.Header.Get(api.HeaderServedBy)}
	info.Index, _ = strconv.ParseUint(resp.Header.Get(api.HeaderIndex), 10, 64)
	info.Bytes, err = io.Copy(w, resp.Body)
	if err != nil {
		return info, fmt.Errorf("roster client: download snapshot after %d bytes: %w", info.Bytes, err)
	}
	return info, nil
}

// RestoreSnapshot uploads the archive read from r (PUT /v1/snapshot), streaming it, and
// returns once the cluster has installed it. The server checks the whole archive
// first: a bad one is an *APIError with status 400 whose Field names the archive member
// at fault and whose Message says what is wrong; the cluster is then unchanged. Another
// restore in progress is a conflict (IsConflict). Only ctx bounds the call.
//
// The cluster keeps its own ACL state (tokens, bootstrap); RestoreSnapshotWith with
// RestoreOptions.ACL = api.RestoreACLArchive restores the archive's.
func (c *Client) RestoreSnapshot(ctx context.Context, r io.Reader) error {
	_, err := c.RestoreSnapshotWith(ctx, r, RestoreOptions{})
	return err
}

// RestoreOptions are the options of RestoreSnapshotWith.
type RestoreOptions struct {
	// ACL is api.RestoreACLCluster (or ""): keep the cluster's ACL state, or
	// api.RestoreACLArchive: restore the archive's (needs acl: write).
	ACL string
}

// RestoreSnapshotWith is RestoreSnapshot with options; it returns the server's answer,
// which says whose ACL state the cluster has now.
func (c *Client) RestoreSnapshotWith(ctx context.Context, r io.Reader, o RestoreOptions) (api.SnapshotRestoreResult, error) {
	var q url.Values
	if o.ACL != "" {
		q = url.Values{"acl": {o.ACL}}
	}
	resp, err := c.snapshotRequest(ctx, http.MethodPut, q, r)
	if err != nil {
		return api.SnapshotRestoreResult{}, err
	}
	defer resp.Body.Close()
	var res api.SnapshotRestoreResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return res, fmt.Errorf("roster client: decoding the restore's answer: %w", err)
	}
	return res, nil
}

// snapshotRequest sends a request to /v1/snapshot without the client's timeout and
// turns a non-2xx answer into an *APIError.
func (c *Client) snapshotRequest(ctx context.Context, method string, q url.Values, body io.Reader) (*http.Response, error) {
	if c.baseErr != nil {
		return nil, c.baseErr
	}
	u := c.base.String() + "/v1/snapshot"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("roster client: %w", err)
	}
	req.Header.Set("User-Agent", "roster-client")
	c.authorize(req)
	req.Header.Set("Accept", "application/gzip, application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/gzip")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}
