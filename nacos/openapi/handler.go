package openapi

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fanout"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/nacos/udppush"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultMaxWait      = 5 * time.Minute
)

// Node is what the operator routes need of the Raft node (*raftnode.Node implements it).
type Node interface {
	httpx.Node
	httpx.LeaderInfo
	// Ready reports whether this node knows a leader and has applied what it knows is committed.
	Ready() (bool, raftnode.Readiness)
	// Members lists the Raft servers with their addresses.
	Members(ctx context.Context) ([]raftnode.Member, error)
}

var _ Node = (*raftnode.Node)(nil)

// Config configures the Nacos API handler. NodeID, Store, Node, Registry, Forwarder and
// Metrics are required.
type Config struct {
	NodeID    string
	Store     nacos.Reader
	Node      Node
	Registry  *registry.Registry
	Forwarder *httpx.Forwarder
	Metrics   *httpx.Metrics
	Logger    *slog.Logger
	// MaxBodyBytes bounds a request body (default 1 MiB).
	MaxBodyBytes int64
	// MaxWait bounds the wait of a blocking read (default 5m).
	MaxWait time.Duration
	// BodyTimeout bounds the arrival of a request body (default httpx.DefaultBodyTimeout).
	BodyTimeout time.Duration
	// RequestTimeout bounds the operator routes' calls to the Raft node (default 10s).
	RequestTimeout time.Duration
	// Watch is the node's change fan-out, which drives the UDP pushes to Nacos 1.x
	// clients; nil pushes nothing. The pusher stops when the hub closes.
	Watch *fanout.Hub
	// PushAddr is the UDP address the push socket binds: pushes are sent from it and
	// acknowledged to it (default ":0": every interface, a port the system picks).
	// udppush.AddrFor derives it from the HTTP listener's address.
	PushAddr string
	// PushMaxSubscribers caps the subscribers this node records (default
	// udppush.DefaultMaxSubscribers).
	PushMaxSubscribers int
	// PushMaxPerAddr and PushMaxPerPort cap the subscribers of one client address, and
	// of one address and udpPort (defaults udppush.DefaultMaxPerAddr, udppush.DefaultMaxPerPort);
	// PushChangeBudget bounds the bytes one change sends to one client address
	// (default udppush.DefaultChangeBudget).
	PushMaxPerAddr   int
	PushMaxPerPort   int
	PushChangeBudget int
	// Registerer receives the push metrics; nil registers none.
	Registerer prometheus.Registerer
	// TrustedOrigins are the origins whose pages a browser may send writes from; every
	// other cross-origin write is refused (403), as on the native API.
	TrustedOrigins []string

	// push overrides the pusher's options in tests.
	push udppush.Options
}

// API is the node's Nacos HTTP API (an http.Handler of the /nacos routes), which the
// gRPC server shares (grpcapi.Config.API).
type API struct {
	cfg     Config
	id      string
	store   nacos.Reader
	node    Node
	reg     *registry.Registry
	fwd     *httpx.Forwarder
	metrics *httpx.Metrics
	log     *slog.Logger
	mux     *chi.Mux
	// push records subscribers and pushes them changes; nil without Config.Watch.
	push *udppush.Pusher
	// internal serves the writes that arrive over gRPC, by method, without the HTTP
	// middleware (ServeInternal).
	internal map[string]http.Handler
	// handler is the router behind the refusal of browsers' cross-origin writes.
	handler http.Handler
}

// New returns the API of the /nacos routes.
func New(cfg Config) (*API, error) {
	if cfg.NodeID == "" || cfg.Store == nil || cfg.Node == nil || cfg.Registry == nil || cfg.Forwarder == nil || cfg.Metrics == nil {
		return nil, errors.New("nacos: Config.NodeID, Store, Node, Registry, Forwarder and Metrics are required")
	}
	if cfg.MaxBodyBytes < 0 || cfg.MaxWait < 0 || cfg.RequestTimeout < 0 ||
		cfg.PushMaxPerAddr < 0 || cfg.PushMaxPerPort < 0 || cfg.PushChangeBudget < 0 {
		return nil, errors.New("nacos: limits must not be negative")
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = httpx.DefaultBodyTimeout
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = registry.DefaultRequestTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &API{
		cfg: cfg, id: cfg.NodeID, store: cfg.Store, node: cfg.Node, reg: cfg.Registry,
		fwd: cfg.Forwarder, metrics: cfg.Metrics, log: cfg.Logger.With("component", "nacos"),
	}
	if cfg.Watch != nil {
		opts := cfg.push
		if opts.Addr == "" {
			opts.Addr = cfg.PushAddr
		}
		if opts.MaxSubscribers == 0 {
			opts.MaxSubscribers = cfg.PushMaxSubscribers
		}
		opts.MaxPerAddr = cmp.Or(opts.MaxPerAddr, cfg.PushMaxPerAddr)
		opts.MaxPerPort = cmp.Or(opts.MaxPerPort, cfg.PushMaxPerPort)
		opts.ChangeBudget = cmp.Or(opts.ChangeBudget, cfg.PushChangeBudget)
		opts.Registerer, opts.Logger = cfg.Registerer, s.log
		var err error
		if s.push, err = udppush.New(cfg.Watch, cfg.Store, opts); err != nil {
			return nil, err
		}
		s.log.Info("nacos push socket", "addr", s.push.LocalAddr().String())
	}
	crossOrigin, err := httpx.CrossOrigin(cfg.TrustedOrigins, func(w http.ResponseWriter, r *http.Request, err error) {
		s.writeNacosError(w, r, err, nacos.ResourceOther)
	})
	if err != nil {
		return nil, err
	}
	s.mux = s.routes()
	s.handler = crossOrigin(s.mux)
	failWrite := func(w http.ResponseWriter, r *http.Request, err error) {
		s.writeNacosError(w, r, err, nacos.ResourceInstance)
	}
	// The token of a gRPC write travels as the route's accessToken parameter: it is
	// resolved and checked here as on the HTTP route, and again by the leader.
	internal := func(fn handlerFunc) http.Handler {
		return s.authenticate(s.nsNeed(acl.Write)(s.fwd.LeaderOnly(failWrite)(s.nacos(nacos.ResourceInstance, fn))))
	}
	s.internal = map[string]http.Handler{
		http.MethodPost:   internal(s.register),
		http.MethodDelete: internal(s.deregister),
	}
	return s, nil
}

// ServeHTTP serves the /nacos routes; a browser's write from another origin is refused
// before anything else looks at it.
func (s *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// IsPath reports whether a request path belongs to the Nacos Open API (/nacos/...).
func IsPath(path string) bool {
	return path == "/nacos" || strings.HasPrefix(path, "/nacos/")
}

// read runs fn through the registry under the request's read options and sets the
// read headers.
func (s *API) read(w http.ResponseWriter, r *http.Request, fn func(ws *store.WatchSet) (uint64, error)) (uint64, error) {
	return httpx.Read(w, r, s.reg, s.node, httpx.ReadOptions{Mode: api.ConsistencyLeader, Wait: s.cfg.MaxWait}, fn)
}

// Short names for the shared HTTP helpers.
var (
	writeJSON = httpx.WriteJSON
	setIndex  = httpx.SetIndex
)
