package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/rosterhq/roster/api"
)

// hostileInputs are the inputs of the input-hardening review that the native API must
// refuse with a 400 naming the field: each is refused by the admission rules (or the
// strict decoding and query parsing) while the state machine's own rules would apply
// it, so nothing may reach the log.
func hostileInputs() []struct{ method, path, body, field string } {
	const (
		ns   = "/v1/namespaces/public"
		svc  = ns + "/groups/DEFAULT_GROUP/services/orders"
		inst = svc + "/instances/127.100.0.1:8080"
	)
	named := func(service string) string {
		return ns + "/groups/DEFAULT_GROUP/services/" + url.PathEscape(service)
	}
	type tc = struct{ method, path, body, field string }
	tests := []tc{
		// Names that are path segments clients resolve.
		{http.MethodPut, ns + "/groups/DEFAULT_GROUP/services/.", `{}`, "service"},
		{http.MethodPut, ns + "/groups/DEFAULT_GROUP/services/..", `{}`, "service"},
		{http.MethodPut, ns + "/groups/DEFAULT_GROUP/services/%2E%2E", `{}`, "service"},
		{http.MethodPut, ns + "/groups/DEFAULT_GROUP/services/../instances/127.100.0.1:80", `{}`, "service"},
		{http.MethodPut, ns + "/groups/../services/orders", `{}`, "group"},
		{http.MethodPut, ns + "/groups/./services/orders/clusters/web", `{}`, "group"},
		// Ports with a sign, leading zeros or spaces: one port, one spelling.
		{http.MethodPut, svc + "/instances/127.100.0.1:+80", `{}`, "port"},
		{http.MethodPut, svc + "/instances/127.100.0.1:080", `{}`, "port"},
		{http.MethodPut, svc + "/instances/127.100.0.1:%2080", `{}`, "port"},
		{http.MethodPut, svc + "/instances/127.100.0.1:80%20", `{}`, "port"},
		{http.MethodPut, svc + "/instances/127.100.0.1:-0", `{}`, "port"},
		// JSON strings encoding/json would store as U+FFFD.
		{http.MethodPut, inst, "{\"metadata\":{\"k\":\"a\xffb\"}}", "metadata"},
		{http.MethodPut, inst, "{\"metadata\":{\"\xfe\":\"1\"}}", "metadata"},
		{http.MethodPut, inst, `{"metadata":{"k":"\ud800"}}`, "metadata"},
		{http.MethodPut, svc, `{"metadata":{"k":"\udc00x"}}`, "metadata"},
		{http.MethodPut, svc + "/clusters/web", "{\"healthCheck\":{\"type\":\"HTTP\",\"headers\":{\"X-A\":\"\xc3\"}}}", "healthCheck.headers"},
		{http.MethodPut, svc + "/clusters/web", "{\"healthCheck\":{\"type\":\"HTTP\",\"path\":\"/\xff\"}}", "healthCheck.path"},
		{http.MethodPut, ns, "{\"name\":\"\xff\"}", "name"},
		{http.MethodPut, inst, "{\"cluster\":\"\xff\"}", "cluster"},
		// Control characters in metadata (a terminal escape, a newline, DEL, C1).
		{http.MethodPut, inst, `{"metadata":{"k":"\u001b[31mred"}}`, "metadata"},
		{http.MethodPut, inst, `{"metadata":{"k":"a\nb"}}`, "metadata"},
		{http.MethodPut, inst, `{"metadata":{"k":"\u007f"}}`, "metadata"},
		{http.MethodPut, inst, `{"metadata":{"k":"\u009b31m"}}`, "metadata"},
		{http.MethodPut, inst, `{"metadata":{"k\u0007":"v"}}`, "metadata"},
		{http.MethodPatch, inst, `{"metadata":{"k":"\u001b]0;title\u0007"}}`, "metadata"},
		{http.MethodPut, svc, `{"metadata":{"k":"\u001b"}}`, "metadata"},
		{http.MethodPut, svc + "/clusters/web", `{"metadata":{"k":"\t"}}`, "metadata"},
		// Bidi reordering in free text, invisible characters in keys.
		{http.MethodPut, inst, `{"metadata":{"file":"\u202egnp.exe"}}`, "metadata"},
		{http.MethodPut, inst, `{"metadata":{"k":"\u2066x"}}`, "metadata"},
		{http.MethodPut, inst, `{"metadata":{"env\u200b":"prod"}}`, "metadata"},
		{http.MethodPut, inst, `{"metadata":{"env ":"prod"}}`, "metadata"},
		{http.MethodPut, inst, `{"metadata":{"\ufeffenv":"prod"}}`, "metadata"},
		{http.MethodPut, ns, `{"name":"\u202eabc"}`, "name"},
		{http.MethodPut, ns, `{"description":"line\u2028break"}`, "description"},
		// Health-check paths and headers.
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"type":"HTTP","path":"/a b"}}`, "healthCheck.path"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"type":"HTTP","path":"/a\u0000"}}`, "healthCheck.path"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"type":"HTTP","path":"/\u200b"}}`, "healthCheck.path"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"type":"HTTP","headers":{"X\u0001":"v"}}}`, "healthCheck.headers"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"type":"HTTP","headers":{"X-Ä":"v"}}}`, "healthCheck.headers"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"type":"HTTP","headers":{"X-A":"a\u0000b"}}}`, "healthCheck.headers"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"type":"HTTP","headers":{"X-A":"\u001b[2J"}}}`, "healthCheck.headers"},
		{http.MethodPut, svc + "/clusters/web", `{"healthCheck":{"type":"HTTP","headers":{"X-A":"1","x-a":"2"}}}`, "healthCheck.headers"},
		// Malformed query strings, on writes and reads: refused, never half-read.
		{http.MethodPut, inst + "?cas=%zz0", `{}`, "cas"},
		{http.MethodPut, inst + "?x=%zz", `{}`, "x"},
		{http.MethodPut, inst + "?cas=0;x=1", `{}`, "query"},
		{http.MethodPut, inst + "?%zz=1", `{}`, "query"},
		{http.MethodPut, inst + "?x=%FF", `{}`, "x"},
		{http.MethodGet, svc + "/instances?cluster=%FF", "", "cluster"},
		{http.MethodGet, svc + "?consistency=%zz", "", "consistency"},
		// A page whose offset overflows, or starts past any list.
		{http.MethodGet, ns + "/services?page=4611686018427387905&size=1000", "", "page"},
		{http.MethodGet, ns + "/services?page=9223372036854775807&size=1000", "", "page"},
		{http.MethodGet, ns + "/services?page=2147483649", "", "page"},
	}
	for _, name := range []string{
		"a\u202eb", "a\u202ab", "a\u202cb", "a\u2066b", "a\u2069b", "a\u200eb", "a\u200fb",
		"a\u200bb", "a\u200cb", "a\u200db", "a\u2060b", "\ufeffab", "a\u00adb", "a\u3164b", "a\ufe0fb", "a\uffffb",
	} {
		tests = append(tests,
			tc{http.MethodPut, named(name), `{}`, "service"},
			tc{http.MethodPut, named(name) + "/instances/127.100.0.1:80", `{}`, "service"},
			tc{http.MethodPut, named(name) + "/clusters/web", `{}`, "service"})
	}
	return tests
}

// TestInput_NativeRefusesHostileInputNamingTheField checks every input of the review
// on the native routes: 400 invalid_argument naming the field, nothing applied.
func TestInput_NativeRefusesHostileInputNamingTheField(t *testing.T) {
	for _, tc := range hostileInputs() {
		name := fmt.Sprintf("%s %s %q", tc.method, tc.path, tc.body)
		t.Run(name, func(t *testing.T) {
			node := newLeaderNode("n1")
			h := mustNew(t, testConfig(node, seededReader()))
			var body any
			if tc.body != "" {
				body = tc.body
			}
			resp := do(t, h, tc.method, tc.path, body)
			if resp.Code != http.StatusBadRequest {
				t.Fatalf("status %d, body %s", resp.Code, resp.Body)
			}
			e := resp.errorBody(t)
			if e.Code != api.CodeInvalid || e.Field != tc.field || e.Message == "" {
				t.Fatalf("error %+v, want field %q", e, tc.field)
			}
			if n := len(node.calls()); n != 0 {
				t.Fatalf("%d commands applied", n)
			}
		})
	}
}

// TestInput_NativeAcceptsWhatTextNeeds checks that the admission rules leave alone what
// names and text legitimately carry: dots inside names, non-Latin letters, the marks and
// joiners of right-to-left text and emoji in metadata values, spaces inside keys,
// escaped valid surrogate pairs.
func TestInput_NativeAcceptsWhatTextNeeds(t *testing.T) {
	const svc = "/v1/namespaces/public/groups/DEFAULT_GROUP/services/"
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPut, svc + "a.b..c", `{}`},
		{http.MethodPut, svc + "...", `{}`},
		{http.MethodPut, svc + url.PathEscape("zamówienia-Ωμέγα"), `{}`},
		{http.MethodPut, "/v1/namespaces/public/groups/a.b/services/orders", `{}`},
		{http.MethodPut, svc + "orders/instances/127.100.0.1:80", `{"metadata":{"label":"\u05e9\u05dc\u05d5\u05dd\u200f (1)","emoji":"👩\u200d💻❤️","fa":"می\u200cخواهم","sym":"\ud83d\ude00"}}`},
		{http.MethodPut, svc + "orders/instances/127.100.0.1:80", `{"metadata":{"display name":"x","u":"\ufffd"}}`},
		{http.MethodPut, svc + "orders/clusters/web", `{"healthCheck":{"type":"HTTP","path":"/health?full=1&x=%20","headers":{"X-Token_1":"a b\u00e9","Host":"svc.local"}}}`},
		{http.MethodPut, "/v1/namespaces/dev", `{"name":"Dév","description":"équipe \u05e9\u200f"}`},
		{http.MethodPut, svc + "orders/instances/127.100.0.1:65535", `{}`},
		{http.MethodPut, svc + "orders/instances/127.100.0.1:1", `{}`},
	} {
		node := newLeaderNode("n1")
		h := mustNew(t, testConfig(node, seededReader()))
		if resp := do(t, h, tc.method, tc.path, tc.body); resp.Code != http.StatusOK || len(node.calls()) != 1 {
			t.Errorf("%s %s %s: %d %s, %d commands", tc.method, tc.path, tc.body, resp.Code, resp.Body, len(node.calls()))
		}
	}
}

// TestInput_StoredLegacyNamesCanBeRemoved checks that the admission rules do not
// strand what an older version stored: a service named ".." (or with a zero-width
// character) is read, deregistered from and deleted under the apply-time rules.
func TestInput_StoredLegacyNamesCanBeRemoved(t *testing.T) {
	for _, name := range []string{"..", "a\u200bb"} {
		rd := seededReader()
		for i := range rd.services {
			rd.services[i].Name = name
		}
		for i := range rd.clusters {
			rd.clusters[i].Service = name
		}
		for i := range rd.instances {
			rd.instances[i].Service = name
		}
		node := newLeaderNode("n1")
		h := mustNew(t, testConfig(node, rd))
		base := "/v1/namespaces/public/groups/DEFAULT_GROUP/services/" + url.PathEscape(name)
		if strings.Trim(name, ".") == "" {
			base = "/v1/namespaces/public/groups/DEFAULT_GROUP/services/%2E%2E"
		}
		for _, tc := range []struct{ method, path string }{
			{http.MethodGet, base},
			{http.MethodGet, base + "/instances"},
			{http.MethodDelete, base + "/instances/127.100.0.1:8080"},
			{http.MethodDelete, base},
		} {
			if resp := do(t, h, tc.method, tc.path, nil); resp.Code != http.StatusOK {
				t.Errorf("%q: %s %s: %d %s", name, tc.method, tc.path, resp.Code, resp.Body)
			}
		}
		if n := len(node.calls()); n != 2 {
			t.Errorf("%q: %d commands applied, want the deregistration and the delete", name, n)
		}
	}
}
