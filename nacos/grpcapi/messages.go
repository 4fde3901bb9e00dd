package grpcapi

import (
	"encoding/json"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/store"
)

// The JSON bodies of the Nacos 2.x gRPC API (alibaba/nacos 2.4.3:
// api/src/main/java/com/alibaba/nacos/api/remote/request/*.java, .../response/*.java and
// api/.../naming/remote/request|response/*.java). Metadata.type of a payload is the
// class's simple name, given by the constants below.

// Request and response types Roster serves or sends.
const (
	rpcServerCheckRequest         = "ServerCheckRequest"
	rpcServerCheckResponse        = "ServerCheckResponse"
	rpcConnectionSetupRequest     = "ConnectionSetupRequest"
	rpcSetupAckRequest            = "SetupAckRequest"
	rpcHealthCheckRequest         = "HealthCheckRequest"
	rpcHealthCheckResponse        = "HealthCheckResponse"
	rpcServerLoaderInfoRequest    = "ServerLoaderInfoRequest"
	rpcServerLoaderInfoResponse   = "ServerLoaderInfoResponse"
	rpcClientDetectionRequest     = "ClientDetectionRequest"
	rpcConnectResetRequest        = "ConnectResetRequest"
	rpcSubscribeServiceRequest    = "SubscribeServiceRequest"
	rpcSubscribeServiceResponse   = "SubscribeServiceResponse"
	rpcServiceQueryRequest        = "ServiceQueryRequest"
	rpcQueryServiceResponse       = "QueryServiceResponse"
	rpcServiceListRequest         = "ServiceListRequest"
	rpcServiceListResponse        = "ServiceListResponse"
	rpcInstanceRequest            = "InstanceRequest"
	rpcPersistentInstanceRequest  = "PersistentInstanceRequest"
	rpcInstanceResponse           = "InstanceResponse"
	rpcBatchInstanceRequest       = "BatchInstanceRequest"
	rpcBatchInstanceResponse      = "BatchInstanceResponse"
	rpcNotifySubscriberRequest    = "NotifySubscriberRequest"
	rpcErrorResponse              = "ErrorResponse"
	rpcAbilityPersistentByGRPC    = "supportPersistentInstanceByGrpc"
	rpcInstanceTypeRegister       = "registerInstance"
	rpcInstanceTypeDeregister     = "deregisterInstance"
	rpcInstanceTypeBatchRegister  = "batchRegisterInstance"
	rpcModuleInternal             = "internal"
	rpcModuleNaming               = "naming"
	rpcGRPCCacheMillis            = 10000
	rpcResultSuccess              = 200
	rpcResultFailure              = 500
	rpcCodeInvalidServerStatus    = 300
	rpcCodeUnregistered           = 301
	rpcCodeNoHandler              = 302
	rpcCodeInvalidParam           = 400
	rpcCodeNoRight                = 403
	rpcCodeBadGateway             = 502
	rpcMessageUnregistered        = "Connection is unregistered."
	rpcMessageNoHandler           = "RequestHandler Not Found"
	rpcMessageServerNotRunning    = "Server is starting,please try later."
	rpcParamCheckInvalidPrefix    = "Param check invalid:"
	rpcDefaultServiceListPageSize = 10
)

// rpcResponse is the base of every response: the Go SDK needs resultCode in each, or
// its response pointer stays nil.
type rpcResponse struct {
	ResultCode int    `json:"resultCode"`
	ErrorCode  int    `json:"errorCode"`
	Success    bool   `json:"success"`
	Message    string `json:"message"`
	RequestID  string `json:"requestId"`
}

func rpcOK() rpcResponse {
	return rpcResponse{ResultCode: rpcResultSuccess, Success: true, Message: "success"}
}

// rpcFail is a typed failure: the request's own response type with resultCode 500.
func rpcFail(code int, msg string) rpcResponse {
	return rpcResponse{ResultCode: rpcResultFailure, ErrorCode: code, Message: msg}
}

// rpcRequestBase is the base of every request. The headers travel in Metadata.headers,
// not in the body.
type rpcRequestBase struct {
	RequestID string            `json:"requestId"`
	Module    string            `json:"module"`
	Headers   map[string]string `json:"headers"`
}

// rpcNamingBase is the base of the naming requests: serviceName is the plain name.
type rpcNamingBase struct {
	rpcRequestBase
	Namespace   string `json:"namespace"`
	ServiceName string `json:"serviceName"`
	GroupName   string `json:"groupName"`
}

type rpcConnectionSetup struct {
	rpcRequestBase
	ClientVersion string            `json:"clientVersion"`
	Tenant        string            `json:"tenant"`
	Labels        map[string]string `json:"labels"`
	// AbilityTable is sent by clients that negotiate abilities (Java ≥ 2.3); they wait
	// for a SetupAckRequest. nil when absent.
	AbilityTable map[string]bool `json:"abilityTable"`
}

type rpcSubscribe struct {
	rpcNamingBase
	Subscribe bool   `json:"subscribe"`
	Clusters  string `json:"clusters"`
}

type rpcQuery struct {
	rpcNamingBase
	Cluster     string `json:"cluster"`
	HealthyOnly bool   `json:"healthyOnly"`
	UDPPort     int    `json:"udpPort"`
}

type rpcServiceList struct {
	rpcNamingBase
	PageNo   int    `json:"pageNo"`
	PageSize int    `json:"pageSize"`
	Selector string `json:"selector"`
}

// rpcInstance is an instance in a request. Fields a client may leave out are pointers,
// so that Nacos's defaults apply to them.
type rpcInstance struct {
	InstanceID  string            `json:"instanceId"`
	IP          string            `json:"ip"`
	Port        int               `json:"port"`
	Weight      *float64          `json:"weight"`
	Healthy     *bool             `json:"healthy"`
	Enabled     *bool             `json:"enabled"`
	Ephemeral   *bool             `json:"ephemeral"`
	ClusterName string            `json:"clusterName"`
	ServiceName string            `json:"serviceName"`
	Metadata    map[string]string `json:"metadata"`
}

type rpcInstanceOp struct {
	rpcNamingBase
	Type     string      `json:"type"`
	Instance rpcInstance `json:"instance"`
}

type rpcBatchInstanceOp struct {
	rpcNamingBase
	Type      string        `json:"type"`
	Instances []rpcInstance `json:"instances"`
}

type rpcServerCheckAnswer struct {
	rpcResponse
	ConnectionID              string `json:"connectionId"`
	SupportAbilityNegotiation bool   `json:"supportAbilityNegotiation"`
}

type rpcServiceInfoAnswer struct {
	rpcResponse
	ServiceInfo json.RawMessage `json:"serviceInfo"`
}

type rpcServiceListAnswer struct {
	rpcResponse
	Count        int      `json:"count"`
	ServiceNames []string `json:"serviceNames"`
}

type rpcServerLoaderInfoAnswer struct {
	rpcResponse
	Address       string            `json:"address"`
	LoaderMetrics map[string]string `json:"loaderMetrics"`
}

// rpcServerRequest is a request the server sends on a connection's stream.
type rpcServerRequest struct {
	rpcRequestBase
	AbilityTable map[string]bool `json:"abilityTable,omitempty"`
	ServerIP     string          `json:"serverIp,omitempty"`
	ServerPort   string          `json:"serverPort,omitempty"`
}

// rpcServiceInfo is a service's instance list in the 2.x shape: name is the plain
// service name (the Go SDK keys its cache and callbacks by groupName@@name@@clusters and
// fires no callback for a grouped name), clusters echoes what the client sent.
type rpcServiceInfo struct {
	Name                     string       `json:"name"`
	GroupName                string       `json:"groupName"`
	Clusters                 string       `json:"clusters"`
	CacheMillis              int64        `json:"cacheMillis"`
	Hosts                    []nacos.Host `json:"hosts"`
	LastRefTime              int64        `json:"lastRefTime"`
	Checksum                 string       `json:"checksum"`
	AllIPs                   bool         `json:"allIPs"`
	ReachProtectionThreshold bool         `json:"reachProtectionThreshold"`
	Valid                    bool         `json:"valid"`
}

// rpcRefTimes hands out lastRefTime values: the Go SDK drops a list whose lastRefTime is
// not above the one it holds, so two lists built in one millisecond must differ. Every
// value is above every earlier one on this node.
type rpcRefTimes struct{ last atomic.Int64 }

func (r *rpcRefTimes) next(now time.Time) int64 {
	for {
		last := r.last.Load()
		v := max(now.UnixMilli(), last+1)
		if r.last.CompareAndSwap(last, v) {
			return v
		}
	}
}

// rpcView is a service's instance list for one clusters filter: its JSON without
// lastRefTime and checksum (sig, equal for lists that look the same to the client) and
// the selected hosts.
type rpcView struct {
	info rpcServiceInfo
	sig  []byte
}

// rpcViewOf selects a service's instance list for a clusters filter (enabled instances
// only, the protect threshold applied, healthyOnly for queries). found is false for a
// service that does not exist: Nacos answers it with an empty list.
func rpcViewOf(key model.ServiceKey, view store.ServiceView, found bool, clusters string, healthyOnly bool) rpcView {
	info := rpcServiceInfo{
		Name: key.Service, GroupName: key.Group, Clusters: clusters,
		CacheMillis: rpcGRPCCacheMillis, Hosts: []nacos.Host{}, Valid: true,
	}
	if found {
		list, reached := nacos.Select(view.Instances, view.Service.ProtectThreshold, nacos.ParseClusterSet(clusters), healthyOnly)
		for _, in := range list {
			info.Hosts = append(info.Hosts, nacos.HostOf(in))
		}
		info.ReachProtectionThreshold = reached
	}
	sig, err := json.Marshal(info)
	if err != nil {
		sig = nil
	}
	info.Checksum = nacos.HostsChecksum(info.Hosts)
	return rpcView{info: info, sig: sig}
}

// encode is the list's JSON with lastRefTime ref.
func (v rpcView) encode(ref int64) ([]byte, error) {
	info := v.info
	info.LastRefTime = ref
	return json.Marshal(info)
}

// notifyBody is the body of a NotifySubscriberRequest carrying info (JSON) with
// requestId id.
func notifyBody(id uint64, key model.ServiceKey, info []byte) []byte {
	b := make([]byte, 0, len(info)+160)
	b = append(b, `{"headers":{},"requestId":"`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `","module":"naming","namespace":`...)
	b = appendJSONString(b, key.Namespace)
	b = append(b, `,"serviceName":`...)
	b = appendJSONString(b, key.Service)
	b = append(b, `,"groupName":`...)
	b = appendJSONString(b, key.Group)
	b = append(b, `,"serviceInfo":`...)
	b = append(b, info...)
	return append(b, '}')
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}
