package healthcheck

import (
	"time"

	"github.com/rosterhq/roster/model"
)

// maxCount caps the consecutive-outcome counters; any value ≥ MaxRiseFall behaves the same.
const maxCount = 1 << 20

// hstate is one instance's rise/fall state machine.
type hstate struct {
	healthy bool // the health the prober has decided: committed, or a transition about to be
	succ    int  // consecutive successes
	fail    int  // consecutive failures
}

// step applies one probe outcome under rise/fall and reports whether the decided health
// flipped: an unhealthy instance becomes healthy after rise consecutive successes, a
// healthy one unhealthy after fall consecutive failures.
func step(s hstate, ok bool, rise, fall int) (hstate, bool) {
	if ok {
		s.succ = min(s.succ+1, maxCount)
		s.fail = 0
		if !s.healthy && s.succ >= rise {
			s.healthy = true
			return s, true
		}
		return s, false
	}
	s.fail = min(s.fail+1, maxCount)
	s.succ = 0
	if s.healthy && s.fail >= fall {
		s.healthy = false
		return s, true
	}
	return s, false
}

// target is the prober's view of one instance. Fields are written by the Run goroutine
// with Prober.mu held, so Results can read them under the read lock.
type target struct {
	ref     model.InstanceRef
	cluster string
	epoch   uint64 // the instance's CreateIndex
	seen    uint64 // highest instance ModifyIndex or SetHealth index known; older events are stale
	spec    *spec
	addr    string
	url     string
	// gen changes whenever the target's state is reset (new spec); probes and
	// submissions carry the gen they were started with.
	gen uint64

	committed bool // last known committed health
	st        hstate
	dirty     bool // queued in Prober.dirty
	inBatch   bool // part of the SetHealth command in flight

	heapIdx int // index in the schedule, -1 when not scheduled
	next    time.Time
	probing bool

	last lastProbe
	// confirming is set while the other voters are asked about a decided transition;
	// vantages are the answers of the last confirmation, this node's view first.
	confirming bool
	vantages   []Vantage
}

// lastProbe is the outcome of the latest probe of the current gen.
type lastProbe struct {
	at      time.Time
	outcome outcome
	done    bool
}

// pending reports whether the prober decided a transition not yet known to be committed.
func (t *target) pending() bool { return t.st.healthy != t.committed }

// schedule is a min-heap of targets by next due time (container/heap).
type schedule []*target

func (s schedule) Len() int           { return len(s) }
func (s schedule) Less(i, j int) bool { return s[i].next.Before(s[j].next) }
func (s schedule) Swap(i, j int) {
	s[i], s[j] = s[j], s[i]
	s[i].heapIdx = i
	s[j].heapIdx = j
}

func (s *schedule) Push(x any) {
	t := x.(*target)
	t.heapIdx = len(*s)
	*s = append(*s, t)
}

func (s *schedule) Pop() any {
	old := *s
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	t.heapIdx = -1
	*s = old[:n-1]
	return t
}
