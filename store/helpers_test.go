package store

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rosterhq/roster/model"
)

// mustNewStore opens a store in a fresh temporary directory and closes it at cleanup.
func mustNewStore(t testing.TB) *Store {
	t.Helper()
	return mustOpenAt(t, filepath.Join(t.TempDir(), "state.db"))
}

// mustOpenAt opens the store at path (NoSync) and closes it at cleanup.
func mustOpenAt(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var testKey = model.ServiceKey{Namespace: "dev", Group: "g1", Service: "orders"}

// testInstance returns a valid instance of testKey in cluster DEFAULT.
func testInstance(ip string, port int) model.Instance {
	return model.Instance{
		Namespace: testKey.Namespace, Group: testKey.Group, Service: testKey.Service,
		IP: ip, Port: port, Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true,
		Metadata: map[string]string{"version": "v1"},
	}
}

func mustDo(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustDump(t testing.TB, s *Store) State {
	t.Helper()
	st, err := s.Dump()
	if err != nil {
		t.Fatalf("Dump: %v", err)
	}
	return st
}

// assertUnchanged fails if the store's state differs from before.
func assertUnchanged(t testing.TB, s *Store, before State) {
	t.Helper()
	if after := mustDump(t, s); !reflect.DeepEqual(before, after) {
		t.Fatalf("state changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

// assertField fails unless err is a *model.ValidationError for field.
func assertField(t testing.TB, err error, field string) {
	t.Helper()
	var ve *model.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("err = %v, want a validation error for %q", err, field)
	}
	if ve.Field != field {
		t.Fatalf("validation error names %q, want %q (%v)", ve.Field, field, err)
	}
}

func mustInstance(t testing.TB, s *Store, ref model.InstanceRef) model.Instance {
	t.Helper()
	_, in, err := s.Instance(nil, ref)
	if err != nil {
		t.Fatalf("Instance(%v): %v", ref, err)
	}
	return in
}

func mustService(t testing.TB, s *Store, key model.ServiceKey) model.Service {
	t.Helper()
	_, svc, err := s.Service(nil, key)
	if err != nil {
		t.Fatalf("Service(%v): %v", key, err)
	}
	return svc
}

// fired reports whether ws wakes within a short deadline. Use it only where a wake is
// expected; for "must not fire" use notFired, which checks without waiting.
func fired(ws *WatchSet) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return ws.Wait(ctx)
}

// notFired reports whether none of ws's channels is closed right now. Watches fire
// before a write returns, so no waiting is needed.
func notFired(ws *WatchSet) bool {
	for ch := range ws.chans {
		select {
		case <-ch:
			return false
		default:
		}
	}
	return true
}
