package httpapi

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
)

func addrs[T interface{ Addr() string }](list []T) []string {
	out := []string{}
	for _, in := range list {
		out = append(out, in.Addr())
	}
	return out
}

// TestSelectInstances_FiltersAndProtectThreshold checks the healthy and cluster filters
// and the protect threshold rule.
func TestSelectInstances_FiltersAndProtectThreshold(t *testing.T) {
	mk := func(ip, cluster string, healthy, enabled bool) model.Instance {
		return model.Instance{IP: ip, Port: 80, Cluster: cluster, Healthy: healthy, Enabled: enabled}
	}
	all := []model.Instance{
		mk("127.100.0.1", "a", true, true),
		mk("127.100.0.2", "a", false, true),
		mk("127.100.0.3", "a", false, true),
		mk("127.100.0.4", "a", true, false),  // disabled
		mk("127.100.0.5", "b", false, false), // disabled
		mk("127.100.0.6", "b", true, true),
	}
	yes, no := true, false
	clusters := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	tests := []struct {
		name      string
		threshold float64
		filter    instanceFilter
		want      []string
		reached   bool
	}{
		{"no filter returns all, disabled included", 0, instanceFilter{},
			[]string{"127.100.0.1:80", "127.100.0.2:80", "127.100.0.3:80", "127.100.0.4:80", "127.100.0.5:80", "127.100.0.6:80"}, false},
		{"no filter lists all and reports the threshold", 0.9, instanceFilter{},
			[]string{"127.100.0.1:80", "127.100.0.2:80", "127.100.0.3:80", "127.100.0.4:80", "127.100.0.5:80", "127.100.0.6:80"}, true},
		{"unhealthy only reports the threshold", 0.5, instanceFilter{healthy: &no},
			[]string{"127.100.0.2:80", "127.100.0.3:80", "127.100.0.5:80"}, true},
		{"healthy excludes unhealthy and disabled", 0, instanceFilter{healthy: &yes},
			[]string{"127.100.0.1:80", "127.100.0.6:80"}, false},
		{"unhealthy only", 0, instanceFilter{healthy: &no},
			[]string{"127.100.0.2:80", "127.100.0.3:80", "127.100.0.5:80"}, false},
		{"cluster filter", 0, instanceFilter{clusters: clusters("b")},
			[]string{"127.100.0.5:80", "127.100.0.6:80"}, false},
		{"cluster list", 0, instanceFilter{clusters: clusters("a", "b")},
			[]string{"127.100.0.1:80", "127.100.0.2:80", "127.100.0.3:80", "127.100.0.4:80", "127.100.0.5:80", "127.100.0.6:80"}, false},
		{"unknown cluster selects nothing", 0, instanceFilter{clusters: clusters("zz"), healthy: &yes}, []string{}, false},
		// Enabled: 1,2,3,6; healthy: 1,6 → ratio 0.5.
		{"ratio above threshold", 0.4, instanceFilter{healthy: &yes}, []string{"127.100.0.1:80", "127.100.0.6:80"}, false},
		{"ratio equal to threshold reaches it", 0.5, instanceFilter{healthy: &yes},
			[]string{"127.100.0.1:80", "127.100.0.2:80", "127.100.0.3:80", "127.100.0.6:80"}, true},
		{"ratio below threshold", 0.8, instanceFilter{healthy: &yes},
			[]string{"127.100.0.1:80", "127.100.0.2:80", "127.100.0.3:80", "127.100.0.6:80"}, true},
		// Cluster a: enabled 1,2,3; healthy 1 → ratio 1/3.
		{"threshold counts selected clusters only", 0.34, instanceFilter{healthy: &yes, clusters: clusters("a")},
			[]string{"127.100.0.1:80", "127.100.0.2:80", "127.100.0.3:80"}, true},
		{"selected cluster above threshold", 0.3, instanceFilter{healthy: &yes, clusters: clusters("a")},
			[]string{"127.100.0.1:80"}, false},
		{"zero threshold not reached while one is healthy", 0, instanceFilter{healthy: &yes, clusters: clusters("a")}, []string{"127.100.0.1:80"}, false},
		{"threshold 1 always reached when anything is unhealthy", 1, instanceFilter{healthy: &yes, clusters: clusters("b")},
			[]string{"127.100.0.6:80"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, reached := selectInstances(all, tc.threshold, tc.filter)
			if !reflect.DeepEqual(addrs(got), tc.want) || reached != tc.reached {
				t.Fatalf("got %v reached=%v, want %v reached=%v", addrs(got), reached, tc.want, tc.reached)
			}
			for _, in := range got {
				for _, orig := range all {
					if orig.IP == in.IP && orig.Healthy != in.Healthy {
						t.Fatalf("%s lost its true healthy field", in.IP)
					}
				}
			}
		})
	}
}

// TestSelectInstances_ZeroThresholdEveryInstanceDown: with the default threshold 0 and
// every enabled instance of the selected clusters unhealthy, the threshold is reached
// (Nacos's rule): healthy=true answers every enabled instance, with its true health.
func TestSelectInstances_ZeroThresholdEveryInstanceDown(t *testing.T) {
	yes, no := true, false
	all := []model.Instance{
		{IP: "127.100.0.1", Port: 80, Cluster: "a", Enabled: true},
		{IP: "127.100.0.2", Port: 80, Cluster: "a", Enabled: true},
		{IP: "127.100.0.3", Port: 80, Cluster: "a"},                // disabled
		{IP: "127.100.0.4", Port: 80, Cluster: "b", Healthy: true}, // disabled, healthy
	}
	for _, tc := range []struct {
		name string
		f    instanceFilter
		want []string
	}{
		{"healthy", instanceFilter{healthy: &yes}, []string{"127.100.0.1:80", "127.100.0.2:80"}},
		{"healthy in a", instanceFilter{healthy: &yes, clusters: map[string]bool{"a": true}}, []string{"127.100.0.1:80", "127.100.0.2:80"}},
		{"unhealthy", instanceFilter{healthy: &no}, []string{"127.100.0.1:80", "127.100.0.2:80", "127.100.0.3:80"}},
		{"no filter", instanceFilter{}, []string{"127.100.0.1:80", "127.100.0.2:80", "127.100.0.3:80", "127.100.0.4:80"}},
	} {
		got, reached := selectInstances(all, 0, tc.f)
		if !reached || !reflect.DeepEqual(addrs(got), tc.want) {
			t.Errorf("%s: %v reached=%v, want %v reached", tc.name, addrs(got), reached, tc.want)
		}
		for _, in := range got {
			if in.Healthy != (in.IP == "127.100.0.4") {
				t.Errorf("%s: %s shown healthy=%v, not its true health", tc.name, in.IP, in.Healthy)
			}
		}
	}
	// Cluster b has no enabled instance: nothing to protect.
	if got, reached := selectInstances(all, 0, instanceFilter{healthy: &yes, clusters: map[string]bool{"b": true}}); reached || len(got) != 0 {
		t.Errorf("no enabled instance: %v reached=%v, want none, not reached", addrs(got), reached)
	}
}

// TestListInstances_QueryParameters checks ?healthy and ?cluster over HTTP, and the
// protect threshold flag in the response.
func TestListInstances_QueryParameters(t *testing.T) {
	rd := seededReader()
	h := mustNew(t, testConfig(newLeaderNode("n1"), rd))
	get := func(q string) api.InstancesResponse {
		t.Helper()
		resp := do(t, h, http.MethodGet, svcPath+"/instances"+q, nil)
		if resp.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", q, resp.Code, resp.Body)
		}
		var out api.InstancesResponse
		resp.decode(t, &out)
		return out
	}
	if out := get("?healthy=true"); !reflect.DeepEqual(addrs(out.Instances), []string{"127.100.0.1:8080", "[::1]:9090"}) || out.ProtectThresholdReached {
		t.Fatalf("healthy: %v %v", addrs(out.Instances), out.ProtectThresholdReached)
	}
	if out := get("?healthy=true&cluster=DEFAULT"); !reflect.DeepEqual(addrs(out.Instances), []string{"127.100.0.1:8080"}) {
		t.Fatalf("healthy DEFAULT: %v", addrs(out.Instances))
	}
	if out := get("?cluster=manual,DEFAULT"); len(out.Instances) != 4 {
		t.Fatalf("both clusters: %v", addrs(out.Instances))
	}
	if out := get("?cluster=manual&cluster=DEFAULT"); len(out.Instances) != 4 {
		t.Fatalf("repeated cluster: %v", addrs(out.Instances))
	}
	// DEFAULT: enabled 127.100.0.1 (healthy), 127.100.0.2 (unhealthy) → ratio 0.5.
	rd.bump(func(f *fakeReader) { f.services[0].ProtectThreshold = 0.6 })
	out := get("?healthy=true&cluster=DEFAULT")
	if !out.ProtectThresholdReached || !reflect.DeepEqual(addrs(out.Instances), []string{"127.100.0.1:8080", "127.100.0.2:8080"}) {
		t.Fatalf("threshold: %v %v", addrs(out.Instances), out.ProtectThresholdReached)
	}
	if out.Instances[1].Healthy {
		t.Fatal("an unhealthy instance returned under the threshold must keep healthy=false")
	}
	if out.Service.ProtectThreshold != 0.6 {
		t.Fatalf("service %+v", out.Service)
	}
}
