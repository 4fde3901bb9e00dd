// Package prom holds the Prometheus helpers Roster's packages share: every collector is
// registered through Register, which reuses an equal collector registered earlier and
// returns any other error (no MustRegister, no bare Registerer.Register). A package
// registers its collectors as one Group:
//
//	g := prom.On(reg)
//	prom.Add(g, &m.requests, &m.errors) // *prometheus.CounterVec fields
//	prom.Add(g, &m.inFlight)            // a prometheus.Gauge field
//	return m, g.Err()
package prom

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg, or returns the equal collector registered there earlier
// (by another handler, prober or term sharing the registry).
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// Group registers a package's collectors on one registry and keeps the first error. A
// Group on a nil registry registers nothing (collectors that only count locally).
type Group struct {
	reg prometheus.Registerer
	err error
}

// On starts a Group on reg (nil: nothing is registered).
func On(reg prometheus.Registerer) *Group { return &Group{reg: reg} }

// Add registers each *c through Register and points it at the collector in use (the
// equal one registered earlier, if any). After an error it does nothing.
func Add[C prometheus.Collector](g *Group, cs ...*C) {
	for _, c := range cs {
		if g.reg == nil || g.err != nil {
			return
		}
		*c, g.err = Register(g.reg, *c)
	}
}

// Err is the first error of the Group's registrations.
func (g *Group) Err() error { return g.err }
