package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
)

// leaderPoll is how often a request waiting for a leader checks for one.
const leaderPoll = 10 * time.Millisecond

// errLeaderMoved is raised by the proxy when the leader answered that it is not the
// leader any more; it asks forward for a retry at the new leader.
var errLeaderMoved = errors.New("the leader answered that it is not the leader")

// proxyState carries one forwarding attempt's target and outcome between forward and
// the reverse proxy's hooks.
type proxyState struct {
	target    *url.URL
	leaderID  string
	retryable bool
	// retry is set by the error hook when the attempt wrote nothing and should be
	// repeated at the new leader.
	retry bool
}

type proxyStateKey struct{}

func stateOf(r *http.Request) *proxyState {
	st, _ := r.Context().Value(proxyStateKey{}).(*proxyState)
	return st
}

// leaderOnly serves a request on the leader and forwards it from a follower.
func (s *server) leaderOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.node.IsLeader() {
			next.ServeHTTP(w, r)
			return
		}
		s.forward(w, r, next)
	})
}

// forward sends r to the leader. A request that was already forwarded is answered 503
// (one hop at most). With no leader known it waits up to Config.LeaderHold for one
// (503 no_leader after that); if this node becomes the leader meanwhile, next serves the
// request here (next nil: the request was refused here as not-leader, so only another
// node will do). When the leader answers that it is not the leader any more, or cannot
// be dialed while another leader is already known, the request is forwarded once more.
func (s *server) forward(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if by := r.Header.Get(api.HeaderForwardedBy); by != "" {
		s.metrics.forwarded.WithLabelValues("loop").Inc()
		s.writeError(w, r, fmt.Errorf("%w: %s is not the leader and the request was already forwarded by %s",
			errNotLeader, s.id, by))
		return
	}
	body := bufferedBody(r)
	exclude := ""
	for attempt := range 2 {
		leader, err := s.awaitLeader(r.Context(), exclude, next != nil)
		if err != nil {
			s.metrics.forwarded.WithLabelValues("no_leader").Inc()
			s.writeError(w, r, err)
			return
		}
		if leader.ID == s.id {
			next.ServeHTTP(w, r)
			return
		}
		target, err := api.BaseURL(leader.HTTPAddr)
		if err != nil {
			s.writeError(w, r, fmt.Errorf("%w: leader %s: %v", errUnavailable, leader.ID, err))
			return
		}
		st := &proxyState{target: target, leaderID: leader.ID, retryable: attempt == 0}
		if s.forwardOnce(w, r, body, st); !st.retry {
			return
		}
		exclude = leader.ID
	}
}

// forwardOnce runs one proxy attempt.
func (s *server) forwardOnce(w http.ResponseWriter, r *http.Request, body []byte, st *proxyState) {
	ctx, cancel := context.WithTimeout(r.Context(), s.forwardTimeout(r))
	defer cancel()
	out := r.Clone(context.WithValue(ctx, proxyStateKey{}, st))
	setBody(out, body)
	// The leader sets these on its answer; ours would be duplicated.
	for _, h := range []string{api.HeaderServedBy, api.HeaderIndex, api.HeaderConsistency,
		api.HeaderKnownLeader, api.HeaderLastContact, api.HeaderNotLeader} {
		w.Header().Del(h)
	}
	s.proxy.ServeHTTP(w, out)
	if st.retry {
		w.Header().Set(api.HeaderServedBy, s.id)
		s.metrics.forwarded.WithLabelValues("retry").Inc()
	}
}

// forwardTimeout bounds one forwarded request: the leader's own request timeout and
// leader hold, plus the wait of a blocking query.
func (s *server) forwardTimeout(r *http.Request) time.Duration {
	d := s.cfg.RequestTimeout + s.cfg.LeaderHold
	if o, ok := r.Context().Value(readOptionsKey{}).(readOptions); ok && o.blocking {
		d += o.wait + o.wait/16
	}
	return d
}

// awaitLeader returns the leader once one other than this node and exclude is known
// with an HTTP address, or this node itself when it is the leader and allowSelf is set.
// It gives up after Config.LeaderHold with errNoLeader.
func (s *server) awaitLeader(ctx context.Context, exclude string, allowSelf bool) (model.Member, error) {
	deadline := time.NewTimer(s.cfg.LeaderHold)
	defer deadline.Stop()
	tick := time.NewTicker(leaderPoll)
	defer tick.Stop()
	for {
		if allowSelf && s.node.IsLeader() {
			return model.Member{ID: s.id}, nil
		}
		l, ok := s.node.Leader()
		if ok && l.ID != exclude && l.ID != s.id && l.HTTPAddr != "" {
			return l, nil
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			if ok && l.HTTPAddr == "" {
				return model.Member{}, fmt.Errorf("%w: the leader %s has no known HTTP address", errNoLeader, l.ID)
			}
			return model.Member{}, fmt.Errorf("%w: none known within %s", errNoLeader, s.cfg.LeaderHold)
		case <-ctx.Done():
			return model.Member{}, ctx.Err()
		}
	}
}

// newProxy builds the reverse proxy shared by all forwarded requests.
func (s *server) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			st := stateOf(pr.In)
			pr.SetURL(st.target)
			pr.SetXForwarded()
			pr.Out.Header.Set(api.HeaderForwardedBy, s.id)
		},
		Transport: s.transport,
		ErrorLog:  slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ModifyResponse: func(resp *http.Response) error {
			st := stateOf(resp.Request)
			if st != nil && st.retryable && resp.StatusCode == http.StatusServiceUnavailable &&
				resp.Header.Get(api.HeaderNotLeader) == "true" {
				return errLeaderMoved
			}
			s.metrics.forwarded.WithLabelValues("ok").Inc()
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			st := stateOf(r)
			if st != nil && st.retryable && s.shouldRetry(st, err) {
				st.retry = true
				return
			}
			s.metrics.forwarded.WithLabelValues("error").Inc()
			w.Header().Set(api.HeaderServedBy, s.id)
			switch {
			case errors.Is(err, errLeaderMoved):
				s.writeError(w, r, fmt.Errorf("%w: %v", errNotLeader, err))
			case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() != nil:
				s.writeError(w, r, fmt.Errorf("forwarding to the leader %s: %w", st.leaderID, err))
			default:
				s.writeError(w, r, fmt.Errorf("%w: forwarding to the leader %s: %v", errUnavailable, st.leaderID, err))
			}
		},
	}
}

// shouldRetry says whether a failed attempt is worth one more at another leader: the
// leader refused as not-leader (nothing applied), or it could not be dialed and this
// node already knows a different leader.
func (s *server) shouldRetry(st *proxyState, err error) bool {
	if errors.Is(err, errLeaderMoved) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		l, ok := s.node.Leader()
		return ok && l.ID != st.leaderID && l.ID != s.id
	}
	return false
}
