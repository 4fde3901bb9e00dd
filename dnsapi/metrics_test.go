package dnsapi

import "testing"

func TestRcodeAndTypeLabels(t *testing.T) {
	for rc, want := range map[int]string{0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED", 16: "BADVERS", 4000: "other"} {
		if got := rcodeLabel(rc); got != want {
			t.Errorf("rcodeLabel(%d) = %q, want %q", rc, got, want)
		}
	}
	if typeLabel(nil) != "none" {
		t.Error("a message without a question is type none")
	}
}
