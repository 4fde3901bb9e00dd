package openapi

import "testing"

// A member of a TLS cluster advertises https://host:port; Nacos's server lists and raft
// leader show it as host:port, as they show every other member.
func TestHostPort_DropsTheScheme(t *testing.T) {
	for in, want := range map[string]string{
		"https://127.0.1.1:8848":  "127.0.1.1:8848",
		"http://127.0.1.1:8848":   "127.0.1.1:8848",
		"https://[::1]:8848":      "[::1]:8848",
		"127.0.1.1:8848":          "127.0.1.1:8848",
		"":                        "",
		"roster1.example:8848":    "roster1.example:8848",
		"https://roster1.example": "roster1.example",
	} {
		if got := hostPort(in); got != want {
			t.Errorf("hostPort(%q) = %q, want %q", in, got, want)
		}
	}
}
