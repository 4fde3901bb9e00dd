package dnsapi

import (
	"context"
	"testing"
	"time"

	"github.com/rosterhq/roster/internal/storetest"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st := storetest.Open(t)
	return st
}

func instanceOf(k model.ServiceKey, ip string) model.Instance {
	return model.Instance{Namespace: k.Namespace, Group: k.Group, Service: k.Service, IP: ip, Port: 1,
		Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true}
}

func countOf(t *testing.T, c *catalog, k model.ServiceKey) int {
	t.Helper()
	svc, err := c.lookup(k)
	if err != nil {
		t.Fatal(err)
	}
	if svc == nil {
		return -1
	}
	return len(svc.instances)
}

// An entry applied through the FSM (it raises the applied index) is seen by the very
// next lookup, with no watcher running at all.
func TestCatalog_AppliedIndexInvalidatesAtOnce(t *testing.T) {
	st := openStore(t)
	c := newCatalog(st) // no run: only the applied index can invalidate
	k := short("db")
	if n := countOf(t, c, k); n != -1 {
		t.Fatalf("before: %d", n)
	}
	for i, ip := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"} {
		idx := uint64(i + 1)
		if err := st.Update(func(tx *store.Txn) error {
			if err := tx.RegisterInstance(idx, instanceOf(k, ip)); err != nil {
				return err
			}
			return tx.SetAppliedIndex(idx)
		}); err != nil {
			t.Fatal(err)
		}
		if n := countOf(t, c, k); n != i+1 {
			t.Fatalf("after applying entry %d: %d instances", idx, n)
		}
	}
}

// A commit that does not move the applied index (a write outside the FSM, a restore of
// a file with the same index) is seen once the watcher bumps the epoch.
func TestCatalog_WatchInvalidatesOtherCommits(t *testing.T) {
	st := openStore(t)
	c := newCatalog(st)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.run(ctx) }()
	defer func() { cancel(); <-done }()
	wait.For(t, 5*time.Second, "the watcher to arm", func() bool { return c.epoch.Load() > 0 })
	k := short("db")
	if err := st.RegisterInstance(1, instanceOf(k, "127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the first instance", func() bool { return countOf(t, c, k) == 1 })
	if err := st.RegisterInstance(2, instanceOf(k, "127.0.0.2")); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the second instance", func() bool { return countOf(t, c, k) == 2 })
	if st.AppliedIndex() != 0 {
		t.Fatalf("applied index %d: these writes were to leave it alone", st.AppliedIndex())
	}
}

// The watcher stops when the store closes instead of spinning on its closed channel.
func TestCatalog_WatcherStopsWithTheStore(t *testing.T) {
	st := openStore(t)
	c := newCatalog(st)
	done := make(chan struct{})
	go func() { defer close(done); c.run(context.Background()) }()
	wait.For(t, 5*time.Second, "the watcher to arm", func() bool { return c.epoch.Load() > 0 })
	_ = st.Close()
	wait.For(t, 5*time.Second, "the watcher to stop", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}
