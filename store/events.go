package store

import (
	"sync"

	"github.com/rosterhq/roster/model"
)

// EventKind says what an Event reports.
type EventKind uint8

// Event kinds.
const (
	// EventInstanceUpsert: Instance was registered, updated or changed health.
	EventInstanceUpsert EventKind = iota + 1
	// EventInstanceDelete: the instance Ref was deregistered; Instance holds its last state.
	EventInstanceDelete
	// EventClusterUpsert: Cluster was created or its definition changed.
	EventClusterUpsert
	// EventServiceDelete: the service Service was deleted, with its clusters.
	EventServiceDelete
	// EventReset: events were dropped (the subscriber fell behind) or the state was
	// restored; the subscriber must rescan the state (ForEachInstance).
	EventReset
	// EventServiceUpsert: the service Service, one of its clusters or one of its instances
	// changed (its ModifyIndex moved). It accompanies every instance and cluster event.
	EventServiceUpsert
	// EventNamespaceUpsert: the namespace Service.Namespace was created or changed.
	EventNamespaceUpsert
	// EventNamespaceDelete: the namespace Service.Namespace was deleted.
	EventNamespaceDelete
)

// String names the kind.
func (k EventKind) String() string {
	switch k {
	case EventInstanceUpsert:
		return "instance-upsert"
	case EventInstanceDelete:
		return "instance-delete"
	case EventClusterUpsert:
		return "cluster-upsert"
	case EventServiceDelete:
		return "service-delete"
	case EventReset:
		return "reset"
	case EventServiceUpsert:
		return "service-upsert"
	case EventNamespaceUpsert:
		return "namespace-upsert"
	case EventNamespaceDelete:
		return "namespace-delete"
	}
	return "unknown"
}

// Event is one change of a commit. Which fields are set depends on Kind; Service is set
// for every kind but EventReset (namespace events set only Service.Namespace).
type Event struct {
	Kind EventKind
	// Index is the applied index of the commit that made the change (0 for a reset).
	Index    uint64
	Instance model.Instance
	Ref      model.InstanceRef
	Cluster  model.Cluster
	Service  model.ServiceKey
	// Reason says why an instance was deleted when it was not by request:
	// ReasonAutoDeregistered. Empty otherwise.
	Reason string
}

// feed delivers each commit's events to the subscribers.
type feed struct {
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool
}

type subscriber struct {
	ch chan []Event
}

func newFeed() *feed { return &feed{subs: make(map[*subscriber]struct{})} }

// Subscribe returns a channel that receives the events of each commit, one slice per
// commit, in commit order, and a function that ends the subscription and closes the
// channel. buffer is the number of commits the channel holds (at least 1). A commit
// never waits for a subscriber: when its buffer is full, the pending events are dropped
// and replaced by a single EventReset, after which the subscriber rescans the state.
// The slices are shared between subscribers and must not be modified. The channel is
// closed when the store closes.
func (s *Store) Subscribe(buffer int) (<-chan []Event, func()) {
	return s.feed.subscribe(buffer)
}

func (f *feed) subscribe(buffer int) (<-chan []Event, func()) {
	sub := &subscriber{ch: make(chan []Event, max(buffer, 1))}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		close(sub.ch)
		return sub.ch, func() {}
	}
	f.subs[sub] = struct{}{}
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if _, ok := f.subs[sub]; ok {
				delete(f.subs, sub)
				close(sub.ch)
			}
		})
	}
	return sub.ch, cancel
}

// publish delivers one commit's events without blocking.
func (f *feed) publish(events []Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for sub := range f.subs {
		sub.deliver(events)
	}
}

// reset tells every subscriber to rescan.
func (f *feed) reset() { f.publish([]Event{{Kind: EventReset}}) }

// deliver sends events, or, when the buffer is full, drains it and sends one reset.
// The feed's lock makes this the channel's only sender, so after draining there is room.
func (sub *subscriber) deliver(events []Event) {
	select {
	case sub.ch <- events:
		return
	default:
	}
	for drained := false; !drained; {
		select {
		case <-sub.ch:
		default:
			drained = true
		}
	}
	select {
	case sub.ch <- []Event{{Kind: EventReset}}:
	default:
	}
}

// close closes every subscriber's channel; later subscriptions get a closed channel.
func (f *feed) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for sub := range f.subs {
		close(sub.ch)
		delete(f.subs, sub)
	}
}
