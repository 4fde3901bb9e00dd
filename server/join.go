package server

import (
	"context"
	"crypto/tls"
	"net/http"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/raftnode"
)

// joiner sends raftnode's join requests with the API client (POST /v1/cluster/join at
// the target member, which hands them to the leader) over hc, with token when set (a
// cluster with ACLs needs one with operator: write); url makes the address the member
// table holds the one to dial.
func joiner(hc *http.Client, token string, url func(string) string) raftnode.Joiner {
	return func(ctx context.Context, target string, req raftnode.JoinRequest) error {
		_, err := client.New(url(target), client.WithHTTPClient(hc), client.WithToken(token)).Join(ctx, api.JoinRequest{
			ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr, NonVoter: req.NonVoter,
			ClusterID: req.ClusterID, Announce: req.Announce, NewestCommand: req.NewestCommand,
		})
		return err
	}
}

// newJoinHTTPClient is the HTTP client of join requests and state checks: traffic
// between members never goes through an HTTP proxy from the environment, and few
// connections are kept. tlsCfg (nil: TLS off) presents the node's certificate.
func newJoinHTTPClient(tlsCfg *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, TLSClientConfig: tlsCfg}}
}
