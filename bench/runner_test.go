package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer answers 500 to every third request and tracks the peak number of
// requests in flight; each request takes about delay.
type countingServer struct {
	inFlight, peak, total atomic.Int64
	delay                 time.Duration
}

func (s *countingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	timer := time.NewTimer(s.delay)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-r.Context().Done():
	}
	if s.total.Add(1)%3 == 0 {
		http.Error(w, "boom", http.StatusInternalServerError)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

func TestRun_RespectsDurationConcurrencyAndCountsErrors(t *testing.T) {
	cs := &countingServer{delay: 2 * time.Millisecond}
	srv := httptest.NewServer(cs)
	defer srv.Close()
	h := newHTTP(5*time.Second, 64)
	defer h.close()
	op := func(ctx context.Context, _ int) error {
		_, _, err := h.do(ctx, http.MethodGet, srv.URL, nil)
		return err
	}
	const workers = 8
	begin := time.Now()
	st, err := Run(testCtx(t), RunConfig{Workers: workers, Warmup: 100 * time.Millisecond, Duration: 400 * time.Millisecond}, op)
	took := time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	if st.Elapsed != 400*time.Millisecond {
		t.Errorf("window %v, want 400ms", st.Elapsed)
	}
	if took < 500*time.Millisecond || took > 3*time.Second {
		t.Errorf("run took %v, want warm-up + duration (500ms) plus little", took)
	}
	if p := cs.peak.Load(); p != workers {
		t.Errorf("peak in-flight %d, want exactly %d workers", p, workers)
	}
	total := st.Requests + st.Errors
	if total == 0 {
		t.Fatal("no requests counted")
	}
	// The server fails one request in three; the window holds most but not all requests.
	if frac := float64(st.Errors) / float64(total); frac < 0.25 || frac > 0.42 {
		t.Errorf("error fraction %.2f (errors %d of %d), want about 1/3", frac, st.Errors, total)
	}
	if total >= uint64(cs.total.Load()) {
		t.Errorf("counted %d of %d server requests: warm-up requests must not be counted", total, cs.total.Load())
	}
	if st.Latency.Count() != st.Requests {
		t.Errorf("latency samples %d, successes %d", st.Latency.Count(), st.Requests)
	}
	if st.Latency.Percentile(0.5) < 2*time.Millisecond {
		t.Errorf("p50 %v below the server's delay", st.Latency.Percentile(0.5))
	}
	if got := st.Throughput(); got < float64(st.Requests)/0.41 || got > float64(st.Requests)/0.39 {
		t.Errorf("throughput %.1f for %d requests in 400ms", got, st.Requests)
	}
	if len(st.ErrorKind) != 1 || !strings.Contains(st.ErrorSamples()[0], "http 500") {
		t.Errorf("error kinds %v", st.ErrorSamples())
	}
}

func TestRun_ExhaustionEndsWindowEarly(t *testing.T) {
	var n atomic.Int64
	op := func(ctx context.Context, _ int) error {
		if n.Add(1) > 200 {
			return ErrExhausted
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	}
	st, err := Run(testCtx(t), RunConfig{Workers: 4, Warmup: 10 * time.Millisecond, Duration: 10 * time.Second}, op)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Exhausted {
		t.Fatal("Exhausted not set")
	}
	if st.Elapsed >= 5*time.Second {
		t.Fatalf("window %v not cut short", st.Elapsed)
	}
	if st.Requests == 0 || st.Requests > 200 {
		t.Fatalf("requests %d", st.Requests)
	}
}

func TestRun_ExhaustedDuringWarmupIsAnError(t *testing.T) {
	op := func(context.Context, int) error { return ErrExhausted }
	_, err := Run(testCtx(t), RunConfig{Workers: 2, Warmup: time.Second, Duration: time.Second}, op)
	if err == nil || !strings.Contains(err.Error(), "warm-up") {
		t.Fatalf("err %v, want an exhausted-during-warm-up error", err)
	}
}

func TestRun_RejectsBadConfig(t *testing.T) {
	op := func(context.Context, int) error { return nil }
	for _, cfg := range []RunConfig{{Workers: 0, Duration: time.Second}, {Workers: 1}, {Workers: 1, Duration: time.Second, Warmup: -1}} {
		if _, err := Run(testCtx(t), cfg, op); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

func TestRun_ErrorKindsAreBounded(t *testing.T) {
	var n atomic.Int64
	op := func(context.Context, int) error { return fmt.Errorf("err %d", n.Add(1)) }
	st, err := Run(testCtx(t), RunConfig{Workers: 2, Duration: 50 * time.Millisecond, MaxErrorKinds: 3}, op)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ErrorKind) != 3 || st.Errors < 3 {
		t.Fatalf("kinds %d errors %d", len(st.ErrorKind), st.Errors)
	}
	if st.Requests != 0 {
		t.Fatalf("successes %d", st.Requests)
	}
}

func TestRun_StopsOnContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int64
	op := func(ctx context.Context, _ int) error {
		if calls.Add(1) == 10 {
			cancel()
		}
		return nil
	}
	_, err := Run(ctx, RunConfig{Workers: 1, Duration: time.Minute}, op)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}
