package openapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
)

// mustParams parses a query string into params.
func mustParams(t *testing.T, query string) params {
	t.Helper()
	v, err := url.ParseQuery(query)
	if err != nil {
		t.Fatalf("query %q: %v", query, err)
	}
	return params{vals: v}
}

// code returns the Nacos code of err (0 for nil, -1 for a non-Nacos error that
// is not a validation error).
func code(err error, res nacos.Resource) int {
	if err == nil {
		return 0
	}
	var ne *nacos.Error
	var ve *model.ValidationError
	switch {
	case errors.As(err, &ne):
		return ne.Code
	case errors.As(err, &ve):
		return nacos.Classify(ve, res).Code
	}
	return -1
}

func TestNacosServiceKey_Resolution(t *testing.T) {
	tests := []struct {
		name     string
		query    string
		want     model.ServiceKey
		wantCode int
	}{
		{"plain name takes the defaults", "serviceName=orders",
			model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders"}, 0},
		{"blank namespace is public", "serviceName=orders&namespaceId=&groupName=",
			model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders"}, 0},
		{"groupName applies to a plain name", "serviceName=orders&groupName=g1&namespaceId=dev",
			model.ServiceKey{Namespace: "dev", Group: "g1", Service: "orders"}, 0},
		{"grouped name", "serviceName=g1@@orders",
			model.ServiceKey{Namespace: "public", Group: "g1", Service: "orders"}, 0},
		{"grouped name with the same groupName", "serviceName=g1@@orders&groupName=g1",
			model.ServiceKey{Namespace: "public", Group: "g1", Service: "orders"}, 0},
		{"values are trimmed", "serviceName=+orders+&groupName=+g1+",
			model.ServiceKey{Namespace: "public", Group: "g1", Service: "orders"}, 0},
		{"grouped name contradicting groupName", "serviceName=g1@@orders&groupName=g2", model.ServiceKey{}, nacos.CodeParameterMismatch},
		{"missing serviceName", "groupName=g1", model.ServiceKey{}, nacos.CodeParameterMissing},
		{"blank serviceName", "serviceName=++", model.ServiceKey{}, nacos.CodeParameterMissing},
		{"empty group in grouped name", "serviceName=@@orders", model.ServiceKey{}, nacos.CodeServiceName},
		{"empty service in grouped name", "serviceName=g1@@", model.ServiceKey{}, nacos.CodeServiceName},
		{"two separators", "serviceName=g1@@a@@b", model.ServiceKey{}, nacos.CodeServiceName},
		{"whitespace in the name", "serviceName=a%20b", model.ServiceKey{}, nacos.CodeServiceName},
		{"illegal group", "serviceName=orders&groupName=g/1", model.ServiceKey{}, nacos.CodeServiceName},
		{"illegal namespace", "serviceName=orders&namespaceId=dev!", model.ServiceKey{}, nacos.CodeIllegalNamespace},
		{"service name too long", "serviceName=" + strings.Repeat("s", model.MaxServiceNameLen+1), model.ServiceKey{}, nacos.CodeServiceName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := serviceKey(mustParams(t, tt.query))
			if code := code(err, nacos.ResourceOther); code != tt.wantCode {
				t.Fatalf("code %d (err %v), want %d", code, err, tt.wantCode)
			}
			if err == nil && got != tt.want {
				t.Fatalf("key %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNacosMetadata_Parsing(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    map[string]string
		wantErr bool
	}{
		{"blank", "  ", nil, false},
		{"JSON object", `{"a":"1","b":"x y"}`, map[string]string{"a": "1", "b": "x y"}, false},
		{"JSON scalars become text, null is dropped", `{"n":5,"f":1.5,"b":true,"z":null}`,
			map[string]string{"n": "5", "f": "1.5", "b": "true"}, false},
		{"empty JSON object", `{}`, map[string]string{}, false},
		{"k=v form", "a=1,b=2", map[string]string{"a": "1", "b": "2"}, false},
		{"k=v form with a trailing comma", "a=1,", map[string]string{"a": "1"}, false},
		{"nested JSON value", `{"a":{"b":"c"}}`, nil, true},
		{"truncated JSON", `{"a":`, nil, true},
		{"JSON array", `["a"]`, nil, true},
		{"pair without value", "a=1,b", nil, true},
		{"pair with two separators", "a=1=2", nil, true},
		{"empty pair in the middle", "a=1,,b=2", nil, true},
		{"plain word", "notjson", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metadata(tt.raw, nacos.CodeInstanceMetadata)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				if code := code(err, nacos.ResourceInstance); code != nacos.CodeInstanceMetadata {
					t.Fatalf("code %d, want %d", code, nacos.CodeInstanceMetadata)
				}
				if !strings.Contains(err.Error(), "metadata format incorrect") {
					t.Fatalf("message %q", err)
				}
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestNacosRegistration_DefaultsAndErrors(t *testing.T) {
	base := "serviceName=orders&ip=127.100.0.1&port=8080&ephemeral=false"
	inst := func(mod func(in *model.Instance)) model.Instance {
		in := model.Instance{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", IP: "127.100.0.1", Port: 8080,
			Cluster: "DEFAULT", Weight: 1, Enabled: true, Healthy: true}
		if mod != nil {
			mod(&in)
		}
		return in
	}
	tests := []struct {
		name     string
		query    string
		want     model.Instance
		wantCode int
	}{
		{"defaults", base, inst(nil), 0},
		{"every field", base + "&namespaceId=dev&groupName=g1&clusterName=web&weight=2.5&enabled=false&healthy=false" +
			`&metadata={"v":"1"}`,
			inst(func(in *model.Instance) {
				in.Namespace, in.Group, in.Cluster, in.Weight, in.Enabled, in.Healthy = "dev", "g1", "web", 2.5, false, false
				in.Metadata = map[string]string{"v": "1"}
			}), 0},
		{"nacos-sdk-go v1 form: grouped name, groupName, legacy enable", "serviceName=DEFAULT_GROUP@@orders&groupName=DEFAULT_GROUP" +
			"&ip=127.100.0.1&port=8080&weight=1&enable=true&healthy=true&metadata={}&ephemeral=false&clusterName=&app=&namespaceId=",
			inst(nil), 0},
		{"enabled wins over the legacy enable", base + "&enabled=true&enable=false", inst(nil), 0},
		{"legacy enable alone", base + "&enable=false", inst(func(in *model.Instance) { in.Enabled = false }), 0},
		{"legacy cluster", base + "&cluster=c1", inst(func(in *model.Instance) { in.Cluster = "c1" }), 0},
		{"clusterName wins over cluster", base + "&cluster=c1&clusterName=c2", inst(func(in *model.Instance) { in.Cluster = "c2" }), 0},
		{"ignored parameters", base + "&clientIP=1.2.3.4&udpPort=5&app=a&env=e&tid=t&isCheck=true&accessToken=x&username=u&password=p",
			inst(nil), 0},
		{"weight 0", base + "&weight=0", inst(func(in *model.Instance) { in.Weight = 0 }), 0},
		{"weight 10000", base + "&weight=10000", inst(func(in *model.Instance) { in.Weight = 10000 }), 0},
		{"IPv6 address", "serviceName=orders&ip=fe80::1&port=80&ephemeral=false",
			inst(func(in *model.Instance) { in.IP, in.Port = "fe80::1", 80 }), 0},
		{"k=v metadata", base + "&metadata=a%3D1", inst(func(in *model.Instance) { in.Metadata = map[string]string{"a": "1"} }), 0},
		{"missing serviceName", "ip=127.100.0.1&port=8080&ephemeral=false", model.Instance{}, nacos.CodeParameterMissing},
		{"missing ip", "serviceName=orders&port=8080&ephemeral=false", model.Instance{}, nacos.CodeParameterMissing},
		{"missing port", "serviceName=orders&ip=127.100.0.1&ephemeral=false", model.Instance{}, nacos.CodeParameterMissing},
		{"port 0", "serviceName=orders&ip=127.100.0.1&port=0&ephemeral=false", model.Instance{}, nacos.CodeParameterValidate},
		{"port 65536", "serviceName=orders&ip=127.100.0.1&port=65536&ephemeral=false", model.Instance{}, nacos.CodeParameterValidate},
		{"port not a number", "serviceName=orders&ip=127.100.0.1&port=http&ephemeral=false", model.Instance{}, nacos.CodeParameterValidate},
		{"bad ip", "serviceName=orders&ip=127.100.0.300&port=80&ephemeral=false", model.Instance{}, nacos.CodeParameterValidate},
		{"weight above 10000", base + "&weight=10000.5", model.Instance{}, nacos.CodeWeight},
		{"negative weight", base + "&weight=-1", model.Instance{}, nacos.CodeWeight},
		{"weight not a number", base + "&weight=heavy", model.Instance{}, nacos.CodeParameterValidate},
		{"weight NaN", base + "&weight=NaN", model.Instance{}, nacos.CodeParameterValidate},
		{"bad metadata JSON", base + `&metadata={"a":`, model.Instance{}, nacos.CodeInstanceMetadata},
		{"metadata too large", base + "&metadata=" + url.QueryEscape(`{"k":"`+strings.Repeat("v", 1100)+`"}`),
			model.Instance{}, nacos.CodeInstanceMetadata},
		{"metadata with an empty key", base + "&metadata=%3Dv", model.Instance{}, nacos.CodeInstanceMetadata},
		{"illegal cluster", base + "&clusterName=a.b", model.Instance{}, nacos.CodeParameterValidate},
		{"bad boolean", base + "&enabled=ture", model.Instance{}, nacos.CodeParameterValidate},
		{"ephemeral by default", "serviceName=orders&ip=127.100.0.1&port=8080", model.Instance{}, nacos.CodeInstanceError},
		{"ephemeral explicitly", "serviceName=orders&ip=127.100.0.1&port=8080&ephemeral=true", model.Instance{}, nacos.CodeInstanceError},
		{"ephemeral not a boolean", "serviceName=orders&ip=127.100.0.1&port=8080&ephemeral=maybe", model.Instance{}, nacos.CodeParameterValidate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := registration(mustParams(t, tt.query), model.DefaultLimits())
			if code := code(err, nacos.ResourceInstance); code != tt.wantCode {
				t.Fatalf("code %d (err %v), want %d", code, err, tt.wantCode)
			}
			if err != nil {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestNacosRegistration_EphemeralRefusalWording(t *testing.T) {
	_, err := registration(mustParams(t, "serviceName=g1@@orders&ip=127.100.0.1&port=8080"), model.DefaultLimits())
	want := "Current service g1@@orders is persistent service, can't register ephemeral instance."
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err %v, want it to start with %q", err, want)
	}
	var ne *nacos.Error
	if !errors.As(err, &ne) || ne.Status != http.StatusBadRequest {
		t.Fatalf("err %#v, want a 400", err)
	}
}

func TestNacosParams_QueryAndFormBody(t *testing.T) {
	tests := []struct {
		name        string
		method      string
		target      string
		contentType string
		body        string
		want        map[string]string
		wantCode    int
	}{
		{"query only", http.MethodGet, "/x?a=1&b=2", "", "", map[string]string{"a": "1", "b": "2"}, 0},
		{"form body on DELETE", http.MethodDelete, "/x", "application/x-www-form-urlencoded", "a=1&b=2",
			map[string]string{"a": "1", "b": "2"}, 0},
		{"form body with charset", http.MethodPut, "/x", "application/x-www-form-urlencoded;charset=utf-8", "a=1",
			map[string]string{"a": "1"}, 0},
		{"body without content type", http.MethodPost, "/x", "", "a=1", map[string]string{"a": "1"}, 0},
		{"query wins over the body", http.MethodPost, "/x?a=q", "application/x-www-form-urlencoded", "a=f&b=f",
			map[string]string{"a": "q", "b": "f"}, 0},
		{"JSON body refused", http.MethodPost, "/x", "application/json", `{"a":1}`, nil, nacos.CodeMediaType},
		{"malformed query", http.MethodGet, "/x?a=%zz", "", "", nil, nacos.CodeParameterValidate},
		{"malformed body", http.MethodPost, "/x", "application/x-www-form-urlencoded", "a=%zz", nil, nacos.CodeParameterValidate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.target, strings.NewReader(tt.body))
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			r = r.WithContext(withBody(r, []byte(tt.body)))
			p, err := parseNacosParams(r)
			if code := code(err, nacos.ResourceOther); code != tt.wantCode {
				t.Fatalf("code %d (err %v), want %d", code, err, tt.wantCode)
			}
			for k, v := range tt.want {
				if got := p.str(k); got != v {
					t.Fatalf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestNacosSelect_ProtectThreshold(t *testing.T) {
	mk := func(ip string, cluster string, healthy, enabled bool) model.Instance {
		return model.Instance{IP: ip, Port: 80, Cluster: cluster, Healthy: healthy, Enabled: enabled, Weight: 1}
	}
	a := mk("127.100.0.1", "DEFAULT", true, true)
	b := mk("127.100.0.2", "DEFAULT", false, true)
	c := mk("127.100.0.3", "DEFAULT", false, false) // disabled: never listed, never counted
	d := mk("127.100.0.4", "web", false, true)
	healthy := func(in model.Instance) model.Instance { in.Healthy = true; return in }
	tests := []struct {
		name        string
		all         []model.Instance
		threshold   float64
		clusters    map[string]bool
		healthyOnly bool
		want        []model.Instance
		reached     bool
	}{
		{"no instances", nil, 0, nil, false, nil, false},
		{"all: healthy and unhealthy with true health", []model.Instance{a, b, c}, 0, nil, false, []model.Instance{a, b}, false},
		{"healthy only", []model.Instance{a, b, c}, 0, nil, true, []model.Instance{a}, false},
		{"threshold 0 with every instance down marks all healthy", []model.Instance{b, c, d}, 0, nil, true,
			[]model.Instance{healthy(b), healthy(d)}, true},
		{"ratio equal to the threshold reaches it", []model.Instance{a, b}, 0.5, nil, true,
			[]model.Instance{a, healthy(b)}, true},
		{"ratio above the threshold", []model.Instance{a, b}, 0.4, nil, true, []model.Instance{a}, false},
		{"clusters filter before the ratio", []model.Instance{a, b, d}, 0, map[string]bool{"web": true}, false,
			[]model.Instance{healthy(d)}, true},
		{"only disabled instances", []model.Instance{c}, 1, nil, false, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reached := nacos.Select(tt.all, tt.threshold, tt.clusters, tt.healthyOnly)
			if reached != tt.reached || len(got) != len(tt.want) || (len(got) > 0 && !reflect.DeepEqual(got, tt.want)) {
				t.Fatalf("got %+v reached %v\nwant %+v reached %v", got, reached, tt.want, tt.reached)
			}
		})
	}
}

func TestParseNacosHealthChecker_Mapping(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    model.HealthCheck
		wantErr bool
	}{
		{"TCP", `{"type":"TCP"}`, model.HealthCheck{Type: model.CheckTCP}, false},
		{"NONE, any case", `{"type":"none"}`, model.HealthCheck{Type: model.CheckNone}, false},
		{"HTTP with everything", `{"type":"HTTP","path":"/health","headers":"X-A:1|Host: a.b:8080","expectedResponseCode":204}`,
			model.HealthCheck{Type: model.CheckHTTP, Path: "/health", Headers: map[string]string{"X-A": "1", "Host": "a.b:8080"},
				ExpectedStatus: []int{204}}, false},
		{"HTTP expected code defaults to 200", `{"type":"HTTP","path":"","headers":""}`,
			model.HealthCheck{Type: model.CheckHTTP, ExpectedStatus: []int{200}}, false},
		{"HTTP expected code as a string", `{"type":"HTTP","expectedResponseCode":"503"}`,
			model.HealthCheck{Type: model.CheckHTTP, ExpectedStatus: []int{503}}, false},
		{"unknown fields are ignored", `{"type":"TCP","foo":1}`, model.HealthCheck{Type: model.CheckTCP}, false},
		{"MYSQL", `{"type":"mysql","user":" u ","pwd":" p w ","cmd":" SELECT 2 "}`,
			model.HealthCheck{Type: model.CheckMySQL, User: "u", Password: " p w ", Query: "SELECT 2"}, false},
		{"MYSQL without cmd", `{"type":"MYSQL","user":"u"}`, model.HealthCheck{Type: model.CheckMySQL, User: "u"}, false},
		{"unknown type", `{"type":"UDP"}`, model.HealthCheck{}, true},
		{"no type", `{}`, model.HealthCheck{}, true},
		{"not JSON", `TCP`, model.HealthCheck{}, true},
		{"header without a colon", `{"type":"HTTP","headers":"X-A"}`, model.HealthCheck{}, true},
		{"bad expected code", `{"type":"HTTP","expectedResponseCode":"ok"}`, model.HealthCheck{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseNacosHealthChecker(tt.raw)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if err == nil && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestToNacosHealthChecker_RoundTrip(t *testing.T) {
	hc := model.HealthCheck{Type: model.CheckHTTP, Path: "/p", Headers: map[string]string{"B": "2", "A": "1"}, ExpectedStatus: []int{204, 200}}
	got := toNacosHealthChecker(hc)
	want := healthChecker{Type: "HTTP", Path: "/p", Headers: "A:1|B:2", ExpectedResponseCode: 204}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := toNacosHealthChecker(model.DefaultHealthCheck()); got != (healthChecker{Type: "TCP"}) {
		t.Fatalf("TCP shows as %+v", got)
	}
	// A MYSQL check shows its password redacted, and reads back into a spec that keeps it.
	my := model.HealthCheck{Type: model.CheckMySQL, User: "probe", Password: "s3cret", Query: "SELECT 1"}
	got = toNacosHealthChecker(my)
	if want := (healthChecker{Type: "MYSQL", User: "probe", Pwd: "***", Cmd: "SELECT 1"}); got != want {
		t.Fatalf("MYSQL shows as %+v", got)
	}
	b, _ := json.Marshal(got)
	back, err := parseNacosHealthChecker(string(b))
	if err != nil || back.Password != model.RedactedPassword || back.User != "probe" || back.Query != "SELECT 1" {
		t.Fatalf("%s reads back as %+v, %v", b, back, err)
	}
	my.Password = ""
	if got := toNacosHealthChecker(my); got.Pwd != "" {
		t.Fatalf("no password shows as %+v", got)
	}
}
