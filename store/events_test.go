package store

import (
	"testing"

	"github.com/rosterhq/roster/model"
)

func kinds(evs []Event) []EventKind {
	var out []EventKind
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

func recv(t *testing.T, ch <-chan []Event) []Event {
	t.Helper()
	select {
	case evs, ok := <-ch:
		if !ok {
			t.Fatal("feed closed")
		}
		return evs
	default:
		t.Fatal("no events pending")
		return nil
	}
}

// entityEvents drops the service and namespace events that accompany entity changes.
func entityEvents(evs []Event) []Event {
	var out []Event
	for _, e := range evs {
		switch e.Kind {
		case EventServiceUpsert, EventNamespaceUpsert, EventNamespaceDelete:
		default:
			out = append(out, e)
		}
	}
	return out
}

func TestSubscribe_ServiceAndNamespaceEventsCarryTheIndex(t *testing.T) {
	s := mustNewStore(t)
	ch, cancel := s.Subscribe(16)
	defer cancel()
	in := testInstance("127.100.0.1", 80)
	mustDo(t, s.Update(func(tx *Txn) error {
		if err := tx.RegisterInstance(7, in); err != nil {
			return err
		}
		return tx.SetAppliedIndex(7)
	}))
	evs := recv(t, ch)
	var ns, svc bool
	for _, e := range evs {
		if e.Index != 7 {
			t.Fatalf("event %s has index %d, want the commit's 7", e.Kind, e.Index)
		}
		ns = ns || (e.Kind == EventNamespaceUpsert && e.Service.Namespace == testKey.Namespace)
		svc = svc || (e.Kind == EventServiceUpsert && e.Service == testKey)
	}
	if !ns || !svc {
		t.Fatalf("first registration: %v, want a namespace-upsert and a service-upsert", kinds(evs))
	}
	mustDo(t, s.UpsertNamespace(8, model.Namespace{ID: "staging", Name: "staging"}))
	if evs := recv(t, ch); len(evs) != 1 || evs[0].Kind != EventNamespaceUpsert || evs[0].Service.Namespace != "staging" {
		t.Fatalf("namespace create: %+v", evs)
	}
	mustDo(t, s.DeleteNamespace(9, "staging"))
	if evs := recv(t, ch); len(evs) != 1 || evs[0].Kind != EventNamespaceDelete || evs[0].Service.Namespace != "staging" {
		t.Fatalf("namespace delete: %+v", evs)
	}
}

func TestSubscribe_DeliversEachCommitInOrder(t *testing.T) {
	s := mustNewStore(t)
	ch, cancel := s.Subscribe(16)
	defer cancel()
	in := testInstance("127.100.0.1", 80)

	mustDo(t, s.RegisterInstance(1, in))
	evs := entityEvents(recv(t, ch))
	if k := kinds(evs); len(k) != 2 || k[0] != EventClusterUpsert || k[1] != EventInstanceUpsert {
		t.Fatalf("register: %v, want implicit cluster then instance", k)
	}
	if evs[1].Instance.CreateIndex != 1 || evs[1].Ref != in.Ref() || evs[1].Service != testKey {
		t.Fatalf("instance event %+v", evs[1])
	}
	mustDo(t, s.UpsertCluster(2, model.Cluster{Namespace: testKey.Namespace, Group: testKey.Group, Service: testKey.Service,
		Name: model.DefaultCluster, HealthCheck: model.HealthCheck{Type: model.CheckHTTP}}))
	if evs := entityEvents(recv(t, ch)); len(evs) != 1 || evs[0].Kind != EventClusterUpsert || evs[0].Cluster.HealthCheck.Type != model.CheckHTTP {
		t.Fatalf("cluster: %+v", evs)
	}
	_, _ = s.SetHealth(3, []model.HealthUpdate{{Ref: in.Ref(), Epoch: 1, Healthy: false}})
	if evs := entityEvents(recv(t, ch)); len(evs) != 1 || evs[0].Kind != EventInstanceUpsert || evs[0].Instance.Healthy {
		t.Fatalf("health: %+v", evs)
	}
	mustDo(t, s.DeregisterInstance(4, in.Ref()))
	if evs := entityEvents(recv(t, ch)); len(evs) != 1 || evs[0].Kind != EventInstanceDelete || evs[0].Ref != in.Ref() {
		t.Fatalf("deregister: %+v", evs)
	}
	mustDo(t, s.DeleteService(5, testKey))
	if evs := entityEvents(recv(t, ch)); len(evs) != 1 || evs[0].Kind != EventServiceDelete || evs[0].Service != testKey {
		t.Fatalf("delete service: %+v", evs)
	}
	// No-ops and member changes carry no events.
	mustDo(t, s.UpsertMember(6, model.Member{ID: "n1", RaftAddr: "127.0.0.1:1"}))
	select {
	case evs := <-ch:
		t.Fatalf("unexpected events %+v", evs)
	default:
	}
}

func TestSubscribe_OverflowReplacesPendingWithOneReset(t *testing.T) {
	s := mustNewStore(t)
	ch, cancel := s.Subscribe(2)
	defer cancel()
	for i := range 5 { // more commits than the buffer holds; none may block
		mustDo(t, s.RegisterInstance(uint64(i+1), testInstance("127.100.0.1", 80+i)))
	}
	evs := recv(t, ch)
	if len(evs) != 1 || evs[0].Kind != EventReset {
		t.Fatalf("after overflow got %v, want one reset", kinds(evs))
	}
	select {
	case evs := <-ch:
		t.Fatalf("more pending after the reset: %v", kinds(evs))
	default:
	}
	mustDo(t, s.RegisterInstance(10, testInstance("127.100.0.2", 80)))
	if evs := recv(t, ch); evs[len(evs)-1].Kind != EventInstanceUpsert {
		t.Fatalf("after the reset got %v", kinds(evs))
	}
}

func TestSubscribe_CancelAndCloseCloseTheChannel(t *testing.T) {
	s := mustNewStore(t)
	ch1, cancel1 := s.Subscribe(1)
	ch2, _ := s.Subscribe(1)
	cancel1()
	cancel1()
	if _, ok := <-ch1; ok {
		t.Fatal("cancelled channel not closed")
	}
	mustDo(t, s.Close())
	if _, ok := <-ch2; ok {
		t.Fatal("channel not closed by Close")
	}
	ch3, _ := s.Subscribe(1)
	if _, ok := <-ch3; ok {
		t.Fatal("subscription after Close not closed")
	}
}
