package api

import "testing"

// TestBaseURL checks the accepted address forms of a node's HTTP API and what they
// become.
func TestBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.100.0.1:8848":                   "http://127.100.0.1:8848",
		"[::1]:8848":                         "http://[::1]:8848",
		" 127.0.0.1:8848 ":                   "http://127.0.0.1:8848",
		"http://a.example:80":                "http://a.example:80",
		"https://a.example:80":               "https://a.example:80",
		"HTTP://a.example:80":                "http://a.example:80",
		"http://roster:8848/":                "http://roster:8848",
		"https://roster.example/prefix/":     "https://roster.example/prefix",
		"http://a:1/p?x=1#frag":              "http://a:1/p",
		"http://a:1/%2Fescaped/":             "http://a:1/%2Fescaped",
		"https://roster.example:8848/a/b///": "https://roster.example:8848/a/b",
	} {
		u, err := BaseURL(in)
		if err != nil || u.String() != want {
			t.Errorf("BaseURL(%q) = %v, %v; want %s", in, u, err, want)
		}
	}
	for _, bad := range []string{"", "  ", "ftp://x:1", "http://", "::", "http://a b:1"} {
		if u, err := BaseURL(bad); err == nil {
			t.Errorf("BaseURL(%q) = %v, want an error", bad, u)
		}
	}
}

func TestJoinSplitAddr(t *testing.T) {
	for _, tc := range []struct {
		ip   string
		port int
		addr string
	}{
		{"127.100.0.1", 8080, "127.100.0.1:8080"},
		{"::1", 9090, "[::1]:9090"},
	} {
		if got := JoinAddr(tc.ip, tc.port); got != tc.addr {
			t.Errorf("JoinAddr(%q, %d) = %q, want %q", tc.ip, tc.port, got, tc.addr)
		}
		ip, port, err := SplitAddr(tc.addr)
		if err != nil || ip != tc.ip || port != tc.port {
			t.Errorf("SplitAddr(%q) = %q, %d, %v", tc.addr, ip, port, err)
		}
	}
	for _, bad := range []string{"127.0.0.1", "127.0.0.1:x", "::1:80"} {
		if _, _, err := SplitAddr(bad); err == nil {
			t.Errorf("SplitAddr(%q) accepted", bad)
		}
	}
}
