package server

import (
	"context"
	"sync"
)

// lifecycle is what a node started, in one place: the closers of what New opened, run
// in reverse order by undo when a later step fails, and the goroutines the node runs
// (background loops and the servers' Serve calls), each of which ends when its context
// is canceled or its server is shut down, and every one of which is waited for.
type lifecycle struct {
	closers []func() error

	ctx    context.Context // canceled by stopLoops
	cancel context.CancelFunc
	loops  sync.WaitGroup // background loops
	serves sync.WaitGroup // Serve calls, ended by their servers' shutdown
	once   sync.Once
}

func newLifecycle() *lifecycle {
	ctx, cancel := context.WithCancel(context.Background())
	return &lifecycle{ctx: ctx, cancel: cancel}
}

// onUndo registers fn to run if New fails after this point.
func (l *lifecycle) onUndo(fn func() error) { l.closers = append(l.closers, fn) }

// undo stops the loops and runs the closers in reverse order (New's failure path).
func (l *lifecycle) undo() {
	l.stopLoops()
	for i := len(l.closers) - 1; i >= 0; i-- {
		_ = l.closers[i]()
	}
	l.closers = nil
}

// loop runs fn in a goroutine until stopLoops cancels its context.
func (l *lifecycle) loop(fn func(ctx context.Context)) {
	l.loops.Add(1)
	go func() {
		defer l.loops.Done()
		fn(l.ctx)
	}()
}

// stopLoops cancels every loop's context and waits until all have returned. It is
// idempotent.
func (l *lifecycle) stopLoops() {
	l.once.Do(func() {
		l.cancel()
		l.loops.Wait()
	})
}

// serve runs a server's Serve call in a goroutine; waitServes waits for every one to
// return (after their servers were shut down).
func (l *lifecycle) serve(fn func()) {
	l.serves.Add(1)
	go func() {
		defer l.serves.Done()
		fn()
	}()
}

func (l *lifecycle) waitServes() { l.serves.Wait() }
