package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestRunSuite_EveryWorkloadAgainstBothSystems(t *testing.T) {
	for _, variant := range []struct{ system, transport string }{
		{SystemRoster, WatchBlocking}, {SystemRoster, WatchSSE}, {SystemEtcd, ""},
	} {
		system := variant.system
		t.Run(system+" "+variant.transport, func(t *testing.T) {
			st := newFakeStore()
			var eps []string
			if system == SystemRoster {
				eps = []string{newFakeRoster(t, st).URL}
			} else {
				eps = []string{newFakeEtcd(t, st, "9", "9").URL}
			}
			modes := []string{Linearizable, Stale}
			want := 20 // register, deregister, 4 reads, 2 mixed, 2 watch — each at 2 concurrencies
			watchPoint := "watch stale all"
			if system == SystemRoster {
				watchPoint += " " + variant.transport
			}
			if variant.transport == WatchSSE {
				modes = []string{Stale} // the SSE watch serves stale state only
				want = 12
			}
			cfg := SuiteConfig{
				Client:        ClientConfig{System: system, Endpoints: eps, ReadTarget: TargetAll, WatchTransport: variant.transport},
				Workloads:     []string{WorkloadRegister, WorkloadDeregister, WorkloadRead, WorkloadMixed, WorkloadWatch},
				Consistencies: modes,
				Instances:     []int{10, 100},
				Concurrency:   []int{1, 4},
				Duration:      100 * time.Millisecond,
				Services:      5,
				Pool:          50,
				CPUPids:       []int{0},
				Label:         "r1",
			}
			var progress bytes.Buffer
			rs, err := RunSuite(testCtx(t), cfg, &progress)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != want {
				t.Fatalf("%d results, want %d", len(rs), want)
			}
			names := map[string]bool{}
			for _, r := range rs {
				names[r.PointName()] = true
				if r.System != system || r.Label != "r1" {
					t.Errorf("result %+v", r)
				}
				if r.Requests == 0 {
					t.Errorf("%s c=%d: no requests (errors %v)", r.PointName(), r.Concurrency, r.ErrorSamples)
				}
				if r.Errors != 0 {
					t.Errorf("%s c=%d: errors %v", r.PointName(), r.Concurrency, r.ErrorSamples)
				}
				if r.ServerCPU < 0 {
					t.Errorf("%s: server cpu not measured", r.PointName())
				}
				if r.Workload == WorkloadWatch && r.WatchTransport != variant.transport {
					t.Errorf("%s: watch transport %q, want %q", r.PointName(), r.WatchTransport, variant.transport)
				}
			}
			for _, want := range []string{"register", "deregister", "read-10 stale all", "read-100 stale all", "mixed stale all", watchPoint} {
				if !names[want] {
					t.Errorf("no point %q in %v", want, names)
				}
			}
			if !strings.Contains(progress.String(), "read-100 stale all") {
				t.Errorf("progress lacks rows:\n%s", progress.String())
			}
			// Read setup left exactly the service sizes asked for.
			if n := st.count("bench-read-100"); n != 100 {
				t.Errorf("bench-read-100 holds %d", n)
			}
		})
	}
}

func TestPrepare_RegisterWritesDistinctInstances(t *testing.T) {
	st := newFakeStore()
	c := mustNewClient(t, ClientConfig{System: SystemRoster, Endpoints: []string{newFakeRoster(t, st).URL}})
	ctx := testCtx(t)
	plan, err := Prepare(ctx, c, Spec{Workload: WorkloadRegister, Services: 3}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		if err := plan.Op(ctx, i%2); err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for i := 0; i < 3; i++ {
		n := st.count("bench-svc-00" + string(rune('0'+i)))
		if n != 10 {
			t.Errorf("service %d holds %d instances, want 10", i, n)
		}
		total += n
	}
	if total != 30 {
		t.Fatalf("%d distinct instances, want 30", total)
	}
	// The services' health checks were turned off before registering.
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.checks) != 3 || st.checks["bench-svc-002"] != "NONE" {
		t.Fatalf("health checks %v, want NONE on the 3 services", st.checks)
	}
}

func TestRunSuite_RegisterLimitRegistersExactlyThatMany(t *testing.T) {
	st := newFakeStore()
	cfg := SuiteConfig{
		Client:        ClientConfig{System: SystemRoster, Endpoints: []string{newFakeRoster(t, st).URL}},
		Workloads:     []string{WorkloadRegister},
		Concurrency:   []int{8},
		Duration:      time.Minute, // the limit ends the point long before
		Services:      3,
		RegisterLimit: 250,
	}
	rs, err := RunSuite(testCtx(t), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Requests still in flight when the limit is reached complete after the window
	// and are not counted; every one of them was registered.
	if len(rs) != 1 || !rs[0].Exhausted || rs[0].Requests > 250 || rs[0].Errors != 0 {
		t.Fatalf("results %+v, want one exhausted point of at most 250 registrations", rs)
	}
	total := 0
	for i := 0; i < 3; i++ {
		total += st.count("bench-svc-00" + string(rune('0'+i)))
	}
	if total != 250 {
		t.Fatalf("%d instances registered, want 250", total)
	}
}

func TestPrepare_KeepsHealthChecksWhenAsked(t *testing.T) {
	st := newFakeStore()
	c := mustNewClient(t, ClientConfig{System: SystemRoster, Endpoints: []string{newFakeRoster(t, st).URL}, HealthChecks: true})
	if _, err := Prepare(testCtx(t), c, Spec{Workload: WorkloadRead, Instances: 10}, 1); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.checks) != 0 {
		t.Fatalf("health checks changed: %v", st.checks)
	}
}

func TestPrepare_DeregisterDrainsPoolThenExhausts(t *testing.T) {
	st := newFakeStore()
	c := mustNewClient(t, ClientConfig{System: SystemEtcd, Endpoints: []string{newFakeEtcd(t, st, "1", "1").URL}})
	ctx := testCtx(t)
	// Two instances exist already; the pool is topped up to 5.
	for i := 0; i < 2; i++ {
		if _, err := c.Register(ctx, 0, fixedKey("bench-svc-000", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := Prepare(ctx, c, Spec{Workload: WorkloadDeregister, Services: 2, Pool: 5}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := plan.Op(ctx, 0); err != nil {
			t.Fatalf("deregister %d: %v", i, err)
		}
	}
	if err := plan.Op(ctx, 0); err != ErrExhausted {
		t.Fatalf("sixth op: %v, want ErrExhausted", err)
	}
	if st.count("bench-svc-000")+st.count("bench-svc-001") != 0 {
		t.Fatal("instances left after draining the pool")
	}
}

func TestPrepare_ReadFailsOnWrongInstanceCount(t *testing.T) {
	st := newFakeStore()
	c := mustNewClient(t, ClientConfig{System: SystemRoster, Endpoints: []string{newFakeRoster(t, st).URL}})
	ctx := testCtx(t)
	plan, err := Prepare(ctx, c, Spec{Workload: WorkloadRead, Instances: 10, Consistency: Stale}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Op(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Register(ctx, 0, fixedKey("bench-read-10", 50), 1); err != nil {
		t.Fatal(err)
	}
	if err := plan.Op(ctx, 0); err == nil || !strings.Contains(err.Error(), "read 11 instances, want 10") {
		t.Fatalf("err %v", err)
	}
	// Setup again removes the extra instance.
	if _, err := Prepare(ctx, c, Spec{Workload: WorkloadRead, Instances: 10}, 1); err != nil {
		t.Fatal(err)
	}
	if n := st.count("bench-read-10"); n != 10 {
		t.Fatalf("setup left %d instances", n)
	}
}

func TestSuiteConfig_RejectsUnknownNames(t *testing.T) {
	base := SuiteConfig{Workloads: []string{WorkloadRead}, Concurrency: []int{1}, Duration: time.Second}
	bad := []func(*SuiteConfig){
		func(c *SuiteConfig) { c.Workloads = []string{"scan"} },
		func(c *SuiteConfig) { c.Consistencies = []string{"strong"} },
		func(c *SuiteConfig) { c.Concurrency = nil },
		func(c *SuiteConfig) { c.Concurrency = []int{0} },
		func(c *SuiteConfig) { c.Instances = []int{-1} },
		func(c *SuiteConfig) { c.Duration = 0 },
	}
	for i, mut := range bad {
		c := base
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
	c := base
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestPrepare_WatchFailsAtOnceWithoutSSE checks that a server without the SSE watch ends
// the watch setup with the reason, instead of retrying until the setup's deadline.
func TestPrepare_WatchFailsAtOnceWithoutSSE(t *testing.T) {
	st := newFakeStore()
	srv := newFakeRosterSSE(t, st, fakeSSE{off: true})
	c := mustNewClient(t, ClientConfig{System: SystemRoster, Endpoints: []string{srv.URL}})
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Second)
	defer cancel()
	_, err := Prepare(ctx, c, Spec{Workload: WorkloadWatch, Consistency: Stale}, 4)
	if err == nil || !strings.Contains(err.Error(), "does not serve the SSE watch") || !strings.Contains(err.Error(), "--watch-transport blocking") {
		t.Fatalf("err %v, want the server's lack of the SSE watch", err)
	}
}
