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
	// unhealthySince is the committed time the instance became unhealthy, in Unix
	// milliseconds (0: healthy or unknown).
	unhealthySince int64
	// deadline is when the instance is due for deregistration (zero: never), and
	// dIdx its index in Prober.deregs (-1 when not there). deregBusy is set while an
	// AutoDeregister command for it is queued or in flight.
	deadline  time.Time
	dIdx      int
	deregBusy bool
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

// needsStamp reports whether the committed unhealthy state lacks its time while the
// cluster deregisters unhealthy instances: an instance made unhealthy by a command
// without one (an older leader's) or registered unhealthy. Submitting its health again
// records the time.
func (t *target) needsStamp() bool {
	return !t.committed && t.unhealthySince == 0 && t.spec.deregAfter > 0 && t.spec.probed()
}

// deregDeadline is when the instance is due for deregistration (zero: never): its
// committed unhealthy time plus its cluster's DeregisterAfter.
func (t *target) deregDeadline() time.Time {
	if t.committed || t.unhealthySince <= 0 || t.spec.deregAfter <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(t.unhealthySince).Add(t.spec.deregAfter)
}

// deregHeap is a min-heap of targets by deregistration deadline (container/heap).
type deregHeap []*target

func (s deregHeap) Len() int           { return len(s) }
func (s deregHeap) Less(i, j int) bool { return s[i].deadline.Before(s[j].deadline) }
func (s deregHeap) Swap(i, j int) {
	s[i], s[j] = s[j], s[i]
	s[i].dIdx = i
	s[j].dIdx = j
}

func (s *deregHeap) Push(x any) {
	t := x.(*target)
	t.dIdx = len(*s)
	*s = append(*s, t)
}

func (s *deregHeap) Pop() any {
	old := *s
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	t.dIdx = -1
	*s = old[:n-1]
	return t
}

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
