//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
)

// envRollingSummary, when set, is a file the rolling-restart test writes its figures
// to as JSON (scripts/bench-rolling-restart.sh).
const envRollingSummary = "ROSTER_ROLLING_SUMMARY"

// RollingSummary is what TestRollingRestart_NoFailedWrite measured.
type RollingSummary struct {
	Writers int `json:"writers"`
	// Seconds is how long the load ran (before, during and just after the restarts).
	Seconds  float64       `json:"seconds"`
	Steps    []RestartStep `json:"steps"`
	Acked    int64         `json:"acked"`
	Retried  int64         `json:"retriedConnectionErrors"`
	Failed   int           `json:"failed"`
	Failures []string      `json:"failures,omitempty"`
	// MaxAckGapMillis is the longest time without any acknowledged write while the
	// nodes restarted; MaxLeaderlessMillis the longest time no node named itself leader
	// (sampled every 10 ms).
	MaxAckGapMillis     float64 `json:"maxAckGapMillis"`
	MaxLeaderlessMillis float64 `json:"maxLeaderlessMillis"`
	// From is the release a rolling upgrade started on; SettingsAcked,
	// SettingsRefused (by error code) and SettingsFailures count the settings writer's
	// answers during it.
	From             string         `json:"from,omitempty"`
	SettingsAcked    int            `json:"settingsAcked,omitempty"`
	SettingsRefused  map[string]int `json:"settingsRefused,omitempty"`
	SettingsFailures []string       `json:"settingsFailures,omitempty"`
}

// rollingLoad is a set of writers that each register instances of their own service
// through the nodes in turn. A writer retries a request that failed to connect (or whose
// connection broke) on the next node: that is what a client behind a list of addresses
// does. Any answer of the API other than success is a failed write.
type rollingLoad struct {
	c *Cluster

	acked, retried atomic.Int64
	mu             sync.Mutex
	failures       []string
	lastAck        time.Time
	maxGap         time.Duration
	measure        bool
	done           map[int]map[int]bool // writer -> acknowledged ports
}

func (l *rollingLoad) run(ctx context.Context, writer int) {
	svc := "rolling-" + strconv.Itoa(writer)
	next := writer
	for i := 0; ctx.Err() == nil; i++ {
		port := 20000 + i%400
		err := l.register(ctx, svc, port, &next)
		if ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		if err != nil {
			l.failures = append(l.failures, fmt.Sprintf("writer %d, port %d: %v", writer, port, err))
		} else {
			now := time.Now()
			if l.measure && now.Sub(l.lastAck) > l.maxGap {
				l.maxGap = now.Sub(l.lastAck)
			}
			l.lastAck = now
			l.done[writer][port] = true
		}
		l.mu.Unlock()
	}
}

// register writes one instance, moving to the next node after a connection error.
func (l *rollingLoad) register(ctx context.Context, svc string, port int, next *int) error {
	backoff := time.NewTicker(20 * time.Millisecond)
	defer backoff.Stop()
	for attempt := 0; ; attempt++ {
		n := l.c.Nodes[*next%len(l.c.Nodes)]
		cl := n.Client()
		if cl != nil {
			rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			_, err := cl.RegisterInstance(rctx, "public", "DEFAULT_GROUP", svc, InstanceIP, port,
				api.InstanceRequest{Metadata: map[string]string{"n": strconv.Itoa(attempt)}})
			cancel()
			var apiErr *client.APIError
			switch {
			case err == nil:
				l.acked.Add(1)
				return nil
			case errors.As(err, &apiErr), ctx.Err() != nil:
				return fmt.Errorf("via %s: %w", n.ID, err)
			case errors.Is(err, context.DeadlineExceeded):
				return fmt.Errorf("via %s: no answer within 15s: %w", n.ID, err)
			}
			l.retried.Add(1)
		}
		*next++
		if attempt > 0 && attempt%len(l.c.Nodes) == 0 {
			select { // every node refused: back off before the next pass
			case <-backoff.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if attempt > 1000 {
			return fmt.Errorf("no node accepted a connection in %d attempts", attempt)
		}
	}
}

// leaderless samples every node's readiness and returns the longest stretch during
// which no running node named itself the leader.
func leaderless(ctx context.Context, c *Cluster) <-chan time.Duration {
	out := make(chan time.Duration, 1)
	go func() {
		var worst time.Duration
		var since time.Time // start of the current stretch without a leader
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			now := time.Now()
			led := false
			for _, n := range c.Nodes {
				cl := n.Client()
				if cl == nil {
					continue
				}
				rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				r, err := cl.Ready(rctx)
				cancel()
				if err == nil && r.Leader == n.ID {
					led = true
					break
				}
			}
			switch {
			case led && !since.IsZero():
				worst = max(worst, now.Sub(since))
				since = time.Time{}
			case !led && since.IsZero():
				since = now
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
		out <- worst
	}()
	return out
}

// TestRollingRestart_NoFailedWrite restarts every node of a 3-node cluster of real
// processes in turn with SIGTERM, followers first and the leader last, under a write
// load. Every write must succeed for writers that retry connection errors on another
// node, and every acknowledged registration must be there at the end. The longest time
// without an acknowledged write and without a leader are measured and logged (figures,
// not limits: docs/benchmarks.md).
func TestRollingRestart_NoFailedWrite(t *testing.T) {
	rollingRun(t, binary, "")
}

// TestRollingUpgrade_NoFailedWrite is the rolling restart as a rolling upgrade from each
// earlier release to this build: the cluster starts on the old release, and each node
// is restarted on the new binary in turn under the same write load, plus a writer of
// cluster settings (a command type v0.1.0 lacks: refused with upgrade_in_progress while
// a server of that release remains, accepted once none does). No registration may fail;
// a settings write may only succeed or be refused for the upgrade.
func TestRollingUpgrade_NoFailedWrite(t *testing.T) {
	for _, rel := range []Release{FirstRelease, PreviousRelease} {
		t.Run("from-"+rel.Version, func(t *testing.T) {
			rollingRun(t, releaseBinary(t, rel), binary)
		})
	}
}

// rollingRun runs the rolling restart on a cluster started on from; a non-empty to is
// the binary each node is restarted on (a rolling upgrade), which also runs the settings
// writer.
func rollingRun(t *testing.T, from, to string) {
	const writers = 8
	c, err := StartCluster(ClusterConfig{Binary: from, Dir: t.TempDir(), Nodes: 3, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	load := &rollingLoad{c: c, done: map[int]map[int]bool{}}
	for w := range writers {
		load.done[w] = map[int]bool{}
	}
	lctx, stopLoad := context.WithCancel(ctx)
	loadStart := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() { defer wg.Done(); load.run(lctx, w) }()
	}
	var settings *settingsLoad
	if to != "" {
		settings = &settingsLoad{c: c, to: to, refused: map[string]int{}}
		wg.Add(1)
		go func() { defer wg.Done(); settings.run(lctx) }()
	}
	defer func() { stopLoad(); wg.Wait() }()
	// Measure from the first acknowledged writes on.
	wait.For(t, 30*time.Second, "the load to start", func() bool { return load.acked.Load() >= 50 })
	load.mu.Lock()
	load.measure = true
	load.mu.Unlock()
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := leaderless(sctx, c)

	steps, restartErr := RestartEachNode(ctx, c, to, t.Logf)

	stopSampling()
	worstLeaderless := <-sampled
	if restartErr != nil {
		t.Fatal(restartErr)
	}
	if settings != nil {
		// Once every server runs the new build, settings writes are accepted again.
		upgraded := time.Now()
		wait.For(t, 20*time.Second, "a settings write accepted (or failed) after the upgrade", func() bool {
			_, _, failures := settings.summary()
			return settings.ackedAfter(upgraded) || len(failures) > 0
		})
	}
	load.mu.Lock()
	load.measure = false
	load.mu.Unlock()
	stopLoad()
	wg.Wait()
	loadTime := time.Since(loadStart)

	sum := RollingSummary{Writers: writers, Seconds: loadTime.Seconds(), Steps: steps, Acked: load.acked.Load(), Retried: load.retried.Load(),
		Failed: len(load.failures), Failures: load.failures,
		MaxAckGapMillis:     float64(load.maxGap.Microseconds()) / 1000,
		MaxLeaderlessMillis: float64(worstLeaderless.Microseconds()) / 1000}
	what := "rolling restart"
	if to != "" {
		what = "rolling upgrade from " + filepath.Base(from)
		sum.From = filepath.Base(from)
		sum.SettingsAcked, sum.SettingsRefused, sum.SettingsFailures = settings.summary()
		sum.Failed += len(sum.SettingsFailures)
	}
	settingsNote := ""
	if to != "" {
		settingsNote = fmt.Sprintf("; settings writes %d acknowledged, refused %v", sum.SettingsAcked, sum.SettingsRefused)
	}
	t.Logf("%s of 3 nodes under %d writers for %.1f s: %d writes acknowledged, %d connection errors retried on another node, %d failed; longest gap between acknowledged writes %.0f ms; longest time without a leader %.0f ms%s",
		what, writers, sum.Seconds, sum.Acked, sum.Retried, sum.Failed, sum.MaxAckGapMillis, sum.MaxLeaderlessMillis, settingsNote)
	if path := os.Getenv(envRollingSummary); path != "" {
		if sum.From != "" { // rolling-1.json -> rolling-1-from-roster-v0.1.0.json
			path = strings.TrimSuffix(path, ".json") + "-from-" + sum.From + ".json"
		}
		raw, _ := json.MarshalIndent(sum, "", "  ")
		if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
			t.Error(err)
		}
	}
	if len(load.failures) > 0 {
		sort.Strings(load.failures)
		t.Fatalf("%d writes failed during the %s, e.g. %q", len(load.failures), what, load.failures[:min(5, len(load.failures))])
	}
	if len(sum.SettingsFailures) > 0 {
		t.Fatalf("%d settings writes failed otherwise than refused for the upgrade during the %s, e.g. %q", len(sum.SettingsFailures), what, sum.SettingsFailures[:min(5, len(sum.SettingsFailures))])
	}
	var leader *Node
	if leader, err = c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	for w, ports := range load.done {
		resp, _, err := leader.Client().Instances(ctx, "public", "DEFAULT_GROUP", "rolling-"+strconv.Itoa(w), client.InstancesQuery{})
		if err != nil {
			t.Fatal(err)
		}
		have := map[int]bool{}
		for _, in := range resp.Instances {
			have[in.Port] = true
		}
		for p := range ports {
			if !have[p] {
				t.Errorf("writer %d: acknowledged registration of port %d is missing", w, p)
			}
		}
	}
}

// settingsLoad writes the cluster settings every 50 ms through the nodes already on the
// new binary (an older release may not have the route), in turn, retrying connection
// errors on the next node like rollingLoad. It counts answers by
// kind: acknowledged, refused by error code (upgrade_in_progress while an older server
// remains), and any other error as a failure.
type settingsLoad struct {
	c  *Cluster
	to string // the new binary

	mu       sync.Mutex
	acked    int
	lastAck  time.Time
	refused  map[string]int
	failures []string
}

func (l *settingsLoad) run(ctx context.Context) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i, next := 0, 0; ctx.Err() == nil; i++ {
		err := l.put(ctx, 1024+i%2, &next)
		if ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		var apiErr *client.APIError
		switch {
		case err == nil:
			l.acked++
			l.lastAck = time.Now()
		case errors.As(err, &apiErr) && apiErr.Code == api.CodeUpgradeInProgress:
			l.refused[apiErr.Code]++
		default:
			l.failures = append(l.failures, err.Error())
		}
		l.mu.Unlock()
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

// put sends one settings write, moving to the next node after a connection error.
func (l *settingsLoad) put(ctx context.Context, size int, next *int) error {
	for attempt := 0; attempt < 1000; attempt++ {
		n := l.c.Nodes[*next%len(l.c.Nodes)]
		*next++
		cl := n.Client()
		if cl == nil || l.c.Binary(n) != l.to {
			if attempt%len(l.c.Nodes) == len(l.c.Nodes)-1 {
				select { // no node on the new binary is up: wait a little
				case <-time.After(20 * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err := cl.UpdateSettings(rctx, api.SettingsRequest{MetadataMaxBytes: &size})
		cancel()
		var apiErr *client.APIError
		if err == nil || errors.As(err, &apiErr) || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("via %s: %w", n.ID, err)
			}
			return nil
		}
		select { // a connection error: the next node, after a pause
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("no node on the new binary accepted a connection in 1000 attempts")
}

// ackedAfter reports whether a settings write was acknowledged after t.
func (l *settingsLoad) ackedAfter(t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastAck.After(t)
}

func (l *settingsLoad) summary() (int, map[string]int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	refused := make(map[string]int, len(l.refused))
	for k, v := range l.refused {
		refused[k] = v
	}
	return l.acked, refused, append([]string(nil), l.failures...)
}
