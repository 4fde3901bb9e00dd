package healthcheck

import (
	"container/heap"
	"time"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// rescan makes the targets match the source exactly: new instances are added, gone ones
// dropped, instances with a new epoch or spec start afresh, and the others keep their
// counters and phase.
//
// It streams: each instance read updates its target at once and marks it with the
// scan's number, and the targets left unmarked are dropped at the end, so a rescan
// holds no copy of the registry. On error no target is dropped; those read before the
// error are up to date (they were read from the committed state) and the caller
// retries.
func (p *Prober) rescan(now time.Time) error {
	p.scans++
	scan := p.scans
	old := p.clusters
	clusters := make(map[clusterKey]*spec, len(old))
	var (
		lastKey clusterKey
		lastSp  *spec
	)
	err := p.src.ForEachInstanceHealth(func(ih store.InstanceHealth, hc *model.HealthCheck) bool {
		// Instances come in key order, so mostly from the cluster of the one before.
		k := clusterKey{ih.Ref.ServiceKey(), ih.Cluster}
		sp := lastSp
		if sp == nil || k != lastKey {
			if sp = clusters[k]; sp == nil {
				sp = newSpec(*hc)
				if o := old[k]; o != nil && o.equal(sp) {
					o.adopt(sp)
					sp = o
				}
				clusters[k] = sp
			}
			lastKey, lastSp = k, sp
		}
		p.upsert(ih, sp, now, true).scan = scan
		return true
	})
	if err != nil {
		// Keep the specs read so far (the targets updated refer to them) and the others.
		for k, sp := range clusters {
			old[k] = sp
		}
		return err
	}
	p.clusters = clusters
	for _, st := range p.bySvc {
		for _, t := range st.byAddr {
			if t.scan != scan {
				p.remove(t)
			}
		}
	}
	return nil
}

// retryRescan runs a rescan that failed earlier.
func (p *Prober) retryRescan(now time.Time) {
	if err := p.rescan(now); err != nil {
		p.log.Error("health prober: rescan failed", "err", err, "retry", p.rescanRetry.failed(now, firstRetry))
		return
	}
	p.needRescan = false
	p.rescanRetry.succeeded()
}

// handleEvents applies one commit's changes to the schedule.
func (p *Prober) handleEvents(evs []store.Event, now time.Time) {
	for _, ev := range evs {
		switch ev.Kind {
		case store.EventInstanceUpsert:
			p.upsert(store.HealthOf(ev.Instance), p.specForInstance(ev), now, false)
		case store.EventInstanceDelete:
			// The event carries the deleted instance; a replayed delete of an earlier
			// registration leaves a newer one alone.
			if t := p.lookup(ev.Ref); t != nil && ev.Instance.CreateIndex >= t.epoch {
				p.remove(t)
			}
		case store.EventClusterUpsert:
			p.clusterChanged(ev.Cluster, now)
		case store.EventServiceDelete:
			p.serviceDeleted(ev.Service)
		case store.EventReset:
			p.rescanRetry.succeeded() // a new reset: the backoff starts over
			if err := p.rescan(now); err != nil {
				p.needRescan = true
				p.log.Error("health prober: rescan failed", "err", err, "retry", p.rescanRetry.failed(now, firstRetry))
			} else {
				p.needRescan = false
			}
		}
	}
}

// specForInstance returns the spec of an upserted instance's cluster.
func (p *Prober) specForInstance(ev store.Event) *spec {
	in := ev.Instance
	k := clusterKey{in.ServiceKey(), in.Cluster}
	if sp := p.clusters[k]; sp != nil {
		return sp
	}
	sp := newSpec(p.lookupHealthCheck(k))
	p.clusters[k] = sp
	return sp
}

// lookupHealthCheck reads a cluster's spec from the source when it can, else assumes
// the spec of an implicitly created cluster.
func (p *Prober) lookupHealthCheck(k clusterKey) model.HealthCheck {
	if cs, ok := p.src.(ClusterSource); ok {
		_, c, err := cs.Cluster(nil, k.svc, k.name)
		if err == nil {
			return c.HealthCheck
		}
		p.log.Debug("health prober: cluster lookup failed", "service", k.svc.String(), "cluster", k.name, "err", err)
	}
	return model.DefaultHealthCheck()
}

// lookup returns the target of ref (nil: none).
func (p *Prober) lookup(ref model.InstanceRef) *target {
	if st := p.bySvc[ref.ServiceKey()]; st != nil {
		return st.byAddr[addrKey{ref.IP, ref.Port}]
	}
	return nil
}

// current reports whether t is still its instance's target (not removed or replaced).
func (p *Prober) current(t *target) bool { return p.lookup(t.ref) == t }

// upsert adds or refreshes the target of an instance and returns it (it may be one the
// prober keeps as it is). authoritative marks a value read from the source now (a
// rescan); otherwise it comes from the change feed and may be older than what the
// prober knows: the feed replays commits made between Subscribe and the initial scan.
func (p *Prober) upsert(in store.InstanceHealth, sp *spec, now time.Time, authoritative bool) *target {
	t := p.lookup(in.Ref)
	if t != nil && t.epoch != in.CreateIndex {
		if !authoritative && in.CreateIndex < t.epoch {
			return t
		}
		p.remove(t)
		t = nil
	}
	if t == nil {
		return p.add(in, sp, now)
	}
	if !authoritative && in.ModifyIndex < t.seen {
		return t
	}
	t.seen = max(t.seen, in.ModifyIndex)
	if in.Healthy != t.committed {
		// The committed health changed under the prober: follow it unless the prober
		// itself is about to change it.
		if !t.pending() && !t.inBatch {
			t.st.healthy = in.Healthy
		}
		t.committed = in.Healthy
	}
	t.unhealthySince = in.UnhealthySince
	if t.cluster != in.Cluster {
		t.cluster = in.Cluster
	}
	if !t.spec.equal(sp) {
		p.reset(t, sp, now)
	} else {
		t.spec = sp
	}
	p.followDeadline(t, now)
	return t
}

// followDeadline re-arms a target's deregistration deadline after its committed state
// or spec changed, and queues the recording of a missing unhealthy time.
func (p *Prober) followDeadline(t *target, now time.Time) {
	p.updateDeadline(t)
	if t.needsStamp() && !t.inBatch {
		p.markDirty(t, now)
	}
}

// add creates the target of a newly seen instance (or a new epoch): committed health as
// stored, counters at zero, first probe at a random point of its interval.
func (p *Prober) add(in store.InstanceHealth, sp *spec, now time.Time) *target {
	svc := in.Ref.ServiceKey()
	st := p.bySvc[svc]
	if st == nil {
		st = &svcTargets{key: svc, byAddr: make(map[addrKey]*target)}
		p.bySvc[svc] = st
	}
	t := &target{
		// The service's names are those of the svcTargets, shared by its targets.
		ref:            model.InstanceRef{Namespace: st.key.Namespace, Group: st.key.Group, Service: st.key.Service, IP: in.Ref.IP, Port: in.Ref.Port},
		cluster:        in.Cluster,
		epoch:          in.CreateIndex,
		seen:           in.ModifyIndex,
		committed:      in.Healthy,
		unhealthySince: in.UnhealthySince,
		st:             hstate{healthy: in.Healthy},
		heapIdx:        -1,
		dIdx:           -1,
	}
	st.byAddr[addrKey{t.ref.IP, t.ref.Port}] = t
	p.count++
	p.reset(t, sp, now)
	p.followDeadline(t, now)
	return t
}

// reset gives a target a (new) spec: fresh counters, no last probe, a new generation
// (results and submissions of the old one are discarded) and a new random phase.
func (p *Prober) reset(t *target, sp *spec, now time.Time) {
	t.spec = sp
	t.gen = p.nextGen()
	t.st = hstate{healthy: t.committed}
	if t.probed != nil {
		t.probed.last = lastProbe{}
	}
	if !sp.probed() {
		if t.heapIdx >= 0 {
			heap.Remove(&p.sched, int(t.heapIdx))
		}
		return
	}
	t.next = randomPhase(now, sp.interval)
	if t.heapIdx >= 0 {
		heap.Fix(&p.sched, int(t.heapIdx))
	} else {
		heap.Push(&p.sched, t)
	}
}

// remove forgets a target; results and submissions for it are discarded.
func (p *Prober) remove(t *target) {
	svc := t.ref.ServiceKey()
	if st := p.bySvc[svc]; st != nil {
		k := addrKey{t.ref.IP, t.ref.Port}
		if st.byAddr[k] == t {
			delete(st.byAddr, k)
			p.count--
		}
		if len(st.byAddr) == 0 {
			delete(p.bySvc, svc)
		}
	}
	if t.heapIdx >= 0 {
		heap.Remove(&p.sched, int(t.heapIdx))
	}
	if t.dIdx >= 0 {
		heap.Remove(&p.deregs, int(t.dIdx))
	}
}

// clusterChanged records a cluster's spec and restarts the instances whose spec changed.
func (p *Prober) clusterChanged(c model.Cluster, now time.Time) {
	svc := model.ServiceKey{Namespace: c.Namespace, Group: c.Group, Service: c.Service}
	k := clusterKey{svc, c.Name}
	sp := newSpec(c.HealthCheck)
	if old := p.clusters[k]; old != nil && old.equal(sp) {
		old.adopt(sp)
		sp = old
	}
	p.clusters[k] = sp
	st := p.bySvc[svc]
	if st == nil {
		return
	}
	for _, t := range st.byAddr {
		if t.cluster != c.Name {
			continue
		}
		if !t.spec.equal(sp) {
			p.reset(t, sp, now)
		} else {
			t.spec = sp
		}
		p.followDeadline(t, now)
	}
}

// serviceDeleted forgets a service's clusters (and instances, which the store has
// already removed).
func (p *Prober) serviceDeleted(svc model.ServiceKey) {
	for k := range p.clusters {
		if k.svc == svc {
			delete(p.clusters, k)
		}
	}
	if st := p.bySvc[svc]; st != nil {
		for _, t := range st.byAddr {
			p.remove(t)
		}
	}
}
