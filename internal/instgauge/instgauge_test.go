package instgauge

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	s, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
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
