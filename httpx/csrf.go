package httpx

import (
	"fmt"
	"net/http"
	"strings"
)

// ErrCrossOrigin refuses a state-changing request a browser sent on behalf of another
// site (403).
var ErrCrossOrigin = errorString("cross-origin request refused")

type errorString string

func (e errorString) Error() string { return string(e) }

// CrossOrigin refuses state-changing requests (anything but GET, HEAD and OPTIONS) that a
// browser sent from another origin: a page on any site could otherwise make an
// operator's browser deregister instances or add a member, with the operator's network
// position and credentials. Browsers say where a request comes from (Sec-Fetch-Site,
// else Origin); clients that are not browsers (the CLI, SDKs, curl) send neither and
// are not affected. trusted lists origins ("https://console.example.com") whose pages
// may still write. It is net/http's CrossOriginProtection; fail answers a refusal.
func CrossOrigin(trusted []string, fail ErrorWriter) (func(http.Handler) http.Handler, error) {
	p := http.NewCrossOriginProtection()
	for _, o := range trusted {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if err := p.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("trusted origin %q: %w", o, err)
		}
	}
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from := r.Header.Get("Origin")
		if from == "" {
			from = "another site (Sec-Fetch-Site: " + r.Header.Get("Sec-Fetch-Site") + ")"
		}
		fail(w, r, fmt.Errorf("%w: a browser sent this %s from %s; pages of other origins may not change anything here (trust an origin with --trusted-origins)",
			ErrCrossOrigin, r.Method, from))
	}))
	return p.Handler, nil
}
