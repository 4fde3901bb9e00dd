package model

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/tlsutil"
)

// TestValidateHealthCheck_CheckTypes checks each field of the check types beyond TCP
// and HTTP, good and bad, and that a refusal names the field.
func TestValidateHealthCheck_CheckTypes(t *testing.T) {
	caPEM, keyPEM, err := tlsutil.GenerateCA(1, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	ca := string(caPEM)
	// A CERTIFICATE block that does not parse is refused by admission only: the state
	// machine does not parse certificates (their parsing may change between Go releases).
	badDER := HealthCheck{Type: CheckTLS, TLSCAPEM: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}.WithDefaults()
	admissionOnly(t, "unparsable certificate", AdmitHealthCheck(badDER), ValidateHealthCheck(badDER), "healthCheck.tlsCaPem")
	if (HealthCheck{Type: CheckMySQL, User: "u"}).WithDefaults().Query != DefaultMySQLQuery {
		t.Fatal("no default query")
	}
	of := func(typ CheckType, f func(*HealthCheck)) HealthCheck {
		h := HealthCheck{Type: typ}
		if f != nil {
			f(&h)
		}
		return h.WithDefaults()
	}
	for _, tc := range []struct {
		name  string
		h     HealthCheck
		field string // "" when valid
	}{
		{"https defaults", of(CheckHTTPS, nil), ""},
		{"https path default", of(CheckHTTPS, func(h *HealthCheck) { h.Path = "" }), ""},
		{"https all options", of(CheckHTTPS, func(h *HealthCheck) {
			h.Path, h.Headers, h.ExpectedStatus = "/ready", map[string]string{"X-A": "1"}, []int{204}
			h.TLSServerName, h.TLSSkipVerify, h.TLSCAPEM = "svc.example.com", true, ca
		}), ""},
		{"https bad path", of(CheckHTTPS, func(h *HealthCheck) { h.Path = "ready" }), "healthCheck.path"},
		{"tls defaults", of(CheckTLS, nil), ""},
		{"tls server name ip", of(CheckTLS, func(h *HealthCheck) { h.TLSServerName = "127.0.0.1" }), ""},
		{"tls server name trailing dot", of(CheckTLS, func(h *HealthCheck) { h.TLSServerName = "a.example." }), ""},
		{"tls ca bundle of two", of(CheckTLS, func(h *HealthCheck) { h.TLSCAPEM = ca + "\n" + ca }), ""},
		{"server name too long", of(CheckTLS, func(h *HealthCheck) { h.TLSServerName = strings.Repeat("a.", 127) + "ab" }), "healthCheck.tlsServerName"},
		{"server name invalid", of(CheckHTTPS, func(h *HealthCheck) { h.TLSServerName = "a b" }), "healthCheck.tlsServerName"},
		{"server name wildcard", of(CheckHTTPS, func(h *HealthCheck) { h.TLSServerName = "*.example.com" }), "healthCheck.tlsServerName"},
		{"server name with port", of(CheckHTTPS, func(h *HealthCheck) { h.TLSServerName = "a.example:443" }), "healthCheck.tlsServerName"},
		{"ca not pem", of(CheckTLS, func(h *HealthCheck) { h.TLSCAPEM = "hello" }), "healthCheck.tlsCaPem"},
		{"ca trailing garbage", of(CheckTLS, func(h *HealthCheck) { h.TLSCAPEM = ca + "junk" }), "healthCheck.tlsCaPem"},
		{"ca private key", of(CheckTLS, func(h *HealthCheck) { h.TLSCAPEM = ca + string(keyPEM) }), "healthCheck.tlsCaPem"},
		{"ca too large", of(CheckTLS, func(h *HealthCheck) { h.TLSCAPEM = ca + strings.Repeat("\n", MaxCAPEMBytes) }), "healthCheck.tlsCaPem"},
		{"tls option on http", of(CheckHTTP, func(h *HealthCheck) { h.TLSSkipVerify = true }), "healthCheck.tlsSkipVerify"},
		{"tls option on tcp", of(CheckTCP, func(h *HealthCheck) { h.TLSServerName = "a.example" }), "healthCheck.tlsServerName"},
		{"ca on none", of(CheckNone, func(h *HealthCheck) { h.TLSCAPEM = ca }), "healthCheck.tlsCaPem"},
		{"path on tls", of(CheckTLS, func(h *HealthCheck) { h.Path = "/" }), "healthCheck.path"},
		{"headers on tls", of(CheckTLS, func(h *HealthCheck) { h.Headers = map[string]string{"A": "b"} }), "healthCheck.headers"},
		{"status on tls", of(CheckTLS, func(h *HealthCheck) { h.ExpectedStatus = []int{200} }), "healthCheck.expectedStatus"},
		// Specs written before the TLS types may carry a path on TCP: still applied.
		{"path on tcp (as before)", of(CheckTCP, func(h *HealthCheck) { h.Path = "/x" }), ""},
		{"grpc defaults", of(CheckGRPC, nil), ""},
		{"grpc service", of(CheckGRPC, func(h *HealthCheck) { h.GRPCService = "orders.v1.Orders" }), ""},
		{"grpc tls options", of(CheckGRPC, func(h *HealthCheck) {
			h.GRPCTLS, h.TLSServerName, h.TLSSkipVerify, h.TLSCAPEM = true, "svc.test", true, ca
		}), ""},
		{"grpc tls option without grpcTls", of(CheckGRPC, func(h *HealthCheck) { h.TLSCAPEM = ca }), "healthCheck.tlsCaPem"},
		{"grpc skip verify without grpcTls", of(CheckGRPC, func(h *HealthCheck) { h.TLSSkipVerify = true }), "healthCheck.tlsSkipVerify"},
		{"grpc service too long", of(CheckGRPC, func(h *HealthCheck) { h.GRPCService = strings.Repeat("a", MaxGRPCServiceLen+1) }), "healthCheck.grpcService"},
		{"grpc service control", of(CheckGRPC, func(h *HealthCheck) { h.GRPCService = "a\nb" }), "healthCheck.grpcService"},
		{"grpc path", of(CheckGRPC, func(h *HealthCheck) { h.Path = "/" }), "healthCheck.path"},
		{"grpcService on http", of(CheckHTTP, func(h *HealthCheck) { h.GRPCService = "x" }), "healthCheck.grpcService"},
		{"grpcTls on tls", of(CheckTLS, func(h *HealthCheck) { h.GRPCTLS = true }), "healthCheck.grpcTls"},
		{"mysql", of(CheckMySQL, func(h *HealthCheck) { h.User = "probe" }), ""},
		{"mysql all fields", of(CheckMySQL, func(h *HealthCheck) {
			h.User, h.Password, h.Query = "probe", "s3cr3t é", "SELECT 1\nFROM dual"
		}), ""},
		{"mysql default query", of(CheckMySQL, func(h *HealthCheck) { h.User = "probe"; h.Query = "" }), ""},
		{"mysql without user", of(CheckMySQL, nil), "healthCheck.user"},
		{"mysql user too long", of(CheckMySQL, func(h *HealthCheck) { h.User = strings.Repeat("u", MaxCheckUserLen+1) }), "healthCheck.user"},
		{"mysql user control", of(CheckMySQL, func(h *HealthCheck) { h.User = "a\x00" }), "healthCheck.user"},
		{"mysql password too long", of(CheckMySQL, func(h *HealthCheck) {
			h.User, h.Password = "probe", strings.Repeat("p", MaxCheckPasswordLen+1)
		}), "healthCheck.password"},
		{"mysql password control", of(CheckMySQL, func(h *HealthCheck) { h.User, h.Password = "probe", "a\x01b" }), "healthCheck.password"},
		{"mysql blank query", of(CheckMySQL, func(h *HealthCheck) { h.User, h.Query = "probe", "  " }), "healthCheck.query"},
		{"mysql query too long", of(CheckMySQL, func(h *HealthCheck) { h.User, h.Query = "probe", strings.Repeat("1", MaxCheckQueryLen+1) }), "healthCheck.query"},
		{"mysql query control", of(CheckMySQL, func(h *HealthCheck) { h.User, h.Query = "probe", "SELECT\x00" }), "healthCheck.query"},
		{"mysql path", of(CheckMySQL, func(h *HealthCheck) { h.User, h.Path = "probe", "/" }), "healthCheck.path"},
		{"mysql tls option", of(CheckMySQL, func(h *HealthCheck) { h.User, h.TLSSkipVerify = "probe", true }), "healthCheck.tlsSkipVerify"},
		{"user on http", of(CheckHTTP, func(h *HealthCheck) { h.User = "probe" }), "healthCheck.user"},
		{"password on tcp", of(CheckTCP, func(h *HealthCheck) { h.Password = "x" }), "healthCheck.password"},
		{"query on grpc", of(CheckGRPC, func(h *HealthCheck) { h.Query = "SELECT 1" }), "healthCheck.query"},
		{"unknown type", of("SMTP", nil), "healthCheck.type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, err := range []error{ValidateHealthCheck(tc.h), AdmitHealthCheck(tc.h)} {
				if tc.field == "" {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					continue
				}
				var ve *ValidationError
				if !errors.As(err, &ve) || ve.Field != tc.field {
					t.Fatalf("got %v, want a validation error naming %s", err, tc.field)
				}
				if tc.h.Password != "" && strings.Contains(err.Error(), tc.h.Password) {
					t.Fatalf("the error %q shows the password", err)
				}
			}
		})
	}
}
