package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server/servertest"
)

// TestNacosWatch_AnswerThenPushes: the answer of the subscription, then a push for a
// registration, each printed; --once prints the answer only.
func TestNacosWatch_AnswerThenPushes(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithGRPC())
	c.MustLeader()
	ctx := cliCtx(t)
	nc := c.Nodes[0].Client()
	registerN(ctx, t, nc, "orders", 1)
	grpcAddr := c.Nodes[0].GRPCAddr

	r := runCLI(t, nil, "nacos-watch", "orders", "--grpc-addr", grpcAddr, "--once")
	if r.code != 0 || !strings.Contains(r.stdout, "answer DEFAULT_GROUP@@orders") || !strings.Contains(r.stdout, "127.100.0.1") {
		t.Fatalf("--once: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a, stdout, stderr := newTestApp(t, nil)
	done := make(chan int)
	go func() { done <- run(wctx, []string{"nacos-watch", "orders", "--grpc-addr", grpcAddr, "-o", "json"}, a) }()
	wait.For(t, 10*time.Second, "the answer", func() bool { return strings.Contains(stdout.String(), `"event":"answer"`) })
	if _, err := nc.RegisterInstance(ctx, "", "", "orders", "127.100.0.2", 2000, api.InstanceRequest{}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the push", func() bool { return strings.Contains(stdout.String(), `"event":"push"`) })
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var push struct {
		Event       string `json:"event"`
		ServiceInfo struct {
			Hosts []struct {
				IP string `json:"ip"`
			} `json:"hosts"`
		} `json:"serviceInfo"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &push); err != nil || push.Event != "push" || len(push.ServiceInfo.Hosts) != 2 {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
}

func TestNacosWatch_Errors(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithGRPC())
	c.MustLeader()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nacos-watch"}, "usage"},
		{[]string{"nacos-watch", "orders", "--grpc-addr", "nohost"}, "--grpc-addr"},
		{[]string{"nacos-watch", "bad name!", "--grpc-addr", c.Nodes[0].GRPCAddr, "--once"}, "Param check invalid"},
	} {
		r := runCLI(t, nil, tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// With ACLs, nacos-watch subscribes with --token (the accessToken header), and without
// one it prints Nacos's refusal and fails.
func TestNacosWatch_Token(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithGRPC(), servertest.WithACL())
	c.MustLeader()
	ctx := cliCtx(t)
	boot, err := c.Nodes[0].Client().ACLBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	registerN(ctx, t, client.New(c.Nodes[0].HTTPAddr, client.WithToken(boot.SecretID)), "orders", 1)
	grpcAddr := c.Nodes[0].GRPCAddr
	r := runCLI(t, nil, "nacos-watch", "orders", "--grpc-addr", grpcAddr, "--once")
	if r.code == 0 || !strings.Contains(r.stderr, "403") {
		t.Fatalf("without a token: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, nil, "nacos-watch", "orders", "--grpc-addr", grpcAddr, "--once", "--token", boot.SecretID)
	if r.code != 0 || !strings.Contains(r.stdout, "127.100.0.1") {
		t.Fatalf("with a token: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
