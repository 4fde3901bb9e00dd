package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Consistency modes of reads, as Roster names them. For etcd, linearizable is a default
// range and stale and leader are serializable ranges (leader against the leader only).
const (
	Linearizable = "linearizable"
	Leader       = "leader"
	Stale        = "stale"
)

// Target selection: "leader" sends every request to the leader; "all" spreads workers
// over every endpoint (worker i uses endpoint i mod n).
const (
	TargetLeader = "leader"
	TargetAll    = "all"
)

// Watch transports of the Roster client (ClientConfig.WatchTransport): SSE holds one
// text/event-stream response open per watcher (GET .../instances with Accept:
// text/event-stream, served from the node's local state), blocking runs blocking queries
// (?index=N&wait=30s) in a loop. etcd always uses its watch stream.
const (
	WatchSSE      = "sse"
	WatchBlocking = "blocking"
)

// DefaultWatchTransport is the Roster client's watch transport when none is configured.
const DefaultWatchTransport = WatchSSE

// Systems the bench can drive.
const (
	SystemRoster = "roster"
	SystemEtcd   = "etcd"
)

// ErrNotFound is returned by Deregister when the instance did not exist.
var ErrNotFound = errors.New("bench: instance not found")

// InstanceKey identifies one registered instance.
type InstanceKey struct {
	Service string
	IP      string
	Port    int
}

// Addr is "ip:port".
func (k InstanceKey) Addr() string { return net.JoinHostPort(k.IP, fmt.Sprint(k.Port)) }

// Client is a system under test. Every method with a worker argument uses that worker's
// endpoint (stable per worker, so each worker keeps its own keep-alive connection) and is
// safe for concurrent use.
type Client interface {
	// System is SystemRoster or SystemEtcd.
	System() string
	// Register creates or replaces an instance; gen is carried in its metadata so that
	// successive registrations of the same instance are real changes. It returns the
	// index (Raft index or etcd revision) of the write.
	Register(ctx context.Context, worker int, k InstanceKey, gen uint64) (uint64, error)
	// Deregister deletes an instance; ErrNotFound if it did not exist.
	Deregister(ctx context.Context, worker int, k InstanceKey) (uint64, error)
	// Read lists a service's instances in the given consistency mode; it returns the
	// index of the data read and the number of instances.
	Read(ctx context.Context, worker int, service, mode string) (index uint64, n int, err error)
	// PrepareService readies a service before the bench registers instances in it (setup
	// only, not measured). For Roster it creates the service's DEFAULT cluster with health
	// check type NONE, unless ClientConfig.HealthChecks keeps the default TCP check: the
	// bench's instances have unreachable addresses, and probing them would load the leader
	// and add health-flip writes that etcd, a plain KV store, never does. For etcd it does
	// nothing.
	PrepareService(ctx context.Context, service string) error
	// List returns the instances of a service (setup only, not measured).
	List(ctx context.Context, service string) ([]InstanceKey, error)
	// Watch calls seen(index, time) with the index current once the watch is established,
	// then again each time it learns that the service changed at a higher index. It
	// blocks until ctx is done (returning nil) or an error occurs. Roster watches with the
	// configured ClientConfig.WatchTransport: over SSE, one call is one event stream on
	// its own connection, it needs mode Stale (the stream is served from the node's local
	// state), a not_found event counts as a state at its index, and the end of the stream
	// is an error (the caller reconnects).
	Watch(ctx context.Context, worker int, service, mode string, seen func(uint64, time.Time)) error
	// Close releases idle connections.
	Close()
}

// ClientConfig configures a Client.
type ClientConfig struct {
	// System is SystemRoster or SystemEtcd.
	System string
	// Endpoints are the HTTP addresses (host:port or URLs) of every cluster member.
	Endpoints []string
	// WriteTarget and ReadTarget are TargetLeader (default) or TargetAll.
	WriteTarget, ReadTarget string
	// Timeout bounds each request (0 = 10s); watches are not bounded.
	Timeout time.Duration
	// MaxConns sizes the keep-alive pool per endpoint (0 = 512).
	MaxConns int
	// TLS, when set, is the TLS configuration of the Roster client's connections, and an
	// endpoint without a scheme is an https:// one. The etcd client ignores it.
	TLS *tls.Config
	// HealthChecks keeps Roster's default TCP health check on the bench's services (see
	// Client.PrepareService).
	HealthChecks bool
	// WatchTransport is how the Roster client watches: WatchSSE or WatchBlocking (""
	// means DefaultWatchTransport). The etcd client ignores it.
	WatchTransport string
	// Token is the ACL token secret every Roster request presents ("" none).
	Token string
}

// WatchTransportOrDefault is c.WatchTransport, or DefaultWatchTransport when empty.
func (c ClientConfig) WatchTransportOrDefault() string {
	if c.WatchTransport == "" {
		return DefaultWatchTransport
	}
	return c.WatchTransport
}

// validWatchTransport rejects an unknown watch transport.
func validWatchTransport(t string) error {
	switch t {
	case "", WatchSSE, WatchBlocking:
		return nil
	}
	return fmt.Errorf("bench: watch transport %q: want %s or %s", t, WatchSSE, WatchBlocking)
}

// NewClient builds a client for cfg.System and resolves the leader when a target needs it.
func NewClient(ctx context.Context, cfg ClientConfig) (Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("bench: no endpoints")
	}
	for _, t := range []*string{&cfg.WriteTarget, &cfg.ReadTarget} {
		switch *t {
		case "":
			*t = TargetLeader
		case TargetLeader, TargetAll:
		default:
			return nil, fmt.Errorf("bench: target %q: want %s or %s", *t, TargetLeader, TargetAll)
		}
	}
	if err := validWatchTransport(cfg.WatchTransport); err != nil {
		return nil, err
	}
	cfg.WatchTransport = cfg.WatchTransportOrDefault()
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 512
	}
	eps := make([]string, len(cfg.Endpoints))
	for i, e := range cfg.Endpoints {
		if cfg.TLS != nil && cfg.System == SystemRoster && !strings.Contains(e, "://") {
			e = "https://" + strings.TrimSpace(e)
		}
		eps[i] = baseURL(e)
	}
	h := newHTTP(cfg.Timeout, cfg.MaxConns)
	h.token = cfg.Token
	switch cfg.System {
	case SystemRoster:
		return newRosterClient(ctx, h, eps, cfg)
	case SystemEtcd:
		return newEtcdClient(ctx, h, eps, cfg)
	default:
		return nil, fmt.Errorf("bench: system %q: want %s or %s", cfg.System, SystemRoster, SystemEtcd)
	}
}

// baseURL turns "host:port" into "http://host:port" and drops a trailing slash.
func baseURL(e string) string {
	e = strings.TrimRight(strings.TrimSpace(e), "/")
	if !strings.Contains(e, "://") {
		e = "http://" + e
	}
	return e
}

// httpClients holds the two HTTP clients of a target: one bounded per request, one
// without a timeout for long polls and streams. Both share one keep-alive pool, which
// limits idle connections only: a stream holds its connection for itself while it is
// open, so N concurrent watches are N connections (HTTP/1.1, no connection cap per host).
type httpClients struct {
	tr      *http.Transport
	req     *http.Client
	stream  *http.Client
	timeout time.Duration
	token   string // ACL token secret sent with every request ("" none)
}

func newHTTP(timeout time.Duration, maxConns int) *httpClients {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: maxConns,
		MaxConnsPerHost:     0, // unlimited: every open stream is a connection of its own
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &httpClients{
		tr:      tr,
		req:     &http.Client{Transport: tr, Timeout: timeout},
		stream:  &http.Client{Transport: tr},
		timeout: timeout,
	}
}

func (h *httpClients) close() { h.tr.CloseIdleConnections() }

// authorize sets the ACL token header of req.
func (h *httpClients) authorize(req *http.Request) {
	if h.token != "" {
		req.Header.Set("X-Roster-Token", h.token)
	}
}

// statusError is a non-2xx answer; the body's first bytes are kept for the report.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string {
	if e.body == "" {
		return fmt.Sprintf("http %d", e.code)
	}
	return fmt.Sprintf("http %d: %s", e.code, e.body)
}

// do sends a request and returns the body of a 2xx answer. The body is always read to
// the end and closed so the connection returns to the keep-alive pool.
func (h *httpClients) do(ctx context.Context, method, url string, body []byte) (*http.Response, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	h.authorize(req)
	resp, err := h.req.Do(req)
	if err != nil {
		return nil, nil, shortenNetErr(err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return resp, nil, shortenNetErr(err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		s := strings.TrimSpace(string(b))
		if len(s) > 160 {
			s = s[:160]
		}
		return resp, b, &statusError{code: resp.StatusCode, body: s}
	}
	return resp, b, nil
}

// shortenNetErr drops the URL from transport errors so that error kinds aggregate
// across instances in the report.
func shortenNetErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// pick returns the endpoint of worker w among eps.
func pick(eps []string, w int) string {
	if w < 0 {
		w = -w
	}
	return eps[w%len(eps)]
}

// drain reads the rest of a body (up to 1 MiB) so the connection can be reused, and
// returns a short excerpt of it for error messages.
func drain(resp *http.Response) (int64, string, error) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	s := strings.TrimSpace(string(b))
	if len(s) > 160 {
		s = s[:160]
	}
	return int64(len(b)), s, err
}
