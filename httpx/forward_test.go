package httpx

import "testing"

// TestLeaderURL_Forms checks the accepted leader address forms.
func TestLeaderURL_Forms(t *testing.T) {
	for in, want := range map[string]string{
		"127.100.0.1:8848":     "http://127.100.0.1:8848",
		"[::1]:8848":           "http://[::1]:8848",
		"http://a.example:80":  "http://a.example:80",
		"https://a.example:80": "https://a.example:80",
	} {
		u, err := leaderURL(in)
		if err != nil || u.String() != want {
			t.Fatalf("%s: %v %v", in, u, err)
		}
	}
	for _, bad := range []string{"ftp://x:1", "http://", "::"} {
		if _, err := leaderURL(bad); err == nil {
			t.Fatalf("%s accepted", bad)
		}
	}
}
