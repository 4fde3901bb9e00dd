package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A command line roster cannot make sense of exits 2 and sends nothing; a failure while
// running (here an API error) exits 1.
func TestExitCodes_UsageIs2AndFailureIs1(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{
		"GET /v1/status/leader": {status: 503, body: `{"error":{"code":"no_leader","message":"no leader elected"}}`},
	})
	cases := []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"unknown flag", nil, []string{"leader", "--frobnicate"}, exitUsage, "unknown flag: --frobnicate"},
		{"flag without its value", nil, []string{"leader", "--timeout"}, exitUsage, "flag needs an argument: --timeout"},
		{"flag value that does not parse", nil, []string{"leader", "--timeout", "soon"}, exitUsage, `invalid argument "soon" for "--timeout"`},
		{"environment value that does not parse", map[string]string{"ROSTER_TIMEOUT": "soon"}, []string{"leader"}, exitUsage, "ROSTER_TIMEOUT"},
		{"bad output format", nil, []string{"leader", "-o", "yaml"}, exitUsage, `--output "yaml"`},
		{"extra argument", nil, []string{"leader", "n1", "n2"}, exitUsage, "usage: roster leader"},
		{"unknown subcommand", nil, []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"API error", nil, []string{"leader"}, exitError, "no leader elected (503 no_leader)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.callCount()
			args := append([]string{tc.args[0], "--addr", f.addr()}, tc.args[1:]...)
			r := runCLI(t, tc.env, args...)
			wantExit(t, r, tc.code)
			if !strings.HasPrefix(r.stderr, "roster: ") || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("stderr %q, want roster: ...%s", r.stderr, tc.want)
			}
			if sent := f.callCount() - before; tc.code == exitUsage && sent != 0 {
				t.Fatalf("a usage error sent %d request(s)", sent)
			}
		})
	}
}

func TestExitCode_Mapping(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{nil, exitOK},
		{errors.New("boom"), exitError},
		{usagef("--weight %d: must be 0..10000", 20000), exitUsage},
		{fmt.Errorf("wrapped: %w", usagef("bad")), exitUsage},
		{errors.New(`unknown command "x" for "roster"`), exitUsage},
		{errors.New(`required flag(s) "id" not set`), exitUsage},
	} {
		if got := exitCode(tc.err); got != tc.code {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.code)
		}
	}
}
