package fanout

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rosterhq/roster/internal/storetest"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

var svcKey = model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders"}

type env struct {
	t     *testing.T
	st    *store.Store
	hub   *Hub
	reg   *prometheus.Registry
	index uint64
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	st := storetest.Open(t)
	reg := prometheus.NewRegistry()
	opts.Metrics = reg
	hub, err := New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		hub.Close()
		_ = st.Close()
	})
	return &env{t: t, st: st, hub: hub, reg: reg}
}

func instance(key model.ServiceKey, ip string, port int) model.Instance {
	return model.Instance{
		Namespace: key.Namespace, Group: key.Group, Service: key.Service,
		IP: ip, Port: port, Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true,
	}
}

// register registers 127.0.0.1:port in key and returns the write's index.
func (e *env) register(key model.ServiceKey, port int) uint64 {
	e.t.Helper()
	e.index++
	if err := e.st.Update(func(tx *store.Txn) error {
		if err := tx.RegisterInstance(e.index, instance(key, "127.0.0.1", port)); err != nil {
			return err
		}
		return tx.SetAppliedIndex(e.index)
	}); err != nil {
		e.t.Fatal(err)
	}
	return e.index
}

// next waits for the subscription's next non-empty batch of updates.
func next(t *testing.T, s *Subscription) []*Update {
	t.Helper()
	select {
	case _, ok := <-s.C():
		if !ok {
			t.Fatalf("subscription ended: %v", s.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no update within 10s")
	}
	return s.Next()
}

// nextIndex waits until the subscription has delivered an update for its only topic
// at index ≥ want and returns every update it saw on the way.
func nextIndex(t *testing.T, s *Subscription, want uint64) []*Update {
	t.Helper()
	var seen []*Update
	for {
		us := next(t, s)
		seen = append(seen, us...)
		for _, u := range us {
			if u.Index >= want {
				return seen
			}
		}
	}
}

func TestSubscribe_FirstUpdateIsCurrentView(t *testing.T) {
	e := newEnv(t, Options{})
	idx := e.register(svcKey, 1001)
	sub, err := e.hub.Subscribe(ServiceTopic(svcKey))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	us := next(t, sub)
	if len(us) != 1 {
		t.Fatalf("got %d updates, want 1", len(us))
	}
	u := us[0]
	if u.Err != nil || u.Index != idx || len(u.Service.Instances) != 1 || u.Resync {
		t.Fatalf("first update = index %d err %v instances %d resync %v; want index %d, 1 instance",
			u.Index, u.Err, len(u.Service.Instances), u.Resync, idx)
	}
}

func TestSubscribe_MissingServiceThenCreated(t *testing.T) {
	e := newEnv(t, Options{})
	sub, err := e.hub.Subscribe(ServiceTopic(svcKey))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	us := next(t, sub)
	if len(us) != 1 || !errors.Is(us[0].Err, model.ErrNotFound) {
		t.Fatalf("first update of a missing service: %+v, want not found", us)
	}
	idx := e.register(svcKey, 1001)
	seen := nextIndex(t, sub, idx)
	last := seen[len(seen)-1]
	if last.Err != nil || len(last.Service.Instances) != 1 {
		t.Fatalf("after creation: err %v, %d instances", last.Err, len(last.Service.Instances))
	}
}

func TestHub_OtherServicesDoNotWake(t *testing.T) {
	e := newEnv(t, Options{})
	e.register(svcKey, 1001)
	sub, err := e.hub.Subscribe(ServiceTopic(svcKey))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	next(t, sub)
	other := svcKey
	other.Service = "payments"
	e.register(other, 2001)
	// A change to this service after the other one: the first update to arrive must be it.
	idx := e.register(svcKey, 1002)
	us := next(t, sub)
	if len(us) != 1 || us[0].Index != idx {
		t.Fatalf("after a change to another service and one to ours got %d updates (first index %d), want exactly ours at %d",
			len(us), us[0].Index, idx)
	}
}

// TestSubscription_CoalescesToLatest: a subscriber that does not read while many
// changes land sees only the latest state, once.
func TestSubscription_CoalescesToLatest(t *testing.T) {
	e := newEnv(t, Options{})
	e.register(svcKey, 1000)
	sub, err := e.hub.Subscribe(ServiceTopic(svcKey))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	next(t, sub)
	var last uint64
	for i := 1; i <= 50; i++ {
		last = e.register(svcKey, 1000+i)
	}
	wait.For(t, 10*time.Second, "the hub to publish the last change", func() bool {
		return testutil.ToFloat64(e.hub.m.updates) >= 2 && pendingIndex(sub) == last
	})
	us := sub.Next()
	if len(us) != 1 || us[0].Index != last || len(us[0].Service.Instances) != 51 {
		t.Fatalf("after 50 unread changes Next returned %d updates (first index %d), want one at %d with 51 instances",
			len(us), us[0].Index, last)
	}
	if again := sub.Next(); len(again) != 0 {
		t.Fatalf("second Next returned %d updates, want none", len(again))
	}
}

func pendingIndex(s *Subscription) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.entries) == 0 || s.entries[0].pending == nil {
		return 0
	}
	return s.entries[0].pending.Index
}

// TestSubscription_NeverTheSameStateTwice: every update a reading subscriber gets has a
// higher index than the one before.
func TestSubscription_NeverTheSameStateTwice(t *testing.T) {
	e := newEnv(t, Options{})
	e.register(svcKey, 1000)
	sub, err := e.hub.Subscribe(ServiceTopic(svcKey))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	done := make(chan []uint64)
	var want atomic.Uint64
	want.Store(1 << 62)
	go func() {
		var got []uint64
		for range sub.C() {
			for _, u := range sub.Next() {
				got = append(got, u.Index)
			}
			if len(got) > 0 && got[len(got)-1] >= want.Load() {
				break
			}
		}
		done <- got
	}()
	var last uint64
	for i := 1; i <= 200; i++ {
		last = e.register(svcKey, 1000+i)
	}
	want.Store(last)
	e.register(svcKey, 5000) // wakes the reader if it already passed the check
	got := <-done
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("update %d has index %d after %d: %v", i, got[i], got[i-1], got)
		}
	}
	t.Logf("200 changes reached a reading subscriber as %d updates", len(got))
}

// TestSubscription_SlowSubscriberResyncs: a subscriber with more pending topics than
// its queue holds is resynced, and never blocks the hub or other subscribers.
func TestSubscription_SlowSubscriberResyncs(t *testing.T) {
	e := newEnv(t, Options{QueueLen: 4})
	keys := make([]model.ServiceKey, 10)
	slow, err := e.hub.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	for i := range keys {
		keys[i] = svcKey
		keys[i].Service = fmt.Sprintf("svc-%d", i)
		e.register(keys[i], 1000)
		if err := slow.Add(ServiceTopic(keys[i])); err != nil {
			t.Fatal(err)
		}
	}
	fast, err := e.hub.Subscribe(ServiceTopic(keys[9]))
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	next(t, fast)
	var last uint64
	for _, k := range keys {
		last = e.register(k, 2000)
	}
	// The fast subscriber gets its change although the slow one is stuck.
	nextIndex(t, fast, last)
	us := slow.Next()
	if len(us) != len(keys) {
		t.Fatalf("resync returned %d updates, want one per topic (%d)", len(us), len(keys))
	}
	for _, u := range us {
		if !u.Resync || u.Err != nil || len(u.Service.Instances) != 2 {
			t.Fatalf("resync update %s: resync %v err %v instances %d; want a fresh full view",
				u.Topic, u.Resync, u.Err, len(u.Service.Instances))
		}
	}
	if got := testutil.ToFloat64(e.hub.m.resyncs.WithLabelValues("overflow")); got != 1 {
		t.Fatalf("overflow resyncs = %v, want 1", got)
	}
	if again := slow.Next(); len(again) != 0 {
		t.Fatalf("after the resync Next returned %d updates, want none", len(again))
	}
}

func TestHub_RestoreResendsFullViews(t *testing.T) {
	e := newEnv(t, Options{})
	e.register(svcKey, 1001)
	sn, err := e.st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	_ = sn.Close()
	idx := e.register(svcKey, 1002)
	sub, err := e.hub.Subscribe(ServiceTopic(svcKey))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if us := next(t, sub); us[0].Index != idx || len(us[0].Service.Instances) != 2 {
		t.Fatalf("first update index %d with %d instances", us[0].Index, len(us[0].Service.Instances))
	}
	if err := e.st.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	us := next(t, sub)
	if len(us) != 1 || !us[0].Resync || len(us[0].Service.Instances) != 1 {
		t.Fatalf("after restore: %d updates, resync %v, %d instances; want a resync with the restored instance",
			len(us), us[0].Resync, len(us[0].Service.Instances))
	}
}

func TestHub_ResyncResendsUnchangedViews(t *testing.T) {
	e := newEnv(t, Options{})
	idx := e.register(svcKey, 1001)
	sub, err := e.hub.Subscribe(ServiceTopic(svcKey))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	next(t, sub)
	e.hub.Resync("leadership")
	us := next(t, sub)
	if len(us) != 1 || !us[0].Resync || us[0].Index != idx {
		t.Fatalf("after Resync: %d updates resync %v index %d; want the unchanged view at %d marked resync",
			len(us), us[0].Resync, us[0].Index, idx)
	}
	if got := testutil.ToFloat64(e.hub.m.resyncs.WithLabelValues("leadership")); got != 1 {
		t.Fatalf("leadership resyncs = %v, want 1", got)
	}
}

func TestHub_ServiceListTopic(t *testing.T) {
	e := newEnv(t, Options{})
	e.register(svcKey, 1001)
	sub, err := e.hub.Subscribe(ServicesTopic("public", store.ServiceFilter{}, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if us := next(t, sub); us[0].Err != nil || us[0].Total != 1 {
		t.Fatalf("first list update: err %v total %d", us[0].Err, us[0].Total)
	}
	other := svcKey
	other.Service = "payments"
	idx := e.register(other, 2001)
	seen := nextIndex(t, sub, idx)
	if last := seen[len(seen)-1]; last.Total != 2 || len(last.Services) != 2 {
		t.Fatalf("after a new service: total %d, %d services", last.Total, len(last.Services))
	}
	// A list filtered by name (case-insensitively) holds the matching service only, with
	// its instance counts, and follows its registrations.
	paySub, err := e.hub.Subscribe(ServicesTopic("public", store.ServiceFilter{Name: "PAY"}, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer paySub.Close()
	if us := next(t, paySub); us[0].Total != 1 || len(us[0].Services) != 1 || us[0].Services[0].Service.Name != "payments" || us[0].Services[0].Instances != 1 {
		t.Fatalf("filtered list: total %d, %+v", us[0].Total, us[0].Services)
	}
	idx = e.register(other, 2002)
	if last := nextIndex(t, paySub, idx); last[len(last)-1].Services[0].Instances != 2 {
		t.Fatalf("filtered list after a registration: %+v", last[len(last)-1].Services)
	}
	_ = next(t, sub) // the unfiltered list saw it too
	// Another namespace does not wake the list.
	elsewhere := model.ServiceKey{Namespace: "staging", Group: "DEFAULT_GROUP", Service: "orders"}
	e.register(elsewhere, 3001)
	idx = e.register(svcKey, 1002)
	if us := next(t, sub); len(us) != 1 || us[0].Index != idx {
		t.Fatalf("got update at %d, want only the public namespace's change at %d", us[0].Index, idx)
	}
}

func TestHub_CloseEndsSubscriptions(t *testing.T) {
	e := newEnv(t, Options{})
	sub, err := e.hub.Subscribe(ServiceTopic(svcKey))
	if err != nil {
		t.Fatal(err)
	}
	empty, err := e.hub.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	e.hub.Close()
	for _, s := range []*Subscription{sub, empty} {
		for range s.C() {
		}
		if !errors.Is(s.Err(), ErrClosed) {
			t.Fatalf("Err after hub close = %v", s.Err())
		}
	}
	if _, err := e.hub.Subscribe(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after close: %v", err)
	}
}

func TestSubscription_CloseAndRemoveDetach(t *testing.T) {
	e := newEnv(t, Options{})
	topic := ServiceTopic(svcKey)
	a, _ := e.hub.Subscribe(topic)
	b, _ := e.hub.Subscribe(topic)
	if n := e.hub.Subscribers(topic); n != 2 {
		t.Fatalf("subscribers = %d, want 2", n)
	}
	a.Close()
	b.Remove(topic)
	if n := e.hub.Subscribers(topic); n != 0 {
		t.Fatalf("subscribers after close and remove = %d, want 0", n)
	}
	if err := b.Add(topic); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(topic); !errors.Is(err, ErrDuplicateTopic) {
		t.Fatalf("second Add: %v", err)
	}
	b.Close()
	if got := testutil.ToFloat64(e.hub.m.subscribers); got != 0 {
		t.Fatalf("subscribers gauge = %v, want 0", got)
	}
	if got := testutil.ToFloat64(e.hub.m.topics); got != 0 {
		t.Fatalf("topics gauge = %v, want 0", got)
	}
}

func TestUpdate_RenderOncePerUpdate(t *testing.T) {
	u := &Update{}
	calls := 0
	for range 3 {
		b, err := u.Render("healthy", func() ([]byte, error) { calls++; return []byte("x"), nil })
		if err != nil || string(b) != "x" {
			t.Fatal(b, err)
		}
	}
	if _, err := u.Render("all", func() ([]byte, error) { calls++; return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Fatalf("render called %d times, want 2 (one per key)", calls)
	}
}

// TestSubscription_IdleFootprint measures what an idle subscriber costs the hub.
func TestSubscription_IdleFootprint(t *testing.T) {
	e := newEnv(t, Options{})
	e.register(svcKey, 1001)
	const n = 2000
	subs := make([]*Subscription, 0, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		s, err := e.hub.Subscribe(ServiceTopic(svcKey))
		if err != nil {
			t.Fatal(err)
		}
		s.Next()
		subs = append(subs, s)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("heap per idle subscription: %.0f bytes", per)
	if per > 16<<10 {
		t.Fatalf("an idle subscription holds %.0f bytes of heap, over the 16 KiB budget", per)
	}
	for _, s := range subs {
		s.Close()
	}
}

// TestSubscribeFunc_NotifiesPendingAndEnd: the callback fires when updates become pending
// (without anyone reading C) and when the subscription ends, and not for changes to other
// services.
func TestSubscribeFunc_NotifiesPendingAndEnd(t *testing.T) {
	e := newEnv(t, Options{})
	var calls atomic.Int64
	s, err := e.hub.SubscribeFunc(func() { calls.Add(1) }, ServiceTopic(svcKey))
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 || len(s.Next()) != 1 {
		t.Fatalf("after subscribing: %d calls, want 1 with the first view pending", calls.Load())
	}
	other := model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "payments"}
	e.register(other, 9000)
	idx := e.register(svcKey, 8000)
	wait.For(t, 5*time.Second, "a notification of the change", func() bool { return calls.Load() == 2 })
	if u := s.Next(); len(u) != 1 || u[0].Index != idx {
		t.Fatalf("pending after the notification: %+v, want the change at %d", u, idx)
	}
	if s.Ended() {
		t.Fatal("Ended before the close")
	}
	e.hub.Close()
	if calls.Load() != 3 || !s.Ended() {
		t.Fatalf("after the hub closed: %d calls, ended %v; want 3 and ended", calls.Load(), s.Ended())
	}
}
