// Package nacosrpc is a hand-driven Nacos 2.x gRPC client for Roster's tests and
// benchmarks: a connection registered as an SDK registers it (ServerCheckRequest, then
// a ConnectionSetupRequest on the stream), and requests sent as JSON bodies by type.
package nacosrpc

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/rosterhq/roster/nacos/nacospb"
)

// Client is one registered connection.
type Client struct {
	cc *grpc.ClientConn
}

// Dial connects to addr (plain text) and registers the connection, waiting up to 10 s
// (or ctx) until the server answers a read on it.
func Dial(ctx context.Context, addr string) (*Client, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	c := &Client{cc: cc}
	if err := c.setup(ctx); err != nil {
		_ = cc.Close()
		return nil, err
	}
	return c, nil
}

func (c *Client) setup(ctx context.Context) error {
	if _, err := c.Call(ctx, "ServerCheckRequest", map[string]any{"module": "internal"}); err != nil {
		return err
	}
	st, err := nacospb.OpenBiStream(context.Background(), c.cc)
	if err != nil {
		return err
	}
	go func() { // the server's requests on the stream (pushes) are not answered
		for {
			if _, err := st.Recv(); err != nil {
				return
			}
		}
	}()
	setup, err := json.Marshal(map[string]any{"module": "internal", "clientVersion": "Nacos-Java-Client:v2.4.0", "tenant": "",
		"labels": map[string]string{"module": "naming", "source": "sdk"}, "abilityTable": map[string]bool{}})
	if err != nil {
		return err
	}
	if err := st.Send(&nacospb.Payload{Metadata: &nacospb.Metadata{Type: "ConnectionSetupRequest"}, Body: &anypb.Any{Value: setup}}); err != nil {
		return err
	}
	// A read answers once the connection is registered.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		m, err := c.Call(ctx, "ServiceQueryRequest", map[string]any{"module": "naming", "namespace": "public", "groupName": "g", "serviceName": "none"})
		if err == nil && m["resultCode"] == float64(200) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return errors.New("nacosrpc: the connection did not register within 10s")
		case <-tick.C:
		}
	}
}

// Call sends a request of type typ with body as its JSON and decodes the answer.
func (c *Client) Call(ctx context.Context, typ string, body any) (map[string]any, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	out, err := nacospb.Call(ctx, c.cc, &nacospb.Payload{Metadata: &nacospb.Metadata{Type: typ}, Body: &anypb.Any{Value: b}})
	if err != nil {
		return nil, err
	}
	var m map[string]any
	err = json.Unmarshal(out.GetBody().GetValue(), &m)
	return m, err
}

// RegisterPersistent sends a persistent registration (PersistentInstanceRequest, as Java
// clients from 2.3 send it) of ip:port in cluster of group@@service in public, and
// returns the answer.
func (c *Client) RegisterPersistent(ctx context.Context, group, service, cluster, ip string, port int, weight float64, md map[string]string) (map[string]any, error) {
	return c.Call(ctx, "PersistentInstanceRequest", map[string]any{"module": "naming", "namespace": "public", "groupName": group,
		"serviceName": service, "type": "registerInstance", "instance": map[string]any{
			"ip": ip, "port": port, "weight": weight, "healthy": true, "enabled": true, "ephemeral": false,
			"clusterName": cluster, "metadata": md}})
}

// Close closes the connection.
func (c *Client) Close() error { return c.cc.Close() }
