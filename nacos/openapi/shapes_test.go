package openapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/nacos/internal/nacostesting"
	"github.com/rosterhq/roster/raftnode"
)

// Documented examples of the Nacos Open API pages (nacos-group/nacos-group.github.io: src/content/docs/v1/en/open-api.md and src/content/docs/v2/zh-cn/guide/user/open-api.md), made valid JSON.
const (
	docV1List = `{"name":"DEFAULT_GROUP@@nacos.test.1","groupName":"DEFAULT_GROUP","clusters":"","cacheMillis":10000,
 "hosts":[{"instanceId":"127.110.10.10#8888#DEFAULT#DEFAULT_GROUP@@nacos.test.1","ip":"127.110.10.10","port":8888,"weight":1,
   "healthy":false,"enabled":true,"ephemeral":false,"clusterName":"DEFAULT","serviceName":"DEFAULT_GROUP@@nacos.test.1",
   "metadata":{},"instanceHeartBeatInterval":5000,"instanceIdGenerator":"simple","instanceHeartBeatTimeOut":15000,"ipDeleteTimeout":30000}],
 "lastRefTime":1528787794594,"checksum":"","allIPs":false,"reachProtectionThreshold":false,"valid":true}`
	// docV1ListCode lists the fields the 1.3 code emits besides the documented ones.
	docV1ListCode = `{"hosts":[{"ip":"","port":1,"valid":true,"healthy":true,"marked":false,"instanceId":"","metadata":{},
   "enabled":true,"weight":1,"clusterName":"","serviceName":"","ephemeral":false}],
 "dom":"","name":"","cacheMillis":1,"lastRefTime":1,"checksum":"","useSpecifiedURL":false,"clusters":"","env":"","metadata":{}}`
	docV2ListData = `{"name":"DEFAULT_GROUP@@test_service","groupName":"DEFAULT_GROUP","clusters":"","cacheMillis":10000,
 "hosts":[{"ip":"127.0.0.1","port":8080,"weight":1.0,"healthy":true,"enabled":true,"ephemeral":true,"clusterName":"DEFAULT",
   "serviceName":"DEFAULT_GROUP@@test_service","metadata":{"value":"1"},"instanceHeartBeatTimeOut":15000,"ipDeleteTimeout":30000,
   "instanceHeartBeatInterval":5000}],
 "lastRefTime":1662554390814,"checksum":"","allIPs":false,"reachProtectionThreshold":false,"valid":true}`
	docV1Instance = `{"metadata":{},"instanceId":"127.110.10.10-8888-DEFAULT-nacos.test.2","port":8888,"service":"nacos.test.2",
 "healthy":false,"ip":"127.110.10.10","clusterName":"DEFAULT","weight":1.0}`
	docV2InstanceData = `{"serviceName":"DEFAULT_GROUP@@test_service","ip":"127.0.0.1","port":8080,"clusterName":"DEFAULT",
 "weight":1.0,"healthy":true,"instanceId":null,"metadata":{"value":"1"}}`
	docV1Service = `{"metadata":{},"groupName":"DEFAULT_GROUP","namespaceId":"public","name":"nacos.test.2","selector":{"type":"none"},
 "protectThreshold":0,"clusters":[{"healthChecker":{"type":"TCP"},"metadata":{},"name":"c1"}]}`
	docV2ServiceData = `{"namespace":"public","serviceName":"nacos.test.1","groupName":"DEFAULT_GROUP","clusterMap":{},"metadata":{},
 "protectThreshold":0,"selector":{"type":"none","contextType":"NONE"},"ephemeral":false}`
	docV1ServiceList = `{"count":148,"doms":["nacos.test.1","nacos.test.2"]}`
	docV2ServiceList = `{"count":2,"services":["nacos.test.1","nacos.test.2"]}`
	docV1Servers     = `{"servers":[{"ip":"1.1.1.1","servePort":8848,"site":"unknown","weight":1,"adWeight":0,"alive":false,
 "lastRefTime":0,"lastRefTimeStr":null,"key":"1.1.1.1:8848"}]}`
	docSwitches = `{"name":"00-00---000-NACOS_SWITCH_DOMAIN-000---00-00","masters":null,"adWeightMap":{},
 "defaultPushCacheMillis":10000,"defaultCacheMillis":3000,"healthCheckEnabled":true,"autoChangeHealthCheckEnabled":true,
 "distroEnabled":true,"pushEnabled":true,"checkTimes":3,"incrementalList":[],"disableAddIP":false,"sendBeatOnly":false,
 "lightBeatEnabled":true,"doubleWriteEnabled":false,"limitedUrlMap":{},"enableAuthentication":false,
 "overriddenServerStatus":null,"defaultInstanceEphemeral":true,"healthCheckWhiteList":[],"checksum":null}`
	docV1Metrics  = `{"serviceCount":1,"responsibleServiceCount":1,"instanceCount":1,"status":"UP","responsibleInstanceCount":1}`
	docV1Login    = `{"accessToken":"eyJhbGciOiJIUzI1NiJ9","tokenTtl":18000,"globalAdmin":true}`
	docRaftLeader = `{"leader":"{}"}`
)

// TestNacosAPI_ResponseShapesMatchTheDocs checks every Nacos read answers with every
// field of Nacos's documented example, with the same JSON types.
func TestNacosAPI_ResponseShapesMatchTheDocs(t *testing.T) {
	h, _, node := newStoreAPI(t)
	node.SetMembers([]raftnode.Member{{ID: "n1", RaftAddr: "127.0.0.1:7848", HTTPAddr: "127.0.0.1:8848", Voter: true, Leader: true}})
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/instance",
		`serviceName=nacos.test.1&ip=127.110.10.10&port=8888&ephemeral=false&metadata={"value":"1"}`)
	nacostesting.MustOK(t, h, http.MethodPut, "/nacos/v1/ns/cluster",
		`serviceName=nacos.test.1&clusterName=DEFAULT&healthChecker={"type":"TCP"}`)

	const q = "?serviceName=nacos.test.1"
	tests := []struct {
		name   string
		target string
		docs   []string
	}{
		{"v1 instance list", "/nacos/v1/ns/instance/list" + q, []string{docV1List, docV1ListCode}},
		{"v2 instance list", "/nacos/v2/ns/instance/list" + q, []string{docV2ListData}},
		{"v1 instance", "/nacos/v1/ns/instance" + q + "&ip=127.110.10.10&port=8888", []string{docV1Instance}},
		{"v2 instance", "/nacos/v2/ns/instance" + q + "&ip=127.110.10.10&port=8888", []string{docV2InstanceData}},
		{"v1 service", "/nacos/v1/ns/service" + q, []string{docV1Service}},
		{"v2 service", "/nacos/v2/ns/service" + q, []string{docV2ServiceData}},
		{"v1 service list", "/nacos/v1/ns/service/list?pageNo=1&pageSize=10", []string{docV1ServiceList}},
		{"v2 service list", "/nacos/v2/ns/service/list", []string{docV2ServiceList}},
		{"v1 servers", "/nacos/v1/ns/operator/servers", []string{docV1Servers}},
		{"v1 switches", "/nacos/v1/ns/operator/switches", []string{docSwitches}},
		{"v2 switches", "/nacos/v2/ns/operator/switches", []string{docSwitches}},
		{"v1 metrics", "/nacos/v1/ns/operator/metrics", []string{docV1Metrics}},
		{"v2 metrics without onlyStatus", "/nacos/v2/ns/operator/metrics?onlyStatus=false", []string{docV1Metrics}},
		{"raft leader", "/nacos/v1/ns/raft/leader", []string{docRaftLeader}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := nacostesting.MustNacos(t, h, http.MethodGet, tt.target, "", http.StatusOK)
			body := resp.Body
			if isV2(newRequest(t, http.MethodGet, tt.target, "")) {
				code, msg, data := resp.Envelope(t)
				if code != 0 || msg != "success" {
					t.Fatalf("envelope code %d message %q", code, msg)
				}
				body = data
			}
			got := decodeAny(t, body)
			for _, doc := range tt.docs {
				sameShape(t, "$", decodeAny(t, []byte(doc)), got)
			}
		})
	}
	for _, path := range []string{"/nacos/v1/auth/login", "/nacos/v1/auth/users/login"} {
		resp := nacostesting.MustNacos(t, h, http.MethodPost, path, "username=nacos&password=nacos", http.StatusOK)
		sameShape(t, path, decodeAny(t, []byte(docV1Login)), decodeAny(t, resp.Body))
	}
}

// TestNacosAPI_ListValues checks the values of an instance list: grouped names, the
// echoed clusters, cacheMillis, persistent hosts, and the service's metadata.
func TestNacosAPI_ListValues(t *testing.T) {
	h, _, _ := newStoreAPI(t)
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/service", "serviceName=orders&groupName=g1&metadata=team%3Dpay")
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/instance",
		`serviceName=g1@@orders&groupName=g1&ip=127.100.0.1&port=80&weight=2&clusterName=web&ephemeral=false&metadata={"v":"1"}`)
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&groupName=g1&ip=127.100.0.2&port=80&ephemeral=false")

	var info nacos.ServiceInfo
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/instance/list?serviceName=g1@@orders&clusters=web", "", http.StatusOK).Decode(t, &info)
	if info.Name != "g1@@orders" || info.GroupName != "g1" || info.Clusters != "web" || info.CacheMillis != nacos.CacheMillis ||
		info.Dom != "g1@@orders" || !info.Valid || info.ReachProtectionThreshold || info.Metadata["team"] != "pay" {
		t.Fatalf("list %+v", info)
	}
	if len(info.Hosts) != 1 {
		t.Fatalf("hosts %+v", info.Hosts)
	}
	want := nacos.Host{InstanceID: "127.100.0.1#80#web#g1@@orders", IP: "127.100.0.1", Port: 80, Weight: 2, Healthy: true, Enabled: true,
		ClusterName: "web", ServiceName: "g1@@orders", Metadata: map[string]string{"v": "1"}, InstanceHeartBeatInterval: 5000,
		InstanceIDGenerator: "simple", InstanceHeartBeatTimeOut: 15000, IPDeleteTimeout: 30000, Valid: true}
	got := info.Hosts[0]
	if got.InstanceID != want.InstanceID || got.Weight != want.Weight || got.ClusterName != want.ClusterName ||
		got.ServiceName != want.ServiceName || got.Metadata["v"] != "1" || got.Ephemeral || !got.Healthy || !got.Enabled {
		t.Fatalf("host %+v\nwant %+v", got, want)
	}
	if info.Checksum == "" {
		t.Fatal("no checksum")
	}

	// All clusters; the same list through v2 (clusterName) is enveloped.
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/instance/list?serviceName=orders&groupName=g1", "", http.StatusOK).Decode(t, &info)
	if len(info.Hosts) != 2 || info.Clusters != "" {
		t.Fatalf("list %+v", info)
	}
	resp := nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v2/ns/instance/list?serviceName=orders&groupName=g1&clusterName=DEFAULT", "", http.StatusOK)
	_, _, data := resp.Envelope(t)
	var v2 nacos.ServiceInfo
	nacostesting.Response{Body: data}.Decode(t, &v2)
	if len(v2.Hosts) != 1 || v2.Hosts[0].IP != "127.100.0.2" || v2.Clusters != "DEFAULT" {
		t.Fatalf("v2 list %+v", v2)
	}

	// An unknown service is an empty list, not an error.
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/instance/list?serviceName=nope&namespaceId=nowhere", "", http.StatusOK).Decode(t, &info)
	if info.Name != "DEFAULT_GROUP@@nope" || len(info.Hosts) != 0 || info.Hosts == nil {
		t.Fatalf("unknown service %+v", info)
	}
}

// TestNacosAPI_ServiceListPaging checks v1's required paging and v2's defaults.
func TestNacosAPI_ServiceListPaging(t *testing.T) {
	h, _, _ := newStoreAPI(t)
	for _, name := range []string{"a", "b", "c"} {
		nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/service", "serviceName="+name)
	}
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/service", "serviceName=other&groupName=g1")
	var l1 serviceListV1
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/service/list?pageNo=2&pageSize=2", "", http.StatusOK).Decode(t, &l1)
	if l1.Count != 3 || len(l1.Doms) != 1 || l1.Doms[0] != "c" {
		t.Fatalf("page 2: %+v", l1)
	}
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/service/list?pageNo=1&pageSize=0", "", http.StatusOK).Decode(t, &l1)
	if l1.Count != 3 || len(l1.Doms) != 0 || l1.Doms == nil {
		t.Fatalf("page size 0: %+v", l1)
	}
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/service/list?pageNo=1&pageSize=10&groupName=g1", "", http.StatusOK).Decode(t, &l1)
	if l1.Count != 1 || l1.Doms[0] != "other" {
		t.Fatalf("group g1: %+v", l1)
	}
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/service/list?pageNo=1&pageSize=10&namespaceId=nowhere", "", http.StatusOK).Decode(t, &l1)
	if l1.Count != 0 || len(l1.Doms) != 0 {
		t.Fatalf("unknown namespace: %+v", l1)
	}
	resp := nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/service/list?pageSize=10", "", http.StatusBadRequest)
	if string(resp.Body) != "caused: Required parameter 'pageNo' type int is not present;" {
		t.Fatalf("body %q", resp.Body)
	}
	// A page below 1 is the first page, as Nacos reads it (nacos-sdk-go v1 sends pageNo=0
	// when the application gives none).
	for _, q := range []string{"pageNo=0&pageSize=10", "pageNo=-3&pageSize=10"} {
		for _, v := range []string{"v1", "v2"} {
			resp := nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/"+v+"/ns/service/list?"+q, "", http.StatusOK)
			if !strings.Contains(string(resp.Body), `"a"`) {
				t.Errorf("%s %s: %s, want the first page", v, q, resp.Body)
			}
		}
	}
	// A negative size and a page starting past any list are refused naming the
	// parameter ((pageNo-1)*pageSize could wrap around to a small offset).
	for _, tt := range []struct{ query, param string }{
		{"pageNo=1&pageSize=-1", "pageSize"},
		{"pageNo=4611686018427387905&pageSize=1000", "pageNo"},
		{"pageNo=9223372036854775807&pageSize=9223372036854775807", "pageNo"},
	} {
		for _, v := range []string{"v1", "v2"} {
			resp := nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/"+v+"/ns/service/list?"+tt.query, "", http.StatusBadRequest)
			if !strings.Contains(string(resp.Body), "'"+tt.param+"'") {
				t.Errorf("%s %s: %s, want it to name %s", v, tt.query, resp.Body, tt.param)
			}
		}
	}
	_, _, data := nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v2/ns/service/list", "", http.StatusOK).Envelope(t)
	var l2 serviceListV2
	nacostesting.Response{Body: data}.Decode(t, &l2)
	if l2.Count != 3 || len(l2.Services) != 3 {
		t.Fatalf("v2 list %+v", l2)
	}
}

// TestNacosAPI_ServiceDetail checks the clusters and health checkers GET service shows.
func TestNacosAPI_ServiceDetail(t *testing.T) {
	h, _, _ := newStoreAPI(t)
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/service", `serviceName=orders&protectThreshold=0.25&metadata={"team":"pay"}`)
	nacostesting.MustOK(t, h, http.MethodPut, "/nacos/v1/ns/cluster",
		`serviceName=orders&clusterName=web&healthChecker={"type":"HTTP","path":"/ping","headers":"X-A:1","expectedResponseCode":204}`+
			`&useInstancePort4Check=false&checkPort=9000&metadata=zone%3Da`)
	var v1 serviceV1
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/service?serviceName=orders", "", http.StatusOK).Decode(t, &v1)
	if v1.Name != "orders" || v1.GroupName != "DEFAULT_GROUP" || v1.NamespaceID != "public" || v1.ProtectThreshold != 0.25 ||
		v1.Metadata["team"] != "pay" || v1.Selector.Type != "none" || len(v1.Clusters) != 1 {
		t.Fatalf("v1 %+v", v1)
	}
	wantHC := healthChecker{Type: "HTTP", Path: "/ping", Headers: "X-A:1", ExpectedResponseCode: 204}
	if c := v1.Clusters[0]; c.Name != "web" || c.HealthChecker != wantHC || c.Metadata["zone"] != "a" {
		t.Fatalf("cluster %+v", c)
	}
	_, _, data := nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v2/ns/service?serviceName=orders", "", http.StatusOK).Envelope(t)
	var v2 serviceV2
	nacostesting.Response{Body: data}.Decode(t, &v2)
	c, ok := v2.ClusterMap["web"]
	if !ok || c.HealthyCheckPort != 9000 || c.UseInstancePortForCheck || c.HealthChecker != wantHC || v2.Ephemeral ||
		v2.ServiceName != "orders" || v2.Selector.ContextType != "NONE" {
		t.Fatalf("v2 %+v", v2)
	}
}
