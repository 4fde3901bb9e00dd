package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// undo runs the closers in reverse order of registration, after the loops stopped;
// stopLoops cancels every loop and returns only once all have; waitServes waits for
// every Serve call.
func TestLifecycle_ReverseUndoAndWaitedGoroutines(t *testing.T) {
	l := newLifecycle()
	var order []int
	for i := range 3 {
		l.onUndo(func() error { order = append(order, i); return errors.New("ignored") })
	}
	var running atomic.Int32
	for range 4 {
		l.loop(func(ctx context.Context) {
			running.Add(1)
			defer running.Add(-1)
			<-ctx.Done()
			time.Sleep(10 * time.Millisecond) // a loop that takes a moment to end
		})
	}
	l.undo()
	if len(order) != 3 || order[0] != 2 || order[1] != 1 || order[2] != 0 {
		t.Fatalf("closers ran in order %v, want [2 1 0]", order)
	}
	if n := running.Load(); n != 0 {
		t.Fatalf("%d loops still running after undo", n)
	}
	l.stopLoops() // idempotent

	stop := make(chan struct{})
	var served atomic.Bool
	l.serve(func() { <-stop; time.Sleep(10 * time.Millisecond); served.Store(true) })
	close(stop)
	l.waitServes()
	if !served.Load() {
		t.Fatal("waitServes returned before the Serve call")
	}
}
