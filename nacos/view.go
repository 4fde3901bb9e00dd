package nacos

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// CacheMillis is the cacheMillis of an instance list answered to a client that
// receives no pushes, and the defaultCacheMillis switch. Nacos SDKs re-query a
// subscribed service once its cached list is older than cacheMillis (nacos-sdk-go v1
// checks every second). Nacos answers 3000 ms; for a client that learns of changes only
// by polling, Roster's 1000 ms bounds that delay to about two seconds, at the cost of one
// leader-local read (no quorum round trip) per subscribed service per client per
// second. Clients that receive UDP pushes are answered udppush.CacheMillis.
const CacheMillis = 1000

// Values Nacos reports for heartbeat-based instances. Roster's instances are persistent
// and probed by the leader, so these describe nothing; they are sent because the Nacos
// list shape has them.
const (
	heartBeatInterval = 5000
	heartBeatTimeout  = 15000
	ipDeleteTimeout   = 30000
)

// Host is one entry of "hosts" in an instance list (the 1.x Open API page, nacos-group/nacos-group.github.io: src/content/docs/v1/en/open-api.md, "Query instance list").
type Host struct {
	InstanceID                string            `json:"instanceId"`
	IP                        string            `json:"ip"`
	Port                      int               `json:"port"`
	Weight                    float64           `json:"weight"`
	Healthy                   bool              `json:"healthy"`
	Enabled                   bool              `json:"enabled"`
	Ephemeral                 bool              `json:"ephemeral"`
	ClusterName               string            `json:"clusterName"`
	ServiceName               string            `json:"serviceName"`
	Metadata                  map[string]string `json:"metadata"`
	InstanceHeartBeatInterval int64             `json:"instanceHeartBeatInterval"`
	InstanceIDGenerator       string            `json:"instanceIdGenerator"`
	InstanceHeartBeatTimeOut  int64             `json:"instanceHeartBeatTimeOut"`
	IPDeleteTimeout           int64             `json:"ipDeleteTimeout"`
	Valid                     bool              `json:"valid"`
	Marked                    bool              `json:"marked"`
}

// ServiceInfo is the body of GET /nacos/v1/ns/instance/list (and the data of the v2
// list): the fields of Nacos's documented example plus those the 1.x code emits.
type ServiceInfo struct {
	Name                     string            `json:"name"`
	GroupName                string            `json:"groupName"`
	Clusters                 string            `json:"clusters"`
	CacheMillis              int64             `json:"cacheMillis"`
	Hosts                    []Host            `json:"hosts"`
	LastRefTime              int64             `json:"lastRefTime"`
	Checksum                 string            `json:"checksum"`
	AllIPs                   bool              `json:"allIPs"`
	ReachProtectionThreshold bool              `json:"reachProtectionThreshold"`
	Valid                    bool              `json:"valid"`
	Dom                      string            `json:"dom"`
	UseSpecifiedURL          bool              `json:"useSpecifiedURL"`
	Env                      string            `json:"env"`
	Metadata                 map[string]string `json:"metadata"`
}

// ParseClusterSet splits a comma-separated cluster list; nil means every cluster.
func ParseClusterSet(s string) map[string]bool {
	var set map[string]bool
	for _, c := range strings.Split(s, ",") {
		if c = strings.TrimSpace(c); c != "" {
			if set == nil {
				set = map[string]bool{}
			}
			set[c] = true
		}
	}
	return set
}

// Select picks the hosts of an instance list as Nacos does: enabled instances of
// the selected clusters (nil: all). When the protect threshold is reached among them
// (model.ProtectThresholdReached) every one of them is returned and marked healthy, as
// Nacos 1.x and 2.x do, and reached is true. Otherwise the healthy ones are returned,
// and the unhealthy ones too unless healthyOnly, each with its true health. Order is the
// store's (IP, port).
func Select(all []model.Instance, threshold float64, clusters map[string]bool, healthyOnly bool) ([]model.Instance, bool) {
	var enabled []model.Instance
	healthy := 0
	for _, in := range all {
		if !in.Enabled || (clusters != nil && !clusters[in.Cluster]) {
			continue
		}
		enabled = append(enabled, in)
		if in.Healthy {
			healthy++
		}
	}
	if model.ProtectThresholdReached(healthy, len(enabled), threshold) {
		out := make([]model.Instance, len(enabled))
		for i, in := range enabled {
			in.Healthy = true
			out[i] = in
		}
		return out, true
	}
	if !healthyOnly {
		return enabled, false
	}
	out := make([]model.Instance, 0, healthy)
	for _, in := range enabled {
		if in.Healthy {
			out = append(out, in)
		}
	}
	return out, false
}

// HostOf shows an instance the way a Nacos list does.
func HostOf(in model.Instance) Host {
	return Host{
		InstanceID:                in.InstanceID(),
		IP:                        in.IP,
		Port:                      in.Port,
		Weight:                    in.Weight,
		Healthy:                   in.Healthy,
		Enabled:                   in.Enabled,
		Ephemeral:                 false,
		ClusterName:               in.Cluster,
		ServiceName:               in.ServiceKey().GroupedName(),
		Metadata:                  NonNilMap(in.Metadata),
		InstanceHeartBeatInterval: heartBeatInterval,
		InstanceIDGenerator:       "simple",
		InstanceHeartBeatTimeOut:  heartBeatTimeout,
		IPDeleteTimeout:           ipDeleteTimeout,
		Valid:                     in.Healthy,
	}
}

// ServiceInfoFor builds an instance list, as GET .../instance/list answers it and
// as a push carries it. clusters is echoed as the client sent it: nacos-sdk-go keys its
// cache by name and clusters. found is false for a service that does not exist, which
// Nacos answers with an empty list, not an error.
func ServiceInfoFor(key model.ServiceKey, view store.ServiceView, found bool, clusters string, healthyOnly bool, cacheMillis int64, now time.Time) ServiceInfo {
	info := ServiceInfo{
		Name:        key.GroupedName(),
		GroupName:   key.Group,
		Clusters:    clusters,
		CacheMillis: cacheMillis,
		Hosts:       []Host{},
		LastRefTime: now.UnixMilli(),
		Valid:       true,
		Dom:         key.GroupedName(),
		Metadata:    map[string]string{},
	}
	if !found {
		return info
	}
	list, reached := Select(view.Instances, view.Service.ProtectThreshold, ParseClusterSet(clusters), healthyOnly)
	for _, in := range list {
		info.Hosts = append(info.Hosts, HostOf(in))
	}
	info.ReachProtectionThreshold = reached
	info.Metadata = NonNilMap(view.Service.Metadata)
	info.Checksum = HostsChecksum(info.Hosts)
	return info
}

// HostsChecksum is the MD5 of the hosts as sent: it changes exactly when the list does.
func HostsChecksum(hosts []Host) string {
	b, err := json.Marshal(hosts)
	if err != nil {
		return ""
	}
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// NonNilMap makes a nil map encode as {} rather than null.
func NonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
