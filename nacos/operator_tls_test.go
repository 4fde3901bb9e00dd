package nacos

import "testing"

// A member of a TLS cluster advertises https://host:port; Nacos's server lists and raft
// leader show it as host:port, as they show every other member.
func TestHostPort_DropsTheScheme(t *testing.T) {
	for in, want := range map[string]string{
		"https://10.0.0.1:8848":   "10.0.0.1:8848",
		"http://10.0.0.1:8848":    "10.0.0.1:8848",
		"https://[fd00::1]:8848":  "[fd00::1]:8848",
		"10.0.0.1:8848":           "10.0.0.1:8848",
		"":                        "",
		"roster1.example:8848":    "roster1.example:8848",
		"https://roster1.example": "roster1.example",
	} {
		if got := hostPort(in); got != want {
			t.Errorf("hostPort(%q) = %q, want %q", in, got, want)
		}
	}
}
