package openapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// handlerFunc serves one Nacos route: it returns the answer ("ok" for writes, a
// value for reads) or an error, which the adapter writes in the request's Nacos shape.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p params) (any, error)

// routes builds the router of the Nacos Open API compatibility layer (/nacos/v1/...
// and /nacos/v2/...; docs/nacos-compatibility.md). It is kept apart from the native
// router, whose routes docs/openapi.yaml describes, and shares its middleware, its
// forwarding to the leader and its consistency checks. Writes are served by the leader
// (forwarded from followers); reads are leader-local by default (forwarded from
// followers), or as ?consistency= asks; operator, auth and refusal routes are answered
// by the node that receives them.
//
// Access control: the login routes answer anyone; every other route first resolves the
// request's token (tokenOf: the accessToken parameter or the native headers) and
// then checks the permission the route needs — namespace read or write on the
// request's namespaceId, operator read or write — before it forwards, records or
// writes anything. The registry checks every write and read once more.
func (s *API) routes() *chi.Mux {
	r := chi.NewRouter()
	fail := func(w http.ResponseWriter, r *http.Request, err error) {
		s.writeNacosError(w, r, err, nacos.ResourceOther)
	}
	// A malformed query string is refused here, before a route reads it or a follower
	// forwards it (the proxy would drop what it cannot parse).
	r.Use(httpx.Recoverer(s.log, fail), httpx.ServedBy(s.id), s.metrics.Middleware, httpx.StrictQuery(fail),
		s.bufferBodyAfterToken(fail))
	r.NotFound(s.notFound)
	r.MethodNotAllowed(httpx.MethodNotAllowed(r, fail))

	r.Post("/nacos/v1/auth/login", s.login)
	r.Post("/nacos/v1/auth/users/login", s.login)

	need := func(p acl.Permission) func(http.Handler) http.Handler {
		return httpx.Require(s.reg, httpx.Fixed(p), fail)
	}
	r.Group(func(r chi.Router) {
		r.Use(s.authenticate)
		// A v1 instance list records its client for UDP pushes on the node that received
		// it, once the caller may read the namespace, before the read is forwarded.
		r.With(s.nsNeed(acl.Read), s.readRouteWith(s.pushRoute)).Get("/nacos/v1/ns/instance/list", s.nacos(nacos.ResourceInstance, s.listInstances))
		r.With(s.nsNeed(acl.Read), s.readRoute).Get("/nacos/v2/ns/instance/list", s.nacos(nacos.ResourceInstance, s.listInstances))
		// This node's subscribers: answered here, never forwarded.
		r.With(s.nsNeed(acl.Read)).Get("/nacos/v1/ns/service/subscribers", s.nacos(nacos.ResourceService, s.subscribers))
		for _, base := range []string{"/nacos/v1/ns", "/nacos/v2/ns"} {
			r.Group(func(r chi.Router) {
				r.Use(s.nsNeed(acl.Read), s.readRoute)
				r.Get(base+"/instance", s.nacos(nacos.ResourceInstance, s.getInstance))
				r.Get(base+"/service", s.nacos(nacos.ResourceService, s.getService))
				r.Get(base+"/service/list", s.nacos(nacos.ResourceService, s.listServices))
			})
			r.Group(func(r chi.Router) {
				r.Use(s.nsNeed(acl.Write), s.fwd.Writes(s.reg, fail))
				r.Post(base+"/instance", s.nacos(nacos.ResourceInstance, s.register))
				r.Put(base+"/instance", s.nacos(nacos.ResourceInstance, s.update))
				r.Patch(base+"/instance", s.nacos(nacos.ResourceInstance, s.patch))
				r.Delete(base+"/instance", s.nacos(nacos.ResourceInstance, s.deregister))
				r.Put(base+"/health", s.nacos(nacos.ResourceInstance, s.setHealth))
				r.Put(base+"/health/instance", s.nacos(nacos.ResourceInstance, s.setHealth))
				r.Post(base+"/service", s.nacos(nacos.ResourceService, s.createService))
				r.Put(base+"/service", s.nacos(nacos.ResourceService, s.updateService))
				r.Delete(base+"/service", s.nacos(nacos.ResourceService, s.deleteService))
				r.Put(base+"/cluster", s.nacos(nacos.ResourceOther, s.putCluster))
			})
			// Refused whoever asks, but only once the caller may write the namespace, as
			// Nacos checks its heartbeat and batch routes (nothing is written either way).
			r.Group(func(r chi.Router) {
				r.Use(s.nsNeed(acl.Write))
				r.Put(base+"/instance/beat", s.nacos(nacos.ResourceInstance, s.beat))
				r.Put(base+"/instance/metadata/batch", s.nacos(nacos.ResourceInstance, s.metadataBatch))
				r.Delete(base+"/instance/metadata/batch", s.nacos(nacos.ResourceInstance, s.metadataBatch))
			})
			r.With(need(acl.OperatorRead)).Get(base+"/operator/switches", s.nacos(nacos.ResourceOther, s.getSwitches))
			r.With(need(acl.OperatorWrite)).Put(base+"/operator/switches", s.nacos(nacos.ResourceOther, s.putSwitches))
			r.With(need(acl.OperatorRead)).Get(base+"/operator/metrics", s.nacos(nacos.ResourceOther, s.metricsRoute))
		}
		r.With(need(acl.OperatorRead)).Get("/nacos/v1/ns/operator/servers", s.nacos(nacos.ResourceOther, s.servers))
		r.With(need(acl.OperatorRead)).Get("/nacos/v1/ns/raft/leader", s.nacos(nacos.ResourceOther, s.raftLeader))
	})
	return r
}

// preAuthBodyBytes is what is read of a request's body before its token is checked,
// with ACLs on, when the token is not in a header or the query string: Nacos clients
// send it in the form body of their writes (nacos-sdk-go puts every parameter there),
// whose forms are small.
const preAuthBodyBytes = 64 << 10

// bufferBodyAfterToken buffers a request's body (within MaxBodyBytes and BodyTimeout)
// only once its token is known to be valid, with ACLs on: a token in a header or the
// query string is checked first, and a request that fails is refused before a byte of
// its body is read; a request whose token can only be in its body has preAuthBodyBytes
// read, else 413. A client without credentials so cannot make the node hold 1 MiB per
// request. With ACLs off the body is buffered as it comes.
func (s *API) bufferBodyAfterToken(fail httpx.ErrorWriter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		full := httpx.BufferBodyWithin(s.cfg.MaxBodyBytes, s.cfg.BodyTimeout, nil, fail)(next)
		limit := min(int64(preAuthBodyBytes), s.cfg.MaxBodyBytes)
		tooLarge := func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, httpx.ErrBodyTooLarge) {
				err = fmt.Errorf("%w: a request without its accessToken in the query string or a header may send at most %d bytes of body "+
					"before it is authenticated", httpx.ErrBodyTooLarge, limit)
			}
			fail(w, r, err)
		}
		small := httpx.BufferBodyWithin(limit, s.cfg.BodyTimeout, nil, tooLarge)(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !s.reg.ACLEnabled() {
				full.ServeHTTP(w, r)
				return
			}
			if tok := tokenOutsideBody(r); tok != "" && !strings.HasSuffix(r.URL.Path, "/login") {
				if _, err := (authenticator{s}).Authenticate(tok); err != nil {
					w.Header().Set("Connection", "close") // its body is left unread
					fail(w, r, err)
					return
				}
				full.ServeHTTP(w, r)
				return
			}
			if r.ContentLength > limit {
				w.Header().Set("Connection", "close")
				tooLarge(w, r, fmt.Errorf("%w: the limit is %d bytes", httpx.ErrBodyTooLarge, limit))
				return
			}
			small.ServeHTTP(w, r)
		})
	}
}

// authenticate resolves the token of a Nacos request (tokenOf) and hands the
// request on with what it may do in its context; a request without a valid token while
// ACLs are on is refused as Nacos refuses it (403).
func (s *API) authenticate(next http.Handler) http.Handler {
	return httpx.Authenticate(authenticator{s}, tokenOf, func(w http.ResponseWriter, r *http.Request, err error) {
		s.writeNacosError(w, r, err, nacos.ResourceOther)
	})(next)
}

// nacos adapts a Nacos handler: it parses the parameters, runs fn and answers in the
// request's shape (v1 text or bare JSON, v2 envelope). An error saying this node is not
// the leader (leadership moved while the request ran) sends the request on to the new
// leader once, as the native API does.
func (s *API) nacos(res nacos.Resource, fn handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := parseNacosParams(r)
		var out any
		if err == nil {
			out, err = fn(w, r, p)
		}
		if err != nil {
			if httpx.HandOver(s.reg, r, err) {
				s.fwd.Retried()
				var here http.Handler
				if errors.Is(err, registry.ErrLegacyLeader) {
					// This node may win the next election while the request waits for
					// a leader to send it to: it is then served here.
					here = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						httpx.SetBody(r, httpx.Body(r))
						p, err := parseNacosParams(r)
						var out any
						if err == nil {
							out, err = fn(w, r, p)
						}
						if err != nil {
							s.writeNacosError(w, r, err, res)
							return
						}
						writeNacosOK(w, r, out)
					})
				}
				s.fwd.Forward(w, r, here, func(w http.ResponseWriter, r *http.Request, err error) { s.writeNacosError(w, r, err, res) })
				return
			}
			s.writeNacosError(w, r, err, res)
			return
		}
		writeNacosOK(w, r, out)
	}
}

// readRoute parses the read options as native reads do (?consistency=, ?index=,
// ?wait=) but defaults to leader-local consistency, and sends reads that need the
// leader to it from a follower. Nacos serves reads from each node's memory and its
// clients poll every cacheMillis, so a quorum round trip per poll (linearizable) buys
// them nothing they expect; leader-local reads still see every write the leader has
// acknowledged. ?consistency=stale serves a poll from any node.
func (s *API) readRoute(next http.Handler) http.Handler {
	return s.readRouteWith(nil)(next)
}

// readRouteWith is readRoute with before (nil: none) run on this node once
// the read options are valid, around the decision to serve the read here or at the
// leader.
func (s *API) readRouteWith(before func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		var serve http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			o := httpx.ReadOptionsOf(r, httpx.ReadOptions{})
			if httpx.ReadsHere(s.reg, o) {
				next.ServeHTTP(w, r)
				return
			}
			fail := func(w http.ResponseWriter, r *http.Request, err error) {
				s.writeNacosError(w, r, err, nacos.ResourceOther)
			}
			if o.Blocking {
				s.fwd.ForwardBlocking(w, r, o, next, fail)
				return
			}
			s.fwd.Forward(w, r, next, fail)
		})
		if before != nil {
			serve = before(serve)
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			o, err := httpx.ParseReadOptions(r, api.ConsistencyLinearizable, s.cfg.MaxWait)
			if err != nil {
				s.writeNacosError(w, r, err, nacos.ResourceOther)
				return
			}
			if !r.URL.Query().Has("consistency") {
				o.Mode = api.ConsistencyLeader
			}
			serve.ServeHTTP(w, httpx.WithReadOptions(r, o))
		})
	}
}

// notFound answers a /nacos path Roster does not serve.
func (s *API) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeNacosError(w, r, nacos.Err(http.StatusNotFound, nacos.CodeResourceNotFound,
		"Roster does not serve %s %s (see docs/nacos-compatibility.md)", r.Method, r.URL.Path), nacos.ResourceOther)
}

// wrote sets X-Roster-Index for a write the registry applied at idx, or returns
// the write's error: wrote(w)(s.reg.RegisterInstance(...)).
func wrote(w http.ResponseWriter) func(idx uint64, err error) error {
	return func(idx uint64, err error) error {
		if err != nil {
			return err
		}
		setIndex(w, idx)
		return nil
	}
}

// maxCASRetries bounds the read-modify-write rounds of a Nacos write whose condition
// failed because the service changed between the read and the write.
const maxCASRetries = 8

// leaderView reads a service on the leader, for a write's preconditions: it waits until
// a leader-local read is allowed (this node leads and has applied every entry of
// earlier terms), then reads the local store. found is false when the service does not
// exist. The write itself re-checks what it depends on, so a race only changes which
// error is answered.
func (s *API) leaderView(r *http.Request, key model.ServiceKey) (view store.ServiceView, found bool, err error) {
	o := registry.ReadOptions{Permission: acl.NamespacePermission(key.Namespace, acl.Read), Consistency: registry.Leader}
	_, err = s.reg.Read(r.Context(), o, func(*store.WatchSet) (uint64, error) {
		var idx uint64
		idx, view, err = s.store.ServiceView(nil, key)
		return idx, err
	})
	if errors.Is(err, model.ErrNotFound) {
		return store.ServiceView{}, false, nil
	}
	if err != nil {
		return view, false, err
	}
	return view, true, nil
}

// findInstance returns the instance ref names in view.
func findInstance(view store.ServiceView, ref model.InstanceRef) (model.Instance, bool) {
	for _, in := range view.Instances {
		if in.IP == ref.IP && in.Port == ref.Port {
			return in, true
		}
	}
	return model.Instance{}, false
}

// findCluster returns the named cluster of view.
func findCluster(view store.ServiceView, name string) (model.Cluster, bool) {
	for _, c := range view.Clusters {
		if c.Name == name {
			return c, true
		}
	}
	return model.Cluster{}, false
}
