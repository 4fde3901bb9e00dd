package nacosgrpctest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rosterhq/roster/internal/grpcflood"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// TestNacosSDKv2_ConnectsUnderAFlood: while the gRPC port is flooded without
// credentials from 20 addresses — connections that send HTTP/2's preface and nothing
// more, and sessions registered and held — the node holds at most its per-address
// bound of each address's connections, and the real nacos-sdk-go v2 client still
// connects, reads and receives pushes.
func TestNacosSDKv2_ConnectsUnderAFlood(t *testing.T) {
	const perIP, sources, each = 10, 20, 15
	c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithGRPC(),
		func(cfg *server.Config) { cfg.GRPCMaxConnsPerIP = perIP })
	nd := c.Nodes[c.MustLeader()]
	const svc = "flooded"
	noneCluster(t, c, svc)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	target := grpcflood.Target{Addr: nd.GRPCAddr}
	for i := range sources {
		for j := range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil { // an attacker reconnects at once
					if j%2 == 0 {
						_, _ = target.Idle(ctx, grpcflood.Loopback(i))
					} else {
						_, _ = target.Session(ctx, grpcflood.Loopback(i), nil)
					}
				}
			}()
		}
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	wait.For(t, 20*time.Second, "the per-address bound to refuse connections", func() bool {
		return metric(t, nd.HTTPAddr, "roster_nacos_grpc_transports_refused_total", "reason", "per_ip") >= sources*(each-perIP)
	})
	if open := metric(t, nd.HTTPAddr, "roster_nacos_grpc_transports"); open > sources*perIP {
		t.Fatalf("%v connections open, over %d sources × %d", open, sources, perIP)
	}

	cl := newClient(t, nd)
	b1, b2 := newBackend(t), newBackend(t)
	register(t, cl, svc, b1)
	cb := newCallbacks()
	if err := cl.Subscribe(&vo.SubscribeParam{ServiceName: svc, SubscribeCallback: cb.fn}); err != nil {
		t.Fatalf("Subscribe under the flood: %v", err)
	}
	cb.await(t, "the first instance", func(l []model.Instance) bool { return samePorts(l, b1.Port()) })
	register(t, cl, svc, b2)
	cb.await(t, "the second instance pushed", func(l []model.Instance) bool { return samePorts(l, b1.Port(), b2.Port()) })
	if open := metric(t, nd.HTTPAddr, "roster_nacos_grpc_transports"); open > sources*perIP+2 {
		t.Fatalf("%v connections open, over %d sources × %d and the client's", open, sources, perIP)
	}
}
