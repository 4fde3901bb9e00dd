package openapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/nacos/udppush"
)

// switchDomainName is the name Nacos gives its switch set.
const switchDomainName = "00-00---000-NACOS_SWITCH_DOMAIN-000---00-00"

// switches is the body of GET .../operator/switches: the Nacos switches whose
// values describe Roster truthfully. Switches about mechanisms Roster does not have
// (Distro, adaptive check timing) or cannot change (the client versions pushed to) are
// left out.
type switches struct {
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

// getSwitches serves GET .../operator/switches. Roster's switches are fixed by its
// design: instances are persistent (defaultInstanceEphemeral=false), the leader probes
// them (healthCheckEnabled=true), v1 clients receive UDP pushes when the node has a
// fan-out (pushEnabled; defaultPushCacheMillis is then udppush.CacheMillis, else
// nacos.CacheMillis: without pushes clients poll), checkTimes is the default fall count
// and enableAuthentication says whether the node enforces ACLs.
func (s *API) getSwitches(http.ResponseWriter, *http.Request, params) (any, error) {
	pushCache := int64(nacos.CacheMillis)
	if s.push != nil {
		pushCache = udppush.CacheMillis
	}
	return switches{
		Name:                     switchDomainName,
		AdWeightMap:              map[string]int{},
		DefaultPushCacheMillis:   pushCache,
		DefaultCacheMillis:       nacos.CacheMillis,
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

// putSwitches refuses to change a switch (403, 10001): Roster's switches describe
// its design and cannot be changed at run time.
func (s *API) putSwitches(http.ResponseWriter, *http.Request, params) (any, error) {
	return nil, nacos.Err(http.StatusForbidden, nacos.CodeAccessDenied,
		"Roster's switches are read-only: they describe its design (persistent instances probed by the leader) "+
			"and cannot be changed at run time")
}

// counter is implemented by *store.Store.
type counter interface {
	Counts() (namespaces, services, instances int, err error)
}

// metricsV1 is the body of GET /nacos/v1/ns/operator/metrics (the data of the v2
// one when onlyStatus=false). Nacos's cpu, load and mem are left out: Roster's process
// metrics are on /metrics. The leader probes every instance, so it is responsible for
// all of them and a follower for none.
type metricsV1 struct {
	Status                   string `json:"status"`
	ServiceCount             int    `json:"serviceCount"`
	InstanceCount            int    `json:"instanceCount"`
	ResponsibleServiceCount  int    `json:"responsibleServiceCount"`
	ResponsibleInstanceCount int    `json:"responsibleInstanceCount"`
}

// metricsStatus is the data of GET /nacos/v2/ns/operator/metrics with onlyStatus
// (the default).
type metricsStatus struct {
	Status string `json:"status"`
}

// metricsRoute serves GET .../operator/metrics from this node: status is "UP" when the
// node knows a leader and has applied what it knows is committed, else "DOWN"
// (nacos-sdk-go's ServerHealthy checks status == "UP").
func (s *API) metricsRoute(_ http.ResponseWriter, r *http.Request, p params) (any, error) {
	status := "DOWN"
	if ok, _ := s.node.Ready(); ok {
		status = "UP"
	}
	if isV2(r) {
		only, present, err := p.boolean("onlyStatus")
		if err != nil {
			return nil, err
		}
		if only || !present {
			return metricsStatus{Status: status}, nil
		}
	}
	m := metricsV1{Status: status}
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

// serverEntry is one entry of GET /nacos/v1/ns/operator/servers.
type serverEntry struct {
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

// servers serves GET /nacos/v1/ns/operator/servers: the Raft servers with the HTTP
// addresses they serve the API on, as this node's configuration lists them. alive means
// the server has a known HTTP address in the cluster configuration (Roster's member
// list, /v1/cluster/members, has voter and leader details); lastRefTime is 0.
func (s *API) servers(_ http.ResponseWriter, r *http.Request, _ params) (any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	members, err := s.node.Members(ctx)
	if err != nil {
		return nil, err
	}
	out := struct {
		Servers []serverEntry `json:"servers"`
	}{Servers: []serverEntry{}}
	for _, m := range members {
		srv := serverEntry{Site: "unknown", Weight: 1, Key: hostPort(m.HTTPAddr)}
		if host, port, err := model.SplitAddr(srv.Key); err == nil {
			srv.IP, srv.ServePort, srv.Alive = host, port, true
		} else {
			srv.Key = m.ID
		}
		out.Servers = append(out.Servers, srv)
	}
	return out, nil
}

// raftLeader serves GET /nacos/v1/ns/raft/leader from this node's view: the
// leader's HTTP address as a JSON string inside JSON, as Nacos 1.x does. Roster's Raft
// has no fields matching Nacos's heartbeatDueMs, leaderDueMs and term; they are left out.
func (s *API) raftLeader(http.ResponseWriter, *http.Request, params) (any, error) {
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

// loginResponse is the answer to a Nacos login while Roster has no authentication.
// nacos-sdk-go v1 stores accessToken (empty: it then sends no token) and reads tokenTtl
// as a number; an absent tokenTtl would crash it.
type loginResponse struct {
	AccessToken string `json:"accessToken"`
	TokenTTL    int64  `json:"tokenTtl"`
	GlobalAdmin bool   `json:"globalAdmin"`
	Message     string `json:"message"`
}

// tokenTTL is the token lifetime reported at login, in seconds: Nacos's default.
const tokenTTL = 18000

// loginDisabled is the answer to every login while ACLs are off: an empty token
// (the accessToken parameters of later requests are then ignored).
func loginDisabled() loginResponse {
	return loginResponse{
		AccessToken: "",
		TokenTTL:    tokenTTL,
		GlobalAdmin: false,
		Message:     "authentication is disabled on this Roster server",
	}
}
