package model

import (
	"errors"
	"strings"
	"testing"
)

// A member's HTTP address is host:port or an http(s):// URL of host:port (a node serving
// HTTPS advertises https://host:port); nothing else is stored.
func TestValidateMember_HTTPAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"", true},
		{"127.0.1.1:8848", true},
		{"[::1]:8848", true},
		{"roster1.example:8848", true},
		{"https://127.0.1.1:8848", true},
		{"http://roster1.example:8848", true},
		{"https://[::1]:8848", true},
		{"https://127.0.1.1", false},
		{"https://127.0.1.1:8848/prefix", false},
		{"https://127.0.1.1:8848/", false},
		{"https://u@127.0.1.1:8848", false},
		{"https://127.0.1.1:8848?x", false},
		{"ftp://127.0.1.1:8848", false},
		{"https://", false},
		{"127.0.1.1", false},
		{"https://" + strings.Repeat("a", MaxMemberAddrLen) + ":1", false},
	} {
		err := ValidateMember(Member{ID: "n1", RaftAddr: "127.0.1.1:7848", HTTPAddr: tc.addr})
		var ve *ValidationError
		switch {
		case tc.ok && err != nil:
			t.Errorf("%q: %v", tc.addr, err)
		case !tc.ok && (!errors.As(err, &ve) || ve.Field != "httpAddr"):
			t.Errorf("%q: %v, want a validation error naming httpAddr", tc.addr, err)
		}
	}
}
