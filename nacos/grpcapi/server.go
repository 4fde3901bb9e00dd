package grpcapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/rosterhq/roster/fanout"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/nacos/nacospb"
	"github.com/rosterhq/roster/nacos/openapi"
	"github.com/rosterhq/roster/registry"
)

// Defaults of Config.
const (
	// DefaultPortOffset is how far above the HTTP port Nacos 2.x clients look for
	// the gRPC port (Nacos's SDK_GRPC_PORT_DEFAULT_OFFSET).
	DefaultPortOffset = 1000
	// DefaultMaxBodyBytes bounds the JSON body of one request, as the HTTP API
	// bounds a request body; a larger one is answered with an ErrorResponse.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxMessageBytes is the largest message a trusted client may send: the
	// body limit and the envelope (MaxBodyBytes + 64 KiB); larger ones are refused by
	// gRPC itself. Nacos accepts 10 MiB, but no body over MaxBodyBytes is served
	// anyway, and a larger limit only lets a client make the node buffer more.
	DefaultMaxMessageBytes = DefaultMaxBodyBytes + rpcEnvelopeBytes
	// DefaultPushTimeout is how long a push waits for the client's ack (Nacos's
	// pushTaskTimeout); DefaultPushRetryDelay how long after a failed or timed-out push
	// the latest list is sent again (pushTaskRetryDelay).
	DefaultPushTimeout    = 5 * time.Second
	DefaultPushRetryDelay = time.Second
	// DefaultIdleTimeout is how long a connection may stay silent before it is sent a
	// ClientDetectionRequest; DefaultDetectionTimeout how long it then has to answer
	// before it is closed (Nacos's runtime connection ejector: 20 s, 5 s, every 3 s).
	DefaultIdleTimeout      = 20 * time.Second
	DefaultDetectionTimeout = 5 * time.Second
	DefaultEjectInterval    = 3 * time.Second
	// DefaultCatchUpTimeout bounds the wait of a read for this node to catch up; past it
	// the read is served from what the node has.
	DefaultCatchUpTimeout = 2 * time.Second
	// DefaultMaxConnections bounds the registered connections of a node, and
	// DefaultMaxSubscriptionsPerConn the subscriptions of one connection. The TCP
	// connections of the port, registered or not, are bounded by MaxTransports (the
	// same default; the server derives it from its file descriptor limit).
	DefaultMaxConnections          = 20000
	DefaultMaxSubscriptionsPerConn = 4096
)

// AddrFor is the gRPC address Nacos 2.x clients expect beside an HTTP address: the
// same host, the HTTP port + 1000 (8848 → 9848). It is "" when the HTTP port is 0 or
// the sum is not a port.
func AddrFor(httpAddr string) string {
	host, port, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return ""
	}
	p, err := strconv.Atoi(port)
	if err != nil || p == 0 || p+DefaultPortOffset > 65535 {
		return ""
	}
	return net.JoinHostPort(host, strconv.Itoa(p+DefaultPortOffset))
}

// Config configures the Nacos 2.x gRPC server. Registry, API, Store and Watch are
// required.
type Config struct {
	// Registry decides every write and read (and sends a follower's to the leader) and
	// authenticates every token.
	Registry *registry.Registry
	// API is the node's Nacos HTTP API (from New): a write runs through its routes only
	// while the leader runs a release without the peer RPC (legacyWrite).
	API *openapi.API
	// Store is what reads and pushes are served from: the node's own state.
	Store nacos.Reader
	// Watch is the node's change fan-out, which drives the pushes.
	Watch *fanout.Hub
	// HTTPAddr is the node's advertised HTTP address (ServerLoaderInfoResponse.address).
	HTTPAddr string
	// CatchUp, when set, is waited for (at most CatchUpTimeout) before a read is served
	// from this node's state: the server wires it to apply what the node knows is
	// committed and every write it forwarded, so that a client reads its own writes.
	CatchUp        func(ctx context.Context) error
	CatchUpTimeout time.Duration
	// Alarm, when set and returning an error, refuses every request but ServerCheck with
	// 300 (clients move to another server): the node's state differs from its peers'.
	Alarm func() error
	// Registerer receives the gRPC metrics; nil registers none.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// TLS, when set, serves gRPC over TLS with this configuration (the node's
	// certificate; client certificates as its ClientAuth says).
	TLS *tls.Config

	// MaxBodyBytes, PushTimeout, PushRetryDelay, IdleTimeout, DetectionTimeout,
	// EjectInterval, MaxConnections and MaxSubscriptions default to the constants above.
	MaxBodyBytes     int
	PushTimeout      time.Duration
	PushRetryDelay   time.Duration
	IdleTimeout      time.Duration
	DetectionTimeout time.Duration
	EjectInterval    time.Duration
	MaxConnections   int
	MaxSubscriptions int

	// The bounds on connections before they are registered and authenticated
	// (grpc_limits.go; docs/security.md): zero values take the Default...
	// constants, MaxTransports that of MaxConnections.
	HandshakeTimeout         time.Duration
	SetupTimeout             time.Duration
	AuthTimeout              time.Duration
	MaxTransports            int
	MaxConnsPerIP            int
	MaxUntrusted             int
	MaxUntrustedPerIP        int
	AcceptRatePerIP          float64 // connections a second
	AcceptBurstPerIP         int
	MaxStreams               int
	UnregisteredMessageBytes int
	UntrustedMessageBytes    int
}

func (c *Config) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.PushTimeout, DefaultPushTimeout)
	set(&c.PushRetryDelay, DefaultPushRetryDelay)
	set(&c.IdleTimeout, DefaultIdleTimeout)
	set(&c.DetectionTimeout, DefaultDetectionTimeout)
	set(&c.EjectInterval, DefaultEjectInterval)
	set(&c.CatchUpTimeout, DefaultCatchUpTimeout)
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxSubscriptions <= 0 {
		c.MaxSubscriptions = DefaultMaxSubscriptionsPerConn
	}
	set(&c.HandshakeTimeout, DefaultHandshakeTimeout)
	set(&c.SetupTimeout, DefaultSetupTimeout)
	set(&c.AuthTimeout, DefaultAuthTimeout)
	setInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	setInt(&c.MaxTransports, DefaultMaxConnections)
	setInt(&c.MaxConnsPerIP, DefaultMaxConnsPerIP)
	setInt(&c.MaxUntrusted, DefaultMaxUntrusted)
	setInt(&c.MaxUntrustedPerIP, DefaultMaxUntrustedPerIP)
	if c.AcceptRatePerIP <= 0 {
		c.AcceptRatePerIP = DefaultAcceptRatePerIP
	}
	// A burst of 4 seconds of the rate.
	setInt(&c.AcceptBurstPerIP, max(1, int(math.Ceil(4*c.AcceptRatePerIP))))
	setInt(&c.MaxStreams, DefaultMaxStreams)
	setInt(&c.UnregisteredMessageBytes, DefaultUnregisteredMessageBytes)
	setInt(&c.UntrustedMessageBytes, DefaultUntrustedMessageBytes)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Server serves the Nacos 2.x gRPC API (docs/nacos-compatibility.md): the
// connection lifecycle, the naming reads and subscriptions, persistent writes, and
// pushes of every change to the subscribed connections. Reads and pushes come from the
// node's own state, as each Nacos server serves its own memory; writes go to the leader.
type Server struct {
	cfg Config
	reg *registry.Registry
	api *openapi.API // the Open API, for legacyWrite only
	log *slog.Logger
	m   *rpcMetrics
	srv *grpc.Server

	mu         sync.Mutex
	conns      map[string]*rpcConn // every transport, registered or not
	registered int
	stopping   bool

	started atomic.Bool
	ln      atomic.Pointer[guardListener]
	ids     atomic.Uint64 // request ids of the server's requests
	refs    rpcRefTimes

	handlers map[string]rpcHandler

	stop      chan struct{}
	ejectDone chan struct{}
}

// rpcHandler serves one request type on a registered connection: it returns the
// response's type and body.
type rpcHandler func(ctx context.Context, s *rpcSession, md *nacospb.Metadata, body []byte) (string, any)

// New builds the gRPC server; Serve starts it.
func New(cfg Config) (*Server, error) {
	if cfg.Registry == nil || cfg.API == nil || cfg.Store == nil || cfg.Watch == nil {
		return nil, errors.New("nacos: Config.Registry, API (from openapi.New), Store and Watch are required")
	}
	cfg.defaults()
	m, err := newRPCMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	g := &Server{
		cfg: cfg, reg: cfg.Registry, api: cfg.API, log: cfg.Logger.With("component", "nacos-grpc"), m: m,
		conns: make(map[string]*rpcConn), stop: make(chan struct{}), ejectDone: make(chan struct{}),
	}
	g.handlers = map[string]rpcHandler{
		rpcHealthCheckRequest:        g.healthCheck,
		rpcServerLoaderInfoRequest:   g.serverLoaderInfo,
		rpcSubscribeServiceRequest:   g.subscribeService,
		rpcServiceQueryRequest:       g.queryService,
		rpcServiceListRequest:        g.serviceList,
		rpcInstanceRequest:           g.instance,
		rpcPersistentInstanceRequest: g.persistentInstance,
		rpcBatchInstanceRequest:      g.batchInstance,
	}
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	if cfg.TLS != nil {
		creds = credentials.NewTLS(cfg.TLS)
	}
	opts := []grpc.ServerOption{
		grpc.StatsHandler(rpcTagger{g}),
		// Connections are inspected until they are trusted (guardCreds).
		grpc.Creds(guardCreds{creds}),
		grpc.MaxRecvMsgSize(cfg.MaxBodyBytes + rpcEnvelopeBytes),
		grpc.MaxHeaderListSize(rpcMaxHeaderListBytes),
		grpc.MaxConcurrentStreams(uint32(cfg.MaxStreams)),
		// TLS and HTTP/2's preface must be done within HandshakeTimeout (gRPC's default
		// is 120 s); the ConnectionSetupRequest within SetupTimeout (eject).
		grpc.ConnectionTimeout(cfg.HandshakeTimeout),
		// A connection silent for a minute is pinged and closed without an answer in
		// 20 s (the Go SDK's own ping policy): half-open connections do not linger.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		// A connection mostly idles between small requests and pushes: a small read
		// buffer keeps an idle connection cheap (grpc-go's default is 32 KiB per
		// connection; its write buffer is shared between writes by default).
		grpc.ReadBufferSize(8 << 10),
		// The Go SDK pings every 60 s, with or without streams; grpc-go's default policy
		// (5 min, no pings without streams) would answer it with GOAWAY too_many_pings.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	g.srv = grpc.NewServer(opts...)
	g.srv.RegisterService(&nacospb.RequestServiceDesc, g)
	g.srv.RegisterService(&nacospb.BiRequestStreamServiceDesc, g)
	return g, nil
}

// Serve accepts connections on ln until Shutdown.
func (g *Server) Serve(ln net.Listener) error {
	if g.started.CompareAndSwap(false, true) {
		go g.eject()
	}
	gl := newGuardListener(g, ln)
	g.ln.Store(gl)
	err := g.srv.Serve(gl)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Shutdown asks every registered client to move to another server
// (ConnectResetRequest), waits up to the context's deadline for them to go, then
// stops. Requests arriving meanwhile are answered "server not running" (300), which
// makes clients pick another server.
func (g *Server) Shutdown(ctx context.Context) {
	g.mu.Lock()
	if g.stopping {
		g.mu.Unlock()
		return
	}
	g.stopping = true
	sessions := g.sessionsLocked()
	g.mu.Unlock()
	close(g.stop)

	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if _, err := s.request(rctx, rpcConnectResetRequest, rpcServerRequest{rpcRequestBase: rpcRequestBase{Module: rpcModuleInternal, Headers: map[string]string{}}}); err == nil {
				g.m.resets.Inc()
			}
		}()
	}
	wg.Wait()
	stopped := make(chan struct{})
	go func() { g.srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		g.srv.Stop()
		<-stopped
	}
	if g.started.Load() {
		<-g.ejectDone
	}
}

// sessionsLocked lists the registered sessions. Called with g.mu held.
func (g *Server) sessionsLocked() []*rpcSession {
	var out []*rpcSession
	for _, c := range g.conns {
		if s := c.current(); s != nil {
			out = append(out, s)
		}
	}
	return out
}

// Connections returns the number of registered connections.
func (g *Server) Connections() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.registered
}

func (g *Server) isStopping() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopping
}

// rpcConn is one transport (HTTP/2 connection) and, once the client has sent its
// ConnectionSetupRequest, its session.
type rpcConn struct {
	id     string
	remote string
	guard  *connGuard // nil when the listener was not the server's own
	mu     sync.Mutex
	sess   *rpcSession
	// since is when the connection was accepted or last lost its session (the setup
	// timeout runs from it), registeredAt when it last registered.
	since, registeredAt time.Time
}

func (c *rpcConn) current() *rpcSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess
}

// rpcTagger gives every transport its Nacos connection id (time_ip_port, as Nacos's
// AddressTransportFilter does) and forgets it when the transport ends.
type rpcTagger struct{ g *Server }

type rpcConnKey struct{}

func (t rpcTagger) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	remote := info.RemoteAddr.String()
	host, port, err := net.SplitHostPort(remote)
	if err != nil {
		host, port = remote, "0"
	}
	c := &rpcConn{id: fmt.Sprintf("%d_%s_%s", time.Now().UnixMilli(), host, port), remote: remote, since: time.Now()}
	if l := t.g.ln.Load(); l != nil {
		if c.guard = l.guard(info.RemoteAddr); c.guard != nil {
			c.since = c.guard.accepted
		}
	}
	t.g.mu.Lock()
	t.g.conns[c.id] = c
	t.g.mu.Unlock()
	return context.WithValue(ctx, rpcConnKey{}, c)
}

func (t rpcTagger) HandleConn(ctx context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnEnd); !ok {
		return
	}
	c, _ := ctx.Value(rpcConnKey{}).(*rpcConn)
	if c == nil {
		return
	}
	if s := c.current(); s != nil {
		s.close("transport closed")
	}
	t.g.mu.Lock()
	delete(t.g.conns, c.id)
	t.g.mu.Unlock()
}

func (rpcTagger) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (rpcTagger) HandleRPC(context.Context, stats.RPCStats)                       {}

func connOf(ctx context.Context) *rpcConn {
	c, _ := ctx.Value(rpcConnKey{}).(*rpcConn)
	return c
}

// Request answers one unary request. Every answer is a payload with gRPC status OK;
// failures travel inside it (ErrorResponse, or the request's own response type with
// resultCode 500), as Nacos answers them.
func (g *Server) Request(ctx context.Context, in *nacospb.Payload) (*nacospb.Payload, error) {
	start := time.Now()
	typ := in.GetMetadata().GetType()
	respType, body := g.dispatch(ctx, typ, in)
	out, err := rpcPayload(respType, body)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encoding %s: %v", respType, err)
	}
	g.m.observeRequest(typ, respType, body, time.Since(start))
	return out, nil
}

// dispatch checks the request in Nacos's order (server state, ServerCheck, handler,
// registration, size) and runs its handler.
func (g *Server) dispatch(ctx context.Context, typ string, in *nacospb.Payload) (string, any) {
	if g.isStopping() {
		return rpcErrorResponse, rpcFail(rpcCodeInvalidServerStatus, rpcMessageServerNotRunning)
	}
	c := connOf(ctx)
	if typ == rpcServerCheckRequest {
		id := ""
		if c != nil {
			id = c.id
		}
		return rpcServerCheckResponse, rpcServerCheckAnswer{rpcResponse: rpcOK(), ConnectionID: id, SupportAbilityNegotiation: true}
	}
	h := g.handlers[typ]
	if h == nil {
		return rpcErrorResponse, rpcFail(rpcCodeNoHandler, rpcMessageNoHandler)
	}
	if g.cfg.Alarm != nil {
		if err := g.cfg.Alarm(); err != nil {
			return rpcErrorResponse, rpcFail(rpcCodeInvalidServerStatus, "this server's state is under an alarm and it serves nothing: "+err.Error())
		}
	}
	// A node that disagrees with the cluster on ACLs serves nothing; clients move on.
	if err := g.reg.ACLGate(); err != nil {
		return rpcErrorResponse, rpcFail(rpcCodeInvalidServerStatus, httpx.Message(err))
	}
	var s *rpcSession
	if c != nil {
		s = c.current()
	}
	if s == nil {
		return rpcErrorResponse, rpcFail(rpcCodeUnregistered, rpcMessageUnregistered)
	}
	g.trustIfAuthenticated(c, in.GetMetadata())
	body := in.GetBody().GetValue()
	if len(body) > g.cfg.MaxBodyBytes {
		return rpcErrorResponse, rpcFail(rpcCodeInvalidParam, fmt.Sprintf("request body of %d bytes exceeds the limit of %d", len(body), g.cfg.MaxBodyBytes))
	}
	s.touch()
	return h(ctx, s, in.GetMetadata(), body)
}

// decode parses a request body; a body that is not the request's JSON is answered as
// Nacos answers an unparseable payload.
func decode(body []byte, v any) (string, any, bool) {
	if err := json.Unmarshal(body, v); err != nil {
		return rpcErrorResponse, rpcFail(rpcCodeBadGateway, "the request body is not valid JSON: "+err.Error()), false
	}
	return "", nil, true
}

// rpcPayload wraps a response body.
func rpcPayload(typ string, body any) (*nacospb.Payload, error) {
	b, ok := body.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	return &nacospb.Payload{Metadata: &nacospb.Metadata{Type: typ}, Body: &anypb.Any{Value: b}}, nil
}

// RequestBiStream serves a connection's stream: the ConnectionSetupRequest that
// registers the connection, then the client's answers to the server's requests. The
// session ends with the stream.
func (g *Server) RequestBiStream(st nacospb.BiStream) error {
	c := connOf(st.Context())
	if c == nil {
		return status.Error(codes.Internal, "connection without an id")
	}
	var s *rpcSession
	defer func() {
		if s != nil {
			s.close("stream ended")
		}
	}()
	recv := make(chan *nacospb.Payload)
	recvErr := make(chan error, 1)
	go func() {
		for {
			p, err := st.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case recv <- p:
			case <-st.Context().Done():
				return
			}
		}
	}()
	for {
		var done <-chan struct{}
		if s != nil {
			done = s.done
		}
		select {
		case err := <-recvErr:
			return err
		case <-done:
			return status.Error(codes.Unavailable, "connection closed by the server: "+s.closeReason())
		case p := <-recv:
			typ := p.GetMetadata().GetType()
			body := p.GetBody().GetValue()
			switch {
			case typ == rpcConnectionSetupRequest:
				ns, err := g.register(c, st, p.GetMetadata(), body)
				if err != nil {
					g.log.Warn("nacos connection refused", "conn", c.id, "remote", c.remote, "err", err)
					return status.Error(codes.ResourceExhausted, err.Error())
				}
				if s != nil {
					s.close("set up again")
				}
				s = ns
			case s != nil && strings.HasSuffix(typ, "Response"):
				var r rpcResponse
				if err := json.Unmarshal(body, &r); err != nil {
					g.log.Debug("nacos stream: unparseable response", "conn", c.id, "type", typ, "err", err)
					continue
				}
				s.touch()
				s.answered(r)
			default:
				g.log.Debug("nacos stream: ignored payload", "conn", c.id, "type", typ, "registered", s != nil)
			}
		}
	}
}

// register records a connection's session from its ConnectionSetupRequest and, when the
// client negotiates abilities, tells it the server's (Roster serves persistent
// instances over gRPC).
func (g *Server) register(c *rpcConn, st nacospb.BiStream, md *nacospb.Metadata, body []byte) (*rpcSession, error) {
	var req rpcConnectionSetup
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("unparseable ConnectionSetupRequest: %w", err)
	}
	s := &rpcSession{
		g: g, c: c, stream: st, done: make(chan struct{}),
		clientIP: md.GetClientIp(), version: req.ClientVersion, tenant: req.Tenant, labels: req.Labels,
		app:     md.GetHeaders()["app"],
		pending: make(map[string]func(rpcResponse)),
	}
	s.touch()
	p, err := newRPCPusher(s)
	if err != nil {
		return nil, err
	}
	s.push = p
	g.mu.Lock()
	if g.stopping {
		g.mu.Unlock()
		p.close()
		return nil, errors.New("the server is stopping")
	}
	c.mu.Lock()
	old := c.sess
	if old == nil && g.registered >= g.cfg.MaxConnections {
		c.mu.Unlock()
		g.mu.Unlock()
		p.close()
		g.m.refused.Inc()
		return nil, fmt.Errorf("%d connections registered, the limit", g.cfg.MaxConnections)
	}
	c.sess = s
	c.registeredAt = time.Now()
	c.mu.Unlock()
	if c.guard != nil {
		c.guard.registered.Store(true)
		if !g.reg.ACLEnabled() {
			c.guard.trust() // nothing to authenticate
		}
	}
	if old == nil {
		g.registered++
		g.m.connections.Set(float64(g.registered))
	}
	g.mu.Unlock()
	if old != nil {
		old.end("replaced by a new setup")
	}
	g.log.Debug("nacos connection registered", "conn", c.id, "remote", c.remote, "client_ip", s.clientIP, "version", s.version, "labels", s.labels)
	if req.AbilityTable != nil {
		ack := rpcServerRequest{
			rpcRequestBase: rpcRequestBase{RequestID: g.nextID(), Module: rpcModuleInternal, Headers: map[string]string{}},
			AbilityTable:   map[string]bool{rpcAbilityPersistentByGRPC: true},
		}
		if err := s.send(rpcSetupAckRequest, ack); err != nil {
			s.close("setup ack failed")
			return nil, err
		}
	}
	return s, nil
}

func (g *Server) nextID() string { return strconv.FormatUint(g.ids.Add(1), 10) }

// eject sends a ClientDetectionRequest to every connection silent for IdleTimeout and
// closes those that do not answer within DetectionTimeout.
func (g *Server) eject() {
	defer close(g.ejectDone)
	tick := time.NewTicker(g.cfg.EjectInterval)
	defer tick.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-tick.C:
		}
		g.cutUnauthenticated(time.Now())
		cutoff := time.Now().Add(-g.cfg.IdleTimeout).UnixNano()
		g.mu.Lock()
		var idle []*rpcSession
		for _, s := range g.sessionsLocked() {
			if s.lastActive.Load() < cutoff && s.detecting.CompareAndSwap(false, true) {
				idle = append(idle, s)
			}
		}
		g.mu.Unlock()
		for _, s := range idle {
			go g.detect(s)
		}
	}
}

func (g *Server) detect(s *rpcSession) {
	defer s.detecting.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.DetectionTimeout)
	defer cancel()
	r, err := s.request(ctx, rpcClientDetectionRequest, rpcServerRequest{rpcRequestBase: rpcRequestBase{Module: rpcModuleInternal, Headers: map[string]string{}}})
	if err == nil && r.ResultCode == rpcResultSuccess {
		g.m.detections.WithLabelValues("answered").Inc()
		return
	}
	g.m.detections.WithLabelValues("closed").Inc()
	s.close("no answer to a ClientDetectionRequest")
}

// rpcSession is a registered connection: what its setup said, its stream (the push
// channel) and its subscriptions.
type rpcSession struct {
	g      *Server
	c      *rpcConn
	stream nacospb.BiStream
	sendMu sync.Mutex

	clientIP, version, tenant, app string
	labels                         map[string]string

	lastActive atomic.Int64
	detecting  atomic.Bool
	push       *rpcPusher

	mu      sync.Mutex
	pending map[string]func(rpcResponse) // the server's requests awaiting an answer, by request id
	closed  bool
	reason  string
	done    chan struct{}
}

func (s *rpcSession) touch() { s.lastActive.Store(time.Now().UnixNano()) }

// send writes one server request on the stream (writes are serialised: a stream is not
// safe for concurrent sends).
func (s *rpcSession) send(typ string, body any) error {
	p, err := rpcPayload(typ, body)
	if err != nil {
		return err
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.Send(p)
}

// request sends a server request and waits for the client's answer.
func (s *rpcSession) request(ctx context.Context, typ string, req rpcServerRequest) (rpcResponse, error) {
	req.RequestID = s.g.nextID()
	ch := make(chan rpcResponse, 1)
	if !s.expect(req.RequestID, func(r rpcResponse) { ch <- r }) {
		return rpcResponse{}, errors.New("connection closed")
	}
	defer s.forget(req.RequestID)
	if err := s.send(typ, req); err != nil {
		return rpcResponse{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return rpcResponse{}, ctx.Err()
	case <-s.done:
		return rpcResponse{}, errors.New("connection closed")
	}
}

// expect registers fn for the answer to request id; false once the session ended.
func (s *rpcSession) expect(id string, fn func(rpcResponse)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.pending[id] = fn
	return true
}

func (s *rpcSession) forget(id string) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

// answered hands the client's answer to whoever waits for it.
func (s *rpcSession) answered(r rpcResponse) {
	s.mu.Lock()
	fn := s.pending[r.RequestID]
	delete(s.pending, r.RequestID)
	s.mu.Unlock()
	if fn != nil {
		fn(r)
	}
}

func (s *rpcSession) closeReason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// close ends the session and unregisters the connection: its stream handler returns,
// its subscriptions go. The transport stays; the client's next request is answered 301
// and the client reconnects.
func (s *rpcSession) close(reason string) {
	if !s.end(reason) {
		return
	}
	g := s.g
	g.mu.Lock()
	s.c.mu.Lock()
	if s.c.sess == s {
		s.c.sess = nil
		s.c.since = time.Now()
		g.registered--
		g.m.connections.Set(float64(g.registered))
	}
	s.c.mu.Unlock()
	g.mu.Unlock()
}

// end stops the session's work; it reports whether this call ended it.
func (s *rpcSession) end(reason string) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.closed, s.reason = true, reason
	s.pending = nil
	close(s.done)
	s.mu.Unlock()
	s.push.close()
	s.g.log.Debug("nacos connection unregistered", "conn", s.c.id, "remote", s.c.remote, "reason", reason)
	return true
}

// trustIfAuthenticated ends c's untrusted phase once a request of it presents a token
// that authenticates (with ACLs off, registering was enough).
func (g *Server) trustIfAuthenticated(c *rpcConn, md *nacospb.Metadata) {
	if c == nil || c.guard == nil || c.guard.trusted.Load() {
		return
	}
	if !g.reg.ACLEnabled() {
		c.guard.trust()
		return
	}
	if tok := rpcToken(md); tok != "" {
		if _, err := g.reg.Authenticate(tok); err == nil {
			c.guard.trust()
		}
	}
}

// cutUnauthenticated closes the connections that did not register within SetupTimeout
// of their accept (or of losing their session), and, with ACLs on, those registered
// for AuthTimeout without a request that authenticated.
func (g *Server) cutUnauthenticated(now time.Time) {
	type cut struct {
		gc     *connGuard
		reason string
	}
	var cuts []cut
	acl := g.reg.ACLEnabled()
	g.mu.Lock()
	for _, c := range g.conns {
		if c.guard == nil || c.guard.trusted.Load() {
			continue
		}
		c.mu.Lock()
		switch {
		case c.sess == nil && now.Sub(c.since) > g.cfg.SetupTimeout:
			cuts = append(cuts, cut{c.guard, rpcClosedSetupTimeout})
		case c.sess != nil && acl && now.Sub(c.registeredAt) > g.cfg.AuthTimeout:
			cuts = append(cuts, cut{c.guard, rpcClosedAuthTimeout})
		}
		c.mu.Unlock()
	}
	g.mu.Unlock()
	for _, c := range cuts {
		c.gc.cut(c.reason)
	}
}
