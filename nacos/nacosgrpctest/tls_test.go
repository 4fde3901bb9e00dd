package nacosgrpctest

import (
	"testing"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rosterhq/roster/server/servertest"
)

// TestNacosSDKv2_OverTLS: nacos-sdk-go v2 configured for TLS (the CA, a client
// certificate, the https scheme) registers over HTTPS and reads and subscribes over
// gRPC with TLS, against a node that requires client certificates.
func TestNacosSDKv2_OverTLS(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithGRPC(), servertest.WithTLSVerifyIncoming())
	c.MustLeader()
	nd := c.Nodes[0]
	host, hp := splitPort(t, nd.HTTPAddr)
	_, gp := splitPort(t, nd.GRPCAddr)
	cc := constant.NewClientConfig(
		constant.WithTimeoutMs(5000),
		constant.WithNotLoadCacheAtStart(true),
		constant.WithCacheDir(t.TempDir()),
		constant.WithLogDir(t.TempDir()),
		constant.WithLogLevel("error"),
		constant.WithTLS(constant.TLSConfig{Enable: true, CaFile: c.TLS.CAFile, CertFile: c.TLS.ClientCertFile, KeyFile: c.TLS.ClientKeyFile}),
	)
	client, err := clients.NewNamingClient(vo.NacosClientParam{ClientConfig: cc, ServerConfigs: []constant.ServerConfig{
		{IpAddr: host, Port: hp, GrpcPort: gp, ContextPath: "/nacos", Scheme: "https"},
	}})
	if err != nil {
		t.Fatalf("nacos-sdk-go v2 naming client: %v", err)
	}
	t.Cleanup(client.CloseClient)
	noneCluster(t, c, "secure")
	cb := newCallbacks()
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: "secure", SubscribeCallback: cb.fn}); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	b := newBackend(t)
	register(t, client, "secure", b)
	cb.await(t, "the registered instance", func(l []model.Instance) bool { return samePorts(l, b.Port()) })
	all, err := client.SelectAllInstances(vo.SelectAllInstancesParam{ServiceName: "secure"})
	if err != nil || !samePorts(all, b.Port()) {
		t.Fatalf("SelectAllInstances: %v %+v", err, all)
	}
}
