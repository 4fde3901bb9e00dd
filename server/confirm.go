package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/healthcheck"
)

// confirmer asks the other voters to probe an instance once (POST /v1/cluster/probe on
// each, all at once), for the leader's majority confirmation of a health transition
// (healthcheck.Confirmer). It presents the node's certificate (TLS) or its join token.
type confirmer struct {
	s *Server
}

// Confirm returns one view per other voter; a voter that cannot be asked, or does not
// answer before ctx's deadline, is a view that did not answer.
func (c confirmer) Confirm(ctx context.Context, req healthcheck.ProbeRequest) []healthcheck.Vantage {
	members, err := c.s.node.Members(ctx)
	if err != nil {
		c.s.log.Warn("health confirmation: listing the members failed; the leader's probes decide alone", "err", err)
		return nil
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil
	}
	var (
		mu  sync.Mutex
		out []healthcheck.Vantage
		wg  sync.WaitGroup
	)
	for _, m := range members {
		if m.ID == c.s.cfg.NodeID || !m.Voter {
			continue
		}
		wg.Go(func() {
			v := c.ask(ctx, m.HTTPAddr, body)
			v.Node = m.ID
			mu.Lock()
			out = append(out, v)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// ask sends one probe request to a peer.
func (c confirmer) ask(ctx context.Context, httpAddr string, body []byte) healthcheck.Vantage {
	if httpAddr == "" {
		return healthcheck.Vantage{Error: "no HTTP address recorded for this member"}
	}
	base, err := api.BaseURL(c.s.peerURL(httpAddr))
	if err != nil {
		return healthcheck.Vantage{Error: err.Error()}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, base.JoinPath("/v1/cluster/probe").String(), bytes.NewReader(body))
	if err != nil {
		return healthcheck.Vantage{Error: err.Error()}
	}
	hreq.Header.Set("Content-Type", "application/json")
	if c.s.cfg.JoinToken != "" {
		hreq.Header.Set(api.HeaderToken, c.s.cfg.JoinToken)
	}
	resp, err := c.s.joinHTTP.Do(hreq)
	if err != nil {
		return healthcheck.Vantage{Error: "not answered: " + err.Error()}
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	var v api.Vantage
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &v) != nil {
		return healthcheck.Vantage{Error: fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, raw)}
	}
	return healthcheck.Vantage{Answered: true, Healthy: v.Healthy, Outcome: v.Outcome, Error: v.Error,
		Latency: time.Duration(v.Latency), At: v.At}
}
