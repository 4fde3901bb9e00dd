package nacos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
)

// nacosSwitchDomainName is the name Nacos gives its switch set.
const nacosSwitchDomainName = "00-00---000-NACOS_SWITCH_DOMAIN-000---00-00"

// nacosSwitches is the body of GET .../operator/switches: the Nacos switches whose
// values describe Roster truthfully. Switches about mechanisms Roster does not have
// (Distro, adaptive check timing) or cannot change (the client versions pushed to) are
// left out.
type nacosSwitches struct {
	Name                         string         `json:"name"`
	Masters                      []string       `json:"masters"`
	AdWeightMap                  map[string]int `json:"adWeightMap"`
	DefaultPushCacheMillis       int64          `json:"defaultPushCacheMillis"`
	DefaultCacheMillis           int64          `json:"defaultCacheMillis"`
	HealthCheckEnabled           bool           `json:"healthCheckEnabled"`
	AutoChangeHealthCheckEnabled bool           `json:"autoChangeHealthCheckEnabled"`
	DistroEnabled                bool           `json:"distroEnabled"`
	PushEnabled                  bool           `json:"pushEnabled"`
	CheckTimes                   int            `json:"checkTimes"`
	IncrementalList              []string       `json:"incrementalList"`
	DisableAddIP                 bool           `json:"disableAddIP"`
	SendBeatOnly                 bool           `json:"sendBeatOnly"`
	LightBeatEnabled             bool           `json:"lightBeatEnabled"`
	DoubleWriteEnabled           bool           `json:"doubleWriteEnabled"`
	LimitedURLMap                map[string]int `json:"limitedUrlMap"`
	EnableAuthentication         bool           `json:"enableAuthentication"`
	OverriddenServerStatus       *string        `json:"overriddenServerStatus"`
	DefaultInstanceEphemeral     bool           `json:"defaultInstanceEphemeral"`
	HealthCheckWhiteList         []string       `json:"healthCheckWhiteList"`
	Checksum                     *string        `json:"checksum"`
}

// nacosGetSwitches serves GET .../operator/switches. Roster's switches are fixed by its
// design: instances are persistent (defaultInstanceEphemeral=false), the leader probes
// them (healthCheckEnabled=true), v1 clients receive UDP pushes when the node has a
// fan-out (pushEnabled; defaultPushCacheMillis is then NacosPushCacheMillis, else
// NacosCacheMillis: without pushes clients poll), checkTimes is the default fall count
// and enableAuthentication says whether the node enforces ACLs.
func (s *API) nacosGetSwitches(http.ResponseWriter, *http.Request, nacosParams) (any, error) {
	pushCache := int64(CacheMillis)
	if s.push != nil {
		pushCache = PushCacheMillis
	}
	return nacosSwitches{
		Name:                     nacosSwitchDomainName,
		AdWeightMap:              map[string]int{},
		DefaultPushCacheMillis:   pushCache,
		DefaultCacheMillis:       CacheMillis,
		HealthCheckEnabled:       true,
		PushEnabled:              s.push != nil,
		CheckTimes:               model.DefaultFall,
		IncrementalList:          []string{},
		LimitedURLMap:            map[string]int{},
		EnableAuthentication:     s.reg.ACLEnabled(),
		DefaultInstanceEphemeral: false,
		HealthCheckWhiteList:     []string{},
	}, nil
}

// nacosPutSwitches refuses to change a switch (403, 10001): Roster's switches describe
// its design and cannot be changed at run time.
func (s *API) nacosPutSwitches(http.ResponseWriter, *http.Request, nacosParams) (any, error) {
	return nil, nacosErr(http.StatusForbidden, CodeAccessDenied,
		"Roster's switches are read-only: they describe its design (persistent instances probed by the leader) "+
			"and cannot be changed at run time")
}

// counter is implemented by *store.Store.
type counter interface {
	Counts() (namespaces, services, instances int, err error)
}

// nacosMetricsV1 is the body of GET /nacos/v1/ns/operator/metrics (the data of the v2
// one when onlyStatus=false). Nacos's cpu, load and mem are left out: Roster's process
// metrics are on /metrics. The leader probes every instance, so it is responsible for
// all of them and a follower for none.
type nacosMetricsV1 struct {
	Status                   string `json:"status"`
	ServiceCount             int    `json:"serviceCount"`
	InstanceCount            int    `json:"instanceCount"`
	ResponsibleServiceCount  int    `json:"responsibleServiceCount"`
	ResponsibleInstanceCount int    `json:"responsibleInstanceCount"`
}

// nacosMetricsStatus is the data of GET /nacos/v2/ns/operator/metrics with onlyStatus
// (the default).
type nacosMetricsStatus struct {
	Status string `json:"status"`
}

// nacosMetrics serves GET .../operator/metrics from this node: status is "UP" when the
// node knows a leader and has applied what it knows is committed, else "DOWN"
// (nacos-sdk-go's ServerHealthy checks status == "UP").
func (s *API) nacosMetrics(_ http.ResponseWriter, r *http.Request, p nacosParams) (any, error) {
	status := "DOWN"
	if ok, _ := s.node.Ready(); ok {
		status = "UP"
	}
	if nacosV2(r) {
		only, present, err := p.boolean("onlyStatus")
		if err != nil {
			return nil, err
		}
		if only || !present {
			return nacosMetricsStatus{Status: status}, nil
		}
	}
	m := nacosMetricsV1{Status: status}
	if c, ok := s.store.(counter); ok {
		_, svcs, insts, err := c.Counts()
		if err != nil {
			return nil, err
		}
		m.ServiceCount, m.InstanceCount = svcs, insts
		if s.node.IsLeader() {
			m.ResponsibleServiceCount, m.ResponsibleInstanceCount = svcs, insts
		}
	}
	return m, nil
}

// nacosServer is one entry of GET /nacos/v1/ns/operator/servers.
type nacosServer struct {
	IP             string  `json:"ip"`
	ServePort      int     `json:"servePort"`
	Site           string  `json:"site"`
	Weight         int     `json:"weight"`
	AdWeight       int     `json:"adWeight"`
	Alive          bool    `json:"alive"`
	LastRefTime    int64   `json:"lastRefTime"`
	LastRefTimeStr *string `json:"lastRefTimeStr"`
	Key            string  `json:"key"`
}

// nacosServers serves GET /nacos/v1/ns/operator/servers: the Raft servers with the HTTP
// addresses they serve the API on, as this node's configuration lists them. alive means
// the server has a known HTTP address in the cluster configuration (Roster's member
// list, /v1/cluster/members, has voter and leader details); lastRefTime is 0.
func (s *API) nacosServers(_ http.ResponseWriter, r *http.Request, _ nacosParams) (any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	members, err := s.node.Members(ctx)
	if err != nil {
		return nil, err
	}
	out := struct {
		Servers []nacosServer `json:"servers"`
	}{Servers: []nacosServer{}}
	for _, m := range members {
		srv := nacosServer{Site: "unknown", Weight: 1, Key: hostPort(m.HTTPAddr)}
		if host, port, err := model.SplitAddr(srv.Key); err == nil {
			srv.IP, srv.ServePort, srv.Alive = host, port, true
		} else {
			srv.Key = m.ID
		}
		out.Servers = append(out.Servers, srv)
	}
	return out, nil
}

// nacosRaftLeader serves GET /nacos/v1/ns/raft/leader from this node's view: the
// leader's HTTP address as a JSON string inside JSON, as Nacos 1.x does. Roster's Raft
// has no fields matching Nacos's heartbeatDueMs, leaderDueMs and term; they are left out.
func (s *API) nacosRaftLeader(http.ResponseWriter, *http.Request, nacosParams) (any, error) {
	l, ok := s.node.Leader()
	if !ok || l.HTTPAddr == "" {
		return nil, fmt.Errorf("%w: %s knows no leader", httpx.ErrNoLeader, s.id)
	}
	addr := hostPort(l.HTTPAddr)
	inner, err := json.Marshal(map[string]string{"ip": addr, "state": "LEADER", "voteFor": addr})
	if err != nil {
		return nil, err
	}
	return map[string]string{"leader": string(inner)}, nil
}

// hostPort is a member's HTTP address as Nacos shows a server, ip:port: the scheme of
// an https:// address (a node serving TLS) is dropped.
func hostPort(addr string) string {
	if u, err := api.BaseURL(addr); err == nil && strings.Contains(addr, "://") {
		return u.Host
	}
	return addr
}

// nacosLoginResponse is the answer to a Nacos login while Roster has no authentication.
// nacos-sdk-go v1 stores accessToken (empty: it then sends no token) and reads tokenTtl
// as a number; an absent tokenTtl would crash it.
type nacosLoginResponse struct {
	AccessToken string `json:"accessToken"`
	TokenTTL    int64  `json:"tokenTtl"`
	GlobalAdmin bool   `json:"globalAdmin"`
	Message     string `json:"message"`
}

// nacosTokenTTL is the token lifetime reported at login, in seconds: Nacos's default.
const nacosTokenTTL = 18000

// nacosLoginDisabled is the answer to every login while ACLs are off: an empty token
// (the accessToken parameters of later requests are then ignored).
func nacosLoginDisabled() nacosLoginResponse {
	return nacosLoginResponse{
		AccessToken: "",
		TokenTTL:    nacosTokenTTL,
		GlobalAdmin: false,
		Message:     "authentication is disabled on this Roster server",
	}
}
