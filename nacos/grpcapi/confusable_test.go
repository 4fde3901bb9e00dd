package grpcapi

import (
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos/internal/nacostesting"
	"github.com/rosterhq/roster/nacos/openapi"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// A registry that refuses confusable names refuses them on the Nacos gRPC route too,
// naming serviceName, and writes nothing; a plain name is registered.
func TestNacosGRPC_ConfusableNameRefusedWithTheFlag(t *testing.T) {
	e := newGRPCEnvWith(t, func(st *store.Store, cfg *openapi.Config) {
		reg, err := registry.New(registry.Config{Settings: st, Raft: cfg.Node.(*nacostesting.Node), RequestTimeout: 2 * time.Second,
			RefuseConfusableNames: true})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Registry = reg
	}, nil)
	st := e.st
	c := e.connect(false)
	register := func(service string) (string, map[string]any) {
		return c.call(rpcPersistentInstanceRequest, map[string]any{"module": "naming", "namespace": "public", "groupName": "DEFAULT_GROUP",
			"serviceName": service, "type": "registerInstance",
			"instance": map[string]any{"ip": "127.100.0.1", "port": 8080, "ephemeral": false, "weight": 1, "enabled": true, "healthy": true}})
	}
	typ, m := register("\u043erders")
	result(t, typ, m, rpcInstanceResponse, 500, 400)
	if msg, _ := m["message"].(string); !strings.Contains(msg, "serviceName") || !strings.Contains(msg, "Cyrillic and Latin") {
		t.Fatalf("message %q does not name serviceName and the scripts", msg)
	}
	if _, _, err := st.Instance(nil, model.InstanceRef{Namespace: "public", Group: "DEFAULT_GROUP", Service: "\u043erders", IP: "127.100.0.1", Port: 8080}); err == nil {
		t.Fatal("the refused registration was written")
	}
	typ, m = register("orders")
	result(t, typ, m, rpcInstanceResponse, 200, 0)
}
