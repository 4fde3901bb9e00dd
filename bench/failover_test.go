package bench

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// afterKillKey marks, in a request's context, a connection opened after the kill.
type afterKillKey struct{}

func TestFailover_MeasuresTimeToFirstWriteThroughSurvivor(t *testing.T) {
	st := newFakeStore()
	// Survivors refuse the first 20 writes of the probes after the leader dies, as a
	// cluster does while it elects a new leader; the dead leader drops connections. The
	// probes' client connects only after the kill, so a connection opened after it is a
	// probe's: the load writers, still running for a moment after the kill, must not use
	// up the refusals (then no probe would fail).
	var dead atomic.Bool
	var refusals atomic.Int64
	leaderInner := newFakeRoster(t, st)
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dead.Load() {
			panic(http.ErrAbortHandler)
		}
		leaderInner.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(leader.Close)
	mkSurvivor := func() *httptest.Server {
		inner := newFakeRoster(t, st)
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if afterKill, _ := r.Context().Value(afterKillKey{}).(bool); afterKill && refusals.Add(1) <= 20 {
				http.Error(w, `{"error":{"code":"no_leader"}}`, http.StatusServiceUnavailable)
				return
			}
			inner.Config.Handler.ServeHTTP(w, r)
		}))
		srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, afterKillKey{}, dead.Load())
		}
		srv.Start()
		t.Cleanup(srv.Close)
		return srv
	}
	s1, s2 := mkSurvivor(), mkSurvivor()
	var killed atomic.Int64
	res, err := Failover(testCtx(t), FailoverConfig{
		System:    SystemRoster,
		Endpoints: []string{leader.URL, s1.URL, s2.URL},
		Leader:    leader.URL,
		KillPID:   4242,
		Load:      100 * time.Millisecond,
		Kill: func(pid int) error {
			killed.Store(int64(pid))
			dead.Store(true)
			leader.CloseClientConnections()
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if killed.Load() != 4242 {
		t.Fatalf("killed %d", killed.Load())
	}
	if res.LoadWrites == 0 || res.Seconds <= 0 || res.Seconds > 10 {
		t.Fatalf("result %+v", res)
	}
	if res.Survivor != s1.URL && res.Survivor != s2.URL {
		t.Fatalf("first write through %q, not a survivor", res.Survivor)
	}
	if res.FailedAfterKill == 0 || res.FailedAfterKill > 20 || !strings.Contains(res.LastError, "503") {
		t.Fatalf("failed after kill %d (last %q), want the refusals", res.FailedAfterKill, res.LastError)
	}
}

func TestFailover_RejectsLeaderOutsideEndpoints(t *testing.T) {
	_, err := Failover(testCtx(t), FailoverConfig{System: SystemRoster, Endpoints: []string{"127.0.0.1:1", "127.0.0.1:2"}, Leader: "127.0.0.1:3", KillPID: 1})
	if err == nil {
		t.Fatal("accepted")
	}
}

func TestSummarizeFailover_MedianMaxPerSystem(t *testing.T) {
	trials := []FailoverResult{
		{System: SystemRoster, Seconds: 1.5}, {System: SystemEtcd, Seconds: 1.1}, {System: SystemRoster, Seconds: 3.0},
		{System: SystemRoster, Seconds: 2.0}, {System: SystemEtcd, Seconds: 0.9}, {System: SystemRoster, LastError: "timeout"},
	}
	sums := SummarizeFailover(trials)
	if len(sums) != 2 || sums[0].System != SystemRoster || sums[1].System != SystemEtcd {
		t.Fatalf("summaries %+v", sums)
	}
	r, e := sums[0], sums[1]
	if r.Trials != 4 || r.Failed != 1 || r.Median != 2.0 || r.Max != 3.0 || r.Min != 1.5 || r.Failures[0] != "timeout" {
		t.Errorf("roster %+v", r)
	}
	if e.Trials != 2 || e.Median != 1.0 || e.Max != 1.1 {
		t.Errorf("etcd %+v", e)
	}
	var buf strings.Builder
	if err := WriteFailoverTable(&buf, sums); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "2.000") || !strings.Contains(buf.String(), "median s") {
		t.Errorf("table:\n%s", buf.String())
	}
}
