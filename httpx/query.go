package httpx

import (
	"math"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// StrictQuery refuses, through fail and with a 400, a request whose query string does
// not parse whole: a malformed %-escape, a ';' separator, or a name or value that is not
// valid UTF-8 once unescaped. Request.URL.Query and httputil.ReverseProxy drop the
// parameters they cannot parse without a word, so such a request could run without one
// of its parameters (a ?cas= condition, say), and differently on the leader and on a
// follower that forwards it. Every API runs it first, on the node that receives the
// request, so every node gives the same answer.
func StrictQuery(fail ErrorWriter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := CheckQuery(r.URL.RawQuery); err != nil {
				fail(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// CheckQuery returns a validation error for the first parameter of the raw query string
// q that url.ParseQuery would refuse or drop, or whose unescaped name or value is not
// valid UTF-8. It names the parameter when its name can be read, else "query".
func CheckQuery(q string) error {
	for q != "" {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		if strings.Contains(pair, ";") {
			return Invalid("query", "malformed query string: ';' is not a parameter separator (use '&')")
		}
		if pair == "" {
			continue
		}
		rawName, rawValue, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(rawName)
		if err != nil {
			return Invalid("query", "malformed query string: %v", err)
		}
		if !utf8.ValidString(name) {
			return Invalid("query", "malformed query string: a parameter name is not valid UTF-8")
		}
		field := name
		if field == "" {
			field = "query"
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			return Invalid(field, "malformed query string: %v", err)
		}
		if !utf8.ValidString(value) {
			return Invalid(field, "must be valid UTF-8")
		}
	}
	return nil
}

// MaxPageOffset bounds where a page of a list may start: (page-1)*size at most
// 2^31-1, the largest count a Nacos client (Java int) can express and beyond any
// registry's size. A page past it is refused rather than computed, as the product could
// overflow and wrap around to the first page.
const MaxPageOffset = math.MaxInt32

// PageOffset returns where page (from 1) of a list in pages of size starts; field names
// the page parameter in the error. A size of 0 or less starts every page at 0.
func PageOffset(field string, page, size int) (int, error) {
	if page < 1 {
		return 0, Invalid(field, "must be at least 1, got %d", page)
	}
	if size <= 0 {
		return 0, nil
	}
	if page-1 > MaxPageOffset/size {
		return 0, Invalid(field, "page %d of %d entries starts beyond %d, more entries than any list holds", page, size, MaxPageOffset)
	}
	return (page - 1) * size, nil
}
