//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// binary is the roster binary TestMain builds once for every test of the run, into
// binDir (which older releases are built into too).
var binary, binDir string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "roster-faults-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	binary, err = BuildBinary(ctx, root, dir)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// moduleRoot finds the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Environment variables of the fault tests.
const (
	// envSeed runs one round with this seed (reproduces a round of an earlier run).
	envSeed = "ROSTER_FAULT_SEED"
	// envDuration switches to the long schedule: rounds of random faults until it passes.
	envDuration = "ROSTER_FAULT_DURATION"
	// envRound is the length of one round of the long schedule (default 60s).
	envRound = "ROSTER_FAULT_ROUND"
	// envNodes lists the cluster sizes rounds cycle through ("3", "3,5").
	envNodes = "ROSTER_FAULT_NODES"
	// envArtifacts is where failing rounds leave their artifacts.
	envArtifacts = "ROSTER_FAULT_ARTIFACTS"
	// envSummary, when set, is a file the run's summary is written to as JSON.
	envSummary = "ROSTER_FAULT_SUMMARY"
	// envCrashIterations is the number of kill -9 iterations (default 20).
	envCrashIterations = "ROSTER_CRASH_ITERATIONS"
	// envOnly restricts the schedule to the named faults ("pause-leader,kill-leader").
	envOnly = "ROSTER_FAULT_ONLY"
)

// faultRegistry returns AllFaults, restricted to the faults named in ROSTER_FAULT_ONLY.
func faultRegistry(t *testing.T) func() []Fault {
	only := os.Getenv(envOnly)
	if only == "" {
		return AllFaults
	}
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var known []string
	found := 0
	for _, f := range AllFaults() {
		known = append(known, f.Name())
		if want[f.Name()] {
			found++
		}
	}
	if found != len(want) {
		t.Fatalf("%s=%q names unknown faults; known: %s", envOnly, only, strings.Join(known, ", "))
	}
	return func() []Fault {
		var out []Fault
		for _, f := range AllFaults() {
			if want[f.Name()] {
				out = append(out, f)
			}
		}
		return out
	}
}

// diskFaults returns the registry and the size of each node's own file system: the
// disk-full fault mounts a tmpfs per node, which needs root. CI runs as root, and
// there the fault is never left out; elsewhere, without root, it is (with a log line).
func diskFaults(t *testing.T, registry func() []Fault) (func() []Fault, int64) {
	uses := false
	for _, f := range registry() {
		uses = uses || f.Name() == (&DiskFull{}).Name()
	}
	switch {
	case !uses:
		return registry, 0
	case CanMountDisks():
		return registry, DefaultDiskBytes
	case os.Getenv("CI") == "true" || os.Getenv(envOnly) != "":
		t.Fatalf("the disk-full fault mounts a tmpfs for each node and needs root (uid %d)", os.Geteuid())
	}
	t.Logf("not root: the disk-full fault is left out of this run (it mounts a tmpfs for each node)")
	return func() []Fault {
		var out []Fault
		for _, f := range registry() {
			if f.Name() != (&DiskFull{}).Name() {
				out = append(out, f)
			}
		}
		return out
	}, 0
}

// previousReleaseFault builds the previous release (releaseBinary) when the registry
// holds the previous-release fault.
func previousReleaseFault(t *testing.T, registry func() []Fault) (func() []Fault, string) {
	for _, f := range registry() {
		if f.Name() == (&OnPreviousRelease{}).Name() {
			return registry, releaseBinary(t, PreviousRelease)
		}
	}
	return registry, ""
}

// fixedSeed is the seed of the short schedule's first round.
const fixedSeed = 20240601

// artifactsDir returns the directory a failing test writes into.
func artifactsDir(name string) string {
	base := os.Getenv(envArtifacts)
	if base == "" {
		base = filepath.Join(os.TempDir(), "roster-faults-artifacts")
	}
	return filepath.Join(base, fmt.Sprintf("%s-%s", name, time.Now().Format("20060102-150405.000")))
}

func nodeCounts(t *testing.T) []int {
	v := os.Getenv(envNodes)
	if v == "" {
		return []int{3}
	}
	var out []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 3 {
			t.Fatalf("%s=%q: want cluster sizes ≥ 3 such as 3,5", envNodes, v)
		}
		out = append(out, n)
	}
	return out
}

// Summary is what a run of TestFaults_Linearizable checked (written to envSummary).
type Summary struct {
	Mode         string
	Rounds       int
	Seeds        []uint64
	Faults       map[string]int
	Ops          int
	OK           int
	NotFound     int
	Unknown      int
	Failed       int
	Checked      int
	Histories    int
	IndexChecked int
	Inconclusive int
	Violations   int
	// CoalescedWrites counts the writes that shared a Raft entry with another one.
	CoalescedWrites int
	Elapsed         string
	CheckTime       string
}

// TestFaults_Linearizable runs rounds of the fault schedule against a real cluster and
// checks each round's history. By default it runs two short rounds, each injecting
// every fault once: one with a fixed seed and one with a random seed (printed). With
// ROSTER_FAULT_SEED it runs that one round; with ROSTER_FAULT_DURATION it runs rounds
// of random faults until the duration has passed (scripts/faults.sh).
func TestFaults_Linearizable(t *testing.T) {
	ctx := context.Background()
	var (
		seeds    []uint64
		duration time.Duration
		round    time.Duration
		mode     = "short"
	)
	if v := os.Getenv(envDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", envDuration, v, err)
		}
		duration, mode = d, "long"
		round = time.Minute
		if v := os.Getenv(envRound); v != "" {
			if round, err = time.ParseDuration(v); err != nil {
				t.Fatalf("%s=%q: %v", envRound, v, err)
			}
		}
	}
	random := rand.Uint64() % 1_000_000_000
	switch v := os.Getenv(envSeed); {
	case v != "":
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envSeed, v, err)
		}
		seeds = []uint64{s}
	case mode == "short":
		seeds = []uint64{fixedSeed, random}
	}
	sizes := nodeCounts(t)
	registry := faultRegistry(t)
	registry, disk := diskFaults(t, registry)
	registry, previous := previousReleaseFault(t, registry)
	t.Logf("fault schedule: %s; seeds %v (random seed %d); cluster sizes %v; reproduce a round with %s=<seed>",
		mode, seeds, random, sizes, envSeed)

	sum := Summary{Mode: mode, Faults: map[string]int{}}
	start := time.Now()
	var checkTime time.Duration
	for i := 0; ; i++ {
		var seed uint64
		if seeds != nil {
			if i >= len(seeds) {
				break
			}
			seed = seeds[i]
		} else {
			if time.Since(start) >= duration {
				break
			}
			seed = random + uint64(i)
		}
		nodes := sizes[i%len(sizes)]
		cfg := RunConfig{Binary: binary, PreviousBinary: previous, Dir: t.TempDir(), Nodes: nodes, DiskBytes: disk, Seed: seed, Faults: registry, Logf: t.Logf}
		if mode == "long" {
			cfg.Duration = min(round, max(duration-time.Since(start), 10*time.Second))
		}
		res, err := Run(ctx, cfg)
		sum.Rounds++
		sum.Seeds = append(sum.Seeds, seed)
		for _, f := range res.Faults {
			sum.Faults[f]++
		}
		rep := res.Report
		sum.Ops += rep.Ops
		sum.OK += rep.OK
		sum.NotFound += rep.NotFound
		sum.Unknown += rep.Unknown
		sum.Failed += rep.Failed
		sum.Checked += rep.Checked
		sum.Histories += rep.Partitions
		sum.IndexChecked += rep.IndexChecked
		sum.Violations += len(rep.Violations)
		sum.CoalescedWrites += res.CoalescedWrites
		checkTime += rep.CheckTime
		if err == nil && rep.Result == porcupine.Unknown && rep.Passed() {
			sum.Inconclusive++
			dir := artifactsDir(fmt.Sprintf("inconclusive-%d", seed))
			_, aerr := WriteArtifacts(dir, res.History, rep)
			t.Logf("round seed %d: porcupine was inconclusive within its timeout; history in %s (%v)", seed, dir, aerr)
		}
		var logLines []string
		if res.Cluster != nil {
			var known []string
			var lerr error
			if logLines, known, lerr = ScanLogs(res.Cluster); lerr != nil {
				t.Errorf("reading the node logs: %v", lerr)
			}
			for _, l := range known {
				t.Logf("known issue (reported, not failing the run): %s", l)
			}
		}
		if err != nil || !rep.Passed() || len(logLines) > 0 {
			dir := artifactsDir(fmt.Sprintf("round-%d", seed))
			files, aerr := WriteArtifacts(dir, res.History, rep)
			if res.Cluster != nil {
				if lerr := res.Cluster.CopyLogs(dir); lerr != nil && aerr == nil {
					aerr = lerr
				}
				if derr := res.Cluster.CopyData(filepath.Join(dir, "data")); derr != nil && aerr == nil {
					aerr = derr
				}
			}
			repro := fmt.Sprintf("%s=%d %s=%d", envSeed, seed, envNodes, nodes)
			if mode == "long" {
				repro += fmt.Sprintf(" %s=%s", envDuration, cfg.Duration)
			}
			if only := os.Getenv(envOnly); only != "" {
				repro += fmt.Sprintf(" %s=%s", envOnly, only)
			}
			t.Errorf("round seed %d (%d nodes, faults %v) failed: err=%v; %s\nviolations:\n  %s\nlog errors:\n  %s\nartifacts in %s (%v; artifact error %v)\nreproduce the schedule: %s go test -run TestFaults_Linearizable ./test/faults/",
				seed, nodes, res.Faults, err, rep, strings.Join(first(rep.Violations, 20), "\n  "),
				strings.Join(first(logLines, 20), "\n  "), dir, files, aerr, repro)
		}
	}
	// The check above is the one of coalesced writes only if writes were coalesced.
	if sum.CoalescedWrites == 0 && os.Getenv(envSeed) == "" {
		t.Errorf("no write shared a Raft entry with another in %d rounds: the checks did not cover coalesced writes", sum.Rounds)
	}
	sum.Elapsed = time.Since(start).Round(time.Second).String()
	sum.CheckTime = checkTime.Round(time.Millisecond).String()
	raw, _ := json.MarshalIndent(sum, "", "  ")
	t.Logf("summary: %s", raw)
	if path := os.Getenv(envSummary); path != "" {
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Error(err)
		}
	}
}

// TestFaults_CrashSafety kills every node with SIGKILL at random moments under write
// load, restarts them, and checks after each of ≥ 20 iterations that every
// acknowledged registration survived exactly once and that all nodes agree.
func TestFaults_CrashSafety(t *testing.T) {
	iterations := 20
	if v := os.Getenv(envCrashIterations); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", envCrashIterations, v)
		}
		iterations = n
	}
	seed := rand.Uint64() % 1_000_000_000
	if v := os.Getenv(envSeed); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envSeed, v, err)
		}
		seed = s
	}
	t.Logf("crash safety: %d iterations, seed %d (%s=%d reproduces the schedule)", iterations, seed, envSeed, seed)
	rng := rand.New(rand.NewPCG(seed, 0xc4a5))
	c, err := StartCluster(ClusterConfig{Binary: binary, Dir: t.TempDir(), Nodes: 3, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			dir := artifactsDir("crash")
			err := c.CopyLogs(dir)
			if err == nil {
				err = c.CopyData(filepath.Join(dir, "data"))
			}
			t.Logf("node logs and data in %s (%v)", dir, err)
		}
	})
	ctx := context.Background()
	var acked, unknown, present int
	var recovery time.Duration
	for i := 0; i < iterations; i++ {
		res, err := CrashIteration(ctx, c, rng, i, t.Logf)
		acked += res.Acked
		unknown += res.Unknown
		present += res.UnknownPresent
		recovery = max(recovery, res.Recovery)
		if err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
	}
	if acked == 0 {
		t.Fatal("no registration was acknowledged in any iteration: the test checked nothing")
	}
	lines, known, err := ScanLogs(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range known {
		t.Logf("known issue (reported, not failing the run): %s", l)
	}
	if len(lines) > 0 {
		t.Errorf("node logs report errors:\n  %s", strings.Join(first(lines, 20), "\n  "))
	}
	t.Logf("crash safety: %d iterations, %d acknowledged registrations all present once, %d unknown (%d present), slowest recovery %s",
		iterations, acked, unknown, present, recovery.Round(time.Millisecond))
}
