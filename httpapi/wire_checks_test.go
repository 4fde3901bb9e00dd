package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/healthcheck"
	"github.com/rosterhq/roster/model"
)

// TestWire_HealthCheckPassword: a check's password never leaves through a read; the
// other fields of the new check types are shown as stored.
func TestWire_HealthCheckPassword(t *testing.T) {
	for _, tc := range []struct {
		name string
		hc   model.HealthCheck
		want string // the JSON fragment the cluster shows
	}{
		{"mysql with a password", model.HealthCheck{Type: model.CheckMySQL, User: "probe", Password: "s3cret", Query: "SELECT 1"},
			`"user":"probe","password":"***","query":"SELECT 1"`},
		{"mysql without a password", model.HealthCheck{Type: model.CheckMySQL, User: "probe", Query: "SELECT 1"},
			`"user":"probe","query":"SELECT 1"`},
		{"mysql with the password ***", model.HealthCheck{Type: model.CheckMySQL, User: "probe", Password: "***"},
			`"user":"probe","password":"***"`},
		{"https", model.HealthCheck{Type: model.CheckHTTPS, Path: "/", TLSServerName: "a.test", TLSSkipVerify: true, TLSCAPEM: "PEM"},
			`"tlsServerName":"a.test","tlsSkipVerify":true,"tlsCaPem":"PEM"`},
		{"grpc", model.HealthCheck{Type: model.CheckGRPC, GRPCService: "orders.v1", GRPCTLS: true},
			`"grpcService":"orders.v1","grpcTls":true`},
		{"tcp shows none of them", model.HealthCheck{Type: model.CheckTCP}, `"rise":0,"fall":0,"confirm":"majority"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(wireCluster(model.Cluster{Name: "c", HealthCheck: tc.hc}))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), tc.want) {
				t.Fatalf("%s\ndoes not contain %s", b, tc.want)
			}
			if strings.Contains(string(b), "s3cret") {
				t.Fatalf("the password shows: %s", b)
			}
		})
	}
}

// TestWire_CertificateExpiry: a probe result shows the certificate's expiry in RFC 3339,
// and nothing when there is none.
func TestWire_CertificateExpiry(t *testing.T) {
	exp := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	b, _ := json.Marshal(wireProbeResult(healthcheck.Result{CheckType: model.CheckTLS, CertificateExpiry: exp}))
	if !strings.Contains(string(b), `"certificateExpiry":"2027-01-02T03:04:05Z"`) {
		t.Fatalf("%s", b)
	}
	b, _ = json.Marshal(wireProbeResult(healthcheck.Result{CheckType: model.CheckTCP}))
	if strings.Contains(string(b), "certificateExpiry") {
		t.Fatalf("%s", b)
	}
}
