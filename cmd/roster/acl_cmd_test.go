package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/server/servertest"
)

// The acl commands against a node with ACLs: bootstrap prints the management secret
// once, token create makes a scoped token whose secret works through --token and
// ROSTER_TOKEN, a command without a token fails with the server's 401, and list, read,
// self and delete show and remove tokens without ever printing a secret again.
func TestACLCommands_AgainstANodeWithACLs(t *testing.T) {
	c := servertest.New(t, 1, steadyTimeouts, servertest.WithACL())
	c.MustLeader()
	addr := c.Nodes[0].HTTPAddr

	r := runCLI(t, nil, "acl", "bootstrap", "--addr", addr, "-o", "json")
	wantExit(t, r, 0)
	var boot api.ACLToken
	if err := json.Unmarshal([]byte(r.stdout), &boot); err != nil || boot.SecretID == "" || !boot.Management {
		t.Fatalf("bootstrap output %q (%v)", r.stdout, err)
	}
	r = runCLI(t, nil, "acl", "bootstrap", "--addr", addr)
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, "bootstrapped already") {
		t.Fatalf("second bootstrap: %q", r.stderr)
	}

	r = runCLI(t, nil, "acl", "token", "create", "--addr", addr, "--token", boot.SecretID, "-o", "json",
		"--description", "deploy bot", "--namespace", "public=write", "--namespace", "*=read", "--operator", "read")
	wantExit(t, r, 0)
	var bot api.ACLToken
	if err := json.Unmarshal([]byte(r.stdout), &bot); err != nil || bot.SecretID == "" ||
		bot.Rules.Namespaces["public"] != "write" || bot.Rules.Namespaces["*"] != "read" || bot.Rules.Operator != "read" || bot.Rules.ACL != "none" {
		t.Fatalf("token create output %q (%v)", r.stdout, err)
	}

	// The bot's token through --token and through ROSTER_TOKEN.
	wantExit(t, runCLI(t, nil, "register", "orders", "127.100.0.9:80", "--addr", addr, "--token", bot.SecretID), 0)
	wantExit(t, runCLI(t, map[string]string{"ROSTER_TOKEN": bot.SecretID}, "instances", "orders", "--addr", addr), 0)
	r = runCLI(t, nil, "instances", "orders", "--addr", addr)
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, "unauthenticated") {
		t.Fatalf("a command without a token: %q, want the server's 401", r.stderr)
	}
	r = runCLI(t, nil, "acl", "token", "list", "--addr", addr, "--token", bot.SecretID)
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, `acl: read`) {
		t.Fatalf("token list with a token without acl read: %q", r.stderr)
	}

	r = runCLI(t, nil, "acl", "token", "list", "--addr", addr, "--token", boot.SecretID)
	wantExit(t, r, 0)
	for _, want := range []string{bot.AccessorID, boot.AccessorID, "deploy bot", "*=read,public=write"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("token list lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, boot.AccessorID) && !strings.Contains(strings.Join(strings.Fields(line), " "), "true *=write write write") {
			t.Errorf("the management token's row does not show every right: %q", line)
		}
	}
	for _, secret := range []string{bot.SecretID, boot.SecretID} {
		if strings.Contains(r.stdout, secret) {
			t.Fatalf("token list printed a secret:\n%s", r.stdout)
		}
	}
	r = runCLI(t, nil, "acl", "token", "self", "--addr", addr, "--token", bot.SecretID)
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, bot.AccessorID) || strings.Contains(r.stdout, bot.SecretID) {
		t.Fatalf("token self: %q", r.stdout)
	}
	wantExit(t, runCLI(t, nil, "acl", "token", "read", bot.AccessorID, "--addr", addr, "--token", boot.SecretID), 0)
	r = runCLI(t, nil, "acl", "token", "create", "--addr", addr, "--token", boot.SecretID, "--namespace", "public=admin")
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, "rules.namespaces") {
		t.Fatalf("a bad level: %q, want the field named", r.stderr)
	}
	// acl: write is not management: the CLI shows the server's refusals.
	r = runCLI(t, nil, "acl", "token", "create", "--addr", addr, "--token", boot.SecretID, "-o", "json",
		"--description", "token admin", "--namespace", "public=write", "--acl", "write")
	wantExit(t, r, 0)
	var tokenAdmin api.ACLToken
	if err := json.Unmarshal([]byte(r.stdout), &tokenAdmin); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "acl", "token", "create", "--addr", addr, "--token", tokenAdmin.SecretID, "--namespace", "*=write")
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, "within its own") || !strings.Contains(r.stderr, `namespace "*": write`) {
		t.Fatalf("creating a token beyond its own rules: %q, want the right named", r.stderr)
	}
	r = runCLI(t, nil, "acl", "token", "delete", boot.AccessorID, "--addr", addr, "--token", tokenAdmin.SecretID)
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, "only a management token may delete a management token") {
		t.Fatalf("deleting the bootstrap token with acl: write: %q", r.stderr)
	}
	r = runCLI(t, nil, "acl", "token", "delete", boot.AccessorID, "--addr", addr, "--token", boot.SecretID)
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, "last management token") {
		t.Fatalf("deleting the last management token: %q", r.stderr)
	}
	r = runCLI(t, nil, "acl", "token", "delete", bot.AccessorID, "--addr", addr, "--token", boot.SecretID)
	wantExit(t, r, 0)
	r = runCLI(t, nil, "instances", "orders", "--addr", addr, "--token", bot.SecretID)
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, "not known to the cluster") {
		t.Fatalf("a deleted token: %q", r.stderr)
	}
}

// roster acl bootstrap --secret-file gives the management token a secret prepared
// beforehand (automation), which it does not print; a secret that is not a UUID is refused and bootstraps nothing.
// Repeating it with the same file succeeds without a second token; with another secret,
// or without a file, the cluster's 409 stands.
func TestACLBootstrap_SecretFile(t *testing.T) {
	c := servertest.New(t, 1, steadyTimeouts, servertest.WithACL())
	c.MustLeader()
	addr := c.Nodes[0].HTTPAddr
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "acl", "bootstrap", "--addr", addr, "--secret-file", bad)
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, "secretId") {
		t.Fatalf("a secret that is not a UUID: %q", r.stderr)
	}
	const secret = "3f9a1c2e-8b7d-4e6f-a5c4-1b2d3e4f5a6b"
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "acl", "bootstrap", "--addr", addr, "--secret-file", good, "-o", "json")
	wantExit(t, r, 0)
	if strings.Contains(r.stdout+r.stderr, secret) || !strings.Contains(r.stdout, `"management": true`) {
		t.Fatalf("bootstrap with a secret file printed %q %q: want the token without its secret", r.stdout, r.stderr)
	}
	wantExit(t, runCLI(t, nil, "acl", "token", "self", "--addr", addr, "--token", secret), 0)

	r = runCLI(t, nil, "acl", "bootstrap", "--addr", addr, "--secret-file", good)
	wantExit(t, r, 0)
	if !strings.Contains(r.stderr, "already bootstrapped") || strings.Contains(r.stdout, secret) {
		t.Fatalf("repeated bootstrap: stdout %q stderr %q", r.stdout, r.stderr)
	}
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("0f9a1c2e-8b7d-4e6f-a5c4-1b2d3e4f5a6b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--secret-file", other}, {}} {
		r = runCLI(t, nil, append([]string{"acl", "bootstrap", "--addr", addr}, args...)...)
		wantExit(t, r, 1)
		if !strings.Contains(r.stderr, "409") && !strings.Contains(r.stderr, "conflict") {
			t.Fatalf("bootstrap %v of a bootstrapped cluster: %q", args, r.stderr)
		}
	}
	toks, _, err := client.New(addr, client.WithToken(secret)).Tokens(cliCtx(t), client.QueryOptions{})
	if err != nil || len(toks.Tokens) != 1 {
		t.Fatalf("tokens after repeated bootstraps: %+v, %v", toks, err)
	}
}
