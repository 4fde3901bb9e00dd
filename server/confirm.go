package server

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/healthcheck"
)

// confirmer asks the other voters to probe an instance once (POST /v1/cluster/probe on
// each, all at once), for the leader's majority confirmation of a health transition
// (healthcheck.Confirmer), through peerJSON. Non-voters are not asked: they do not count
// toward the voters' majority.
type confirmer struct {
	s *Server
}

// Confirm returns the number of voters of the latest Raft configuration (this node
// counted as one) and one view per other voter; a voter that cannot be asked, or does
// not answer before ctx's deadline, is a view that did not answer. An error means the
// configuration could not be read: the confirmation is inconclusive.
func (c confirmer) Confirm(ctx context.Context, req healthcheck.ProbeRequest) (healthcheck.Confirmation, error) {
	members, err := c.s.node.Members(ctx)
	if err != nil {
		return healthcheck.Confirmation{}, err
	}
	var (
		mu  sync.Mutex
		out = healthcheck.Confirmation{Voters: 1}
		wg  sync.WaitGroup
	)
	for _, m := range members {
		if m.ID == c.s.cfg.NodeID || !m.Voter {
			continue
		}
		out.Voters++
		if m.HTTPAddr == "" {
			out.Views = append(out.Views, healthcheck.Vantage{Node: m.ID, Error: "not answered: its HTTP address is not known yet"})
			continue
		}
		wg.Go(func() {
			v := c.ask(ctx, m.HTTPAddr, req)
			v.Node = m.ID
			mu.Lock()
			out.Views = append(out.Views, v)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out, nil
}

// ask sends one probe request to a peer.
func (c confirmer) ask(ctx context.Context, httpAddr string, req healthcheck.ProbeRequest) healthcheck.Vantage {
	var v api.Vantage
	if err := c.s.peerJSON(ctx, http.MethodPost, httpAddr, "/v1/cluster/probe", req, &v, http.StatusOK); err != nil {
		return healthcheck.Vantage{Error: "not answered: " + err.Error()}
	}
	return healthcheck.Vantage{Answered: true, Healthy: v.Healthy, Outcome: v.Outcome, Error: v.Error,
		Latency: time.Duration(v.Latency), At: v.At}
}
