package nacostest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/rosterhq/roster/model"
)

// envelope is a v2 answer.
type envelope struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func decodeEnvelope(t *testing.T, r reply) envelope {
	t.Helper()
	var e envelope
	if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Message == "" {
		t.Fatalf("not a v2 envelope: %d %q (%v)", r.status, r.body, err)
	}
	return e
}

// TestNacosHTTP_V2Lifecycle drives the v2 API over HTTP through a follower of a
// 3-node cluster: every answer is an envelope, writes land on the leader.
func TestNacosHTTP_V2Lifecycle(t *testing.T) {
	c, leader := newCluster(t, 3)
	base := "http://" + c.Nodes[c.Followers()[0]].HTTPAddr + "/nacos/v2/ns"
	key := model.ServiceKey{Namespace: "dev", Group: "g1", Service: "pay"}
	b := newBackend(t)
	port := "&port=" + strconv.Itoa(b.Port())

	steps := []struct {
		method, path, form string
		wantData           string
	}{
		{http.MethodPost, "/service", "namespaceId=dev&groupName=g1&serviceName=pay&protectThreshold=0.5&metadata=%7B%22team%22%3A%22a%22%7D", `"ok"`},
		{http.MethodPost, "/instance", "namespaceId=dev&groupName=g1&serviceName=pay&ip=127.0.0.1&ephemeral=false" + port, `"ok"`},
		{http.MethodPut, "/instance", "namespaceId=dev&serviceName=g1@@pay&ip=127.0.0.1&weight=7" + port, `"ok"`},
		{http.MethodPatch, "/instance", "namespaceId=dev&serviceName=g1@@pay&ip=127.0.0.1&enabled=false" + port, `"ok"`},
	}
	for _, s := range steps {
		r := call(t, s.method, base+s.path, s.form)
		e := decodeEnvelope(t, r)
		if r.status != http.StatusOK || e.Code != 0 || e.Message != "success" || string(e.Data) != s.wantData {
			t.Fatalf("%s %s: %d %+v", s.method, s.path, r.status, e)
		}
	}
	list := instances(t, c, leader, key)
	if len(list) != 1 || list[0].Weight != 7 || list[0].Enabled {
		t.Fatalf("leader has %+v", list)
	}

	r := call(t, http.MethodGet, base+"/instance?namespaceId=dev&groupName=g1&serviceName=pay&ip=127.0.0.1"+port, "")
	e := decodeEnvelope(t, r)
	var detail struct {
		ServiceName string  `json:"serviceName"`
		Weight      float64 `json:"weight"`
	}
	if err := json.Unmarshal(e.Data, &detail); err != nil || detail.ServiceName != "g1@@pay" || detail.Weight != 7 {
		t.Fatalf("detail %s (%v)", e.Data, err)
	}
	r = call(t, http.MethodGet, base+"/service/list?namespaceId=dev&groupName=g1", "")
	if e = decodeEnvelope(t, r); string(e.Data) != `{"count":1,"services":["pay"]}` {
		t.Fatalf("service list %s", e.Data)
	}
	// A disabled instance is not listed.
	r = call(t, http.MethodGet, base+"/instance/list?namespaceId=dev&groupName=g1&serviceName=pay", "")
	var info struct {
		Hosts []json.RawMessage `json:"hosts"`
	}
	if e = decodeEnvelope(t, r); json.Unmarshal(e.Data, &info) != nil || len(info.Hosts) != 0 {
		t.Fatalf("list %s", e.Data)
	}

	r = call(t, http.MethodDelete, base+"/instance?namespaceId=dev&serviceName=g1@@pay&ip=127.0.0.1"+port, "")
	if e = decodeEnvelope(t, r); e.Code != 0 {
		t.Fatalf("deregister %+v", e)
	}
	r = call(t, http.MethodDelete, base+"/service", "namespaceId=dev&groupName=g1&serviceName=pay")
	if e = decodeEnvelope(t, r); e.Code != 0 {
		t.Fatalf("delete service %+v", e)
	}
	if _, _, err := c.Nodes[leader].Server.Store().Service(nil, key); err == nil {
		t.Fatal("service still exists")
	}
}

// TestNacosHTTP_BadInputLeavesTheLogAlone sends bad requests through a follower and
// checks each is refused with Nacos's status and code and that the leader's Raft log
// did not move.
func TestNacosHTTP_BadInputLeavesTheLogAlone(t *testing.T) {
	c, leader := newCluster(t, 3)
	follower := "http://" + c.Nodes[c.Followers()[0]].HTTPAddr
	// A live backend: the leader's TCP probes succeed, so no health change is written.
	inst := "serviceName=orders&ip=127.0.0.1&port=" + strconv.Itoa(newBackend(t).Port())
	if r := call(t, http.MethodPost, follower+"/nacos/v1/ns/instance", inst+"&ephemeral=false"); r.body != "ok" {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	c.WaitSettled() // the leader's own writes (identity, member records) are done
	before := lastIndex(c, leader)

	tests := []struct {
		name, method, path, form string
		status, code             int
	}{
		{"missing serviceName", "POST", "/instance", "ip=127.100.0.2&port=80&ephemeral=false", 400, 10000},
		{"missing ip", "POST", "/instance", "serviceName=orders&port=80&ephemeral=false", 400, 10000},
		{"missing port", "POST", "/instance", "serviceName=orders&ip=127.100.0.2&ephemeral=false", 400, 10000},
		{"port out of range", "POST", "/instance", "serviceName=orders&ip=127.100.0.2&port=99999&ephemeral=false", 400, 20002},
		{"weight above 10000", "POST", "/instance", inst + "&weight=10000.01&ephemeral=false", 400, 21001},
		{"weight below 0", "POST", "/instance", inst + "&weight=-1&ephemeral=false", 400, 21001},
		{"bad metadata JSON", "POST", "/instance", inst + "&metadata=%7B%22a%22%3A&ephemeral=false", 400, 21002},
		{"illegal service name", "POST", "/instance", "serviceName=%E4%B8%AD&ip=127.100.0.2&port=80&ephemeral=false", 400, 21000},
		{"illegal namespace", "POST", "/instance", inst + "&namespaceId=a%20b&ephemeral=false", 400, 22000},
		{"ephemeral by default", "POST", "/instance", inst, 400, 21004},
		{"update of a missing instance", "PUT", "/instance", "serviceName=orders&ip=127.100.0.9&port=80", 404, 21003},
		{"health on a probed cluster", "PUT", "/health/instance", inst + "&healthy=false", 400, 21011},
		{"delete a service with instances", "DELETE", "/service", "serviceName=orders", 400, 21009},
		{"service not found", "GET", "/service?serviceName=nope", "", 400, 21008},
		{"instance not found", "GET", "/instance?serviceName=orders&ip=127.100.0.9&port=80", "", 404, 20004},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, tt.method, follower+"/nacos/v2/ns"+tt.path, tt.form)
			e := decodeEnvelope(t, r)
			if r.status != tt.status || e.Code != tt.code {
				t.Fatalf("v2: %d %+v, want %d code %d", r.status, e, tt.status, tt.code)
			}
			r = call(t, tt.method, follower+"/nacos/v1/ns"+tt.path, tt.form)
			if r.status != tt.status || !strings.HasPrefix(r.body, "caused: ") {
				t.Fatalf("v1: %d %q, want %d caused: ...", r.status, r.body, tt.status)
			}
		})
	}
	if after := lastIndex(c, leader); after != before {
		t.Fatalf("bad input moved the leader's Raft log from %d to %d", before, after)
	}
}
