package openapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// TestCrossOrigin_NacosWritesFromOtherSitesRefused: the Nacos routes take form bodies,
// which any page can make a browser send to another site; a browser's cross-site write
// is refused with 403 in Nacos's shape and writes nothing. Reads, non-browser clients
// and trusted origins pass.
func TestCrossOrigin_NacosWritesFromOtherSitesRefused(t *testing.T) {
	h, st, _ := newTestAPIWith(t, "n1", nil, func(_ *store.Store, c *Config) {
		c.TrustedOrigins = []string{"https://console.example.com"}
	})
	form := "serviceName=orders&ip=127.100.0.1&port=8080&ephemeral=false"
	send := func(method, target, form string, hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, target, strings.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	evil := map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}
	for _, path := range []string{"/nacos/v1/ns/instance", "/nacos/v2/ns/instance"} {
		rec := send(http.MethodPost, path, form, evil)
		if rec.Code != http.StatusForbidden {
			t.Fatalf("%s cross-site: %d %s", path, rec.Code, rec.Body)
		}
		if strings.HasPrefix(path, "/nacos/v1") && !strings.HasPrefix(rec.Body.String(), "caused: ") {
			t.Fatalf("v1 refusal not in Nacos's shape: %s", rec.Body)
		}
		if strings.HasPrefix(path, "/nacos/v2") && !strings.Contains(rec.Body.String(), `"code":10001`) {
			t.Fatalf("v2 refusal not access denied: %s", rec.Body)
		}
	}
	ref := model.InstanceRef{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", IP: "127.100.0.1", Port: 8080}
	if _, _, err := st.Instance(nil, ref); err == nil {
		t.Fatal("a refused cross-site registration was written")
	}
	if rec := send(http.MethodGet, "/nacos/v1/ns/instance/list?serviceName=orders", "", evil); rec.Code != http.StatusOK {
		t.Fatalf("cross-site read: %d %s", rec.Code, rec.Body)
	}
	if rec := send(http.MethodPost, "/nacos/v1/ns/instance", form, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://console.example.com"}); rec.Code != http.StatusOK {
		t.Fatalf("trusted origin: %d %s", rec.Code, rec.Body)
	}
	if rec := send(http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.2&port=8080&ephemeral=false", nil); rec.Code != http.StatusOK {
		t.Fatalf("an SDK (no browser headers): %d %s", rec.Code, rec.Body)
	}
}
