package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/rosterhq/roster/internal/wait"
)

// freeLoopbackAddr returns a loopback address whose port was free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// `roster server --log-format json` writes nothing but JSON lines, hashicorp/raft's
// own lines included; ROSTER_LOG_FORMAT sets it too.
func TestServer_LogFormatJSON(t *testing.T) {
	for _, viaEnv := range []bool{false, true} {
		name := "flag"
		if viaEnv {
			name = "env"
		}
		t.Run(name, func(t *testing.T) {
			raftAddr := freeLoopbackAddr(t)
			env := map[string]string{}
			args := []string{"server", "--node-id", "n1", "--data-dir", filepath.Join(t.TempDir(), "n1"),
				"--http-addr", "127.0.0.1:0", "--raft-addr", raftAddr, "--peers", "n1=" + raftAddr,
				"--dns-addr", "", "--grpc-addr", "off"}
			if viaEnv {
				env["ROSTER_LOG_FORMAT"] = "json"
			} else {
				args = append(args, "--log-format", "json")
			}
			a, _, stderr := newTestApp(t, env)
			a.startNode = startNode
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan int, 1)
			go func() { done <- run(ctx, args, a) }()

			// A single-node cluster elects itself: Raft logs the election.
			wait.For(t, 30*time.Second, "raft's election and the node's start in the log", func() bool {
				out := stderr.String()
				return strings.Contains(out, `"logger":"raft"`) && strings.Contains(out, `"msg":"entering leader state"`) &&
					strings.Contains(out, `"msg":"roster started"`)
			})
			cancel()
			select {
			case code := <-done:
				if code != 0 {
					t.Fatalf("exit %d:\n%s", code, stderr.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the server did not stop")
			}

			raftLines := 0
			for _, line := range strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n") {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("not a JSON line: %q (%v)", line, err)
				}
				for _, k := range []string{"time", "level", "msg"} {
					if _, ok := rec[k]; !ok {
						t.Errorf("line without %q: %s", k, line)
					}
				}
				if strings.Count(line, `"node":`) > 1 {
					t.Errorf("line with a duplicate node key: %s", line)
				}
				if rec["logger"] == "raft" {
					raftLines++
					if rec["node"] != "n1" {
						t.Errorf("raft line without the node id: %s", line)
					}
				}
			}
			if raftLines == 0 {
				t.Fatal("no raft line")
			}
		})
	}
}

// A bad --log-format or ROSTER_LOG_FORMAT is refused before anything starts, naming
// the flag (and the variable); text is the default.
func TestServer_LogFormatValidated(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want []string
	}{
		{nil, []string{"--log-format", "xml"}, []string{`"--log-format"`, "want text or json"}},
		{map[string]string{"ROSTER_LOG_FORMAT": "yaml"}, nil, []string{"ROSTER_LOG_FORMAT", "want text or json"}},
	} {
		a, _, stderr := newTestApp(t, tc.env)
		started := false
		a.startNode = func(nodeOptions, *slog.Logger) (string, func() error, error) {
			started = true
			return "", nil, nil
		}
		code := run(context.Background(), append([]string{"server", "--node-id", "n1", "--data-dir", t.TempDir()}, tc.args...), a)
		if code == 0 || started {
			t.Fatalf("%v %v: exit %d, started %v", tc.env, tc.args, code, started)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%v %v: stderr %q lacks %q", tc.env, tc.args, stderr.String(), w)
			}
		}
	}
	var f logFormat
	logFormatFlag(pflag.NewFlagSet("t", pflag.ContinueOnError), &f)
	if f != logFormatText {
		t.Fatalf("default --log-format %q, want text", f)
	}
}
