package healthcheck

import (
	"time"

	"github.com/rosterhq/roster/model"
)

// maxCount caps the consecutive-outcome counters; any value ≥ MaxRiseFall behaves the same.
const maxCount = 1 << 20

// hstate is one instance's rise/fall state machine.
type hstate struct {
	healthy bool  // the health the prober has decided: committed, or a transition about to be
	succ    int32 // consecutive successes
	fail    int32 // consecutive failures
}

// step applies one probe outcome under rise/fall and reports whether the decided health
// flipped: an unhealthy instance becomes healthy after rise consecutive successes, a
// healthy one unhealthy after fall consecutive failures.
func step(s hstate, ok bool, rise, fall int) (hstate, bool) {
	if ok {
		s.succ = min(s.succ+1, maxCount)
		s.fail = 0
		if !s.healthy && int(s.succ) >= rise {
			s.healthy = true
			return s, true
		}
		return s, false
	}
	s.fail = min(s.fail+1, maxCount)
	s.succ = 0
	if s.healthy && int(s.fail) >= fall {
		s.healthy = false
		return s, true
	}
	return s, false
}

// addrKey is an instance's address: the key of its target among its service's.
type addrKey struct {
	ip   string
	port int
}

// svcTargets are the targets of one service's instances. key's strings are shared by
// the refs of every target of the service.
type svcTargets struct {
	key    model.ServiceKey
	byAddr map[addrKey]*target
}

// target is the prober's view of one instance. Fields are written by the Run goroutine
// with Prober.mu held, so Results can read them under the read lock.
//
// A registry holds as many targets as instances, so the struct is kept small: what
// only probed instances need beyond their schedule (the last probe, the vantages of a
// confirmation) is allocated on first use, and the probed address is computed when a
// probe starts rather than stored.
type target struct {
	ref     model.InstanceRef // service names shared with the svcTargets
	cluster string
	epoch   uint64 // the instance's CreateIndex
	seen    uint64 // highest instance ModifyIndex or SetHealth index known; older events are stale
	spec    *spec
	// gen changes whenever the target's state is reset (new spec); probes and
	// submissions carry the gen they were started with.
	gen uint64
	// unhealthySince is the committed time the instance became unhealthy, in Unix
	// milliseconds (0: healthy or unknown).
	unhealthySince int64
	// scan is the number of the last rescan that saw the instance (Prober.scans).
	scan uint32
	// heapIdx is the index in the schedule (-1 when not scheduled), dIdx the index in
	// Prober.deregs (-1 when not there).
	heapIdx int32
	dIdx    int32
	st      hstate

	committed bool // last known committed health
	// deregBusy is set while an AutoDeregister command for the target is queued or in
	// flight.
	deregBusy bool
	dirty     bool // queued in Prober.dirty
	inBatch   bool // part of the SetHealth command in flight
	probing   bool
	// confirming is set while the other voters are asked about a decided transition.
	confirming bool

	next time.Time // when the next probe is due (scheduled targets)
	// deadline is when the instance is due for deregistration (zero: never).
	deadline time.Time
	probed   *probeState // nil until the first probe result or confirmation
}

// probeState is what a target keeps of its probes.
type probeState struct {
	last lastProbe
	// vantages are the answers of the last confirmation, this node's view first.
	vantages []Vantage
}

// lastProbe is the outcome of the latest probe of the current gen.
type lastProbe struct {
	at      time.Time
	outcome outcome
	done    bool
}

// last returns the latest probe of the current gen (zero: none).
func (t *target) last() lastProbe {
	if t.probed == nil {
		return lastProbe{}
	}
	return t.probed.last
}

// state returns the target's probeState, allocating it on first use.
func (t *target) state() *probeState {
	if t.probed == nil {
		t.probed = new(probeState)
	}
	return t.probed
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
	s[i].dIdx = int32(i)
	s[j].dIdx = int32(j)
}

func (s *deregHeap) Push(x any) {
	t := x.(*target)
	t.dIdx = int32(len(*s))
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
	s[i].heapIdx = int32(i)
	s[j].heapIdx = int32(j)
}

func (s *schedule) Push(x any) {
	t := x.(*target)
	t.heapIdx = int32(len(*s))
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
