package registry

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/rosterhq/roster/model"
)

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// The writes that create or replace something under a service name (register, service,
// cluster) go through the node's handling of confusable names: refused, naming the
// field, with RefuseConfusableNames; else applied and logged once per name.
func TestRegistry_ConfusableNames(t *testing.T) {
	ctx := context.Background()
	hc := model.HealthCheck{Type: model.CheckNone}.WithDefaults()
	writes := func(r *Registry, service string) map[string]func() (uint64, error) {
		return map[string]func() (uint64, error){
			"register": func() (uint64, error) {
				return r.RegisterInstance(ctx, model.Instance{Namespace: "public", Group: "g", Service: service, IP: "127.100.0.1", Port: 80,
					Cluster: model.DefaultCluster, Weight: 1, Enabled: true}, Condition{})
			},
			"service": func() (uint64, error) {
				return r.UpsertService(ctx, model.Service{Namespace: "public", Group: "g", Name: service}, Condition{})
			},
			"cluster": func() (uint64, error) {
				return r.UpsertCluster(ctx, model.Cluster{Namespace: "public", Group: "g", Service: service, Name: "web", HealthCheck: hc}, Condition{})
			},
		}
	}

	raft := &countingRaft{}
	strict, err := New(Config{Settings: defaultSettings{}, Raft: raft, RefuseConfusableNames: true})
	if err != nil {
		t.Fatal(err)
	}
	for name, write := range writes(strict, "\u043erders") {
		_, err := write()
		var ve *model.ValidationError
		if !errors.As(err, &ve) || ve.Field != "service" || !strings.Contains(ve.Message, "Cyrillic and Latin") {
			t.Errorf("%s under a mixed-script name: %v, want a validation error naming service", name, err)
		}
	}
	if len(raft.applied) != 0 {
		t.Fatalf("%d commands submitted for refused writes", len(raft.applied))
	}
	for name, write := range writes(strict, "orders") {
		if _, err := write(); err != nil {
			t.Errorf("%s under a plain name: %v", name, err)
		}
	}

	logs := &lockedBuf{}
	lenient, err := New(Config{Settings: defaultSettings{}, Raft: &countingRaft{}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for name, write := range writes(lenient, "\uff4frders") {
			if _, err := write(); err != nil {
				t.Errorf("%s under a fullwidth name without the flag: %v", name, err)
			}
		}
	}
	if n := logs.count("level=WARN"); n != 1 {
		t.Fatalf("%d warnings for one name written 6 times, want 1", n)
	}
	if n := logs.count("U+FF4F"); n != 1 {
		t.Fatalf("the warning does not name the fullwidth form")
	}
}
