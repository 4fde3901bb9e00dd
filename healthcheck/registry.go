package healthcheck

import (
	"container/heap"
	"time"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// rescan makes the targets match the source exactly: new instances are added, gone ones
// dropped, instances with a new epoch or spec start afresh, and the others keep their
// counters and phase. On error nothing changes.
func (p *Prober) rescan(now time.Time) error {
	type item struct {
		in model.Instance
		hc model.HealthCheck
	}
	var items []item
	err := p.src.ForEachInstance(func(in model.Instance, hc model.HealthCheck) bool {
		items = append(items, item{in, hc})
		return true
	})
	if err != nil {
		return err
	}
	old := p.clusters
	p.clusters = make(map[clusterKey]*spec, len(old))
	seen := make(map[model.InstanceRef]struct{}, len(items))
	for _, it := range items {
		k := clusterKey{it.in.ServiceKey(), it.in.Cluster}
		sp := p.clusters[k]
		if sp == nil {
			sp = newSpec(it.hc)
			if o := old[k]; o != nil && o.equal(sp) {
				o.adopt(sp)
				sp = o
			}
			p.clusters[k] = sp
		}
		p.upsert(it.in, sp, now, true)
		seen[it.in.Ref()] = struct{}{}
	}
	for ref, t := range p.targets {
		if _, ok := seen[ref]; !ok {
			p.remove(t)
		}
	}
	return nil
}

// retryRescan runs a rescan that failed earlier.
func (p *Prober) retryRescan(now time.Time) {
	if err := p.rescan(now); err != nil {
		p.rescanBackoff = min(2*p.rescanBackoff, maxRetryBackoff)
		p.rescanAt = now.Add(p.rescanBackoff)
		p.log.Error("health prober: rescan failed", "err", err, "retry", p.rescanBackoff)
		return
	}
	p.needRescan = false
}

// handleEvents applies one commit's changes to the schedule.
func (p *Prober) handleEvents(evs []store.Event, now time.Time) {
	for _, ev := range evs {
		switch ev.Kind {
		case store.EventInstanceUpsert:
			p.upsert(ev.Instance, p.specForInstance(ev), now, false)
		case store.EventInstanceDelete:
			// The event carries the deleted instance; a replayed delete of an earlier
			// registration leaves a newer one alone.
			if t := p.targets[ev.Ref]; t != nil && ev.Instance.CreateIndex >= t.epoch {
				p.remove(t)
			}
		case store.EventClusterUpsert:
			p.clusterChanged(ev.Cluster, now)
		case store.EventServiceDelete:
			p.serviceDeleted(ev.Service)
		case store.EventReset:
			if err := p.rescan(now); err != nil {
				p.needRescan = true
				p.rescanBackoff = 100 * time.Millisecond
				p.rescanAt = now.Add(p.rescanBackoff)
				p.log.Error("health prober: rescan failed", "err", err, "retry", p.rescanBackoff)
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

// upsert adds or refreshes the target of an instance. authoritative marks a value read
// from the source now (a rescan); otherwise it comes from the change feed and may be
// older than what the prober knows: the feed replays commits made between Subscribe and
// the initial scan.
func (p *Prober) upsert(in model.Instance, sp *spec, now time.Time, authoritative bool) {
	ref := in.Ref()
	t := p.targets[ref]
	if t != nil && t.epoch != in.CreateIndex {
		if !authoritative && in.CreateIndex < t.epoch {
			return
		}
		p.remove(t)
		t = nil
	}
	if t == nil {
		p.add(in, sp, now)
		return
	}
	if !authoritative && in.ModifyIndex < t.seen {
		return
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
	t.cluster = in.Cluster
	if !t.spec.equal(sp) {
		p.reset(t, sp, now)
	} else {
		t.spec = sp
	}
	p.followDeadline(t, now)
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
func (p *Prober) add(in model.Instance, sp *spec, now time.Time) {
	ref := in.Ref()
	t := &target{
		ref:            ref,
		cluster:        in.Cluster,
		epoch:          in.CreateIndex,
		seen:           in.ModifyIndex,
		committed:      in.Healthy,
		unhealthySince: in.UnhealthySince,
		st:             hstate{healthy: in.Healthy},
		heapIdx:        -1,
		dIdx:           -1,
	}
	p.targets[ref] = t
	svc := ref.ServiceKey()
	m := p.bySvc[svc]
	if m == nil {
		m = make(map[model.InstanceRef]*target)
		p.bySvc[svc] = m
	}
	m[ref] = t
	p.reset(t, sp, now)
	p.followDeadline(t, now)
}

// reset gives a target a (new) spec: fresh counters, no last probe, a new generation
// (results and submissions of the old one are discarded) and a new random phase.
func (p *Prober) reset(t *target, sp *spec, now time.Time) {
	t.spec = sp
	t.addr, t.url = probeTarget(t.ref, sp)
	t.gen = p.nextGen()
	t.st = hstate{healthy: t.committed}
	t.last = lastProbe{}
	if !sp.probed() {
		if t.heapIdx >= 0 {
			heap.Remove(&p.sched, t.heapIdx)
		}
		return
	}
	t.next = randomPhase(now, sp.interval)
	if t.heapIdx >= 0 {
		heap.Fix(&p.sched, t.heapIdx)
	} else {
		heap.Push(&p.sched, t)
	}
}

// remove forgets a target; results and submissions for it are discarded.
func (p *Prober) remove(t *target) {
	delete(p.targets, t.ref)
	svc := t.ref.ServiceKey()
	if m := p.bySvc[svc]; m != nil {
		delete(m, t.ref)
		if len(m) == 0 {
			delete(p.bySvc, svc)
		}
	}
	if t.heapIdx >= 0 {
		heap.Remove(&p.sched, t.heapIdx)
	}
	if t.dIdx >= 0 {
		heap.Remove(&p.deregs, t.dIdx)
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
	for _, t := range p.bySvc[svc] {
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
	for _, t := range p.bySvc[svc] {
		p.remove(t)
	}
}
