package grpcapi

import (
	"errors"
	"testing"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
)

// The gRPC requests read service references with the same rules as the Open API
// (nacos.ResolveServiceKey), refusals naming the request's field.
func TestRPCServiceKey_SameRulesAsTheOpenAPI(t *testing.T) {
	tests := []struct {
		name  string
		base  rpcNamingBase
		want  model.ServiceKey
		field string // "" when accepted
	}{
		{"defaults", rpcNamingBase{ServiceName: "orders"}, model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders"}, ""},
		{"grouped name", rpcNamingBase{Namespace: "dev", ServiceName: "g1@@orders"}, model.ServiceKey{Namespace: "dev", Group: "g1", Service: "orders"}, ""},
		{"agreeing group", rpcNamingBase{GroupName: "g1", ServiceName: "g1@@orders"}, model.ServiceKey{Namespace: "public", Group: "g1", Service: "orders"}, ""},
		{"contradicting group", rpcNamingBase{GroupName: "g2", ServiceName: "g1@@orders"}, model.ServiceKey{}, "groupName"},
		{"empty group part", rpcNamingBase{ServiceName: "@@orders"}, model.ServiceKey{}, "serviceName"},
		{"empty service part", rpcNamingBase{ServiceName: "g1@@"}, model.ServiceKey{}, "serviceName"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key, err := rpcServiceKey(tc.base)
			var ve *model.ValidationError
			switch {
			case tc.field == "" && (err != nil || key != tc.want):
				t.Fatalf("%+v: %+v %v, want %+v", tc.base, key, err, tc.want)
			case tc.field != "" && (!errors.As(err, &ve) || ve.Field != tc.field):
				t.Fatalf("%+v: %v, want a refusal naming %s", tc.base, err, tc.field)
			}
		})
	}
	if err := nacos.CheckClusterList("clusters", "c1, ,c2"); err != nil {
		t.Fatalf("a list with a blank entry: %v", err)
	}
	var ve *model.ValidationError
	if err := nacos.CheckClusterList("cluster", "c1,a b"); !errors.As(err, &ve) || ve.Field != "cluster" {
		t.Fatalf("a list with a bad name: %v", err)
	}
}
