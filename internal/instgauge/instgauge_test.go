package instgauge

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/internal/storetest"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// series gathers roster_instances as "label=value,...": value.
func series(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "roster_instances" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var parts []string
			for _, l := range m.GetLabel() {
				parts = append(parts, l.GetName()+"="+l.GetValue())
			}
			out[strings.Join(parts, ",")] = m.GetGauge().GetValue()
		}
	}
	return out
}

func instance(svc, ip string, healthy bool) model.Instance {
	return model.Instance{Namespace: "public", Group: "DEFAULT_GROUP", Service: svc, IP: ip, Port: 80,
		Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: healthy}
}

func TestGauges_FollowTheAppliedState(t *testing.T) {
	s := storetest.Open(t)
	idx := uint64(0)
	next := func() uint64 { idx++; return idx }
	// Present before the gauge starts: counted by the initial scan.
	a := instance("orders", "127.0.0.1", true)
	if err := s.RegisterInstance(next(), a); err != nil {
		t.Fatal(err)
	}

	for _, perService := range []bool{true, false} {
		reg := prometheus.NewRegistry()
		g, err := New(s, reg, perService, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { defer close(done); g.Run(stop) }()

		lbl := func(svc, health string) string {
			if perService {
				return "group=DEFAULT_GROUP,health=" + health + ",namespace=public,service=" + svc
			}
			return "health=" + health + ",namespace=public"
		}
		expect := func(what string, want map[string]float64) {
			t.Helper()
			wait.For(t, 5*time.Second, what, func() bool {
				got := series(t, reg)
				if len(got) != len(want) {
					return false
				}
				for k, v := range want {
					if got[k] != v {
						return false
					}
				}
				return true
			})
		}
		expect("the initial scan", map[string]float64{lbl("orders", Healthy): 1, lbl("orders", Unhealthy): 0})

		b := instance("orders", "127.0.0.2", true)
		c := instance("billing", "127.0.0.3", false)
		if err := s.RegisterInstance(next(), b); err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterInstance(next(), c); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetHealthAt(next(), []model.HealthUpdate{{Ref: a.Ref(), Epoch: 1, Healthy: false}}, 1); err != nil {
			t.Fatal(err)
		}
		if perService {
			expect("registrations and a health change", map[string]float64{
				lbl("orders", Healthy): 1, lbl("orders", Unhealthy): 1,
				lbl("billing", Healthy): 0, lbl("billing", Unhealthy): 1,
			})
		} else {
			expect("registrations and a health change", map[string]float64{lbl("", Healthy): 1, lbl("", Unhealthy): 2})
		}
		// Deregistered: a service with no instances left has no series.
		if err := s.DeregisterInstance(next(), c.Ref()); err != nil {
			t.Fatal(err)
		}
		if err := s.DeregisterInstance(next(), b.Ref()); err != nil {
			t.Fatal(err)
		}
		expect("deregistrations", map[string]float64{lbl("orders", Healthy): 0, lbl("orders", Unhealthy): 1})
		// Back to the starting state for the next round.
		if err := s.RegisterInstance(next(), a); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetHealthAt(next(), []model.HealthUpdate{{Ref: a.Ref(), Epoch: 1, Healthy: true}}, 2); err != nil {
			t.Fatal(err)
		}
		expect("healthy again", map[string]float64{lbl("orders", Healthy): 1, lbl("orders", Unhealthy): 0})
		close(stop)
		<-done
	}
}

// After a reset (events dropped, or a restore) the gauge recounts the state: instances
// whose events it never saw are counted, and removed ones forgotten.
func TestGauges_RescanOnResetRecounts(t *testing.T) {
	s := storetest.Open(t)
	reg := prometheus.NewRegistry()
	g, err := New(s, reg, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ins []model.Instance
	for i := range 30 {
		in := instance([]string{"orders", "billing", "users"}[i%3], "127.0.1."+strconv.Itoa(i+1), i%5 > 1)
		if err := s.RegisterInstance(uint64(i+1), in); err != nil {
			t.Fatal(err)
		}
		ins = append(ins, in)
	}
	g.rescan()
	lbl := func(svc, health string) string {
		return "group=DEFAULT_GROUP,health=" + health + ",namespace=public,service=" + svc
	}
	want := map[string]float64{
		lbl("orders", Healthy): 6, lbl("orders", Unhealthy): 4,
		lbl("billing", Healthy): 6, lbl("billing", Unhealthy): 4,
		lbl("users", Healthy): 6, lbl("users", Unhealthy): 4,
	}
	if got := series(t, reg); !equalSeries(got, want) {
		t.Fatalf("after the scan: %v, want %v", got, want)
	}
	// Changes whose events were dropped: every billing instance goes, one orders
	// instance is added.
	for i, in := range ins {
		if in.Service == "billing" {
			if err := s.DeregisterInstance(uint64(100+i), in.Ref()); err != nil {
				t.Fatal(err)
			}
		}
	}
	extra := instance("orders", "127.0.2.1", false)
	if err := s.RegisterInstance(200, extra); err != nil {
		t.Fatal(err)
	}
	g.apply([]store.Event{{Kind: store.EventReset}})
	want = map[string]float64{
		lbl("orders", Healthy): 6, lbl("orders", Unhealthy): 5,
		lbl("users", Healthy): 6, lbl("users", Unhealthy): 4,
	}
	if got := series(t, reg); !equalSeries(got, want) {
		t.Fatalf("after the reset: %v, want %v", got, want)
	}
	n := 0
	for _, byAddr := range g.health {
		n += len(byAddr)
	}
	if n != 21 || len(g.health) != 2 {
		t.Fatalf("the gauge keeps %d instances of %d services, want 21 of 2", n, len(g.health))
	}
	// Events after the rescan apply to the recounted state.
	if err := s.DeregisterInstance(201, extra.Ref()); err != nil {
		t.Fatal(err)
	}
	g.apply([]store.Event{{Kind: store.EventInstanceDelete, Ref: extra.Ref(), Instance: extra}})
	if got := series(t, reg)[lbl("orders", Unhealthy)]; got != 4 {
		t.Fatalf("orders unhealthy = %v after a deregistration, want 4", got)
	}
}

func equalSeries(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if w, ok := a[k]; !ok || w != v {
			return false
		}
	}
	return true
}
