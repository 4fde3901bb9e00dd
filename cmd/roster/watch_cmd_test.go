package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server/servertest"
)

func TestWatch_PrintsEachChange(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	ctx := cliCtx(t)
	nc := c.Nodes[0].Client()
	registerN(ctx, t, nc, "orders", 1)

	for _, output := range []string{"json", "table"} {
		t.Run(output, func(t *testing.T) {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			a, stdout, stderr := newTestApp(t, nil)
			done := make(chan int)
			go func() {
				done <- run(wctx, []string{"watch", "orders", "--addr", c.Nodes[0].HTTPAddr, "--output", output}, a)
			}()
			wait.For(t, 10*time.Second, "the first state", func() bool { return strings.Contains(stdout.String(), "127.100.0.1") })
			port := 2000
			if output == "table" {
				port = 3000
			}
			if _, err := nc.RegisterInstance(ctx, "", "", "orders", "127.100.0.2", port, api.InstanceRequest{}); err != nil {
				t.Fatal(err)
			}
			wait.For(t, 10*time.Second, "the change", func() bool { return strings.Contains(stdout.String(), "127.100.0.2") })
			cancel()
			if code := <-done; code != 0 {
				t.Fatalf("exit %d, stderr %s", code, stderr.String())
			}
			if output != "json" {
				if !strings.Contains(stdout.String(), "# index") || !strings.Contains(stdout.String(), "ADDRESS") {
					t.Fatalf("table output:\n%s", stdout.String())
				}
				return
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			if len(lines) < 2 {
				t.Fatalf("%d JSON lines, want at least 2:\n%s", len(lines), stdout.String())
			}
			var prev uint64
			for _, l := range lines {
				var wl struct {
					Index uint64                `json:"index"`
					Data  api.InstancesResponse `json:"data"`
				}
				if err := json.Unmarshal([]byte(l), &wl); err != nil {
					t.Fatalf("line %q: %v", l, err)
				}
				if wl.Index <= prev || wl.Data.Index != wl.Index {
					t.Fatalf("line %q: index %d after %d", l, wl.Index, prev)
				}
				prev = wl.Index
			}
		})
	}
}

func TestWatch_BadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"watch"},
		{"watch", "orders", "--services"},
	} {
		r := runCLI(t, nil, append(args, "--addr", "127.0.0.1:1")...)
		if r.code == 0 || !strings.Contains(r.stderr, "usage") {
			t.Fatalf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}
