package grpcapi

import (
	"bytes"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/rosterhq/roster/fanout"
	"github.com/rosterhq/roster/model"
)

var errTooManySubscriptions = errors.New("too many subscriptions on this connection")

// rpcSubKey is one subscription of a connection: a service seen through a clusters
// filter (the Go SDK keys its cache by both).
type rpcSubKey struct {
	key      model.ServiceKey
	clusters string
}

// rpcSub is what the client holds of one subscription and the push under way.
type rpcSub struct {
	// acked is the signature of the list the client holds: the subscribe answer's, then
	// each acknowledged push's.
	acked []byte
	// inflight is the request id of the push awaiting its ack (0: none), with the
	// signature of the list it carries and when it times out.
	inflight    uint64
	inflightSig []byte
	sentAt      time.Time
	deadline    time.Time
	// retryAt delays the next push after a failed or timed-out one.
	retryAt time.Time
	// noticed is when the oldest change the client has not acknowledged was seen;
	// changed when the newest was.
	noticed, changed time.Time
	// allowed reports whether the token of the latest subscribe request still grants
	// read access to the service's namespace (nil: ACLs off); a subscription whose
	// token no longer does ends instead of being pushed.
	allowed func() bool
}

// rpcPusher pushes a connection's subscriptions: one goroutine per connection reads its
// fan-out subscription, sends a NotifySubscriberRequest for every subscription whose
// list differs from what the client acknowledged, waits for the ack (PushTimeout),
// resends the latest list after a failure (PushRetryDelay), and never has more than one
// push of a subscription in flight: changes that arrive meanwhile are coalesced into
// the next one.
type rpcPusher struct {
	s    *rpcSession
	g    *Server
	sub  *fanout.Subscription
	wake chan struct{}
	acks chan rpcResponse

	mu     sync.Mutex
	subs   map[rpcSubKey]*rpcSub
	topics map[model.ServiceKey]int
	latest map[model.ServiceKey]*fanout.Update
	byID   map[uint64]rpcSubKey
	closed bool
}

func newRPCPusher(s *rpcSession) (*rpcPusher, error) {
	p := &rpcPusher{
		s: s, g: s.g, wake: make(chan struct{}, 1), acks: make(chan rpcResponse, 64),
		subs: make(map[rpcSubKey]*rpcSub), topics: make(map[model.ServiceKey]int),
		latest: make(map[model.ServiceKey]*fanout.Update), byID: make(map[uint64]rpcSubKey),
	}
	sub, err := s.g.cfg.Watch.SubscribeFunc(func() {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	p.sub = sub
	go p.run()
	return p, nil
}

// subscribe adds (or renews) a subscription and returns the list the client is
// answered with, which is what it holds from then on. allowed (nil: ACLs off) is
// checked before every push of it.
func (p *rpcPusher) subscribe(key model.ServiceKey, clusters string, allowed func() bool) (rpcView, error) {
	sk := rpcSubKey{key, clusters}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return rpcView{}, errors.New("connection closed")
	}
	sub := p.subs[sk]
	addTopic := false
	if sub == nil {
		if len(p.subs) >= p.g.cfg.MaxSubscriptions {
			p.mu.Unlock()
			return rpcView{}, errTooManySubscriptions
		}
		sub = &rpcSub{}
		p.subs[sk] = sub
		p.topics[key]++
		addTopic = p.topics[key] == 1
		p.g.m.subscriptions.Inc()
	}
	sub.allowed = allowed
	p.mu.Unlock()
	// Read, then follow: a change applied between the two is in the topic's first
	// update, which differs from the answer and is pushed.
	v, err := p.g.view(key, clusters, false)
	if err != nil {
		return v, err
	}
	p.mu.Lock()
	if p.subs[sk] == sub {
		sub.acked = v.sig
	}
	p.mu.Unlock()
	if addTopic {
		if err := p.sub.Add(fanout.ServiceTopic(key)); err != nil && !errors.Is(err, fanout.ErrDuplicateTopic) {
			return v, err
		}
	}
	return v, nil
}

// unsubscribe ends a subscription (nothing when there is none).
func (p *rpcPusher) unsubscribe(key model.ServiceKey, clusters string) {
	sk := rpcSubKey{key, clusters}
	p.mu.Lock()
	sub := p.subs[sk]
	if sub == nil {
		p.mu.Unlock()
		return
	}
	delete(p.subs, sk)
	if sub.inflight != 0 {
		delete(p.byID, sub.inflight)
		p.s.forget(strconv.FormatUint(sub.inflight, 10))
	}
	p.g.m.subscriptions.Dec()
	p.topics[key]--
	last := p.topics[key] == 0
	if last {
		delete(p.topics, key)
		delete(p.latest, key)
	}
	p.mu.Unlock()
	if last {
		p.sub.Remove(fanout.ServiceTopic(key))
	}
}

// close drops every subscription; the push goroutine ends.
func (p *rpcPusher) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.g.m.subscriptions.Sub(float64(len(p.subs)))
	p.subs = map[rpcSubKey]*rpcSub{}
	p.mu.Unlock()
	p.sub.Close()
}

// run is the connection's push goroutine.
func (p *rpcPusher) run() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-p.s.done:
			return
		case <-p.wake:
		case r := <-p.acks:
			p.ack(r, time.Now())
		case <-timer.C:
		}
		if p.sub.Ended() {
			p.s.close("the node's fan-out closed")
			return
		}
		next, ok := p.step(time.Now())
		if !ok {
			return
		}
		timer.Stop()
		select {
		case <-timer.C:
		default:
		}
		if !next.IsZero() {
			timer.Reset(max(time.Until(next), 0))
		}
	}
}

// rpcPush is a push to send.
type rpcPush struct {
	id      uint64
	sk      rpcSubKey
	info    []byte
	allowed func() bool
}

// step takes the pending updates, expires pushes past their deadline and sends what
// differs from what each client holds. It returns when it next has something to do
// (zero: nothing), and false once the connection is gone.
func (p *rpcPusher) step(now time.Time) (time.Time, bool) {
	updates := p.sub.Next()
	var next time.Time
	later := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	var sends []rpcPush
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return next, false
	}
	for _, u := range updates {
		key := u.Topic.Service
		if p.topics[key] == 0 {
			continue // unsubscribed meanwhile
		}
		p.latest[key] = u
		for sk, sub := range p.subs {
			if sk.key == key {
				sub.changed = now
				if sub.noticed.IsZero() {
					sub.noticed = now
				}
			}
		}
	}
	for sk, sub := range p.subs {
		if sub.inflight != 0 {
			if now.Before(sub.deadline) {
				later(sub.deadline)
				continue
			}
			delete(p.byID, sub.inflight)
			p.s.forget(strconv.FormatUint(sub.inflight, 10))
			sub.inflight = 0
			sub.retryAt = now.Add(p.g.cfg.PushRetryDelay)
			p.g.m.pushes.WithLabelValues("timeout").Inc()
		}
		if !sub.retryAt.IsZero() {
			if now.Before(sub.retryAt) {
				later(sub.retryAt)
				continue
			}
			sub.retryAt = time.Time{}
		}
		u := p.latest[sk.key]
		if u == nil {
			continue
		}
		sig, info, ok := p.render(u, sk)
		if !ok {
			continue
		}
		if bytes.Equal(sig, sub.acked) {
			sub.noticed = time.Time{}
			continue
		}
		id := p.g.ids.Add(1)
		sub.inflight, sub.inflightSig, sub.sentAt, sub.deadline = id, sig, now, now.Add(p.g.cfg.PushTimeout)
		p.byID[id] = sk
		later(sub.deadline)
		sends = append(sends, rpcPush{id: id, sk: sk, info: info, allowed: sub.allowed})
	}
	p.mu.Unlock()
	for _, snd := range sends {
		if snd.allowed != nil && !snd.allowed() {
			// The token the client subscribed with was deleted or lost its right.
			p.unsubscribe(snd.sk.key, snd.sk.clusters)
			p.g.log.Debug("nacos grpc subscription ended: its token no longer grants read access",
				"conn", p.s.c.id, "service", snd.sk.key.String())
			continue
		}
		if !p.s.expect(strconv.FormatUint(snd.id, 10), p.acked) {
			return next, false
		}
		if err := p.s.send(rpcNotifySubscriberRequest, notifyBody(snd.id, snd.sk.key, snd.info)); err != nil {
			p.g.m.pushes.WithLabelValues("failed").Inc()
			p.s.close("push failed: " + err.Error())
			return next, false
		}
		p.g.m.pushes.WithLabelValues("sent").Inc()
	}
	return next, true
}

// acked hands the client's answer to a push to the push goroutine (it runs on the
// stream's reading goroutine).
func (p *rpcPusher) acked(r rpcResponse) {
	select {
	case p.acks <- r:
	case <-p.s.done:
	}
}

// ack records the client's answer to a push: success makes the pushed list the one it
// holds; a failure is retried after PushRetryDelay.
func (p *rpcPusher) ack(r rpcResponse, now time.Time) {
	id, err := strconv.ParseUint(r.RequestID, 10, 64)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sk, ok := p.byID[id]
	if !ok {
		return
	}
	delete(p.byID, id)
	sub := p.subs[sk]
	if sub == nil || sub.inflight != id {
		return
	}
	sub.inflight = 0
	if r.ResultCode != rpcResultSuccess {
		sub.retryAt = now.Add(p.g.cfg.PushRetryDelay)
		p.g.m.pushes.WithLabelValues("failed").Inc()
		return
	}
	sub.acked = sub.inflightSig
	p.g.m.pushes.WithLabelValues("acked").Inc()
	if !sub.noticed.IsZero() {
		p.g.m.pushLatency.Observe(now.Sub(sub.noticed).Seconds())
	}
	sub.noticed = time.Time{}
	if sub.changed.After(sub.sentAt) {
		// A change arrived after this push was sent: it is the next one's.
		sub.noticed = sub.changed
	}
}

// render is a subscription's list in an update: its signature, and its JSON with the
// update's lastRefTime. Both are computed once per update and clusters filter, and
// shared by every connection that pushes them. ok is false for a failed read (the next
// change reads again).
func (p *rpcPusher) render(u *fanout.Update, sk rpcSubKey) (sig, info []byte, ok bool) {
	if u.Err != nil && !errors.Is(u.Err, model.ErrNotFound) {
		return nil, nil, false
	}
	memo := "grpc\x00" + sk.clusters
	view := func() rpcView { return rpcViewOf(sk.key, u.Service, u.Err == nil, sk.clusters, false) }
	sig, err := u.Render(memo+"\x00sig", func() ([]byte, error) { return view().sig, nil })
	if err != nil {
		return nil, nil, false
	}
	info, err = u.Render(memo+"\x00info", func() ([]byte, error) { return view().encode(p.g.refs.next(time.Now())) })
	if err != nil {
		return nil, nil, false
	}
	return sig, info, true
}
