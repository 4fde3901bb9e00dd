package healthcheck

import (
	"context"
	"time"

	"github.com/rosterhq/roster/model"
)

// markDirty queues a target's transition; the batch window opens with the first one.
func (p *Prober) markDirty(t *target, now time.Time) {
	if !t.dirty {
		t.dirty = true
		p.dirty = append(p.dirty, t)
	}
	if p.flushAt.IsZero() {
		p.flushAt = now.Add(p.cfg.FlushInterval)
	}
}

// nextFlush is when queued transitions must be submitted (zero: nothing to wait for).
func (p *Prober) nextFlush() time.Time {
	if p.submitting || len(p.dirty) == 0 {
		return time.Time{}
	}
	if p.submitRetry.at.After(p.flushAt) {
		return p.submitRetry.at
	}
	return p.flushAt
}

// maybeSubmit submits queued transitions when the batch window has closed or the batch
// is full, unless a submission is in flight or backing off after a failure.
func (p *Prober) maybeSubmit(ctx context.Context, now time.Time) {
	if p.submitting || len(p.dirty) == 0 || p.submitRetry.holds(now) {
		return
	}
	if len(p.dirty) < p.cfg.MaxBatch && now.Before(p.flushAt) {
		return
	}
	p.submit(ctx, now)
}

// submit sends up to MaxBatch queued transitions as one SetHealthAt command, each with
// the instance's epoch, and the leader's clock as the time the instances it makes
// unhealthy became so. Transitions undone meanwhile (flaps) are dropped. An unhealthy
// instance whose committed state lacks that time (needsStamp) is sent unhealthy again,
// which records it.
func (p *Prober) submit(ctx context.Context, now time.Time) {
	items := make([]batchItem, 0, min(len(p.dirty), p.cfg.MaxBatch))
	n := 0
	for n < len(p.dirty) && len(items) < p.cfg.MaxBatch {
		t := p.dirty[n]
		n++
		t.dirty = false
		if !p.current(t) || (!t.pending() && !t.needsStamp()) {
			continue
		}
		t.inBatch = true
		items = append(items, batchItem{t: t, gen: t.gen, healthy: t.st.healthy, stamp: !t.pending()})
	}
	rest := copy(p.dirty, p.dirty[n:])
	clear(p.dirty[rest:])
	p.dirty = p.dirty[:rest]
	if rest == 0 {
		p.flushAt = time.Time{}
	} else {
		p.flushAt = now // the rest has waited its window already
	}
	if len(items) == 0 {
		return
	}
	ups := make([]model.HealthUpdate, len(items))
	for i, it := range items {
		ups[i] = model.HealthUpdate{Ref: it.t.ref, Epoch: it.t.epoch, Healthy: it.healthy}
	}
	p.submitting = true
	at := now.UnixMilli()
	p.wg.Go(func() { p.submitUpdates(ctx, items, ups, at) })
}

// handleSubmit records the outcome of a SetHealth submission. On success the committed
// health of its instances is updated. On failure, while still leader, the transitions
// still wanted are queued again after a backoff; once ctx is done nothing is retried.
func (p *Prober) handleSubmit(ctx context.Context, r submitResult, now time.Time) {
	p.submitting = false
	for _, it := range r.items {
		it.t.inBatch = false
	}
	if r.err == nil {
		p.submitRetry.succeeded()
		for _, it := range r.items {
			t := it.t
			if !p.current(t) || t.gen != it.gen {
				// Removed, re-registered or re-specified meanwhile: whether the store
				// applied the update (it skips other epochs and NONE clusters) shows in
				// the change feed.
				continue
			}
			if it.stamp {
				continue // the change feed brings the recorded time
			}
			if it.healthy {
				p.met.toHealthy.Inc()
			} else {
				p.met.toUnhealthy.Inc()
			}
			p.log.Info("health transition committed", "instance", refString(t.ref), "epoch", t.epoch,
				"healthy", it.healthy, "index", r.index, "lastError", t.last().outcome.err)
			t.committed = it.healthy
			if it.healthy {
				t.unhealthySince = 0
			} // else the change feed brings the recorded time
			p.updateDeadline(t)
			t.seen = max(t.seen, r.index)
			if t.pending() {
				p.markDirty(t, now) // flipped back meanwhile
			}
		}
		return
	}
	if ctx.Err() != nil {
		return
	}
	p.met.submitErrors.Inc()
	wait := p.submitRetry.failed(now, p.cfg.FlushInterval)
	p.log.Warn("health prober: SetHealth failed; retrying", "err", r.err, "updates", len(r.items), "retry", wait)
	for _, it := range r.items {
		t := it.t
		if p.current(t) && t.gen == it.gen && (t.pending() || t.needsStamp()) {
			p.markDirty(t, now)
		}
	}
}
