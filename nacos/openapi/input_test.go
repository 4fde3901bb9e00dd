package openapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/nacos/internal/nacostesting"
)

// TestNacosAPI_RefusesHostileInputNamingTheParameter checks the inputs of the
// input-hardening review on the Nacos routes: each is a 400 in Nacos's shape naming the
// parameter, with the parameter's code, and nothing reaches the log. The state
// machine's own rules would apply every one of them; the admission rules refuse them.
func TestNacosAPI_RefusesHostileInputNamingTheParameter(t *testing.T) {
	h, st, node := newStoreAPI(t)
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.1&port=8080&ephemeral=false")
	applied, calls := st.AppliedIndex(), len(node.Applied())

	const (
		reg = "serviceName=orders&ip=127.100.0.2&port=8080&ephemeral=false"
		hc  = "serviceName=orders&clusterName=web&healthChecker="
	)
	q := url.QueryEscape
	tests := []struct {
		name         string
		method, path string
		query, form  string
		code         int
		text         string
	}{
		// Names: path segments clients resolve, bidi controls, zero-width characters.
		{"service ..", http.MethodPost, "instance", "", "serviceName=..&ip=127.100.0.2&port=80&ephemeral=false", 21000, "'serviceName'"},
		{"service .", http.MethodPost, "service", "", "serviceName=.", 21000, "'serviceName'"},
		{"grouped service ..", http.MethodPost, "service", "", "serviceName=g1@@..", 21000, "'serviceName'"},
		{"group ..", http.MethodPost, "instance", "", reg + "&groupName=..", 21000, "'groupName'"},
		{"service with RLO", http.MethodPost, "instance", "", "serviceName=" + q("a\u202eb") + "&ip=127.100.0.2&port=80&ephemeral=false", 21000, "'serviceName'"},
		{"service with LRI", http.MethodPost, "service", "", "serviceName=" + q("a\u2066b"), 21000, "'serviceName'"},
		{"service with ZWSP", http.MethodPost, "service", "", "serviceName=" + q("orders\u200b"), 21000, "'serviceName'"},
		{"service with BOM", http.MethodPost, "service", "", "serviceName=" + q("\ufefforders"), 21000, "'serviceName'"},
		{"service with LRM", http.MethodPost, "service", "", "serviceName=" + q("a\u200eb"), 21000, "'serviceName'"},
		{"cluster of service ..", http.MethodPut, "cluster", "", `serviceName=..&clusterName=web&healthChecker={"type":"TCP"}`, 21000, "'serviceName'"},
		// Ports: one port, one spelling.
		{"port +80", http.MethodPost, "instance", "", "serviceName=orders&ip=127.100.0.2&port=%2B80&ephemeral=false", 20002, "'port'"},
		{"port 080", http.MethodPost, "instance", "", "serviceName=orders&ip=127.100.0.2&port=080&ephemeral=false", 20002, "'port'"},
		{"port 8 0", http.MethodPost, "instance", "", "serviceName=orders&ip=127.100.0.2&port=8+0&ephemeral=false", 20002, "'port'"},
		{"port +80 on deregister", http.MethodDelete, "instance", "", "serviceName=orders&ip=127.100.0.1&port=%2B8080", 20002, "'port'"},
		{"checkPort +9000", http.MethodPut, "cluster", "", hc + `{"type":"TCP"}&useInstancePort4Check=false&checkPort=%2B9000`, 20002, "'checkPort'"},
		// Metadata: invalid UTF-8 (two such keys would both show as U+FFFD), control
		// characters, bidi overrides, invisible keys, lossy JSON escapes.
		{"metadata invalid UTF-8", http.MethodPost, "instance", "", reg + "&metadata=k%3D%FF", 21002, "'metadata'"},
		{"metadata colliding keys", http.MethodPost, "instance", "", reg + "&metadata=%FF%3D1,%FE%3D2", 21002, "'metadata'"},
		{"metadata escape sequence", http.MethodPost, "instance", "", reg + "&metadata=k%3D%1B%5B31mred", 21002, "'metadata'"},
		{"metadata newline", http.MethodPost, "instance", "", reg + "&metadata=" + q(`{"k":"a\nb"}`), 21002, "'metadata'"},
		{"metadata C1 control", http.MethodPost, "instance", "", reg + "&metadata=" + q(`{"k":"\u009b2J"}`), 21002, "'metadata'"},
		{"metadata RLO", http.MethodPost, "instance", "", reg + "&metadata=" + q("file=\u202egnp.exe"), 21002, "'metadata'"},
		{"metadata ZWSP key", http.MethodPost, "instance", "", reg + "&metadata=" + q("env\u200b=prod"), 21002, "'metadata'"},
		{"metadata lone surrogate", http.MethodPost, "instance", "", reg + "&metadata=" + q(`{"k":"\ud800"}`), 21002, "unpaired"},
		{"patch metadata control", http.MethodPatch, "instance", "", "serviceName=orders&ip=127.100.0.1&port=8080&metadata=k%3D%07", 21002, "'metadata'"},
		{"update metadata control", http.MethodPut, "instance", "", "serviceName=orders&ip=127.100.0.1&port=8080&metadata=k%3D%07", 21002, "'metadata'"},
		{"service metadata control", http.MethodPost, "service", "", "serviceName=new&metadata=k%3D%1B", 21005, "'metadata'"},
		{"cluster metadata control", http.MethodPut, "cluster", "", hc + `{"type":"TCP"}&metadata=k%3D%1B`, 20002, "'metadata'"},
		{"form value invalid UTF-8", http.MethodPost, "instance", "", reg + "&app=%C3", 20002, "'app'"},
		// Health-check paths and headers.
		{"check path with a space", http.MethodPut, "cluster", "", hc + q(`{"type":"HTTP","path":"/a b"}`), 20002, "'healthChecker.path'"},
		{"check path with a control", http.MethodPut, "cluster", "", hc + q(`{"type":"HTTP","path":"/a\u0000"}`), 20002, "'healthChecker.path'"},
		{"check path lone surrogate", http.MethodPut, "cluster", "", hc + q(`{"type":"HTTP","path":"/\udc00"}`), 20002, "'healthChecker'"},
		{"check header control", http.MethodPut, "cluster", "", hc + q(`{"type":"HTTP","headers":"X-A:\u001b[2J"}`), 20002, "'healthChecker.headers'"},
		{"check header name", http.MethodPut, "cluster", "", hc + q(`{"type":"HTTP","headers":"X\u0001:v"}`), 20002, "'healthChecker.headers'"},
		{"check header twice", http.MethodPut, "cluster", "", hc + q(`{"type":"HTTP","headers":"X-A:1|x-a:2"}`), 20002, "'healthChecker.headers'"},
		// Malformed query strings: refused on the node that receives them.
		{"query bad escape", http.MethodPost, "instance", reg + "&x=%zz", "", 20002, "'x'"},
		{"query semicolon", http.MethodPost, "instance", reg + ";x=1", "", 20002, "'query'"},
		{"query invalid UTF-8", http.MethodPost, "instance", reg + "&metadata=k%3D%FF", "", 20002, "'metadata'"},
		// List filters.
		{"list clusters invalid UTF-8", http.MethodGet, "instance/list", "serviceName=orders&clusters=%FF&clusterName=%FF", "", 20002, "must be valid UTF-8"},
		{"list clusters illegal", http.MethodGet, "instance/list", "serviceName=orders&clusters=a.b&clusterName=a.b", "", 20002, "is not a cluster name"},
	}
	for _, tt := range tests {
		for _, v := range []string{"v1", "v2"} {
			t.Run(v+" "+tt.name, func(t *testing.T) {
				target := "/nacos/" + v + "/ns/" + tt.path
				if tt.query != "" {
					target += "?" + tt.query
				}
				resp := nacostesting.Do(t, h, tt.method, target, tt.form)
				if resp.Code != http.StatusBadRequest {
					t.Fatalf("status %d %s, want 400", resp.Code, resp.Body)
				}
				if v == "v1" {
					body := string(resp.Body)
					if !strings.HasPrefix(body, "caused: ") || !strings.HasSuffix(body, ";") || !strings.Contains(body, tt.text) {
						t.Fatalf("v1 body %q, want caused: ...%s...;", body, tt.text)
					}
					return
				}
				code, msg, data := resp.Envelope(t)
				var detail string
				if err := json.Unmarshal(data, &detail); err != nil {
					t.Fatalf("data %s is not a string", data)
				}
				if code != tt.code || msg != nacos.Message(tt.code) || !strings.Contains(detail, tt.text) {
					t.Fatalf("v2 answered %d %q %q, want %d ...%s...", code, msg, detail, tt.code, tt.text)
				}
			})
		}
	}
	if got := st.AppliedIndex(); got != applied {
		t.Fatalf("applied index moved from %d to %d", applied, got)
	}
	if got := node.Applied(); len(got) != calls {
		t.Fatalf("hostile input reached the log: %v", got[calls:])
	}
}

// TestNacosAPI_AcceptsWhatTextNeeds checks that the admission rules leave alone what
// Nacos clients send: dotted names, the blanks every parameter loses, and the marks and
// joiners of right-to-left text and emoji in metadata values.
func TestNacosAPI_AcceptsWhatTextNeeds(t *testing.T) {
	h, _, _ := newStoreAPI(t)
	q := url.QueryEscape
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=a.b..c&groupName=g.1&ip=127.100.0.2&port=%208080%20&ephemeral=false"+
		"&metadata="+q(`{"label":"\u05e9\u05dc\u05d5\u05dd\u200f","emoji":"👩\u200d💻","sym":"\ud83d\ude00"}`))
	nacostesting.MustOK(t, h, http.MethodPost, "/nacos/v1/ns/service", "serviceName=...&metadata="+q("display name=Dév"))
	nacostesting.MustOK(t, h, http.MethodPut, "/nacos/v1/ns/cluster", `serviceName=...&clusterName=web&healthChecker=`+
		q(`{"type":"HTTP","path":"/health?full=1","headers":"X-Token:a b|Host:svc.local"}`)+`&useInstancePort4Check=false&checkPort=65535`)
	nacostesting.MustNacos(t, h, http.MethodGet, "/nacos/v1/ns/instance/list?serviceName=orders&clusters=DEFAULT,web_1", "", http.StatusOK)
}
