package testtool

import (
	"fmt"
	"strings"
	"testing"
)

// recorder notes how Missing ended a test instead of ending this one.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Fatalf(format string, a ...any) { r.fatal = fmt.Sprintf(format, a...) }
func (r *recorder) Skipf(format string, a ...any)  { r.skip = fmt.Sprintf(format, a...) }

// Under CI=true a missing program fails the test; elsewhere it skips it, saying how to
// install the program either way.
func TestMissing_FailsUnderCIAndSkipsElsewhere(t *testing.T) {
	for _, tc := range []struct {
		ci       string
		wantFail bool
	}{{"true", true}, {"", false}, {"false", false}} {
		t.Setenv("CI", tc.ci)
		r := &recorder{TB: t}
		Missing(r, "dig", "apt-get install dnsutils")
		msg := r.skip
		if tc.wantFail {
			msg = r.fatal
		}
		if (r.fatal != "") != tc.wantFail || (r.skip != "") == tc.wantFail || !strings.Contains(msg, "apt-get install dnsutils") {
			t.Errorf("CI=%q: fatal %q, skip %q", tc.ci, r.fatal, r.skip)
		}
	}
}
