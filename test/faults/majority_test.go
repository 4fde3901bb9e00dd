package faults

import (
	"context"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/testnet"
	"github.com/rosterhq/roster/internal/wait"
)

// Majority confirmation with real processes: three `roster server` processes, n1
// leading. n1 is started with --probe-deny for instance A's address, so only the leader
// cannot reach A: its failing probes are overruled by n2 and n3 and A stays healthy.
// Instance B is denied to n1 and n2: two of three cannot reach it, and it turns
// unhealthy. The reverse: C is denied to n2 and n3; when its listener closes everyone
// agrees it is down, and when it listens again only the leader can reach it, so it stays
// unhealthy.
func TestMajorityConfirmation_RealProcesses(t *testing.T) {
	const ipA, ipB, ipC = "127.0.0.77", "127.0.0.78", "127.0.0.79"
	c, err := StartCluster(ClusterConfig{Binary: binary, Dir: t.TempDir(), Nodes: 3, Logf: t.Logf, Args: map[string][]string{
		"n1": {"--probe-deny", ipA + "/32," + ipB + "/32"},
		"n2": {"--probe-deny", ipB + "/32," + ipC + "/32"},
		"n3": {"--probe-deny", ipC + "/32"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.ID != "n1" {
		if err := l.Client().TransferLeadership(ctx, "n1"); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, 30*time.Second, "n1 to lead", func() bool {
		l, err := c.Leader(ctx)
		return err == nil && l.ID == "n1"
	})
	cl := c.Node("n2").Client()
	// The leader asks the others at the HTTP addresses they announce after the
	// election: until then a confirmation finds no majority of the voters.
	wait.For(t, 30*time.Second, "every member's HTTP address known", func() bool {
		res, _, err := cl.Members(ctx, client.QueryOptions{})
		if err != nil || len(res.Members) != 3 {
			return false
		}
		for _, m := range res.Members {
			if m.HTTPAddr == "" {
				return false
			}
		}
		return true
	})
	if _, err := cl.UpsertCluster(ctx, "public", "DEFAULT_GROUP", "db", "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{
		Type: "TCP", Interval: "1s", Timeout: "300ms", Rise: 1, Fall: 1,
	}}); err != nil {
		t.Fatal(err)
	}
	lnA, lnB, lnC := testnet.New(t, ipA), testnet.New(t, ipB), testnet.New(t, ipC)
	portA, portB, portC := lnA.Port(), lnB.Port(), lnC.Port()
	for _, in := range []struct {
		ip   string
		port int
	}{{ipA, portA}, {ipB, portB}, {ipC, portC}} {
		if _, err := cl.RegisterInstance(ctx, "public", "DEFAULT_GROUP", "db", in.ip, in.port, api.InstanceRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	healthy := func(ip string, port int) (bool, bool) {
		res, _, err := cl.Instance(ctx, "public", "DEFAULT_GROUP", "db", ip, port, client.QueryOptions{})
		return res.Instance.Healthy, err == nil
	}
	views := func(ip string) map[string]api.Vantage {
		res, err := cl.Health(ctx, "public", "DEFAULT_GROUP", "db")
		if err != nil {
			return nil
		}
		for _, r := range res.Results {
			if r.IP == ip && len(r.Vantages) == 3 {
				m := map[string]api.Vantage{}
				for _, v := range r.Vantages {
					m[v.Node] = v
				}
				return m
			}
		}
		return nil
	}

	wait.For(t, 30*time.Second, "B unhealthy (two of three cannot reach it)", func() bool {
		h, ok := healthy(ipB, portB)
		return ok && !h
	})
	wait.For(t, 30*time.Second, "A's failing probes overruled by n2 and n3", func() bool {
		v := views(ipA)
		return v != nil && !v["n1"].Healthy && v["n1"].Outcome == "denied" && v["n2"].Healthy && v["n3"].Healthy
	})
	if h, ok := healthy(ipA, portA); !ok || !h {
		t.Fatalf("A is not healthy after its transition was overruled (healthy %v, read ok %v)", h, ok)
	}

	lnC.Close()
	wait.For(t, 30*time.Second, "C unhealthy once its listener closed", func() bool {
		h, ok := healthy(ipC, portC)
		return ok && !h
	})
	lnC.Reopen()
	wait.For(t, 30*time.Second, "C's recovery, seen by the leader alone, overruled", func() bool {
		v := views(ipC)
		return v != nil && v["n1"].Healthy && !v["n2"].Healthy && !v["n3"].Healthy
	})
	if h, ok := healthy(ipC, portC); !ok || h {
		t.Fatalf("C turned healthy although only the leader can reach it (healthy %v, read ok %v)", h, ok)
	}
}
