package healthcheck

import (
	"container/heap"
	"context"
	"errors"
	"time"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// Automatic deregistration. An instance of a cluster with a DeregisterAfter that stays
// unhealthy for that long is deregistered through Raft. The clock is the committed time
// the instance became unhealthy (Instance.UnhealthySince, written by the SetHealthAt
// command that made it unhealthy), so a new leader computes the same deadline as the
// old one: a change of leader neither resets nor shortens it. The AutoDeregister
// command applies only to the same registration epoch, unhealthy since the same time, so
// an instance that became healthy, flapped or was registered again is kept, and a retry
// of a command that was committed changes nothing.

// deregItem is one AutoDeregister command of a submission and its outcome.
type deregItem struct {
	t     *target
	d     store.AutoDeregistration
	index uint64
	err   error
}

// updateDeadline puts a target in the deregistration heap at its deadline, or takes it
// out when it has none, when a command for it is queued or in flight, or while the
// prober has decided it healthy and the transition is not committed yet.
func (p *Prober) updateDeadline(t *target) {
	var at time.Time
	if !t.deregBusy && !t.st.healthy {
		at = t.deregDeadline()
	}
	t.deadline = at
	switch {
	case at.IsZero():
		if t.dIdx >= 0 {
			heap.Remove(&p.deregs, int(t.dIdx))
		}
	case t.dIdx >= 0:
		heap.Fix(&p.deregs, int(t.dIdx))
	default:
		heap.Push(&p.deregs, t)
	}
}

// queueDueDeregs moves the targets whose deadline has passed to the submission queue.
func (p *Prober) queueDueDeregs(now time.Time) {
	for len(p.deregs) > 0 && !p.deregs[0].deadline.After(now) {
		t := heap.Pop(&p.deregs).(*target)
		t.deadline = time.Time{}
		t.deregBusy = true
		p.deregQueue = append(p.deregQueue, t)
	}
}

// nextDereg is when the deregistration heap or queue needs the loop (zero: never).
func (p *Prober) nextDereg() time.Time {
	var at time.Time
	if len(p.deregs) > 0 {
		at = p.deregs[0].deadline
	}
	if len(p.deregQueue) > 0 && !p.deregistering && (at.IsZero() || p.deregRetry.at.Before(at)) {
		at = p.deregRetry.at
	}
	return at
}

// maybeDeregister submits up to MaxBatch queued deregistrations, one AutoDeregister
// command each, unless a submission is in flight or backing off after a failure.
func (p *Prober) maybeDeregister(ctx context.Context, now time.Time) {
	if p.deregistering || len(p.deregQueue) == 0 || p.deregRetry.holds(now) {
		return
	}
	n := min(len(p.deregQueue), p.cfg.MaxBatch)
	items := make([]deregItem, 0, n)
	for _, t := range p.deregQueue[:n] {
		if !p.current(t) {
			continue // removed meanwhile
		}
		if d := t.deregDeadline(); d.IsZero() || d.After(now) || t.st.healthy {
			t.deregBusy = false // healthy again (or about to be), or a new deadline, since it was queued
			p.updateDeadline(t)
			continue
		}
		items = append(items, deregItem{t: t, d: store.AutoDeregistration{Ref: t.ref, Epoch: t.epoch, UnhealthySince: t.unhealthySince}})
	}
	rest := copy(p.deregQueue, p.deregQueue[n:])
	clear(p.deregQueue[rest:])
	p.deregQueue = p.deregQueue[:rest]
	if len(items) == 0 {
		return
	}
	p.deregistering = true
	at := now.UnixMilli()
	p.wg.Go(func() { p.submitDeregs(ctx, items, at) })
}

// submitDeregs is the body of the deregistration goroutine: it never calls Apply once
// ctx is done.
func (p *Prober) submitDeregs(ctx context.Context, items []deregItem, at int64) {
	for i := range items {
		if items[i].err = ctx.Err(); items[i].err == nil {
			items[i].index, items[i].err = p.app.Apply(ctx, fsm.AutoDeregisterRequest{Instance: items[i].d, At: at})
		}
	}
	p.deregDone <- items // never blocks: one submission at a time, buffer 1
}

// handleDeregs records the outcome of a deregistration submission. A refused command
// (the instance is gone, was registered again or is no longer unhealthy since the same
// time) is dropped; the change feed brings the instance's new state. A failed one is
// retried after a backoff while the node is leader.
func (p *Prober) handleDeregs(ctx context.Context, items []deregItem, now time.Time) {
	p.deregistering = false
	failed := 0
	for _, it := range items {
		t := it.t
		t.deregBusy = false
		current := p.current(t)
		switch {
		case it.err == nil:
			p.met.autoDeregs.Inc()
			p.log.Info("instance deregistered automatically", "instance", refString(t.ref), "epoch", it.d.Epoch,
				"unhealthySince", time.UnixMilli(it.d.UnhealthySince).UTC().Format(time.RFC3339Nano),
				"unhealthyFor", now.Sub(time.UnixMilli(it.d.UnhealthySince)).Round(time.Millisecond),
				"deregisterAfter", t.spec.deregAfter, "index", it.index)
			if current {
				p.remove(t)
			}
		case errors.Is(it.err, model.ErrNotFound) || errors.Is(it.err, model.ErrConflict) || errors.Is(it.err, model.ErrInvalid):
			p.log.Debug("automatic deregistration refused", "instance", refString(t.ref), "err", it.err)
			// When the feed already brought a new state, follow it; otherwise its event will.
			if current && (t.epoch != it.d.Epoch || t.unhealthySince != it.d.UnhealthySince || t.committed) {
				p.updateDeadline(t)
			}
		case ctx.Err() != nil:
		default:
			failed++
			if current {
				t.deregBusy = true
				p.deregQueue = append(p.deregQueue, t)
			}
		}
	}
	if failed == 0 {
		p.deregRetry.succeeded()
		return
	}
	p.met.submitErrors.Inc()
	wait := p.deregRetry.failed(now, p.cfg.FlushInterval)
	p.log.Warn("health prober: AutoDeregister failed; retrying", "failed", failed, "retry", wait)
}
