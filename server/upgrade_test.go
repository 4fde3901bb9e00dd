package server_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/rosterhq/roster/buildinfo"
	"github.com/rosterhq/roster/datadir"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// A data directory a newer release wrote in a newer format is refused before anything in
// it is opened: the server does not start, and the directory is left as it was (a
// downgrade past a format change keeps the data for the newer binary).
func TestServer_RefusesNewerDataFormatUntouched(t *testing.T) {
	dir := t.TempDir()
	record := fmt.Sprintf(`{"format":%d,"writtenBy":"v9.0.0"}`, datadir.Format+1)
	if err := os.WriteFile(filepath.Join(dir, datadir.FileName), []byte(record), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := server.New(server.Config{NodeID: "n1", DataDir: dir, HTTPAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0"})
	if !errors.Is(err, datadir.ErrNewerFormat) {
		t.Fatalf("New on a newer data directory: %v, want ErrNewerFormat", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != datadir.FileName {
		t.Fatalf("the refused directory holds %v, want only %s", entries, datadir.FileName)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, datadir.FileName)); string(got) != record {
		t.Fatalf("%s rewritten: %s", datadir.FileName, got)
	}
}

// Every node exports its build on /metrics (roster_build_info, 1) and that its state
// machine is not halted.
func TestMetrics_BuildInfoAndHalted(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts())
	nd := c.Nodes[c.MustLeader()]
	ctx := ctxT(t, 20*time.Second)
	b := buildinfo.Get()
	series := fmt.Sprintf(`roster_build_info{commit=%q,goversion=%q,newest_command=%q,version=%q}`, b.Commit, b.GoVersion, fsm.NewestType.String(), b.Version)
	if got := metricValue(ctx, t, nd, series); got != 1 {
		t.Fatalf("%s = %v, want 1", series, got)
	}
	resp, err := http.Get("http://" + nd.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !regexp.MustCompile(`(?m)^roster_state_machine_halted 0$`).Match(body) {
		t.Fatal("/metrics has no roster_state_machine_halted 0")
	}
}
