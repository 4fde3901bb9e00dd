package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func sampleResult(system string, rps, p99, cpu float64) Result {
	return Result{
		System: system, Workload: WorkloadRead, Consistency: Linearizable, Instances: 10, Concurrency: 16,
		WindowSeconds: 5, Requests: uint64(rps * 5), RPS: rps,
		Latency:   Latency{P50: 1.234, P90: 2.5, P99: p99, Max: 123.4},
		ServerCPU: cpu, ClientCPU: 0.5, OtherCPU: 0.1,
	}
}

func TestWriteTable_FormatsRows(t *testing.T) {
	r := sampleResult(SystemRoster, 12345.6, 9.87, 1.5)
	r.Errors = 3
	r.ErrorSamples = []string{"3× http 503: no leader"}
	r2 := Result{System: SystemEtcd, Workload: WorkloadDeregister, Concurrency: 1, RPS: 812.3, ServerCPU: -1, OtherCPU: -1, Exhausted: true,
		Extra: map[string]float64{"pool": 4000}}
	var buf bytes.Buffer
	if err := WriteTable(&buf, []Result{r, r2}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("want header, 2 rows and 2 notes, got:\n%s", out)
	}
	for _, col := range []string{"system", "point", "conc", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "errors", "srv cpu", "cli cpu", "other cpu"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header lacks %q: %s", col, lines[0])
		}
	}
	row := strings.Fields(lines[1])
	want := []string{"roster", "read-10", "linearizable", "16", "12346", "1.23", "2.50", "9.87", "123", "3", "1.50", "0.50", "0.10"}
	if strings.Join(row, " ") != strings.Join(want, " ") {
		t.Errorf("row %q, want %q", row, want)
	}
	if f := strings.Fields(lines[2]); f[0] != "etcd" || f[3] != "812*" || f[9] != "-" || f[11] != "-" {
		t.Errorf("second row %q: want exhausted mark and unknown cpu", f)
	}
	if !strings.Contains(out, "http 503: no leader") || !strings.Contains(out, "pool=4000") {
		t.Errorf("notes missing:\n%s", out)
	}
	// Columns line up: every row is as wide as the header.
	if len(lines[1]) != len(lines[0]) || len(lines[2]) != len(lines[0]) {
		t.Errorf("rows not aligned:\n%s", out)
	}
}

func TestReport_JSONRoundTrip(t *testing.T) {
	rep := Report{Meta: NewMeta([]string{"bench"}), Results: []Result{sampleResult(SystemEtcd, 100, 2, 0.3)}}
	rep.Meta.Started = rep.Meta.Started.Round(time.Second)
	var buf bytes.Buffer
	if err := WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"rps": 100`, `"p99_ms": 2`, `"server_cpu_cores": 0.3`, `"go_version"`} {
		if !strings.Contains(buf.String(), key) {
			t.Errorf("JSON lacks %s:\n%s", key, buf.String())
		}
	}
	got, err := ReadReport(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Results) != 1 || got.Results[0].RPS != 100 || got.Results[0].PointName() != "read-10 linearizable" || got.Meta.NumCPU == 0 {
		t.Fatalf("round trip %+v", got)
	}
	spread := got.Results[0]
	spread.ReadTarget = TargetAll
	if spread.PointName() != "read-10 linearizable all" {
		t.Fatalf("spread point name %q", spread.PointName())
	}
}

func TestCompare_MediansAndRatios(t *testing.T) {
	a := Report{Results: []Result{sampleResult(SystemRoster, 1000, 10, 1.0), sampleResult(SystemEtcd, 2000, 5, 1.0)}}
	b := Report{Results: []Result{sampleResult(SystemRoster, 1200, 12, 1.0), sampleResult(SystemEtcd, 2400, 4, 1.0)}}
	c := Report{Results: []Result{sampleResult(SystemRoster, 1100, 11, 1.0)}}
	only := sampleResult(SystemRoster, 50, 1, -1)
	only.Workload, only.Consistency, only.Instances = WorkloadRegister, "", 0
	c.Results = append(c.Results, only)
	cmp := Compare([]Report{a, b, c})
	if len(cmp.Points) != 2 || len(cmp.Raw) != 6 {
		t.Fatalf("points %d raw %d", len(cmp.Points), len(cmp.Raw))
	}
	p := cmp.Points[0]
	if p.Roster.Rounds != 3 || p.Roster.RPS != 1100 || p.Roster.P99 != 11 {
		t.Errorf("roster median %+v", p.Roster)
	}
	if p.Etcd.Rounds != 2 || p.Etcd.RPS != 2200 || p.Etcd.P99 != 4.5 {
		t.Errorf("etcd median %+v", p.Etcd)
	}
	if p.RPSRatio != 0.5 || p.P99Ratio != 11/4.5 || p.EfficiencyRatio != 0.5 {
		t.Errorf("ratios %+v", p)
	}
	if p.Roster.OtherCPU != 0.1 {
		t.Errorf("other cpu median %v", p.Roster.OtherCPU)
	}
	if q := cmp.Points[1]; q.Etcd != nil || q.RPSRatio != 0 || q.Roster.ServerCPU != -1 || q.Roster.OtherCPU != -1 {
		t.Errorf("roster-only point %+v", q)
	}
	var buf bytes.Buffer
	if err := WriteComparison(&buf, cmp); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "read-10 linearizable") || !strings.Contains(out, "0.50") || !strings.Contains(out, "2.44") {
		t.Errorf("comparison table:\n%s", out)
	}
}

// TestCompare_EachRosterWatchTransportAgainstEtcdsWatch checks that etcd's watch point is
// compared with both Roster transports, in rows where etcd's point first appeared, and
// that a Roster watch result from before there were transports counts as blocking.
func TestCompare_EachRosterWatchTransportAgainstEtcdsWatch(t *testing.T) {
	watch := func(system, transport string, rps float64) Result {
		r := sampleResult(system, rps, 10, 1.0)
		r.Workload, r.Instances, r.Consistency, r.ReadTarget, r.WatchTransport = WorkloadWatch, 0, Stale, TargetAll, transport
		return r
	}
	reg := sampleResult(SystemEtcd, 100, 1, 1)
	reg.Workload, reg.Consistency, reg.Instances = WorkloadRegister, "", 0
	etcd := Report{Results: []Result{watch(SystemEtcd, "", 400), reg}}
	roster := Report{Results: []Result{reg, watch(SystemRoster, WatchSSE, 200), watch(SystemRoster, WatchBlocking, 100)}}
	roster.Results[0].System = SystemRoster
	old := Report{Results: []Result{watch(SystemRoster, "", 300)}}
	cmp := Compare([]Report{etcd, roster, old})
	var names []string
	for _, p := range cmp.Points {
		names = append(names, p.Point)
	}
	want := []string{"watch stale all sse", "watch stale all blocking", "register"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Fatalf("rows %q, want %q", names, want)
	}
	sse, blocking := cmp.Points[0], cmp.Points[1]
	if sse.Etcd == nil || sse.Etcd.RPS != 400 || sse.Roster.RPS != 200 || sse.RPSRatio != 0.5 || sse.BasePoint != "watch stale all" {
		t.Errorf("sse row %+v", sse)
	}
	if blocking.Roster.Rounds != 2 || blocking.Roster.RPS != 200 || blocking.Etcd.RPS != 400 {
		t.Errorf("blocking row (with the old result) roster %+v etcd %+v", blocking.Roster, blocking.Etcd)
	}
	if r := cmp.Points[2]; r.Roster == nil || r.Etcd == nil || r.BasePoint != "" {
		t.Errorf("register row %+v", r)
	}
	var buf bytes.Buffer
	if err := WriteComparison(&buf, cmp); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "watch stale all sse") || !strings.Contains(buf.String(), "watch stale all blocking") {
		t.Errorf("comparison table:\n%s", buf.String())
	}
}
