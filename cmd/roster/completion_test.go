package main

import (
	"strings"
	"testing"
)

// roster completion prints each shell's script.
func TestCompletion_Scripts(t *testing.T) {
	for shell, marker := range map[string]string{
		"bash":       "__start_roster",
		"zsh":        "#compdef roster",
		"fish":       "complete -c roster",
		"powershell": "Register-ArgumentCompleter",
	} {
		r := runCLI(t, nil, "completion", shell)
		wantExit(t, r, 0)
		if !strings.Contains(r.stdout, marker) || r.stderr != "" {
			t.Errorf("completion %s: stdout lacks %q (stderr %q)", shell, marker, r.stderr)
		}
	}
	r := runCLI(t, nil, "completion", "tcsh")
	wantExit(t, r, exitUsage)
	if !strings.Contains(r.stderr, `unknown command "tcsh" for "roster completion"`) {
		t.Fatalf("stderr %q", r.stderr)
	}
}

// What the shell scripts ask (roster __complete ...): subcommands, and the fixed values
// of flags and arguments.
func TestCompletion_Candidates(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", ""}, []string{"namespaces", "cluster-config", "update", "set-health", "join", "completion"}},
		{[]string{"__complete", "members", ""}, []string{"remove"}},
		{[]string{"__complete", "leader", ""}, []string{"transfer"}},
		{[]string{"__complete", "namespaces", ""}, []string{"create", "update", "delete"}},
		{[]string{"__complete", "cluster-config", "orders", "--check", ""}, checkTypes},
		{[]string{"__complete", "cluster-config", "orders", "--confirm", ""}, []string{"majority", "leader"}},
		{[]string{"__complete", "set-health", "orders", "127.0.0.1:80", ""}, []string{"healthy", "unhealthy"}},
		{[]string{"__complete", "instances", "orders", "-o", ""}, []string{"table", "json"}},
	} {
		r := runCLI(t, nil, tc.args...)
		wantExit(t, r, 0)
		got := map[string]bool{}
		for _, line := range strings.Split(r.stdout, "\n") {
			got[strings.SplitN(line, "\t", 2)[0]] = true
		}
		for _, w := range tc.want {
			if !got[w] {
				t.Errorf("%v: candidates lack %q:\n%s", tc.args, w, r.stdout)
			}
		}
	}
}

// A command that groups others shows its help alone and refuses an unknown subcommand.
func TestGroupCommands_UnknownSubcommandExits2(t *testing.T) {
	for _, group := range [][]string{{"snapshot"}, {"acl"}, {"acl", "token"}, {"tls"}, {"tls", "ca"}} {
		r := runCLI(t, nil, append(group, "frobnicate")...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "roster: ") {
			t.Errorf("%v frobnicate: exit %d, stderr %q; want 2", group, r.code, r.stderr)
		}
	}
	r := runCLI(t, nil, "snapshot")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "Available Commands:") {
		t.Fatalf("roster snapshot printed %q, want its help", r.stdout)
	}
}
