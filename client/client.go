// Package client is a Go client for Roster's native REST API (/v1/...). It speaks the
// wire types of package api, one typed method per route, and turns error responses into
// *APIError values.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rosterhq/roster/api"
)

// DefaultTimeout bounds a request that is not a blocking query. A blocking query gets
// this much on top of its wait time (plus the server's jitter).
const DefaultTimeout = 30 * time.Second

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// Client calls one Roster node. It is safe for concurrent use; connections are kept
// alive and reused across calls.
type Client struct {
	base    *url.URL
	baseErr error
	// tls is WithTLSConfig's configuration; ownHC says hc is the Client's own (not
	// WithHTTPClient's), which it applies to.
	tls     *tls.Config
	ownHC   bool
	hc      *http.Client
	timeout time.Duration
	token   string
}

// Option configures a Client.
type Option func(*Client)

// WithTimeout sets the per-request timeout of calls that do not block (d ≤ 0 keeps
// DefaultTimeout). Blocking queries are allowed their wait time on top of it.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithTLSConfig makes the Client speak HTTPS with cfg: the CAs it trusts (RootCAs) and
// the client certificate it presents (Certificates), for a node started with TLS
// (tlsutil.ClientConfig builds cfg from files). An address without a scheme is then an
// https:// one. A client given WithHTTPClient keeps that client's own TLS settings.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *Client) { c.tls = cfg }
}

// WithHTTPClient makes the Client send its requests through hc (for TLS settings, proxies
// or tests). The Client's own per-request timeout still applies.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc, c.ownHC = hc, false
		}
	}
}

// WithToken makes every request present the ACL token secret (X-Roster-Token); "" sends
// none. A cluster with ACLs answers requests without a valid token 401.
func WithToken(secret string) Option {
	return func(c *Client) { c.token = secret }
}

// authorize sets the token header of req.
func (c *Client) authorize(req *http.Request) {
	if c.token != "" {
		req.Header.Set(api.HeaderToken, c.token)
	}
}

// New returns a client for the node at addr, either "host:port" (plain HTTP) or a URL
// such as "https://roster.example:8848" (a path prefix is kept). An unusable addr is
// reported by every call rather than here.
func New(addr string, opts ...Option) *Client {
	c := &Client{hc: defaultHTTPClient(), timeout: DefaultTimeout, ownHC: true}
	c.base, c.baseErr = parseBase(addr)
	for _, o := range opts {
		o(c)
	}
	if c.tls != nil {
		if t, ok := c.hc.Transport.(*http.Transport); ok && c.ownHC {
			t.TLSClientConfig = c.tls.Clone()
		}
		if c.base != nil && !strings.Contains(addr, "://") {
			c.base.Scheme = "https"
		}
	}
	return c
}

// Addr is the base URL requests go to ("" when the address given to New was unusable).
func (c *Client) Addr() string {
	if c.base == nil {
		return ""
	}
	return c.base.String()
}

func defaultHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment,
			DialContext: (&net.Dialer{
				Timeout:   5 * time.Second,
				KeepAlive: 30 * time.Second,
			}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			MaxIdleConnsPerHost:   32,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   5 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
	}
}

func parseBase(addr string) (*url.URL, error) {
	u, err := api.BaseURL(addr)
	if err != nil {
		return nil, fmt.Errorf("roster client: server address: %w", err)
	}
	return u, nil
}

// QueryOptions are the read options every read route accepts.
type QueryOptions struct {
	// Consistency is api.ConsistencyLinearizable (the server's default when empty),
	// api.ConsistencyLeader or api.ConsistencyStale.
	Consistency string
	// WaitIndex > 0 makes the read a blocking query: the server answers once the data's
	// index is past WaitIndex, or when WaitTime has passed.
	WaitIndex uint64
	// WaitTime bounds a blocking query (0 = the server's default).
	WaitTime time.Duration
}

func (q QueryOptions) encode(v url.Values) {
	if q.Consistency != "" {
		v.Set("consistency", q.Consistency)
	}
	if q.WaitIndex > 0 {
		v.Set("index", strconv.FormatUint(q.WaitIndex, 10))
		if q.WaitTime > 0 {
			v.Set("wait", q.WaitTime.String())
		}
	}
}

// blockingWait is how long the server may hold the request.
func (q QueryOptions) blockingWait() time.Duration {
	if q.WaitIndex == 0 {
		return 0
	}
	w := q.WaitTime
	if w <= 0 {
		w = 5 * time.Minute // the server's upper bound
	}
	return w + w/8 // room for the server's jitter
}

// Meta describes how a read was served.
type Meta struct {
	// Index is the X-Roster-Index of the response: pass it as WaitIndex to block until
	// the data changes.
	Index uint64
	// KnownLeader reports whether the serving node knew a leader.
	KnownLeader bool
	// LastContact is how long ago the serving node last heard from the leader (0 on the leader).
	LastContact time.Duration
}

func parseMeta(h http.Header) Meta {
	var m Meta
	m.Index, _ = strconv.ParseUint(h.Get(api.HeaderIndex), 10, 64)
	m.KnownLeader, _ = strconv.ParseBool(h.Get(api.HeaderKnownLeader))
	if ms, err := strconv.ParseInt(h.Get(api.HeaderLastContact), 10, 64); err == nil && ms > 0 {
		m.LastContact = time.Duration(ms) * time.Millisecond
	}
	return m
}

// pathBuilder builds an escaped URL path segment by segment; the first empty
// caller-supplied segment becomes its error.
type pathBuilder struct {
	segs []string
	err  error
}

func newPath(lit ...string) *pathBuilder { return &pathBuilder{segs: lit} }

// lit appends literal segments.
func (p *pathBuilder) lit(segs ...string) *pathBuilder {
	p.segs = append(p.segs, segs...)
	return p
}

// param appends a caller-supplied segment, rejecting an empty one.
func (p *pathBuilder) param(name, value string) *pathBuilder {
	if value == "" && p.err == nil {
		p.err = fmt.Errorf("roster client: %s must not be empty", name)
	}
	p.segs = append(p.segs, value)
	return p
}

// ns appends "namespaces/{ns}", defaulting an empty namespace to "public".
func (p *pathBuilder) ns(ns string) *pathBuilder {
	if ns == "" {
		ns = api.DefaultNamespace
	}
	return p.lit("namespaces", ns)
}

// service appends ".../groups/{group}/services/{service}", defaulting an empty group.
func (p *pathBuilder) service(ns, group, service string) *pathBuilder {
	if group == "" {
		group = api.DefaultGroup
	}
	return p.ns(ns).lit("groups", group, "services").param("service", service)
}

// instance appends ".../instances/{ip}:{port}" (IPv6 in brackets).
func (p *pathBuilder) instance(ip string, port int) *pathBuilder {
	p.lit("instances")
	if ip == "" {
		return p.param("ip", "")
	}
	if (port < 1 || port > 65535) && p.err == nil {
		p.err = fmt.Errorf("roster client: port %d out of range 1..65535", port)
	}
	return p.lit(api.JoinAddr(ip, port))
}

func (p *pathBuilder) build() (string, error) {
	if p.err != nil {
		return "", p.err
	}
	var b strings.Builder
	for _, s := range p.segs {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String(), nil
}

// request describes one call.
type request struct {
	method string
	path   *pathBuilder
	query  url.Values
	body   any
	wait   time.Duration // extra time a blocking query may take
}

// roundTrip sends r and returns the response; closing its body releases the request's
// timeout.
func (c *Client) roundTrip(ctx context.Context, r request) (*http.Response, error) {
	if c.baseErr != nil {
		return nil, c.baseErr
	}
	p, err := r.path.build()
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(c.base.String() + p)
	if err != nil {
		return nil, fmt.Errorf("roster client: %w", err)
	}
	if len(r.query) > 0 {
		u.RawQuery = r.query.Encode()
	}

	var body io.Reader
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return nil, fmt.Errorf("roster client: encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout+r.wait)
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("roster client: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "roster-client")
	c.authorize(req)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody releases the request's context when the body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	// Drain a little so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(b.ReadCloser, maxErrorBody))
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// do sends r, decodes a 2xx body into out (when out is non-nil) and returns the response
// metadata; any other status becomes an *APIError.
func (c *Client) do(ctx context.Context, r request, out any) (Meta, error) {
	resp, err := c.roundTrip(ctx, r)
	if err != nil {
		return Meta{}, err
	}
	defer resp.Body.Close()
	meta := parseMeta(resp.Header)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return meta, decodeError(resp)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return meta, fmt.Errorf("roster client: decode %s %s response: %w", r.method, resp.Request.URL.Path, err)
		}
	}
	return meta, nil
}

// write sends a write and returns the index it was applied at.
func (c *Client) write(ctx context.Context, method string, path *pathBuilder, body any) (uint64, error) {
	return c.writeQuery(ctx, method, path, nil, body)
}

// writeIf is write conditional on the object's modify index (?cas=index; 0: only if
// the object does not exist yet).
func (c *Client) writeIf(ctx context.Context, method string, path *pathBuilder, index uint64, body any) (uint64, error) {
	return c.writeQuery(ctx, method, path, url.Values{"cas": {strconv.FormatUint(index, 10)}}, body)
}

// writeQuery sends a write with query parameters and returns the index it was applied at.
func (c *Client) writeQuery(ctx context.Context, method string, path *pathBuilder, query url.Values, body any) (uint64, error) {
	var res api.WriteResult
	meta, err := c.do(ctx, request{method: method, path: path, query: query, body: body}, &res)
	if err != nil {
		return 0, err
	}
	if res.Index == 0 {
		res.Index = meta.Index
	}
	return res.Index, nil
}

// read sends a GET with the query options and decodes the body into out.
func (c *Client) read(ctx context.Context, path *pathBuilder, q QueryOptions, extra url.Values, out any) (Meta, error) {
	v := url.Values{}
	for k, vs := range extra {
		v[k] = vs
	}
	q.encode(v)
	return c.do(ctx, request{method: http.MethodGet, path: path, query: v, wait: q.blockingWait()}, out)
}
