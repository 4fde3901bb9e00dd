package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"strings"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/raftnode"
)

// joiner sends raftnode's join requests with the API client (POST /v1/cluster/join at
// the target member, which hands them to the leader) over hc, with token when set (a
// cluster with ACLs needs one with operator: write); url makes the address the member
// table holds the one to dial.
//
// A leader of an older release refuses the fields it does not know (400 naming an
// unknown field). During a rolling upgrade the request is then sent again in the shape
// of the releases before: without the build (v0.2.x), then with only the addresses and
// suffrage (v0.1.x), whose leader treats it as an announcement of an existing server.
func joiner(hc *http.Client, token string, url func(string) string) raftnode.Joiner {
	return func(ctx context.Context, target string, req raftnode.JoinRequest) error {
		c := client.New(url(target), client.WithHTTPClient(hc), client.WithToken(token))
		var err error
		for _, body := range joinShapes(req) {
			if _, err = c.Join(ctx, body); !unknownField(err) {
				return err
			}
		}
		return err
	}
}

// joinShapes is req in today's shape, then in the shapes older leaders accept.
func joinShapes(req raftnode.JoinRequest) []api.JoinRequest {
	full := api.JoinRequest{
		ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr, NonVoter: req.NonVoter,
		ClusterID: req.ClusterID, Announce: req.Announce, NewestCommand: req.NewestCommand,
		Version: req.Version, Commit: req.Commit,
	}
	v02 := full
	v02.Version, v02.Commit = "", ""
	v01 := api.JoinRequest{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr, NonVoter: req.NonVoter}
	return []api.JoinRequest{full, v02, v01}
}

// unknownField reports whether err is a leader refusing a field of the request it does
// not know.
func unknownField(err error) bool {
	var e *client.APIError
	return errors.As(err, &e) && e.Status == http.StatusBadRequest && strings.Contains(e.Message, "unknown field")
}

// newJoinHTTPClient is the HTTP client of join requests and state checks: traffic
// between members never goes through an HTTP proxy from the environment, and few
// connections are kept. tlsCfg (nil: TLS off) presents the node's certificate.
func newJoinHTTPClient(tlsCfg *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, TLSClientConfig: tlsCfg}}
}
