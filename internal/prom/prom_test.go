package prom

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func newCounter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "roster_test_total", Help: "h"})
}

// A second Group on the same registry reuses the first one's collectors, so both count
// into the one series; a Group on a nil registry registers nothing; a conflicting
// collector is the Group's error and stops it.
func TestGroup_ReusesRegisteredCollectorsAndKeepsTheFirstError(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := newCounter(), newCounter()
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "roster_test_by_total", Help: "h"}, []string{"l"})
	g := On(reg)
	Add(g, &a)
	Add(g, &vec)
	if g.Err() != nil {
		t.Fatal(g.Err())
	}
	g2 := On(reg)
	Add(g2, &b)
	if g2.Err() != nil || b != a {
		t.Fatalf("second registration: err %v, reused %v", g2.Err(), b == a)
	}
	b.Inc()
	a.Inc()
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetMetric()[0].GetCounter().GetValue() != 2 {
		t.Fatalf("gathered %v (%v), want one counter at 2", mfs, err)
	}

	c := newCounter()
	Add(On(nil), &c)
	if c == a {
		t.Fatal("a Group on no registry swapped the collector")
	}

	clash := prometheus.NewGauge(prometheus.GaugeOpts{Name: "roster_test_total", Help: "other help"})
	later := prometheus.NewGauge(prometheus.GaugeOpts{Name: "roster_test_later", Help: "h"})
	g3 := On(reg)
	Add(g3, &clash, &later)
	if g3.Err() == nil || !strings.Contains(g3.Err().Error(), "roster_test_total") {
		t.Fatalf("conflicting collector: err %v", g3.Err())
	}
	if n, _ := reg.Gather(); len(n) != 1 {
		t.Fatalf("registered after the error: %d families", len(n))
	}
}
