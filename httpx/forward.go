package httpx

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/registry"
)

// leaderPoll is how often a request waiting for a leader checks for one.
const leaderPoll = 10 * time.Millisecond

// errLeaderMoved is raised by the proxy when the leader answered that it is not the
// leader any more; it asks forward for a retry at the new leader.
var errLeaderMoved = errors.New("the leader answered that it is not the leader")

// Node is what forwarding needs of the node (the server wires the consensus layer).
type Node interface {
	// IsLeader reports whether this node is the leader now.
	IsLeader() bool
	// Leader returns the current leader's addresses, if one is known.
	Leader() (model.Member, bool)
}

// ForwarderConfig configures a Forwarder. Node, NodeID and Metrics are required.
type ForwarderConfig struct {
	Node   Node
	NodeID string
	Logger *slog.Logger
	// RequestTimeout and LeaderHold bound one forwarded request, together with the
	// wait of a blocking read; LeaderHold bounds the wait for a leader to be known.
	RequestTimeout time.Duration
	LeaderHold     time.Duration
	// Transport carries the forwarded requests; nil means a keep-alive transport owned
	// by the Forwarder (see CloseIdleConnections).
	Transport http.RoundTripper
	Metrics   *Metrics
	// CatchUp, when set, waits until this node has applied every entry up to min
	// (*raftnode.Node.CatchUp). A blocking read parked here runs only after it, so that
	// it sees the writes this node forwarded (ForwardBlocking).
	CatchUp func(ctx context.Context, min uint64) error
	// TLS, when set, is the client configuration of the connections to the leader (of
	// the Forwarder's own transport), and a leader address without a scheme is dialed
	// over HTTPS: the cluster serves its API over HTTPS only.
	TLS *tls.Config
}

// Forwarder sends requests that need the leader to it, for every API of a node.
type Forwarder struct {
	cfg       ForwarderConfig
	id        string
	node      Node
	log       *slog.Logger
	met       *Metrics
	proxy     *httputil.ReverseProxy
	transport http.RoundTripper
	ownsTrans bool
	// lastWrite is the highest index of a write this node forwarded and the leader
	// acknowledged (LastWriteIndex).
	lastWrite atomic.Uint64
}

// LastWriteIndex is the highest index of a write this node forwarded to the leader and
// saw acknowledged: once this node has applied it, a read here sees every write made
// through this node.
func (f *Forwarder) LastWriteIndex() uint64 { return f.lastWrite.Load() }

// noteWrite records the index of an acknowledged forwarded write.
func (f *Forwarder) noteWrite(resp *http.Response) {
	switch resp.Request.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return
	}
	idx, err := strconv.ParseUint(resp.Header.Get(api.HeaderIndex), 10, 64)
	if err != nil {
		return
	}
	for {
		cur := f.lastWrite.Load()
		if idx <= cur || f.lastWrite.CompareAndSwap(cur, idx) {
			return
		}
	}
}

// NewForwarder returns a Forwarder.
func NewForwarder(cfg ForwarderConfig) (*Forwarder, error) {
	if cfg.Node == nil || cfg.NodeID == "" || cfg.Metrics == nil {
		return nil, errors.New("httpx: ForwarderConfig.Node, NodeID and Metrics are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Forwarder{cfg: cfg, id: cfg.NodeID, node: cfg.Node, log: cfg.Logger, met: cfg.Metrics, transport: cfg.Transport}
	if f.transport == nil {
		t := NewTransport(cfg.RequestTimeout)
		t.TLSClientConfig = cfg.TLS
		f.transport, f.ownsTrans = t, true
	}
	f.proxy = f.newProxy()
	return f, nil
}

// MaxForwardConns bounds the connections a node opens to the leader to forward requests.
const MaxForwardConns = 128

// NewTransport is the shared keep-alive transport used to reach the leader. Dialing is
// bounded so that a dead leader is a quick 503, never a hang.
func NewTransport(requestTimeout time.Duration) *http.Transport {
	dial := min(3*time.Second, requestTimeout)
	if dial <= 0 {
		dial = 3 * time.Second
	}
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: dial, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		// Forwarded requests share a bounded pool: a burst waits for a connection instead
		// of opening one per request (blocking reads no longer hold one while they
		// wait: ForwardBlocking).
		MaxConnsPerHost:       MaxForwardConns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   dial,
		ExpectContinueTimeout: time.Second,
	}
}

// CloseIdleConnections closes idle connections of the transport when the Forwarder owns it.
func (f *Forwarder) CloseIdleConnections() {
	if t, ok := f.transport.(*http.Transport); ok && f.ownsTrans {
		t.CloseIdleConnections()
	}
}

// proxyState carries one forwarding attempt's target and outcome between forward and
// the reverse proxy's hooks.
type proxyState struct {
	target    *url.URL
	leaderID  string
	retryable bool
	fail      ErrorWriter
	// deadline ends the forward's retries (LeaderHold after it began).
	deadline time.Time
	// retry is set by the error hook when the attempt wrote nothing and should be
	// repeated at the new leader; notSent says it never reached the leader.
	retry, notSent bool
}

type proxyStateKey struct{}

func stateOf(r *http.Request) *proxyState {
	st, _ := r.Context().Value(proxyStateKey{}).(*proxyState)
	return st
}

// Writes serves a write where it arrived when reg reaches the leader itself (the write
// goes to the leader typed, registry.Peer); otherwise it is LeaderOnly.
func (f *Forwarder) Writes(reg *registry.Registry, fail ErrorWriter) func(http.Handler) http.Handler {
	if reg.ReachesLeader() {
		return func(next http.Handler) http.Handler { return next }
	}
	return f.LeaderOnly(fail)
}

// ReadsHere reports whether a read under o is served by this node: a stale read, a read
// on the leader, or any read when reg reaches the leader itself (a consistent read asks
// it for a read index). Otherwise the read is forwarded to the leader.
func ReadsHere(reg *registry.Registry, o ReadOptions) bool {
	return o.Mode == api.ConsistencyStale || reg.IsLeader() || reg.ReachesLeader()
}

// HandOver reports whether a request that failed with err is sent on to the leader over
// HTTP: a leader of an older release cannot take it typed (registry.ErrLegacyLeader), or,
// when reg does not reach the leader itself, this node turned out not to lead. A request
// forwarded already is never sent on (one hop at most).
func HandOver(reg *registry.Registry, r *http.Request, err error) bool {
	if r.Header.Get(api.HeaderForwardedBy) != "" {
		return false
	}
	leaderOnly, _ := r.Context().Value(leaderOnlyKey{}).(bool)
	return errors.Is(err, registry.ErrLegacyLeader) || ((leaderOnly || !reg.ReachesLeader()) && IsNotLeader(err))
}

// leaderOnlyKey marks a request LeaderOnly serves here, as leader: one that turns out
// not to be served by the leader is handed over (HandOver).
type leaderOnlyKey struct{}

// LeaderOnly serves a request on the leader and forwards it from a follower (fail
// answers what cannot be forwarded).
func (f *Forwarder) LeaderOnly(fail ErrorWriter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if f.node.IsLeader() {
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), leaderOnlyKey{}, true)))
				return
			}
			f.Forward(w, r, next, fail)
		})
	}
}

// Forward sends r, whose body BufferBody kept, to the leader; fail answers in the
// caller's shape what cannot be forwarded. A request that was already forwarded is
// answered 503 (one hop at most). With no leader known it waits up to LeaderHold for one
// (503 no_leader after that); if this node becomes the leader meanwhile, next serves the
// request here (next nil: the request was refused here as not-leader, so only another
// node will do). When the leader answers that it is not the leader any more, or cannot
// be dialed while another leader is already known, the request is forwarded once more.
func (f *Forwarder) Forward(w http.ResponseWriter, r *http.Request, next http.Handler, fail ErrorWriter) {
	if by := r.Header.Get(api.HeaderForwardedBy); by != "" {
		f.met.Forwarded.WithLabelValues("loop").Inc()
		fail(w, r, fmt.Errorf("%w: %s is not the leader and the request was already forwarded by %s",
			ErrNotLeader, f.id, by))
		return
	}
	body := Body(r)
	exclude := ""
	deadline := time.Now().Add(f.cfg.LeaderHold)
	moved := false // a leader answered that it no longer leads: retried once
	for {
		leader, err := f.awaitLeaderUntil(r.Context(), exclude, next != nil, deadline)
		if err != nil {
			f.met.Forwarded.WithLabelValues("no_leader").Inc()
			fail(w, r, err)
			return
		}
		if leader.ID == f.id {
			next.ServeHTTP(w, r)
			return
		}
		target, err := f.leaderURL(leader.HTTPAddr)
		if err != nil {
			fail(w, r, fmt.Errorf("%w: leader %s: %v", ErrUnavailable, leader.ID, err))
			return
		}
		st := &proxyState{target: target, leaderID: leader.ID, retryable: !moved, deadline: deadline, fail: fail}
		if f.forwardOnce(w, r, body, st); !st.retry {
			return
		}
		if st.notSent {
			// Nothing reached the leader (it could not be dialed: killed, or stopping).
			// Wait for the next leader, which may be the same server once restarted.
			exclude = ""
			if !sleepUntil(r.Context(), min(time.Until(deadline), notSentPause)) {
				fail(w, r, r.Context().Err())
				return
			}
			continue
		}
		moved, exclude = true, leader.ID
	}
}

// notSentPause is how long a forward that could not reach the leader waits before it
// looks for a leader again.
const notSentPause = 50 * time.Millisecond

// sleepUntil waits d or until ctx ends; it reports whether d passed.
func sleepUntil(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// leaderURL parses the leader's HTTP address; with TLS on, one without a scheme is an
// https URL.
func (f *Forwarder) leaderURL(addr string) (*url.URL, error) {
	u, err := api.BaseURL(addr)
	if err == nil && f.cfg.TLS != nil && !strings.Contains(addr, "://") {
		u.Scheme = "https"
	}
	return u, err
}

// Retried records that a request refused here as not-leader while it was being served
// is sent on to the new leader (a handler's own retry through Forward).
func (f *Forwarder) Retried() { f.met.LeaderMoved.Inc() }

// forwardOnce runs one proxy attempt.
func (f *Forwarder) forwardOnce(w http.ResponseWriter, r *http.Request, body []byte, st *proxyState) {
	f.log.DebugContext(r.Context(), "forwarding the request to the leader", "leader", st.leaderID,
		"method", r.Method, "path", r.URL.Path, "retry", !st.retryable)
	ctx, cancel := context.WithTimeout(r.Context(), f.forwardTimeout(r))
	defer cancel()
	out := r.Clone(context.WithValue(ctx, proxyStateKey{}, st))
	SetBody(out, body)
	clearLeaderHeaders(w)
	f.proxy.ServeHTTP(w, out)
	if st.retry {
		w.Header().Set(api.HeaderServedBy, f.id)
		f.met.Forwarded.WithLabelValues("retry").Inc()
	}
}

// clearLeaderHeaders removes the headers the leader sets on its answer, which ours
// would duplicate.
func clearLeaderHeaders(w http.ResponseWriter) {
	for _, h := range []string{api.HeaderServedBy, api.HeaderIndex, api.HeaderConsistency,
		api.HeaderKnownLeader, api.HeaderLastContact, api.HeaderNotLeader} {
		w.Header().Del(h)
	}
}

// ForwardStream sends r to the leader with its body streamed as it arrives (a snapshot
// archive): no buffering and no second attempt, since the body can be read only once.
// local serves the request here when this node is the leader (nil: it is not served
// here); refuse answers what cannot be forwarded, in the caller's shape and without
// reading the body; fail answers a forwarding attempt that failed.
func (f *Forwarder) ForwardStream(w http.ResponseWriter, r *http.Request, local http.HandlerFunc, refuse, fail ErrorWriter) {
	if by := r.Header.Get(api.HeaderForwardedBy); by != "" {
		f.met.Forwarded.WithLabelValues("loop").Inc()
		refuse(w, r, fmt.Errorf("%w: %s is not the leader and the request was already forwarded by %s",
			ErrNotLeader, f.id, by))
		return
	}
	leader, err := f.awaitLeader(r.Context(), "", local != nil)
	if err != nil {
		f.met.Forwarded.WithLabelValues("no_leader").Inc()
		refuse(w, r, err)
		return
	}
	if leader.ID == f.id {
		local(w, r)
		return
	}
	target, err := f.leaderURL(leader.HTTPAddr)
	if err != nil {
		refuse(w, r, fmt.Errorf("%w: leader %s: %v", ErrUnavailable, leader.ID, err))
		return
	}
	st := &proxyState{target: target, leaderID: leader.ID, fail: fail}
	f.log.DebugContext(r.Context(), "forwarding the request to the leader, streaming its body", "leader", st.leaderID,
		"method", r.Method, "path", r.URL.Path)
	out := r.Clone(context.WithValue(r.Context(), proxyStateKey{}, st)) // shares r.Body
	clearLeaderHeaders(w)
	f.proxy.ServeHTTP(w, out)
}

// forwardTimeout bounds one forwarded request: the leader's own request timeout and
// leader hold, plus the wait of a blocking query.
func (f *Forwarder) forwardTimeout(r *http.Request) time.Duration {
	d := f.cfg.RequestTimeout + f.cfg.LeaderHold
	if o := ReadOptionsOf(r, ReadOptions{}); o.Blocking {
		d += o.Wait + o.Wait/16
	}
	return d
}

// AwaitLeader waits, up to LeaderHold, until this node knows a leader (itself or
// another with an HTTP address); it reports whether one is known.
func (f *Forwarder) AwaitLeader(ctx context.Context) bool {
	_, err := f.awaitLeader(ctx, "", true)
	return err == nil
}

// awaitLeader returns the leader once one other than this node and exclude is known
// with an HTTP address, or this node itself when it is the leader and allowSelf is set.
// It gives up after LeaderHold with ErrNoLeader.
func (f *Forwarder) awaitLeader(ctx context.Context, exclude string, allowSelf bool) (model.Member, error) {
	return f.awaitLeaderUntil(ctx, exclude, allowSelf, time.Now().Add(f.cfg.LeaderHold))
}

// awaitLeaderUntil is awaitLeader giving up at until.
func (f *Forwarder) awaitLeaderUntil(ctx context.Context, exclude string, allowSelf bool, until time.Time) (model.Member, error) {
	deadline := time.NewTimer(time.Until(until))
	defer deadline.Stop()
	tick := time.NewTicker(leaderPoll)
	defer tick.Stop()
	for {
		if allowSelf && f.node.IsLeader() {
			return model.Member{ID: f.id}, nil
		}
		l, ok := f.node.Leader()
		if ok && l.ID != exclude && l.ID != f.id && l.HTTPAddr != "" {
			return l, nil
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			if ok && l.HTTPAddr == "" {
				return model.Member{}, fmt.Errorf("%w: the leader %s has no known HTTP address", ErrNoLeader, l.ID)
			}
			return model.Member{}, fmt.Errorf("%w: none known within %s", ErrNoLeader, f.cfg.LeaderHold)
		case <-ctx.Done():
			return model.Member{}, ctx.Err()
		}
	}
}

// newProxy builds the reverse proxy shared by all forwarded requests.
func (f *Forwarder) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			st := stateOf(pr.In)
			pr.SetURL(st.target)
			// The leader gets the query string exactly as the client sent it: the proxy
			// removes the parameters it cannot parse, and a request the leader would
			// refuse must not become one it applies. The leader runs the same code, so
			// it reads the query as this node would have.
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
			pr.SetXForwarded()
			pr.Out.Header.Set(api.HeaderForwardedBy, f.id)
			// The leader keeps the id, so both nodes log the request under it.
			if id := RequestIDOf(pr.In.Context()); id != "" {
				pr.Out.Header.Set(HeaderRequestID, id)
			}
		},
		Transport: f.transport,
		ErrorLog:  slog.NewLogLogger(f.log.Handler(), slog.LevelWarn),
		ModifyResponse: func(resp *http.Response) error {
			if RequestIDOf(resp.Request.Context()) != "" {
				resp.Header.Del(HeaderRequestID) // the same id, already on this node's answer
			}
			st := stateOf(resp.Request)
			if st != nil && st.retryable && resp.StatusCode == http.StatusServiceUnavailable &&
				resp.Header.Get(api.HeaderNotLeader) == "true" {
				return errLeaderMoved
			}
			f.met.Forwarded.WithLabelValues("ok").Inc()
			f.noteWrite(resp)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			st := stateOf(r)
			if st != nil && neverSent(err) && !st.deadline.IsZero() && time.Now().Before(st.deadline) && r.Context().Err() == nil {
				st.retry, st.notSent = true, true
				return
			}
			if st != nil && st.retryable && errors.Is(err, errLeaderMoved) {
				st.retry = true
				return
			}
			f.met.Forwarded.WithLabelValues("error").Inc()
			w.Header().Set(api.HeaderServedBy, f.id)
			switch {
			case errors.Is(err, errLeaderMoved):
				st.fail(w, r, fmt.Errorf("%w: %v", ErrNotLeader, err))
			case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() != nil:
				st.fail(w, r, fmt.Errorf("forwarding to the leader %s: %w", st.leaderID, err))
			case neverSent(err):
				// Nothing reached the leader, so nothing was applied: the client may retry
				// anywhere, which "unavailable" (outcome unknown) would not tell it.
				st.fail(w, r, fmt.Errorf("%w: the leader %s could not be reached, so the request was not sent (not applied): %v",
					ErrNoLeader, st.leaderID, err))
			default:
				st.fail(w, r, fmt.Errorf("%w: forwarding to the leader %s: %v", ErrUnavailable, st.leaderID, err))
			}
		},
	}
}

// neverSent reports whether a forwarding attempt failed before any of the request could
// reach the leader: the connection to it could not be opened.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
