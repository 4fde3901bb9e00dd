package healthcheck

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
)

func TestManager_RunsOneProberPerTerm(t *testing.T) {
	src := newFakeSource()
	src.setCheck(testSvc, model.DefaultCluster, tcpCheck(10*time.Second, 2, 3), false)
	in := src.register(inst("127.100.0.1", 8080, true), false)
	reg := prometheus.NewRegistry()
	fnet := newFakeNet()
	m, err := NewManager(Config{Registerer: reg, Clock: newFakeClock(), Dial: fnet.dial}, src, &fakeApplier{src: src}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rs, running := m.Results(testSvc); running || rs != nil {
		t.Fatalf("Results before any term = %v, %v", rs, running)
	}
	for term := 1; term <= 2; term++ {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.Run(ctx)
		}()
		wait.For(t, 5*time.Second, "prober running", func() bool {
			rs, running := m.Results(testSvc)
			return running && len(rs) == 1 && rs[0].IP == in.IP
		})
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("term %d: Run did not return", term)
		}
		if _, running := m.Results(testSvc); running {
			t.Fatalf("term %d: running after Run returned", term)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, want := range []string{"roster_health_probe_targets", "roster_health_probes_in_flight"} {
		if !names[want] {
			t.Fatalf("metric %s not registered; have %v", want, names)
		}
	}
}

func TestNewProber_SharesRegisteredMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	src, app := newFakeSource(), &fakeApplier{}
	p1 := mustNewProber(t, Config{Registerer: reg}, src, app)
	p2 := mustNewProber(t, Config{Registerer: reg}, src, app)
	if p1.met.skipped != p2.met.skipped {
		t.Fatal("second prober did not reuse the registered collectors")
	}
	if _, err := NewManager(Config{Registerer: reg}, src, app, nil); err != nil {
		t.Fatalf("NewManager on the same registry: %v", err)
	}
}

func TestConfig_Validate(t *testing.T) {
	var c Config
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.MaxConcurrent != DefaultMaxConcurrent || c.FlushInterval != DefaultFlushInterval ||
		c.MaxBatch != DefaultMaxBatch || c.MaxBodyBytes != DefaultMaxBodyBytes || c.Clock == nil {
		t.Fatalf("defaults not filled: %+v", c)
	}
	bad := []Config{
		{MaxConcurrent: -1},
		{MaxConcurrent: MaxConcurrentLimit + 1},
		{MaxBatch: MaxBatchLimit + 1},
		{FlushInterval: 250 * time.Millisecond},
		{FlushInterval: -time.Millisecond},
		{MaxBatch: -1},
		{MaxBodyBytes: -1},
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("Validate(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}
	if _, err := NewManager(Config{FlushInterval: time.Second}, newFakeSource(), &fakeApplier{}, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NewManager with a bad config: %v", err)
	}
}
