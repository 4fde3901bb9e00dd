package server_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/internal/wait"
)

// encodings returns spellings of the path segment seg that all decode to seg: each
// letter alone as %xx in lower- and upper-case hex, every letter (mixed-case hex), and
// each '.' as %2e.
func encodings(seg string) []string {
	var out []string
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '_' || c == '-' {
			out = append(out,
				seg[:i]+fmt.Sprintf("%%%02x", c)+seg[i+1:],
				seg[:i]+fmt.Sprintf("%%%02X", c)+seg[i+1:])
		}
	}
	var all strings.Builder
	for i := 0; i < len(seg); i++ {
		if i%2 == 0 {
			fmt.Fprintf(&all, "%%%02x", seg[i])
		} else {
			fmt.Fprintf(&all, "%%%02X", seg[i])
		}
	}
	return append(out, all.String())
}

// sseStatus opens a stream of path as secret and returns its status and, for a refusal,
// the body; an opened stream is closed at once.
func sseStatus(t *testing.T, addr, secret, path string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", api.MediaEventStream)
	req.Header.Set(api.HeaderToken, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("stream %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, nil
	}
	b := make([]byte, 4096)
	n, _ := resp.Body.Read(b)
	return resp.StatusCode, b[:n]
}

// rawRequestLine sends a request line as written (no client re-encodes it) and returns
// the status.
func rawRequestLine(t *testing.T, addr, secret, target string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n%s: %s\r\nConnection: close\r\n\r\n", target, addr, api.HeaderToken, secret)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

// A namespace's name is decoded once, before any decision: every route that reads (or
// writes) a namespace's data answers a percent-encoded spelling of its path exactly as
// it answers the plain one — through the leader and through a follower, for a token that may read
// the namespace and for one whose "*" rule would let it read any namespace but this
// one, which stays 403 however the name is spelled. Streams too. Doubly encoded names
// and names that decode to invalid ones are 400s naming the field; a request line that
// is no valid encoding at all is a 400.
func TestACL_EncodedNamesGetThePlainNamesAnswer(t *testing.T) {
	c := newACLCluster(t)
	ctx := ctxT(t, 120*time.Second)
	m := c.as(c.MustLeader(), c.mgmt)
	none := api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}
	for _, n := range []string{"secret", "public"} {
		if n != "public" {
			if _, err := m.UpsertNamespace(ctx, n, api.NamespaceRequest{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := m.UpsertCluster(ctx, n, group, "svc", "DEFAULT", none); err != nil {
			t.Fatal(err)
		}
		if _, err := m.RegisterInstance(ctx, n, group, "svc", "127.0.0.1", 1, api.InstanceRequest{Metadata: map[string]string{"k": n}}); err != nil {
			t.Fatal(err)
		}
	}
	reader := c.token(ctx, t, "all but secret", api.ACLRules{Namespaces: map[string]string{"*": "read", "secret": "none"}})
	writer := c.token(ctx, t, "writes all but secret", api.ACLRules{Namespaces: map[string]string{"*": "write", "secret": "read"}})
	follower := c.Followers()[0]
	for _, tok := range []string{reader.SecretID, writer.SecretID} {
		waitToken(t, c, follower, tok)
	}

	// Each route with its segments: the namespace, then the others.
	type route struct {
		format string // %[1]s namespace, %[2]s group, %[3]s service, %[4]s cluster, %[5]s address
		stream bool
		method string // a write's; "" for a read
		body   string
	}
	routes := []route{
		{format: "/v1/namespaces/%[1]s"},
		{format: "/v1/namespaces/%[1]s/services"},
		{format: "/v1/namespaces/%[1]s/groups/%[2]s/services/%[3]s"},
		{format: "/v1/namespaces/%[1]s/groups/%[2]s/services/%[3]s/clusters"},
		{format: "/v1/namespaces/%[1]s/groups/%[2]s/services/%[3]s/clusters/%[4]s"},
		{format: "/v1/namespaces/%[1]s/groups/%[2]s/services/%[3]s/instances"},
		{format: "/v1/namespaces/%[1]s/groups/%[2]s/services/%[3]s/instances/%[5]s"},
		{format: "/v1/namespaces/%[1]s/groups/%[2]s/services/%[3]s/health"},
		{format: "/v1/namespaces/%[1]s/groups/%[2]s/services/%[3]s/instances", stream: true},
		{format: "/v1/namespaces/%[1]s/services", stream: true},
		// Writes that leave the fixtures as they are.
		{format: "/v1/namespaces/%[1]s/groups/%[2]s/services/%[3]s/instances/%[5]s", method: http.MethodPut, body: `{"metadata":{"k":"again"}}`},
		{format: "/v1/namespaces/%[1]s/groups/%[2]s/services/%[3]s/instances/%[5]s", method: http.MethodPatch, body: `{"weight":1}`},
		{format: "/v1/namespaces/%[1]s/groups/%[2]s/services/%[3]s/instances/%[5]s/health", method: http.MethodPut, body: `{"healthy":true}`},
		{format: "/v1/namespaces/%[1]s/groups/%[2]s/services/%[3]s/clusters/%[4]s", method: http.MethodPut, body: `{"healthCheck":{"type":"NONE"}}`},
	}
	// segs are the path's segments for namespace ns, with segment i spelled v.
	segs := func(ns string, i int, v string) []string {
		out := []string{ns, group, "svc", "DEFAULT", "127.0.0.1:1"}
		out[i] = v
		return out
	}
	path := func(rt route, segs []string) string {
		args := make([]any, len(segs))
		for i, s := range segs {
			args[i] = s
		}
		return fmt.Sprintf(rt.format, args...)
	}
	answer := func(addr, secret string, rt route, p string) (int, string) {
		if rt.stream {
			code, b := sseStatus(t, addr, secret, p)
			return code, errorCode(b)
		}
		if rt.method != "" {
			code, b := rawDo(t, addr, secret, rt.method, p, rt.body)
			return code, errorCode(b) // a write's index moves with every write
		}
		code, b := rawDo(t, addr, secret, http.MethodGet, p, "")
		if code == http.StatusOK {
			return code, string(b)
		}
		return code, errorCode(b)
	}

	checked := 0
	for _, via := range []int{c.MustLeader(), follower} {
		addr := c.Nodes[via].HTTPAddr
		for _, ns := range []string{"secret", "public"} {
			for _, tok := range []struct {
				name, secret string
			}{{"reader", reader.SecretID}, {"writer", writer.SecretID}} {
				for _, rt := range routes {
					plain := path(rt, segs(ns, 0, ns))
					wantCode, want := answer(addr, tok.secret, rt, plain)
					allowed := ns == "public" || tok.name == "writer"
					if rt.method != "" {
						allowed = ns == "public" && tok.name == "writer"
					}
					if !allowed && wantCode != http.StatusForbidden {
						t.Fatalf("%s %s as %s: %d, want 403", rt.method, plain, tok.name, wantCode)
					}
					if allowed && wantCode != http.StatusOK {
						t.Fatalf("%s %s as %s: %d %s, want 200", rt.method, plain, tok.name, wantCode, want)
					}
					var variants []string
					for _, e := range encodings(ns) {
						variants = append(variants, path(rt, segs(ns, 0, e)))
					}
					// The other segments, encoded too (the address's dots as %2e).
					for i, v := range segs(ns, 0, ns)[1:] {
						if strings.Contains(rt.format, fmt.Sprintf("%%[%d]s", i+2)) {
							e := encodings(v)
							variants = append(variants, path(rt, segs(ns, i+1, e[0])), path(rt, segs(ns, i+1, e[len(e)-1])))
						}
					}
					for _, v := range variants {
						code, got := answer(addr, tok.secret, rt, v)
						if code != wantCode || got != want {
							t.Errorf("%s %s as %s via %s: %d %.200s, want %d %.200s (the answer of %s)",
								rt.method, v, tok.name, c.Nodes[via].ID, code, got, wantCode, want, plain)
						}
						checked++
					}
				}
			}
		}

		// A doubly encoded name is the name with a literal '%': not a namespace id.
		// So are names that decode to a slash, a dot-dot or a control character.
		for _, bad := range []string{"s%2565cret", "%2e%2e", "%2E", "a%2Fb", "s%00cret", "s%ffcret"} {
			for _, rt := range routes[:8] {
				p := path(rt, segs(bad, 0, bad))
				code, b := rawDo(t, addr, reader.SecretID, http.MethodGet, p, "")
				if code != http.StatusBadRequest || errorCode(b) != api.CodeInvalid || !strings.Contains(string(b), `"field":"namespace"`) {
					t.Errorf("GET %s via %s: %d %s, want 400 naming the namespace", p, c.Nodes[via].ID, code, b)
				}
			}
		}
		// No valid encoding at all: refused before any route sees it.
		for _, bad := range []string{"s%zzcret", "secre%7", "s%"} {
			if code := rawRequestLine(t, addr, reader.SecretID, "/v1/namespaces/"+bad+"/services"); code != http.StatusBadRequest {
				t.Errorf("GET /v1/namespaces/%s/services via %s: %d, want 400", bad, c.Nodes[via].ID, code)
			}
		}
	}
	t.Logf("%d encoded paths answered as their plain ones", checked)
}

// waitToken waits until node i knows the token secret.
func waitToken(t *testing.T, c *aclCluster, i int, secret string) {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	wait.For(t, 10*time.Second, c.Nodes[i].ID+" to know the token", func() bool {
		_, err := c.as(i, secret).TokenSelf(ctx)
		return err == nil
	})
}
