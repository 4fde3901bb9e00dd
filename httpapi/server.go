// Package httpapi serves Roster's native REST API (/v1/...), the cluster and status
// endpoints and /metrics. Any node accepts any request: writes, and reads that need the
// leader, are reverse-proxied from a follower to the leader (one hop at most).
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/console"
	"github.com/rosterhq/roster/fanout"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/healthcheck"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// Defaults of Config.
const (
	DefaultRequestTimeout = 10 * time.Second
	DefaultMaxBodyBytes   = 1 << 20
	DefaultMaxWait        = 5 * time.Minute
	// DefaultLeaderHold bounds how long a request waits for a leader to be known
	// (never longer than the request timeout).
	DefaultLeaderHold = 5 * time.Second
	// DefaultPageSize and MaxPageSize bound GET /v1/namespaces/{ns}/services.
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// Reader is the subset of *store.Store the API reads from. Every read returns the index
// of the data read (≥ 1) and registers what it read in ws (ws may be nil).
type Reader interface {
	Namespaces(ws *store.WatchSet) (uint64, []model.Namespace, error)
	Namespace(ws *store.WatchSet, id string) (uint64, model.Namespace, error)
	ServiceSummaries(ws *store.WatchSet, ns string, f store.ServiceFilter, page, size int) (uint64, []store.ServiceSummary, int, error)
	Clusters(ws *store.WatchSet, key model.ServiceKey) (uint64, []model.Cluster, error)
	Cluster(ws *store.WatchSet, key model.ServiceKey, name string) (uint64, model.Cluster, error)
	Instance(ws *store.WatchSet, ref model.InstanceRef) (uint64, model.Instance, error)
	ServiceView(ws *store.WatchSet, key model.ServiceKey) (uint64, store.ServiceView, error)
	// EncodedServiceView is encode's result for ServiceView's, kept with the cached
	// view per variant (see store.Store.EncodedServiceView).
	EncodedServiceView(ws *store.WatchSet, key model.ServiceKey, variant string, encode func(uint64, store.ServiceView) ([]byte, error)) (uint64, []byte, error)
	Members(ws *store.WatchSet) (uint64, []model.Member, error)
	Settings(ws *store.WatchSet) (uint64, model.Settings, error)
	Tokens(ws *store.WatchSet) (uint64, []acl.Token, error)
	Token(ws *store.WatchSet, accessor string) (uint64, acl.Token, error)
}

// Consensus is the subset of the Raft node (*raftnode.Node) the API uses.
type Consensus interface {
	// ID is this node's server id.
	ID() string
	// IsLeader reports whether this node is the leader now.
	IsLeader() bool
	// Leader returns the current leader's addresses, if one is known.
	Leader() (model.Member, bool)
	// ConsistentRead returns once a linearizable read of the local store is safe.
	ConsistentRead(ctx context.Context) error
	// LeaderRead returns once a leader-local read of the local store is allowed.
	LeaderRead(ctx context.Context) error
	// LastContact is the time since this node last heard from the leader (0 on the leader).
	LastContact() time.Duration
	// KnownLeader reports whether this node knows a leader.
	KnownLeader() bool
	// Ready reports whether this node knows a leader and has applied what it knows is committed.
	Ready() (bool, raftnode.Readiness)
	// Members lists the Raft servers with their addresses.
	Members(ctx context.Context) ([]raftnode.Member, error)
	// Join adds (or re-announces) a server. Leader only.
	Join(ctx context.Context, req raftnode.JoinRequest) error
	// RemoveServer removes a server. Leader only.
	RemoveServer(ctx context.Context, id string) error
	// TransferLeadership hands leadership to the server id (any server when id is empty).
	TransferLeadership(ctx context.Context, id string) error
	// LeaderLacks refuses (an *raftnode.UpgradeRequiredError) a command of type t that
	// the leader, another server of an older release, does not apply.
	LeaderLacks(t fsm.MessageType) error
}

// Config configures the API handler. Store and Node are required.
type Config struct {
	// NodeID is this node's id (X-Roster-Served-By, X-Roster-Forwarded-By); defaults to Node.ID().
	NodeID string
	// Store is the local state (a *store.Store).
	Store Reader
	// Node is the Raft node (a *raftnode.Node).
	Node Consensus
	// Logger receives request errors; defaults to slog.Default().
	Logger *slog.Logger
	// RequestTimeout bounds a write's Apply and a read's consistency check (default 10s).
	RequestTimeout time.Duration
	// MaxBodyBytes bounds a request body (default 1 MiB); larger bodies get 413.
	MaxBodyBytes int64
	// MaxWait bounds the wait of a blocking query (default 5m).
	MaxWait time.Duration
	// LeaderHold bounds how long a request waits for a leader to become known before it
	// is answered 503 no_leader (default min(5s, RequestTimeout)).
	LeaderHold time.Duration
	// Registry is the application service every write and read goes through (required).
	Registry *registry.Registry
	// Metrics is the Prometheus registry the API registers its collectors in and serves
	// on /metrics; nil means a private one.
	Metrics *prometheus.Registry
	// Transport carries requests forwarded to the leader; nil means a keep-alive
	// transport owned by the handler (see the handler's CloseIdleConnections). Ignored
	// when Forwarder is set.
	Transport http.RoundTripper
	// Forwarder sends requests that need the leader to it; nil means one of the
	// handler's own. A node shares one between its APIs.
	Forwarder *httpx.Forwarder
	// Version is this build's version, recorded in snapshot archives.
	Version string
	// Snapshot configures GET and PUT /v1/snapshot (snapshot.go).
	Snapshot SnapshotConfig
	// Health serves the leader's last probe results (health.go); nil answers 503.
	Health HealthResults
	// Autopilot serves GET /v1/operator/autopilot/health (autopilot.go); nil answers 503.
	Autopilot AutopilotReporter
	// Prober runs the single probes of POST /v1/cluster/probe (nil answers 503).
	Prober SingleProber
	// Watch is the node's change fan-out, which serves streaming watches
	// (Accept: text/event-stream); nil answers them 406.
	Watch *fanout.Hub
	// KeepAlive is how often an idle stream gets a comment line (default DefaultKeepAlive).
	KeepAlive time.Duration
	// BodyTimeout bounds the arrival of a request body (default httpx.DefaultBodyTimeout).
	BodyTimeout time.Duration
	// StateChecks serves GET /v1/status/state-check (nil: every check is 404).
	StateChecks StateChecker
	// PeerReady asks another node, by its HTTP address, for its GET /v1/status/ready
	// answer (over the node-to-node client, with TLS when the cluster has it), for
	// GET /v1/cluster/members?detail=true. Nil: other members show as unreachable.
	PeerReady func(ctx context.Context, httpAddr string) (api.Ready, error)
	// TrustedOrigins are the origins (scheme://host[:port]) whose pages a browser may send
	// state-changing requests from; every other cross-origin write is refused (403).
	TrustedOrigins []string
	// StreamWriters bounds the goroutines writing HTTP/1.x streams at once (default
	// DefaultStreamWriters).
	StreamWriters int
	// StreamWriteTimeout bounds one write to a stream whose client does not read; the
	// stream is then closed (default DefaultStreamWriteTimeout).
	StreamWriteTimeout time.Duration
	// ProbePolicy is this node's probe target policy, shown by
	// GET /v1/operator/probe-policy (the zero Policy is the default one).
	ProbePolicy healthcheck.Policy
	// MetricsRequireToken puts /metrics behind operator: read access while ACLs are on
	// (roster server --metrics-require-token); otherwise it answers anyone.
	MetricsRequireToken bool
}

func (c Config) withDefaults() (Config, error) {
	if c.Store == nil {
		return c, errors.New("httpapi: Config.Store is required")
	}
	if c.Node == nil {
		return c, errors.New("httpapi: Config.Node is required")
	}
	if c.Registry == nil {
		return c, errors.New("httpapi: Config.Registry is required")
	}
	if c.NodeID == "" {
		c.NodeID = c.Node.ID()
	}
	if c.NodeID == "" {
		return c, errors.New("httpapi: Config.NodeID is required")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RequestTimeout < 0 || c.MaxBodyBytes < 0 || c.MaxWait < 0 || c.LeaderHold < 0 {
		return c, errors.New("httpapi: timeouts and limits must not be negative")
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.LeaderHold == 0 {
		c.LeaderHold = DefaultLeaderHold
	}
	c.LeaderHold = min(c.LeaderHold, c.RequestTimeout)
	var err error
	if c.Snapshot, err = c.Snapshot.withDefaults(c.Node); err != nil {
		return c, err
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = httpx.DefaultBodyTimeout
	}
	if c.StreamWriters <= 0 {
		c.StreamWriters = DefaultStreamWriters
	}
	if c.StreamWriteTimeout <= 0 {
		c.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.NewRegistry()
	}
	return c, nil
}

// server is the handler New returns.
type server struct {
	cfg     Config
	id      string
	store   Reader
	node    Consensus
	reg     *registry.Registry
	log     *slog.Logger
	router  *chi.Mux
	fwd     *httpx.Forwarder
	ownsFwd bool
	// toLeader is the middleware of writes the registry applies: served here when the
	// registry reaches the leader itself, else forwarded over HTTP (httpx.Forwarder.Writes).
	toLeader func(http.Handler) http.Handler
	metrics  *httpx.Metrics
	streams  *streamMetrics
	streamer *streamer
	console  *console.Handler
	// handler is the router behind the refusal of browsers' cross-origin writes.
	handler http.Handler
}

// New validates cfg and returns the API handler. The handler also implements
// CloseIdleConnections, which closes the idle connections of the forwarding transport
// it owns (when Config.Transport was nil).
func New(cfg Config) (http.Handler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &server{
		cfg:   cfg,
		id:    cfg.NodeID,
		store: cfg.Store,
		node:  cfg.Node,
		reg:   cfg.Registry,
		log:   cfg.Logger.With("component", "httpapi"),
	}
	s.metrics, err = httpx.NewMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	if s.streams, err = newStreamMetrics(cfg.Metrics); err != nil {
		return nil, err
	}
	s.streamer = newStreamer(cfg.StreamWriters, cfg.StreamWriteTimeout, cfg.KeepAlive, s.streams)
	crossOrigin, err := httpx.CrossOrigin(cfg.TrustedOrigins, s.writeError)
	if err != nil {
		return nil, err
	}
	s.fwd = cfg.Forwarder
	if s.fwd == nil {
		s.fwd, err = httpx.NewForwarder(httpx.ForwarderConfig{
			Node: cfg.Node, NodeID: cfg.NodeID, Logger: s.log, RequestTimeout: cfg.RequestTimeout,
			LeaderHold: cfg.LeaderHold, Transport: cfg.Transport, Metrics: s.metrics,
		})
		if err != nil {
			return nil, err
		}
		s.ownsFwd = true
	}
	s.toLeader = s.fwd.Writes(s.reg, s.writeError)
	if s.console, err = console.New(); err != nil {
		return nil, err
	}
	s.router = s.routes()
	s.handler = crossOrigin(s.router)
	return s, nil
}

// ServeHTTP serves the native API; a browser's write from another origin is refused
// before anything else looks at it.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// CloseIdleConnections closes idle connections of the forwarding transport when the
// handler owns it.
func (s *server) CloseIdleConnections() {
	if s.ownsFwd {
		s.fwd.CloseIdleConnections()
	}
}

// routes builds the router. Every route appears in docs/openapi.yaml.
//
// The web console's pages (package console, docs/console.md) are not API routes and are
// not in docs/openapi.yaml: GET /ui/... serves them, GET /ui redirects to /ui/, and a
// browser's GET / (Accept: text/html) is sent to /ui/; any other GET / is the API's 404.
// They carry no data, so they answer anyone; the pages read and write through the
// routes below with the operator's token.
//
// Access control: the status routes, /metrics (unless Config.MetricsRequireToken; with
// ACLs on, its per-namespace and per-service series need operator: read) and
// POST /v1/acl/bootstrap answer anyone; every other route first resolves the request's
// token (httpx.Authenticate: 401 without a valid one while ACLs are on) and then
// checks the permission the route needs (httpx.Require: 403) — before a follower
// forwards anything, and again on the node that serves it. The registry checks the
// permission of every write and read once more, derived from the key it writes or
// reads. Path parameters are decoded once (decodePathParams), before any of these.
func (s *server) routes() *chi.Mux {
	r := chi.NewRouter()
	// A malformed query string is refused here, before a route reads it or a follower
	// forwards it (the proxy would drop what it cannot parse).
	r.Use(httpx.Recoverer(s.log, s.writeError), httpx.ServedBy(s.id), s.metrics.Middleware, httpx.StrictQuery(s.writeError))
	r.NotFound(s.notFound)
	r.MethodNotAllowed(httpx.MethodNotAllowed(r, s.writeError))

	authenticate := httpx.Authenticate(s.reg, nil, s.writeError)
	need := func(p acl.Permission) func(http.Handler) http.Handler {
		return httpx.Require(s.reg, httpx.Fixed(p), s.writeError)
	}
	// The namespace a route needs is its decoded {ns} (decodePathParams runs first).
	nsNeed := func(a acl.Access) func(http.Handler) http.Handler {
		return httpx.Require(s.reg, func(r *http.Request) acl.Permission {
			return acl.NamespacePermission(pathParam(r, "ns"), a)
		}, s.writeError)
	}

	switch {
	case s.cfg.MetricsRequireToken:
		r.With(authenticate, need(acl.OperatorRead)).Method(http.MethodGet, "/metrics", httpx.Handler(s.cfg.Metrics))
	case s.reg.ACLEnabled():
		// The series that name namespaces and services need operator: read.
		r.Method(http.MethodGet, "/metrics", s.metricsHandler())
	default:
		r.Method(http.MethodGet, "/metrics", httpx.Handler(s.cfg.Metrics))
	}
	r.Get("/", s.root)
	r.Get("/ui", console.RedirectToPrefix)
	r.Method(http.MethodGet, console.Prefix+"*", s.console)
	r.Method(http.MethodHead, console.Prefix+"*", s.console)
	r.Get("/v1/status/leader", s.handle(s.getLeader))
	r.Get("/v1/status/ready", s.handle(s.getReady))
	r.Get("/v1/status/state-check", s.handle(s.getStateCheck))
	r.With(httpx.BufferBodyWithin(s.cfg.MaxBodyBytes, s.cfg.BodyTimeout, httpx.JSONBodies, s.writeError),
		s.fwd.LeaderOnly(s.writeError)).Post("/v1/acl/bootstrap", s.handle(s.bootstrapACL))
	// Joins and address announcements come from nodes: over TLS a node certificate of
	// the cluster's CA is enough; otherwise they need operator: write (--join-token).
	r.With(httpx.NodeOr(func(next http.Handler) http.Handler { return authenticate(need(acl.OperatorWrite)(next)) }),
		httpx.BufferBodyWithin(s.cfg.MaxBodyBytes, s.cfg.BodyTimeout, httpx.JSONBodies, s.writeError),
		s.fwd.LeaderOnly(s.writeError)).Post("/v1/cluster/join", s.handle(s.join))
	// A leader's request for one probe, to confirm a health transition: from a node
	// (its certificate) or an operator; served here, never forwarded.
	r.With(httpx.NodeOr(func(next http.Handler) http.Handler { return authenticate(need(acl.OperatorWrite)(next)) }),
		httpx.BufferBodyWithin(s.cfg.MaxBodyBytes, s.cfg.BodyTimeout, httpx.JSONBodies, s.writeError)).Post("/v1/cluster/probe", s.handle(s.probeForLeader))

	const (
		ns       = "/v1/namespaces/{ns}"
		service  = ns + "/groups/{group}/services/{service}"
		cluster  = service + "/clusters/{cluster}"
		instance = service + "/instances/{addr}"
		token    = "/v1/acl/tokens/{accessor}"
	)

	r.Group(func(r chi.Router) {
		// Path parameters are decoded once, before anything decides on them.
		r.Use(s.decodePathParams, authenticate)
		r.With(need(acl.OperatorRead)).Get("/v1/operator/probe-policy", s.handle(s.getProbePolicy))
		r.With(need(registry.Authenticated)).Get("/v1/acl/token/self", s.handle(s.getTokenSelf))

		// Reads: ?consistency, ?index, ?wait; forwarded to the leader unless stale. The
		// permission is checked before anything is forwarded.
		read := func(perm func(http.Handler) http.Handler) chi.Router { return r.With(perm, s.readRoute) }
		read(need(registry.Authenticated)).Get("/v1/namespaces", s.handle(s.listNamespaces))
		r.Group(func(r chi.Router) {
			r.Use(nsNeed(acl.Read), s.readRoute)
			r.Get(ns, s.handle(s.getNamespace))
			r.Get(ns+"/services", s.handle(s.listServices))
			r.Get(service, s.handle(s.getService))
			r.Get(service+"/clusters", s.handle(s.listClusters))
			r.Get(cluster, s.handle(s.getCluster))
			r.Get(service+"/instances", s.handle(s.listInstances))
			r.Get(instance, s.handle(s.getInstance))
		})
		r.With(need(acl.OperatorRead), s.leaderStateRoute).Get("/v1/cluster/members", s.handle(s.listMembers))
		read(need(acl.OperatorRead)).Get("/v1/operator/settings", s.handle(s.getSettings))
		read(need(acl.ACLRead)).Get("/v1/acl/tokens", s.handle(s.listTokens))
		read(need(acl.ACLRead)).Get(token, s.handle(s.getToken))

		// Writes: bounded JSON bodies; the permission is checked before the body is
		// read. The registry hands a follower's write to the leader typed (s.toLeader);
		// a follower refuses a command type its leader lacks before it hands it over
		// (leaderApplies: a rolling upgrade's older leader).
		write := func(perm func(http.Handler) http.Handler, cmd ...fsm.MessageType) chi.Router {
			mw := []func(http.Handler) http.Handler{perm, httpx.BufferBodyWithin(s.cfg.MaxBodyBytes, s.cfg.BodyTimeout, httpx.JSONBodies, s.writeError)}
			for _, t := range cmd {
				mw = append(mw, s.leaderApplies(t, nil))
			}
			return r.With(append(mw, s.toLeader)...)
		}
		write(need(acl.OperatorWrite)).Put(ns, s.handle(s.putNamespace))
		write(need(acl.OperatorWrite)).Delete(ns, s.handle(s.deleteNamespace))
		r.Group(func(r chi.Router) {
			r.Use(nsNeed(acl.Write), httpx.BufferBodyWithin(s.cfg.MaxBodyBytes, s.cfg.BodyTimeout, httpx.JSONBodies, s.writeError),
				s.casNeedsNewLeader, s.toLeader)
			r.Put(service, s.handle(s.putService))
			r.Delete(service, s.handle(s.deleteService))
			r.Put(cluster, s.handle(s.putCluster))
			r.Put(instance, s.handle(s.putInstance))
			r.Patch(instance, s.handle(s.patchInstance))
			r.Delete(instance, s.handle(s.deleteInstance))
			r.Put(instance+"/health", s.handle(s.putHealth))
		})
		r.Group(func(r chi.Router) {
			r.Use(need(acl.OperatorWrite), httpx.BufferBodyWithin(s.cfg.MaxBodyBytes, s.cfg.BodyTimeout, httpx.JSONBodies, s.writeError), s.fwd.LeaderOnly(s.writeError))
			r.Delete("/v1/cluster/members/{id}", s.handle(s.removeMember))
			r.Post("/v1/cluster/leadership-transfer", s.handle(s.transferLeadership))
		})
		write(need(acl.OperatorWrite), fsm.UpdateSettingsType).Put("/v1/operator/settings", s.handle(s.putSettings))
		write(need(acl.ACLWrite), fsm.CreateTokenType).Post("/v1/acl/tokens", s.handle(s.createToken))
		write(need(acl.ACLWrite), fsm.DeleteTokenType).Delete(token, s.handle(s.deleteToken))

		// Probe results and server health live in the leader's memory: always served by
		// the leader.
		r.With(nsNeed(acl.Read), s.fwd.LeaderOnly(s.writeError)).Get(service+"/health", s.handle(s.getHealth))
		r.With(need(acl.OperatorRead), s.fwd.LeaderOnly(s.writeError)).Get("/v1/operator/autopilot/health", s.handle(s.getAutopilotHealth))

		// Backup archives: streamed bodies outside the write group's limits (snapshot.go).
		// An archive holds every token's hash, so saving one needs operator write too.
		r.Group(func(r chi.Router) {
			r.Use(need(acl.OperatorWrite))
			s.snapshotRoutes(r)
		})
	})
	return r
}

// root answers GET /: a browser asking for a page is sent to the console; anything else
// is the API's 404, as for any unknown route.
func (s *server) root(w http.ResponseWriter, r *http.Request) {
	if console.WantsPage(r) {
		http.Redirect(w, r, console.Prefix, http.StatusFound)
		return
	}
	s.notFound(w, r)
}

// handle adapts a handler that returns an error. An error that says this node is not
// the leader (leadership moved while the request ran) sends the request on to the new
// leader once; any other error is answered through writeError.
func (s *server) handle(fn func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := fn(w, r)
		if err == nil {
			return
		}
		if httpx.HandOver(s.reg, r, err) {
			s.fwd.Retried()
			var here http.Handler
			if errors.Is(err, registry.ErrLegacyLeader) {
				// This node may win the next election while the request waits for a
				// leader to send it to: it is then served here.
				here = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					httpx.SetBody(r, httpx.Body(r))
					if err := fn(w, r); err != nil {
						s.writeError(w, r, err)
					}
				})
			}
			s.fwd.Forward(w, r, here, s.writeError)
			return
		}
		s.writeError(w, r, err)
	}
}
