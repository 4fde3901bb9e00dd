package openapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
)

// FuzzNacosParams feeds arbitrary query strings and form bodies to the Nacos parameter
// parsing. It must never panic; every refusal must be a 4xx in Nacos's shape or a store
// validation error; every accepted parameter is valid UTF-8; and every accepted
// registration or service must pass the admission rules, hold no invalid UTF-8 or
// control character, be persistent, and name the service the key resolution names.
func FuzzNacosParams(f *testing.F) {
	seeds := [][2]string{
		{"serviceName=orders&ip=127.100.0.1&port=8080&ephemeral=false", ""},
		{"", "serviceName=DEFAULT_GROUP%40%40orders&groupName=DEFAULT_GROUP&ip=127.100.0.1&port=8080&weight=1&enable=true" +
			"&healthy=true&metadata=%7B%7D&ephemeral=false&clusterName=&app=&namespaceId="},
		{"serviceName=g1@@orders&groupName=g2&ip=127.100.0.1&port=80&ephemeral=false", ""},
		{"serviceName=orders&ip=fe80::1&port=80&ephemeral=false&metadata=a%3D1,b%3D2", ""},
		{"serviceName=orders&ip=127.100.0.1&port=80", "ephemeral=false&weight=10000.1"},
		{"serviceName=orders&ip=127.100.0.1&port=80&ephemeral=false", `metadata={"a":1,"b":null,"c":true}`},
		{"serviceName=@@x&ip=a.b&port=65536", "metadata=%zz"},
		{"serviceName=orders&protectThreshold=0.5&selector=%7B%22type%22%3A%22none%22%7D", ""},
		{"serviceName=orders&ip=127.100.0.1&port=80&ephemeral=false&healthChecker=%7B%22type%22%3A%22HTTP%22%2C%22headers%22%3A%22a%3Ab%7Cc%22%7D", ""},
		{"a=%zz", "b=;c"},
		{"serviceName=..&ip=127.100.0.1&port=%2B80&ephemeral=false", "metadata=k%3D%1B%5B31m"},
		{"serviceName=a%E2%80%AEb&ip=127.100.0.1&port=080&ephemeral=false", "metadata=%FF%3D1,%FE%3D2"},
		{"serviceName=orders&ip=127.100.0.1&port=80&ephemeral=false", `metadata={"k":"\ud800"}`},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	limits := model.DefaultLimits()
	f.Fuzz(func(t *testing.T, query, body string) {
		r := &http.Request{
			Method: http.MethodPost,
			URL:    &url.URL{Path: "/nacos/v1/ns/instance", RawQuery: query},
			Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
		}
		r = r.WithContext(httpx.WithBody(context.Background(), []byte(body)))
		p, err := parseNacosParams(r)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		for k, vs := range p.vals {
			for _, v := range vs {
				if !utf8.ValidString(k) || !utf8.ValidString(v) {
					t.Fatalf("accepted parameter %q=%q", k, v)
				}
			}
		}

		in, err := registration(p, limits)
		if err != nil {
			checkRefusal(t, err)
		} else {
			if err := limits.AdmitInstance(in); err != nil {
				t.Fatalf("accepted registration %+v fails admission: %v", in, err)
			}
			noControl(t, "registration", in.Namespace, in.Group, in.Service, in.IP, in.Cluster)
			for k, v := range in.Metadata {
				noControl(t, "registration metadata", k, v)
			}
			key, err := serviceKey(p)
			if err != nil || key != in.ServiceKey() {
				t.Fatalf("registration names %+v, key resolution %+v (%v)", in.ServiceKey(), key, err)
			}
			if eph, ok, err := p.boolean("ephemeral"); err != nil || !ok || eph {
				t.Fatalf("accepted a registration with ephemeral %v (present %v, %v)", eph, ok, err)
			}
		}

		if svc, err := serviceForm(p, limits); err != nil {
			checkRefusal(t, err)
		} else if err := limits.AdmitService(svc); err != nil {
			t.Fatalf("accepted service %+v fails admission: %v", svc, err)
		} else {
			for k, v := range svc.Metadata {
				noControl(t, "service metadata", k, v)
			}
		}

		if raw := p.str("healthChecker"); raw != "" {
			if _, err := parseNacosHealthChecker(raw); err != nil {
				checkRefusal(t, err)
			}
		}
	})
}

// noControl fails unless every string is valid UTF-8 without control characters.
func noControl(t *testing.T, what string, ss ...string) {
	t.Helper()
	for _, s := range ss {
		if !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
			t.Fatalf("accepted %s holds %q", what, s)
		}
	}
}

// checkRefusal fails unless err is a 4xx Nacos error with a known code or a store
// validation error.
func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var ne *nacos.Error
	var ve *model.ValidationError
	switch {
	case errors.As(err, &ne):
		if ne.Status < 400 || ne.Status > 499 || ne.Code == 0 || nacos.Message(ne.Code) == "server error" || ne.Msg == "" {
			t.Fatalf("refusal %+v is not a Nacos 4xx", ne)
		}
	case errors.As(err, &ve):
		if ve.Field == "" {
			t.Fatalf("validation error without a field: %v", ve)
		}
	default:
		t.Fatalf("unexpected error type %T: %v", err, err)
	}
}
