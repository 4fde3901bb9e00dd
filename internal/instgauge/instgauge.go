// Package instgauge keeps the gauges of registered instances by health —
// roster_instances{namespace,group,service,health} — from a node's applied state. Every
// node runs it, leader or not: it follows the store's change feed, so the gauges move
// as each entry is applied there.
package instgauge

import (
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/internal/prom"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// Source is the applied state (*store.Store implements it).
type Source interface {
	// ForEachInstanceHealth calls fn for every instance from one consistent view; fn
	// must not call the Source.
	ForEachInstanceHealth(fn func(ih store.InstanceHealth, hc *model.HealthCheck) bool) error
	Subscribe(buffer int) (<-chan []store.Event, func())
}

// Health label values.
const (
	Healthy   = "healthy"
	Unhealthy = "unhealthy"
)

// feedBuffer is the change-feed buffer, in commits; a gauge that falls behind rescans.
const feedBuffer = 1024

// key is what one pair of series counts: a service, or a namespace when per-service
// labels are off.
type key struct{ ns, group, service string }

// addr is an instance's address within its service.
type addr struct {
	ip   string
	port int
}

// healthMap is the health of every instance, by service then address: a registry
// holds as many entries as instances, and keying them by a whole InstanceRef (four
// strings and a port) made the map three times as large.
type healthMap map[model.ServiceKey]map[addr]bool

func (m healthMap) get(ref model.InstanceRef) (healthy, ok bool) {
	healthy, ok = m[ref.ServiceKey()][addr{ref.IP, ref.Port}]
	return healthy, ok
}

func (m healthMap) set(ref model.InstanceRef, healthy bool) {
	svc := ref.ServiceKey()
	byAddr := m[svc]
	if byAddr == nil {
		byAddr = make(map[addr]bool)
		m[svc] = byAddr
	}
	byAddr[addr{ref.IP, ref.Port}] = healthy
}

func (m healthMap) delete(ref model.InstanceRef) {
	svc := ref.ServiceKey()
	if byAddr := m[svc]; byAddr != nil {
		delete(byAddr, addr{ref.IP, ref.Port})
		if len(byAddr) == 0 {
			delete(m, svc)
		}
	}
}

// Gauges counts instances by health. Create it with New and Run it once.
type Gauges struct {
	src        Source
	log        *slog.Logger
	perService bool
	vec        *prometheus.GaugeVec

	mu     sync.Mutex
	health healthMap
	counts map[key]*[2]int // [healthy, unhealthy]
}

// New registers the gauge on reg. With perService the series are labelled namespace,
// group, service and health (two series per service with instances); without, namespace
// and health only (two per namespace), for registries with many services.
func New(src Source, reg prometheus.Registerer, perService bool, logger *slog.Logger) (*Gauges, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	labels := []string{"namespace", "health"}
	help := "Registered instances in this node's applied state, by namespace and health."
	if perService {
		labels = []string{"namespace", "group", "service", "health"}
		help = "Registered instances in this node's applied state, by service and health."
	}
	g := &Gauges{
		src: src, log: logger, perService: perService,
		vec:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "roster_instances", Help: help}, labels),
		health: make(healthMap),
		counts: make(map[key]*[2]int),
	}
	pg := prom.On(reg)
	prom.Add(pg, &g.vec)
	if err := pg.Err(); err != nil {
		return nil, err
	}
	return g, nil
}

// Run subscribes to the change feed, counts the state, then follows the feed until stop
// is closed or the feed ends (the store closed).
func (g *Gauges) Run(stop <-chan struct{}) {
	events, cancel := g.src.Subscribe(feedBuffer)
	defer cancel()
	g.rescan()
	for {
		select {
		case <-stop:
			return
		case evs, ok := <-events:
			if !ok {
				return
			}
			g.apply(evs)
		}
	}
}

// rescan recounts the whole state (at the start and after the feed dropped events).
// Events of commits the scan already saw may follow; applying them again converges on
// the same counts, since each carries an instance's whole state.
func (g *Gauges) rescan() {
	health := make(healthMap)
	err := g.src.ForEachInstanceHealth(func(ih store.InstanceHealth, _ *model.HealthCheck) bool {
		health.set(ih.Ref, ih.Healthy)
		return true
	})
	if err != nil {
		g.log.Error("instance gauges: reading the state failed; they stay as they were until the next reset", "err", err)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.vec.Reset()
	g.health = health
	g.counts = make(map[key]*[2]int)
	for svc, byAddr := range health {
		for _, h := range byAddr {
			g.addTo(svc, h, 1)
		}
	}
	for k := range g.counts {
		g.publish(k)
	}
}

func (g *Gauges) apply(evs []store.Event) {
	for _, ev := range evs {
		switch ev.Kind {
		case store.EventReset:
			g.rescan()
			continue
		case store.EventInstanceUpsert, store.EventInstanceDelete:
		default:
			continue
		}
		g.mu.Lock()
		old, had := g.health.get(ev.Ref)
		switch {
		case ev.Kind == store.EventInstanceDelete && had:
			g.health.delete(ev.Ref)
			g.publish(g.add(ev.Ref, old, -1))
		case ev.Kind == store.EventInstanceUpsert && (!had || old != ev.Instance.Healthy):
			if had {
				g.add(ev.Ref, old, -1)
			}
			g.health.set(ev.Ref, ev.Instance.Healthy)
			g.publish(g.add(ev.Ref, ev.Instance.Healthy, 1))
		}
		g.mu.Unlock()
	}
}

// add counts delta instances of ref's service with health h and returns the key.
func (g *Gauges) add(ref model.InstanceRef, h bool, delta int) key {
	return g.addTo(ref.ServiceKey(), h, delta)
}

// addTo counts delta instances of svc with health h and returns the key.
func (g *Gauges) addTo(svc model.ServiceKey, h bool, delta int) key {
	k := key{ns: svc.Namespace}
	if g.perService {
		k.group, k.service = svc.Group, svc.Service
	}
	c := g.counts[k]
	if c == nil {
		c = new([2]int)
		g.counts[k] = c
	}
	i := 0
	if !h {
		i = 1
	}
	c[i] += delta
	return k
}

// publish sets the two series of k, or deletes them once k has no instances left.
func (g *Gauges) publish(k key) {
	c := g.counts[k]
	labels := func(health string) []string {
		if g.perService {
			return []string{k.ns, k.group, k.service, health}
		}
		return []string{k.ns, health}
	}
	if c == nil || c[0]+c[1] <= 0 {
		delete(g.counts, k)
		g.vec.DeleteLabelValues(labels(Healthy)...)
		g.vec.DeleteLabelValues(labels(Unhealthy)...)
		return
	}
	g.vec.WithLabelValues(labels(Healthy)...).Set(float64(c[0]))
	g.vec.WithLabelValues(labels(Unhealthy)...).Set(float64(c[1]))
}
