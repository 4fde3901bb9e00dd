// Package fanout tells a node's watchers about changes as soon as the node applies them.
//
// A Hub reads the store's change feed after every applied batch, works out which watched
// views (Topics: a service, or a page of a namespace's service list) the batch changed,
// reads each changed view once and hands the same immutable Update to every subscriber of
// that topic. Delivery never blocks: a subscriber holds at most one pending Update per
// topic (a newer one replaces it, so a slow reader skips intermediate states and never
// sees the same state twice), and one whose pending updates exceed its queue is told to
// resync instead — its next Next reads every topic afresh. Neither the apply path nor
// other subscribers ever wait for a subscriber.
//
// Everything a hub serves is the local node's state: on a follower it is as stale as the
// follower is. Streaming endpoints (server-sent events, Nacos pushes, Nacos gRPC) consume it.
package fanout

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// ErrClosed is Subscription.Err after the hub closed.
var ErrClosed = errors.New("fanout: hub closed")

// DefaultQueueLen is Options.QueueLen's default.
const DefaultQueueLen = 64

// feedBuffer is how many commits the hub's store subscription holds before the store
// replaces them with one reset (which the hub turns into a resync of every topic).
const feedBuffer = 1024

// Source is what a hub reads: a *store.Store.
type Source interface {
	Subscribe(buffer int) (<-chan []store.Event, func())
	ServiceView(ws *store.WatchSet, key model.ServiceKey) (uint64, store.ServiceView, error)
	ServiceSummaries(ws *store.WatchSet, ns string, f store.ServiceFilter, page, size int) (uint64, []store.ServiceSummary, int, error)
}

// Options configure a Hub.
type Options struct {
	// QueueLen bounds the updates pending for one subscriber (distinct topics; default
	// DefaultQueueLen). A subscriber with more is resynced.
	QueueLen int
	// Metrics receives the hub's collectors; nil registers none.
	Metrics prometheus.Registerer
	// Logger receives read failures; nil means slog.Default().
	Logger *slog.Logger
}

// Hub fans the store's changes out to subscribers. Create it with New; Close it.
type Hub struct {
	src      Source
	queueLen int
	log      *slog.Logger
	m        *metrics

	mu     sync.Mutex
	topics map[Topic]*topicState
	// lists indexes the KindServices topics by namespace.
	lists map[string]map[Topic]struct{}
	// subs is every open subscription, with or without topics.
	subs   map[*Subscription]struct{}
	closed bool

	resyncCh    chan string
	stop        chan struct{}
	done        chan struct{}
	unsubscribe func()
}

// topicState is a topic's subscribers and the last update delivered to them.
type topicState struct {
	subs map[*Subscription]struct{}
	last *Update
}

// New subscribes to src's change feed and starts the hub.
func New(src Source, opts Options) (*Hub, error) {
	if opts.QueueLen <= 0 {
		opts.QueueLen = DefaultQueueLen
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, err
	}
	events, unsubscribe := src.Subscribe(feedBuffer)
	h := &Hub{
		src: src, queueLen: opts.QueueLen, log: opts.Logger, m: m,
		topics:      make(map[Topic]*topicState),
		lists:       make(map[string]map[Topic]struct{}),
		subs:        make(map[*Subscription]struct{}),
		resyncCh:    make(chan string, 1),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		unsubscribe: unsubscribe,
	}
	go h.run(events)
	return h, nil
}

// Close stops the hub and ends every subscription (their C channels close and Err
// returns ErrClosed). It is idempotent.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		<-h.done
		return
	}
	h.closed = true
	h.mu.Unlock()
	close(h.stop)
	<-h.done
	h.unsubscribe()
	h.closeAll()
}

// Resync sends every subscriber the current view of each of its topics, marked Resync,
// whether or not it changed; reason labels the metric ("leadership", ...). A node calls
// it when its leadership changes.
func (h *Hub) Resync(reason string) {
	select {
	case h.resyncCh <- reason:
	default: // one is pending; it covers this one
	}
}

// Subscribe starts a subscription to topics (none is allowed: add them later). The
// current view of each topic is pending at once, so the first Next returns it.
func (h *Hub) Subscribe(topics ...Topic) (*Subscription, error) {
	return h.SubscribeFunc(nil, topics...)
}

// SubscribeFunc is Subscribe with a notification callback: besides signalling C, the
// subscription calls notify whenever updates become pending and when it ends. notify runs
// on the hub's goroutine with the hub's locks held: it must return at once and must not
// call the hub or the subscription. It lets a consumer serve many subscriptions from a
// few goroutines instead of one goroutine waiting on each C.
func (h *Hub) SubscribeFunc(notify func(), topics ...Topic) (*Subscription, error) {
	s := &Subscription{hub: h, ch: make(chan struct{}, 1), notify: notify}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	h.subs[s] = struct{}{}
	h.m.subscribers.Inc()
	h.mu.Unlock()
	for _, t := range topics {
		if err := s.Add(t); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Subscribers returns the number of subscriptions of topic.
func (h *Hub) Subscribers(t Topic) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.topics[t]; st != nil {
		return len(st.subs)
	}
	return 0
}

// attach registers s as a subscriber of t.
func (h *Hub) attach(s *Subscription, t Topic) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	st := h.topics[t]
	if st == nil {
		st = &topicState{subs: make(map[*Subscription]struct{}, 1)}
		h.topics[t] = st
		if t.Kind == KindServices {
			ns := h.lists[t.Namespace()]
			if ns == nil {
				ns = make(map[Topic]struct{}, 1)
				h.lists[t.Namespace()] = ns
			}
			ns[t] = struct{}{}
		}
		h.m.topics.Inc()
	}
	st.subs[s] = struct{}{}
	return nil
}

// forget drops a closed subscription.
func (h *Hub) forget(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		h.m.subscribers.Dec()
	}
}

// detach removes s from t, dropping the topic with its last subscriber.
func (h *Hub) detach(s *Subscription, t Topic) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.topics[t]
	if st == nil {
		return
	}
	delete(st.subs, s)
	if len(st.subs) > 0 {
		return
	}
	delete(h.topics, t)
	if t.Kind == KindServices {
		if ns := h.lists[t.Namespace()]; ns != nil {
			delete(ns, t)
			if len(ns) == 0 {
				delete(h.lists, t.Namespace())
			}
		}
	}
	h.m.topics.Dec()
}

// read reads a topic's current view.
func (h *Hub) read(t Topic) *Update {
	u := &Update{Topic: t}
	switch t.Kind {
	case KindService:
		u.Index, u.Service, u.Err = h.src.ServiceView(nil, t.Service)
	case KindServices:
		u.Index, u.Services, u.Total, u.Err = h.src.ServiceSummaries(nil, t.Namespace(), store.ServiceFilter{Group: t.Group, Name: t.Name}, t.Page, t.Size)
	default:
		u.Err = model.Invalid("topic", "unknown kind %d", t.Kind)
	}
	if u.Err != nil && !errors.Is(u.Err, model.ErrNotFound) {
		h.m.readErrors.Inc()
		h.log.Error("fanout: read failed", "topic", t.String(), "err", u.Err)
	}
	return u
}

// changes is what a run of batches touched.
type changes struct {
	services   map[model.ServiceKey]struct{}
	namespaces map[string]struct{}
	all        bool
	reason     string // resync reason when all
	first      time.Time
}

func (c *changes) empty() bool {
	return !c.all && len(c.services) == 0 && len(c.namespaces) == 0
}

func (c *changes) add(batch []store.Event) {
	for _, e := range batch {
		switch e.Kind {
		case store.EventReset:
			c.resync("reset")
		case store.EventNamespaceUpsert, store.EventNamespaceDelete:
			c.namespaces[e.Service.Namespace] = struct{}{}
		default:
			c.services[e.Service] = struct{}{}
			c.namespaces[e.Service.Namespace] = struct{}{}
		}
	}
}

func (c *changes) resync(reason string) {
	c.all = true
	if c.reason == "" {
		c.reason = reason
	}
}

// run consumes the change feed until the hub stops or the store closes. Batches that
// queued while the last ones were published are merged: each topic is read once.
func (h *Hub) run(events <-chan []store.Event) {
	defer close(h.done)
	for {
		c := changes{services: map[model.ServiceKey]struct{}{}, namespaces: map[string]struct{}{}}
		select {
		case <-h.stop:
			return
		case batch, ok := <-events:
			if !ok {
				h.closeAll()
				return
			}
			c.add(batch)
		case reason := <-h.resyncCh:
			c.resync(reason)
		}
		c.first = time.Now()
	drain:
		for {
			select {
			case batch, ok := <-events:
				if !ok {
					break drain
				}
				c.add(batch)
			case reason := <-h.resyncCh:
				c.resync(reason)
			default:
				break drain
			}
		}
		if !c.empty() {
			h.publish(&c)
		}
	}
}

// publish reads every changed topic that has subscribers and offers the update.
func (h *Hub) publish(c *changes) {
	var todo []Topic
	h.mu.Lock()
	if c.all {
		todo = make([]Topic, 0, len(h.topics))
		for t := range h.topics {
			todo = append(todo, t)
		}
	} else {
		for key := range c.services {
			if t := ServiceTopic(key); h.topics[t] != nil {
				todo = append(todo, t)
			}
		}
		for ns := range c.namespaces {
			for t := range h.lists[ns] {
				todo = append(todo, t)
			}
		}
	}
	h.mu.Unlock()
	if c.all {
		h.m.resyncs.WithLabelValues(c.reason).Inc()
	}
	for _, t := range todo {
		u := h.read(t)
		u.Resync = c.all
		h.mu.Lock()
		st := h.topics[t]
		if st == nil || (!u.Resync && st.last != nil && sameView(st.last, u)) {
			h.mu.Unlock()
			continue
		}
		st.last = u
		for s := range st.subs {
			s.offer(u)
		}
		h.m.updates.Add(float64(len(st.subs)))
		h.mu.Unlock()
	}
	h.m.publish.Observe(time.Since(c.first).Seconds())
}

// sameView reports whether b shows what a showed: the same index and the same existence.
func sameView(a, b *Update) bool {
	return a.Index == b.Index && (a.Err == nil) == (b.Err == nil)
}

// closeAll ends every subscription.
func (h *Hub) closeAll() {
	h.mu.Lock()
	h.closed = true
	subs := h.subs
	h.subs = map[*Subscription]struct{}{}
	h.topics = map[Topic]*topicState{}
	h.lists = map[string]map[Topic]struct{}{}
	h.m.topics.Set(0)
	h.m.subscribers.Set(0)
	h.mu.Unlock()
	for s := range subs {
		s.end(ErrClosed)
	}
}
