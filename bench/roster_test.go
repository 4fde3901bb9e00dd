package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRosterClient_RegisterReadDeregisterWatch(t *testing.T) {
	for _, transport := range []string{WatchSSE, WatchBlocking} {
		t.Run(transport, func(t *testing.T) {
			st := newFakeStore()
			srv := newFakeRoster(t, st)
			c := mustNewClient(t, ClientConfig{System: SystemRoster, Endpoints: []string{srv.URL}, WatchTransport: transport})
			ctx := testCtx(t)
			k := InstanceKey{Service: "orders", IP: "127.100.0.1", Port: 8080}
			idx, err := c.Register(ctx, 0, k, 7)
			if err != nil || idx == 0 {
				t.Fatalf("register: %d %v", idx, err)
			}
			for _, mode := range []string{Linearizable, Leader, Stale} {
				got, n, err := c.Read(ctx, 3, "orders", mode)
				if err != nil || n != 1 || got != idx {
					t.Fatalf("%s read: idx %d n %d err %v", mode, got, n, err)
				}
			}
			keys, err := c.List(ctx, "orders")
			if err != nil || len(keys) != 1 || keys[0] != k {
				t.Fatalf("list %v %v", keys, err)
			}
			if keys, err := c.List(ctx, "missing"); err != nil || len(keys) != 0 {
				t.Fatalf("list of a missing service: %v %v", keys, err)
			}

			seen := make(chan uint64, 16)
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- c.Watch(wctx, 0, "orders", Stale, func(i uint64, _ time.Time) { seen <- i }) }()
			recv := func() uint64 {
				select {
				case i := <-seen:
					return i
				case err := <-done:
					t.Fatalf("watch ended: %v", err)
				case <-ctx.Done():
					t.Fatal("no event")
				}
				return 0
			}
			if first := recv(); first != idx {
				t.Fatalf("watch established at %d, want %d", first, idx)
			}
			idx2, err := c.Deregister(ctx, 0, k)
			if err != nil {
				t.Fatal(err)
			}
			if got := recv(); got != idx2 {
				t.Fatalf("watch saw %d, want %d", got, idx2)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("watch returned %v after cancel", err)
			}
			if _, err := c.Deregister(ctx, 0, k); !errors.Is(err, ErrNotFound) {
				t.Fatalf("second deregister: %v", err)
			}
		})
	}
}

func TestRosterClient_ErrorsCarryStatus(t *testing.T) {
	st := newFakeStore()
	srv := newFakeRoster(t, st)
	c := mustNewClient(t, ClientConfig{System: SystemRoster, Endpoints: []string{srv.URL}})
	_, _, err := c.Read(testCtx(t), 0, "nope", Stale)
	var se *statusError
	if !errors.As(err, &se) || se.code != 404 {
		t.Fatalf("err %v, want a 404 status error", err)
	}
}

func TestNewClient_RejectsUnknownSystemAndTarget(t *testing.T) {
	ctx := testCtx(t)
	if _, err := NewClient(ctx, ClientConfig{System: "consul", Endpoints: []string{"127.0.0.1:1"}}); err == nil {
		t.Error("unknown system accepted")
	}
	if _, err := NewClient(ctx, ClientConfig{System: SystemRoster, Endpoints: []string{"127.0.0.1:1"}, WriteTarget: "some"}); err == nil {
		t.Error("unknown target accepted")
	}
	if _, err := NewClient(ctx, ClientConfig{System: SystemRoster}); err == nil {
		t.Error("no endpoints accepted")
	}
	if _, err := NewClient(ctx, ClientConfig{System: SystemRoster, Endpoints: []string{"127.0.0.1:1"}, WriteTarget: TargetAll,
		ReadTarget: TargetAll, WatchTransport: "websocket"}); err == nil {
		t.Error("unknown watch transport accepted")
	}
}
