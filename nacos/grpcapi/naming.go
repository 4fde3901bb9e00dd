package grpcapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/nacos/nacospb"
	"github.com/rosterhq/roster/registry"
)

// healthCheck answers the client's keep-alive.
func (g *Server) healthCheck(context.Context, *rpcSession, *nacospb.Metadata, []byte) (string, any) {
	return rpcHealthCheckResponse, rpcOK()
}

// serverLoaderInfo reports this node's load as Nacos's ServerLoaderInfoRequestHandler
// does (every value a string). With ACLs on it needs operator read access, as the
// operator routes of the HTTP API do.
func (g *Server) serverLoaderInfo(_ context.Context, _ *rpcSession, md *nacospb.Metadata, _ []byte) (string, any) {
	if refused, ok := g.authorize(md, acl.OperatorRead); !ok {
		return rpcServerLoaderInfoResponse, refused
	}
	n := g.Connections()
	return rpcServerLoaderInfoResponse, rpcServerLoaderInfoAnswer{
		rpcResponse: rpcOK(),
		Address:     g.cfg.HTTPAddr,
		LoaderMetrics: map[string]string{
			"conCount":    strconv.Itoa(n),
			"sdkConCount": strconv.Itoa(n),
			"load":        "0",
			"cpu":         strconv.Itoa(runtime.NumCPU()),
		},
	}
}

// rpcServiceKey resolves a naming request's service: namespace "" is public, group ""
// is DEFAULT_GROUP, and a grouped serviceName (group@@name) is accepted when its group
// agrees. Names follow the store's rules.
func rpcServiceKey(b rpcNamingBase) (model.ServiceKey, error) {
	key, err := nacos.ResolveServiceKey(b.Namespace, b.GroupName, b.ServiceName)
	switch {
	case errors.Is(err, nacos.ErrGroupedName):
		return key, model.Invalid("serviceName", "%q should be format as 'groupName@@serviceName'", b.ServiceName)
	case errors.Is(err, nacos.ErrGroupMismatch):
		return key, model.Invalid("groupName", "%q does not match the group of serviceName %q", b.GroupName, b.ServiceName)
	}
	return key, err
}

// paramInvalid is the typed failure Nacos's parameter check answers with.
func paramInvalid(err error) rpcResponse {
	return rpcFail(rpcCodeInvalidParam, rpcParamCheckInvalidPrefix+err.Error())
}

// catchUp waits, within CatchUpTimeout, until this node has applied what it knows is
// committed and the writes it forwarded; a node that cannot catch up in time serves what
// it has (its state is never more than stale).
func (g *Server) catchUp(ctx context.Context) {
	if g.cfg.CatchUp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.CatchUpTimeout)
	defer cancel()
	if err := g.cfg.CatchUp(ctx); err != nil {
		g.log.Debug("nacos grpc read served before this node caught up", "err", err)
	}
}

// read runs fn, a read of this node's state, through the registry once this node has
// caught up: registry.Read decides the state alarm, the ACL gate and the namespace's
// read permission (ctx carries the caller's rights: authorizeIn), as for every surface.
// The read is stale: Nacos clients read each server's own memory. A refusal is answered
// as Nacos answers it; ok is false then.
func (g *Server) read(ctx context.Context, ns string, fn func() error) (rpcResponse, bool) {
	g.catchUp(ctx)
	_, err := g.reg.Read(ctx, registry.ReadOptions{Namespace: ns, Consistency: registry.Stale},
		func(*registry.WatchSet) (uint64, error) { return 0, fn() })
	if err == nil {
		return rpcResponse{}, true
	}
	ne := nacos.Classify(err, nacos.ResourceOther)
	if ne.Auth {
		return rpcFail(rpcCodeNoRight, ne.Msg), false
	}
	return rpcFail(ne.Status, ne.Msg), false
}

// view reads a service's list for a clusters filter from this node's state.
func (g *Server) view(key model.ServiceKey, clusters string, healthyOnly bool) (rpcView, error) {
	_, sv, err := g.cfg.Store.ServiceView(nil, key)
	found := err == nil
	if err != nil && !errors.Is(err, model.ErrNotFound) {
		return rpcView{}, err
	}
	return rpcViewOf(key, sv, found, clusters, healthyOnly), nil
}

// serviceInfoAnswer encodes a list with a fresh lastRefTime into a response of type typ.
func (g *Server) serviceInfoAnswer(typ string, v rpcView) (string, any) {
	info, err := v.encode(g.refs.next(time.Now()))
	if err != nil {
		return typ, rpcServiceInfoAnswer{rpcResponse: rpcFail(http.StatusInternalServerError, httpx.Message(err))}
	}
	return typ, rpcServiceInfoAnswer{rpcResponse: rpcOK(), ServiceInfo: info}
}

// subscribeService answers SubscribeServiceRequest: the service's list for the
// request's clusters (enabled instances, protect threshold applied), and with subscribe
// true a subscription of this connection, pushed every later change of that list.
// subscribe false ends the subscription and still answers the list.
func (g *Server) subscribeService(ctx context.Context, s *rpcSession, md *nacospb.Metadata, body []byte) (string, any) {
	var req rpcSubscribe
	if t, v, ok := decode(body, &req); !ok {
		return t, v
	}
	perm := rpcNamespacePermission(req.rpcNamingBase, acl.Read)
	ctx, refused, ok := g.authorizeIn(ctx, md, perm)
	if !ok {
		return rpcSubscribeServiceResponse, rpcServiceInfoAnswer{rpcResponse: refused}
	}
	key, err := rpcServiceKey(req.rpcNamingBase)
	if err == nil {
		err = nacos.CheckClusterList("clusters", req.Clusters)
	}
	if err != nil {
		return rpcSubscribeServiceResponse, rpcServiceInfoAnswer{rpcResponse: paramInvalid(err)}
	}
	var v rpcView
	if req.Subscribe {
		g.catchUp(ctx)
		v, err = s.push.subscribe(key, req.Clusters, g.reg.StillAllowed(rpcToken(md), perm))
	} else {
		s.push.unsubscribe(key, req.Clusters)
		if refused, ok := g.read(ctx, key.Namespace, func() (err error) { v, err = g.view(key, req.Clusters, false); return err }); !ok {
			return rpcSubscribeServiceResponse, rpcServiceInfoAnswer{rpcResponse: refused}
		}
	}
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, errTooManySubscriptions) {
			code = rpcCodeInvalidParam
		}
		return rpcSubscribeServiceResponse, rpcServiceInfoAnswer{rpcResponse: rpcFail(code, httpx.Message(err))}
	}
	return g.serviceInfoAnswer(rpcSubscribeServiceResponse, v)
}

// queryService answers ServiceQueryRequest: the list without a subscription, healthy
// instances only when asked (note the request's field is "cluster").
func (g *Server) queryService(ctx context.Context, _ *rpcSession, md *nacospb.Metadata, body []byte) (string, any) {
	var req rpcQuery
	if t, v, ok := decode(body, &req); !ok {
		return t, v
	}
	ctx, refused, ok := g.authorizeIn(ctx, md, rpcNamespacePermission(req.rpcNamingBase, acl.Read))
	if !ok {
		return rpcQueryServiceResponse, rpcServiceInfoAnswer{rpcResponse: refused}
	}
	key, err := rpcServiceKey(req.rpcNamingBase)
	if err == nil {
		err = nacos.CheckClusterList("cluster", req.Cluster)
	}
	if err != nil {
		return rpcQueryServiceResponse, rpcServiceInfoAnswer{rpcResponse: paramInvalid(err)}
	}
	var v rpcView
	if refused, ok := g.read(ctx, key.Namespace, func() (err error) { v, err = g.view(key, req.Cluster, req.HealthyOnly); return err }); !ok {
		return rpcQueryServiceResponse, rpcServiceInfoAnswer{rpcResponse: refused}
	}
	return g.serviceInfoAnswer(rpcQueryServiceResponse, v)
}

// serviceList answers ServiceListRequest: one page of the names of a group's services
// (plain names), with the number of services in the group. A namespace without services
// has none. selector is accepted and ignored, as Nacos does.
func (g *Server) serviceList(ctx context.Context, _ *rpcSession, md *nacospb.Metadata, body []byte) (string, any) {
	var req rpcServiceList
	if t, v, ok := decode(body, &req); !ok {
		return t, v
	}
	ctx, refused, ok := g.authorizeIn(ctx, md, rpcNamespacePermission(req.rpcNamingBase, acl.Read))
	if !ok {
		return rpcServiceListResponse, rpcServiceListAnswer{rpcResponse: refused}
	}
	ns, group := req.Namespace, req.GroupName
	if ns == "" {
		ns = model.DefaultNamespace
	}
	if group == "" {
		group = model.DefaultGroup
	}
	err := model.ValidateNamespace(ns)
	if err == nil {
		err = model.ValidateGroup(group)
	}
	if err == nil && req.PageSize < 0 {
		err = model.Invalid("pageSize", "must not be negative, got %d", req.PageSize)
	}
	if err != nil {
		return rpcServiceListResponse, rpcServiceListAnswer{rpcResponse: paramInvalid(err)}
	}
	page, size := max(req.PageNo, 1), req.PageSize
	if size == 0 {
		size = rpcDefaultServiceListPageSize
	}
	if _, err := httpx.PageOffset("pageNo", page, size); err != nil {
		return rpcServiceListResponse, rpcServiceListAnswer{rpcResponse: paramInvalid(err)}
	}
	var list []model.Service
	var total int
	if refused, ok := g.read(ctx, ns, func() (err error) {
		_, list, total, err = g.cfg.Store.Services(nil, ns, group, page, size)
		if errors.Is(err, model.ErrNotFound) {
			list, total, err = nil, 0, nil
		}
		return err
	}); !ok {
		return rpcServiceListResponse, rpcServiceListAnswer{rpcResponse: refused}
	}
	names := make([]string, 0, len(list))
	for _, svc := range list {
		names = append(names, svc.Name)
	}
	return rpcServiceListResponse, rpcServiceListAnswer{rpcResponse: rpcOK(), Count: total, ServiceNames: names}
}

// errPersistentOnly refuses an ephemeral registration with Nacos's sentence for a
// persistent service.
func errPersistentOnly(key model.ServiceKey) rpcResponse {
	return rpcFail(rpcCodeInvalidParam, fmt.Sprintf(
		"Current service %s is persistent service, can't register ephemeral instance. "+
			"Roster keeps persistent instances only: register with ephemeral=false", key.GroupedName()))
}

// instance answers InstanceRequest, the ephemeral instance API. Registrations are
// refused with the typed InstanceResponse (an ErrorResponse would make the Go SDK retry
// the registration in a loop); a deregistration removes the persistent instance at
// ip:port, as DELETE /nacos/v1/ns/instance does whatever ephemeral says.
func (g *Server) instance(ctx context.Context, s *rpcSession, md *nacospb.Metadata, body []byte) (string, any) {
	var req rpcInstanceOp
	if t, v, ok := decode(body, &req); !ok {
		return t, v
	}
	ctx, refused, ok := g.authorizeIn(ctx, md, rpcNamespacePermission(req.rpcNamingBase, acl.Write))
	if !ok {
		return rpcInstanceResponse, refused
	}
	ctx = registry.WithRequestID(ctx, req.RequestID) // a forwarded write takes it to the leader
	key, err := rpcServiceKey(req.rpcNamingBase)
	if err != nil {
		return rpcInstanceResponse, paramInvalid(err)
	}
	switch req.Type {
	case rpcInstanceTypeRegister:
		return rpcInstanceResponse, errPersistentOnly(key)
	case rpcInstanceTypeDeregister:
		return rpcInstanceResponse, g.write(ctx, s, md, http.MethodDelete, key, req.Instance)
	default:
		return rpcInstanceResponse, rpcFail(rpcCodeInvalidParam, fmt.Sprintf("Unsupported request type %s", req.Type))
	}
}

// persistentInstance answers PersistentInstanceRequest (Java clients ≥ 2.3, once the
// setup ack said supportPersistentInstanceByGrpc): register or deregister a persistent
// instance through the same route, validation and codes as the HTTP API.
func (g *Server) persistentInstance(ctx context.Context, s *rpcSession, md *nacospb.Metadata, body []byte) (string, any) {
	var req rpcInstanceOp
	if t, v, ok := decode(body, &req); !ok {
		return t, v
	}
	ctx, refused, ok := g.authorizeIn(ctx, md, rpcNamespacePermission(req.rpcNamingBase, acl.Write))
	if !ok {
		return rpcInstanceResponse, refused
	}
	ctx = registry.WithRequestID(ctx, req.RequestID) // a forwarded write takes it to the leader
	key, err := rpcServiceKey(req.rpcNamingBase)
	if err != nil {
		return rpcInstanceResponse, paramInvalid(err)
	}
	switch req.Type {
	case rpcInstanceTypeRegister:
		return rpcInstanceResponse, g.write(ctx, s, md, http.MethodPost, key, req.Instance)
	case rpcInstanceTypeDeregister:
		return rpcInstanceResponse, g.write(ctx, s, md, http.MethodDelete, key, req.Instance)
	default:
		return rpcInstanceResponse, rpcFail(rpcCodeInvalidParam, fmt.Sprintf("Unsupported request type %s", req.Type))
	}
}

// batchInstance answers BatchInstanceRequest, which only ever carries ephemeral
// instances (Java's batch deregistration is a batch registration of what remains): it
// is refused with the typed response.
func (g *Server) batchInstance(_ context.Context, _ *rpcSession, md *nacospb.Metadata, body []byte) (string, any) {
	var req rpcBatchInstanceOp
	if t, v, ok := decode(body, &req); !ok {
		return t, v
	}
	if refused, ok := g.authorize(md, rpcNamespacePermission(req.rpcNamingBase, acl.Write)); !ok {
		return rpcBatchInstanceResponse, refused
	}
	key, err := rpcServiceKey(req.rpcNamingBase)
	if err != nil {
		return rpcBatchInstanceResponse, paramInvalid(err)
	}
	if req.Type != rpcInstanceTypeBatchRegister {
		return rpcBatchInstanceResponse, rpcFail(rpcCodeInvalidParam, fmt.Sprintf("Unsupported request type %s", req.Type))
	}
	return rpcBatchInstanceResponse, errPersistentOnly(key)
}

// write runs a persistent registration (method POST) or deregistration (DELETE)
// through the registry, which hands it to the leader when this node does not lead (ctx
// carries what the caller may do: authorizeIn; the leader checks the token again), and
// turns the outcome into a typed response: success, or resultCode 500 with the HTTP
// status the Open API would answer as errorCode and its message. The instance is
// checked by the same rules, in the same order and with the same messages, as the Open
// API's form.
func (g *Server) write(ctx context.Context, s *rpcSession, md *nacospb.Metadata, method string, key model.ServiceKey, in rpcInstance) rpcResponse {
	limits := g.reg.Limits()
	f, err := rpcInstanceForm(key, in, limits)
	if err == nil {
		if method == http.MethodPost {
			persistent := false
			f.Ephemeral = &persistent
			var inst model.Instance
			if inst, err = f.Registration(limits); err == nil {
				_, err = g.reg.RegisterInstance(ctx, inst, registry.Condition{})
			}
		} else {
			// Deregistering an instance that is not there answers ok, as the Open API does.
			if _, err = g.reg.DeregisterInstance(ctx, f.Ref, registry.Condition{}); errors.Is(err, model.ErrNotFound) {
				err = nil
			}
		}
	}
	if errors.Is(err, registry.ErrLegacyLeader) {
		return g.legacyWrite(ctx, s, md, method, key, in)
	}
	if err == nil {
		return rpcOK()
	}
	ne := nacos.Classify(err, nacos.ResourceInstance)
	return rpcFail(ne.Status, ne.Msg)
}

// rpcInstanceForm checks a gRPC request's instance as parseNacosInstanceForm checks the
// Open API's form: ip, port, clusterName, weight, enabled, healthy and metadata.
func rpcInstanceForm(key model.ServiceKey, in rpcInstance, limits model.Limits) (nacos.InstanceForm, error) {
	var f nacos.InstanceForm
	ip := strings.TrimSpace(in.IP)
	if ip == "" {
		return f, nacos.Missing("ip", "String")
	}
	if in.Port == 0 {
		return f, nacos.Missing("port", "Integer")
	}
	f.Ref = model.InstanceRef{Namespace: key.Namespace, Group: key.Group, Service: key.Service, IP: ip, Port: in.Port}
	if err := model.ValidateInstanceRef(f.Ref); err != nil {
		return f, err
	}
	if c := strings.TrimSpace(in.ClusterName); c != "" {
		if err := model.ValidateClusterName(c); err != nil {
			return f, err
		}
		f.Cluster = &c
	}
	if in.Weight != nil {
		w := *in.Weight // JSON carries no NaN or infinity
		if err := model.ValidateWeight(w); err != nil {
			return f, err
		}
		f.Weight = &w
	}
	f.Enabled, f.Healthy = in.Enabled, in.Healthy
	if len(in.Metadata) > 0 {
		md := maps.Clone(in.Metadata)
		if err := limits.AdmitMetadata("metadata", md); err != nil {
			return f, err
		}
		f.Metadata = &md
	}
	return f, nil
}

// legacyWrite is write while the leader runs a release without the peer RPC (a rolling
// upgrade from v0.2.x): the write runs as the equivalent Open API call (POST or DELETE
// /nacos/v2/ns/instance) on this node, whose HTTP stack forwards it to the leader.
// Every release from this one on takes writes over the peer RPC, so this goes once
// v0.2.x is no longer a release to upgrade from.
func (g *Server) legacyWrite(ctx context.Context, s *rpcSession, md *nacospb.Metadata, method string, key model.ServiceKey, in rpcInstance) rpcResponse {
	q := url.Values{}
	q.Set("namespaceId", key.Namespace)
	q.Set("groupName", key.Group)
	q.Set("serviceName", key.Service)
	q.Set("ip", in.IP)
	q.Set("port", strconv.Itoa(in.Port))
	if in.ClusterName != "" {
		q.Set("clusterName", in.ClusterName)
	}
	if method == http.MethodPost {
		if in.Weight != nil {
			q.Set("weight", strconv.FormatFloat(*in.Weight, 'g', -1, 64))
		}
		if in.Enabled != nil {
			q.Set("enabled", strconv.FormatBool(*in.Enabled))
		}
		if in.Healthy != nil {
			q.Set("healthy", strconv.FormatBool(*in.Healthy))
		}
		if len(in.Metadata) > 0 {
			b, err := json.Marshal(in.Metadata)
			if err != nil {
				return rpcFail(rpcCodeInvalidParam, err.Error())
			}
			q.Set("metadata", string(b))
		}
		q.Set("ephemeral", "false")
	}
	if tok := rpcToken(md); tok != "" {
		q.Set(nacos.AccessTokenParam, tok)
	}
	status, res := g.api.ServeInternal(ctx, method, "/nacos/v2/ns/instance", q, s.c.remote)
	if status == http.StatusOK && res.Code == nacos.CodeSuccess {
		return rpcOK()
	}
	msg, _ := res.Data.(string)
	if msg == "" {
		msg = res.Message
	}
	return rpcFail(status, msg)
}

// rpcToken is the token a gRPC request presents: its accessToken header, which
// nacos-sdk-go v2 sets on every request once it has logged in over HTTP.
func rpcToken(md *nacospb.Metadata) string {
	return strings.TrimSpace(md.GetHeaders()[nacos.AccessTokenParam])
}

// rpcNamespacePermission is access a to the namespace a naming request names (public
// when it names none), as Nacos's auth filter reads the request's namespace before
// any parameter is checked.
func rpcNamespacePermission(b rpcNamingBase, a acl.Access) acl.Permission {
	ns := strings.TrimSpace(b.Namespace)
	if ns == "" {
		ns = model.DefaultNamespace
	}
	return acl.NamespacePermission(ns, a)
}

// authorize resolves the request's token and checks p, before the request does
// anything. A refusal is Nacos's (RemoteRequestAuthFilter): the request's own response
// type with resultCode 500, errorCode 403 (NacosException.NO_RIGHT) and the auth
// plugin's message; ok is false then.
func (g *Server) authorize(md *nacospb.Metadata, p acl.Permission) (rpcResponse, bool) {
	_, refused, ok := g.authorizeIn(context.Background(), md, p)
	return refused, ok
}

// authorizeIn is authorize that returns ctx carrying what the request may do, for the
// registry (which hands the token on to the leader with a write).
func (g *Server) authorizeIn(ctx context.Context, md *nacospb.Metadata, p acl.Permission) (context.Context, rpcResponse, bool) {
	if !g.reg.ACLEnabled() {
		return ctx, rpcResponse{}, true // dispatch checked that the node agrees with the cluster
	}
	secret := rpcToken(md)
	a, err := g.reg.Authenticate(secret)
	if err == nil {
		err = a.Check(p)
	} else {
		err = nacos.AuthError(secret, err)
	}
	if err == nil {
		return acl.WithAuthorizer(ctx, a), rpcResponse{}, true
	}
	ne := nacos.Classify(err, nacos.ResourceOther)
	if ne.Auth {
		return ctx, rpcFail(rpcCodeNoRight, ne.Msg), false
	}
	return ctx, rpcFail(ne.Status, ne.Msg), false
}
