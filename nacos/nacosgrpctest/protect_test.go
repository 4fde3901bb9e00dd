package nacosgrpctest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// nacosList is the part of a Nacos instance list the protect threshold decides.
type nacosList struct {
	Hosts []struct {
		IP      string `json:"ip"`
		Port    int    `json:"port"`
		Healthy bool   `json:"healthy"`
	} `json:"hosts"`
	ReachProtectionThreshold bool `json:"reachProtectionThreshold"`
}

func (l nacosList) String() string {
	var hosts []string
	for _, h := range l.Hosts {
		hosts = append(hosts, fmt.Sprintf("%s:%d/%v", h.IP, h.Port, h.Healthy))
	}
	sort.Strings(hosts)
	return fmt.Sprintf("reached=%v %s", l.ReachProtectionThreshold, strings.Join(hosts, ","))
}

// TestProtectThreshold_ZeroEveryInstanceDownOnEverySurface: with the default threshold
// 0 and every instance of a NONE cluster set down by hand, every surface says the
// threshold is reached and answers both instances — the native service list and
// instances?healthy=true, the Nacos v1 and v2 instance lists with healthyOnly, the Nacos
// gRPC API through nacos-sdk-go v2, and DNS; once one instance is healthy again, every
// surface says it is not and answers that one.
func TestProtectThreshold_ZeroEveryInstanceDownOnEverySurface(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithGRPC(),
		func(cfg *server.Config) { cfg.DNS.Addr = "127.0.0.1:0" })
	nd := c.Nodes[c.MustLeader()]
	cl := nd.Client()
	ctx := context.Background()
	const svc = "orders"
	ns, group := model.DefaultNamespace, model.DefaultGroup
	zero := 0.0
	if _, err := cl.UpsertService(ctx, ns, group, svc, api.ServiceRequest{ProtectThreshold: &zero}); err != nil {
		t.Fatalf("service: %v", err)
	}
	noneCluster(t, c, svc)
	for _, addr := range []struct {
		ip   string
		port int
	}{{"127.0.0.1", 7001}, {"127.0.0.2", 7002}} {
		if _, err := cl.RegisterInstance(ctx, ns, group, svc, addr.ip, addr.port, api.InstanceRequest{}); err != nil {
			t.Fatalf("register %s: %v", addr.ip, err)
		}
		if _, err := cl.SetInstanceHealth(ctx, ns, group, svc, addr.ip, addr.port, false); err != nil {
			t.Fatalf("health of %s: %v", addr.ip, err)
		}
	}
	sdk := newClient(t, nd)

	nacosGet := func(path string, q url.Values, v any) error {
		resp, err := http.Get(nd.URL() + path + "?" + q.Encode())
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", path, resp.Status)
		}
		return json.NewDecoder(resp.Body).Decode(v)
	}
	// surfaces reads what each surface answers, in one comparable line per surface.
	surfaces := func() map[string]string {
		out := map[string]string{}
		if res, _, err := cl.Services(ctx, ns, client.ServicesQuery{}); err != nil || len(res.Services) != 1 {
			out["native services"] = fmt.Sprint("error ", err, res.Services)
		} else {
			out["native services"] = fmt.Sprintf("reached=%v", res.Services[0].ProtectThresholdReached)
		}
		if res, _, err := cl.Instances(ctx, ns, group, svc, client.InstancesQuery{HealthyOnly: true}); err != nil {
			out["native instances?healthy=true"] = fmt.Sprint("error ", err)
		} else {
			var hosts []string
			for _, in := range res.Instances {
				hosts = append(hosts, fmt.Sprintf("%s/%v", in.Addr(), in.Healthy))
			}
			out["native instances?healthy=true"] = fmt.Sprintf("reached=%v %s", res.ProtectThresholdReached, strings.Join(hosts, ","))
		}
		q := url.Values{"serviceName": {svc}, "healthyOnly": {"true"}}
		var v1 nacosList
		if err := nacosGet("/nacos/v1/ns/instance/list", q, &v1); err != nil {
			out["nacos v1 list"] = fmt.Sprint("error ", err)
		} else {
			out["nacos v1 list"] = v1.String()
		}
		var v2 struct {
			Data nacosList `json:"data"`
		}
		if err := nacosGet("/nacos/v2/ns/instance/list", q, &v2); err != nil {
			out["nacos v2 list"] = fmt.Sprint("error ", err)
		} else {
			out["nacos v2 list"] = v2.Data.String()
		}
		if info, err := sdk.GetService(vo.GetServiceParam{ServiceName: svc}); err != nil {
			out["nacos gRPC"] = fmt.Sprint("error ", err)
		} else {
			var l nacosList
			for _, h := range info.Hosts {
				l.Hosts = append(l.Hosts, struct {
					IP      string `json:"ip"`
					Port    int    `json:"port"`
					Healthy bool   `json:"healthy"`
				}{h.Ip, int(h.Port), h.Healthy})
			}
			l.ReachProtectionThreshold = info.ReachProtectionThreshold
			out["nacos gRPC"] = l.String()
		}
		m := new(dns.Msg)
		m.SetQuestion(svc+".svc."+"roster.", dns.TypeA)
		if r, err := dns.Exchange(m, nd.Server.DNSAddr()); err != nil {
			out["dns A"] = fmt.Sprint("error ", err)
		} else {
			var ips []string
			for _, rr := range r.Answer {
				if a, ok := rr.(*dns.A); ok {
					ips = append(ips, a.A.String())
				}
			}
			slices.Sort(ips)
			out["dns A"] = strings.Join(ips, ",")
		}
		return out
	}
	agree := func(what string, want map[string]string) {
		t.Helper()
		var last map[string]string
		defer func() {
			if t.Failed() {
				t.Logf("last answers: %v", last)
			}
		}()
		wait.For(t, 10*time.Second, what, func() bool {
			last = surfaces()
			for k, v := range want {
				if last[k] != v {
					return false
				}
			}
			return true
		})
	}

	agree("every surface to reach the threshold with every instance down", map[string]string{
		"native services":               "reached=true",
		"native instances?healthy=true": "reached=true 127.0.0.1:7001/false,127.0.0.2:7002/false",
		"nacos v1 list":                 "reached=true 127.0.0.1:7001/true,127.0.0.2:7002/true",
		"nacos v2 list":                 "reached=true 127.0.0.1:7001/true,127.0.0.2:7002/true",
		"nacos gRPC":                    "reached=true 127.0.0.1:7001/true,127.0.0.2:7002/true",
		"dns A":                         "127.0.0.1,127.0.0.2",
	})
	if healthy, err := sdk.SelectInstances(vo.SelectInstancesParam{ServiceName: svc, HealthyOnly: true}); err != nil || len(healthy) != 2 {
		t.Fatalf("SDK SelectInstances healthy: %v %+v, want both instances", err, healthy)
	}

	if _, err := cl.SetInstanceHealth(ctx, ns, group, svc, "127.0.0.2", 7002, true); err != nil {
		t.Fatal(err)
	}
	agree("no surface to reach the threshold once one instance is healthy", map[string]string{
		"native services":               "reached=false",
		"native instances?healthy=true": "reached=false 127.0.0.2:7002/true",
		"nacos v1 list":                 "reached=false 127.0.0.2:7002/true",
		"nacos v2 list":                 "reached=false 127.0.0.2:7002/true",
		"nacos gRPC":                    "reached=false 127.0.0.1:7001/false,127.0.0.2:7002/true",
		"dns A":                         "127.0.0.2",
	})
}
