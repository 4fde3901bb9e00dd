package fanout

import (
	"errors"
	"sync"
)

// ErrDuplicateTopic is returned by Add for a topic the subscription already has.
var ErrDuplicateTopic = errors.New("fanout: topic already subscribed")

// Subscription receives the updates of its topics. Its consumer waits on C and then
// takes what is pending with Next:
//
//	for range sub.C() {
//		for _, u := range sub.Next() { ... }
//	}
//	// sub.Err() says why it ended
//
// It is safe for concurrent use; an idle subscription holds a few hundred bytes.
type Subscription struct {
	hub *Hub
	// ch is signalled (capacity 1) when updates are pending and closed when the
	// subscription ends.
	ch chan struct{}
	// notify, when set, is called with ch's signals (see Hub.SubscribeFunc).
	notify func()

	mu       sync.Mutex
	entries  []entry
	pending  int
	overflow bool
	closed   bool
	err      error
}

// entry is one topic of a subscription.
type entry struct {
	topic Topic
	// sent is the index of the last update Next returned for the topic.
	sent uint64
	// sentFound says whether that update found the view (a view created at the index its
	// absence was reported at is still news).
	sentFound bool
	pending   *Update
}

// stale reports whether u shows nothing newer than (index, found) does.
func stale(u *Update, index uint64, found bool) bool {
	return u.Index < index || (u.Index == index && (u.Err == nil) == found && !u.Resync)
}

// C is signalled when updates are pending, and closed when the subscription ends.
func (s *Subscription) C() <-chan struct{} { return s.ch }

// Ended reports whether the subscription has ended (closed by its consumer or the hub).
func (s *Subscription) Ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Err is nil while the subscription is open, ErrClosed once the hub closed, and
// nil again after Close (the consumer's own decision).
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Add subscribes to t; its current view becomes pending at once.
func (s *Subscription) Add(t Topic) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.find(t) >= 0 {
		s.mu.Unlock()
		return ErrDuplicateTopic
	}
	s.entries = append(s.entries, entry{topic: t})
	s.mu.Unlock()
	if err := s.hub.attach(s, t); err != nil {
		s.drop(t)
		return err
	}
	// Read after attaching: a change committed meanwhile is either in this read or
	// offered by the hub, and offer keeps the newer of the two.
	s.offer(s.hub.read(t))
	return nil
}

// Remove unsubscribes from t (dropping its pending update).
func (s *Subscription) Remove(t Topic) {
	if s.drop(t) {
		s.hub.detach(s, t)
	}
}

// Topics lists the subscription's topics.
func (s *Subscription) Topics() []Topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Topic, len(s.entries))
	for i, e := range s.entries {
		out[i] = e.topic
	}
	return out
}

// Next returns the pending updates (at most one per topic, each newer than the last one
// returned for its topic) and clears them. After the subscription fell behind it returns
// a fresh read of every topic instead, each marked Resync.
func (s *Subscription) Next() []*Update {
	s.mu.Lock()
	if s.overflow {
		s.overflow = false
		topics := make([]Topic, len(s.entries))
		for i, e := range s.entries {
			topics[i] = e.topic
		}
		s.mu.Unlock()
		s.hub.m.resyncs.WithLabelValues("overflow").Inc()
		out := make([]*Update, 0, len(topics))
		for _, t := range topics {
			u := s.hub.read(t)
			u.Resync = true
			out = append(out, u)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, u := range out {
			if i := s.find(u.Topic); i >= 0 {
				e := &s.entries[i]
				if u.Index >= e.sent {
					e.sent, e.sentFound = u.Index, u.Err == nil
				}
				if e.pending != nil && e.pending.Index <= u.Index {
					e.pending = nil
					s.pending--
				}
			}
		}
		return out
	}
	defer s.mu.Unlock()
	if s.pending == 0 {
		return nil
	}
	out := make([]*Update, 0, s.pending)
	for i := range s.entries {
		e := &s.entries[i]
		if e.pending != nil {
			out = append(out, e.pending)
			e.sent, e.sentFound = e.pending.Index, e.pending.Err == nil
			e.pending = nil
		}
	}
	s.pending = 0
	return out
}

// Close ends the subscription; C closes. It is idempotent.
func (s *Subscription) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	topics := make([]Topic, len(s.entries))
	for i, e := range s.entries {
		topics[i] = e.topic
	}
	s.closeLocked(nil)
	s.mu.Unlock()
	for _, t := range topics {
		s.hub.detach(s, t)
	}
	s.hub.forget(s)
}

// end closes the subscription on the hub's behalf (the hub already forgot it).
func (s *Subscription) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closeLocked(err)
	}
}

func (s *Subscription) closeLocked(err error) {
	s.closed = true
	s.err = err
	s.entries = nil
	s.pending = 0
	close(s.ch)
	if s.notify != nil {
		s.notify()
	}
}

// offer makes u pending for its topic unless the subscriber already has that state or
// a newer one. Called with the hub's lock held (or by Add); never blocks.
func (s *Subscription) offer(u *Update) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	i := s.find(u.Topic)
	if i < 0 {
		return // removed meanwhile
	}
	e := &s.entries[i]
	if e.pending != nil {
		if stale(u, e.pending.Index, e.pending.Err == nil) {
			return
		}
		if e.pending.Resync && !u.Resync {
			// A resync replaced by a newer change is still a resync for this subscriber.
			u = u.resynced()
		}
		e.pending = u
	} else {
		if e.sent != 0 && stale(u, e.sent, e.sentFound) {
			return
		}
		if s.overflow {
			return // Next reads every topic anyway
		}
		if s.pending >= s.hub.queueLen {
			// Fallen behind: forget the pending updates, resync on the next Next.
			for j := range s.entries {
				s.entries[j].pending = nil
			}
			s.pending = 0
			s.overflow = true
		} else {
			e.pending = u
			s.pending++
		}
	}
	select {
	case s.ch <- struct{}{}:
	default:
	}
	if s.notify != nil {
		s.notify()
	}
}

// find returns the index of t's entry, or -1. Called with s.mu held.
func (s *Subscription) find(t Topic) int {
	for i := range s.entries {
		if s.entries[i].topic == t {
			return i
		}
	}
	return -1
}

// drop removes t's entry and reports whether it was there.
func (s *Subscription) drop(t Topic) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.find(t)
	if i < 0 {
		return false
	}
	if s.entries[i].pending != nil {
		s.pending--
	}
	s.entries = append(s.entries[:i], s.entries[i+1:]...)
	return true
}
