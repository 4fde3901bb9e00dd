package healthcheck

import (
	"cmp"
	"slices"
	"strings"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
)

// Result is the leader's view of one instance: its last probe and its state machine.
type Result = api.ProbeResult

// result snapshots a target; the caller holds Prober.mu.
func (t *target) result() Result {
	hc := t.spec.hc
	r := Result{
		IP:                   t.ref.IP,
		Port:                 t.ref.Port,
		Cluster:              t.cluster,
		Epoch:                t.epoch,
		CheckType:            hc.Type,
		Healthy:              t.committed,
		Pending:              t.pending(),
		ConsecutiveSuccesses: t.st.succ,
		ConsecutiveFailures:  t.st.fail,
		Rise:                 hc.Rise,
		Fall:                 hc.Fall,
		Interval:             model.Duration(t.spec.interval),
	}
	if t.spec.probed() {
		r.Target = t.addr
		if hc.Type == model.CheckHTTP {
			r.Target = t.url
		}
		r.NextCheck = t.next
	}
	if t.last.done {
		o := t.last.outcome
		r.LastCheck = t.last.at
		r.Latency = model.Duration(o.latency)
		r.Outcome = o.class
		r.Status = o.status
		r.Error = o.err
	}
	return r
}

func sortResults(rs []Result) {
	slices.SortFunc(rs, func(a, b Result) int {
		return cmp.Or(strings.Compare(a.IP, b.IP), cmp.Compare(a.Port, b.Port))
	})
}
