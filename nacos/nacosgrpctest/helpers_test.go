package nacosgrpctest

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/internal/testnet"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/server/servertest"
)

// backend is a TCP listener on loopback standing in for an instance, so that a TCP
// probe of it succeeds while it is open.
type backend = testnet.Backend

func newBackend(t *testing.T) *backend { return testnet.New(t, "127.0.0.1") }

// key is the service key of a DEFAULT_GROUP service in public.
func key(svc string) model.ServiceKey {
	return model.ServiceKey{Namespace: model.DefaultNamespace, Group: model.DefaultGroup, Service: svc}
}

// noneCluster makes the DEFAULT cluster of a DEFAULT_GROUP service unprobed, so that
// the test's backends only need to exist.
func noneCluster(t *testing.T, c *servertest.Cluster, svc string) {
	t.Helper()
	for _, nd := range c.Nodes {
		if nd.Running() {
			_, err := nd.Client().UpsertCluster(context.Background(), model.DefaultNamespace, model.DefaultGroup, svc, model.DefaultCluster,
				api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}})
			if err != nil {
				t.Fatalf("NONE cluster for %s: %v", svc, err)
			}
			return
		}
	}
}

// register registers a persistent instance of a DEFAULT_GROUP service through client.
func register(t *testing.T, client naming_client.INamingClient, svc string, b *backend) {
	t.Helper()
	ok, err := client.RegisterInstance(vo.RegisterInstanceParam{Ip: "127.0.0.1", Port: uint64(b.Port()), ServiceName: svc,
		Weight: 1, Enable: true, Healthy: true, Ephemeral: false})
	if !ok || err != nil {
		t.Fatalf("RegisterInstance %s %d: %v %v", svc, b.Port(), ok, err)
	}
}

// metric sums the samples of a Prometheus metric on a node's /metrics whose labels
// include each name="value" pair of labels.
func metric(t *testing.T, httpAddr, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("metrics of %s: %v", httpAddr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			ok = ok && strings.Contains(line, labels[i]+`="`+labels[i+1]+`"`)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}
