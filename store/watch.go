package store

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
)

// WatchSet collects the channels of the items a read depended on. Pass it to reads, then
// Wait: it returns as soon as any of those items changed. A WatchSet belongs to one
// goroutine; it is not safe for concurrent use.
type WatchSet struct {
	chans map[<-chan struct{}]struct{}
}

// NewWatchSet returns an empty WatchSet.
func NewWatchSet() *WatchSet {
	return &WatchSet{chans: make(map[<-chan struct{}]struct{}, 4)}
}

// Add adds a channel that is closed when the watched item changes.
func (ws *WatchSet) Add(ch <-chan struct{}) {
	if ws.chans == nil {
		ws.chans = make(map[<-chan struct{}]struct{}, 4)
	}
	ws.chans[ch] = struct{}{}
}

// Len returns the number of channels in the set.
func (ws *WatchSet) Len() int { return len(ws.chans) }

// Wait blocks until one of the set's channels is closed (true) or ctx is done (false).
// An empty set waits for ctx only.
func (ws *WatchSet) Wait(ctx context.Context) bool {
	switch len(ws.chans) {
	case 0:
		<-ctx.Done()
		return false
	case 1:
		for ch := range ws.chans {
			select {
			case <-ch:
				return true
			case <-ctx.Done():
				return false
			}
		}
	}
	cases := make([]reflect.SelectCase, 0, len(ws.chans)+1)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	for ch := range ws.chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen != 0
}

// watchRegistry holds one channel per watched item. A commit closes the channels of the
// items it changed and forgets them; the next read of an item creates a fresh channel.
// Channels exist only for items some reader asked about since their last change.
type watchRegistry struct {
	mu    sync.Mutex
	chans map[string]chan struct{}
	// seq counts fire calls; readers sample it before their read transaction.
	seq atomic.Uint64
	// closed is a channel that is always closed, handed to a reader that raced a commit.
	closed chan struct{}
}

func newWatchRegistry() *watchRegistry {
	closed := make(chan struct{})
	close(closed)
	return &watchRegistry{chans: make(map[string]chan struct{}), closed: closed}
}

func (w *watchRegistry) sequence() uint64 { return w.seq.Load() }

// add puts the channels of keys into ws. seq is the sequence sampled before the read:
// if any commit fired since, the read may have seen data older than the channels it
// would get, so ws gets an already closed channel and the caller reads again.
func (w *watchRegistry) add(ws *WatchSet, seq uint64, keys []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seq.Load() != seq {
		ws.Add(w.closed)
		return
	}
	for _, k := range keys {
		ch, ok := w.chans[k]
		if !ok {
			ch = make(chan struct{})
			w.chans[k] = ch
		}
		ws.Add(ch)
	}
}

// channel returns the channel of key, creating it.
func (w *watchRegistry) channel(key string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.chans[key]
	if !ok {
		ch = make(chan struct{})
		w.chans[key] = ch
	}
	return ch
}

// fire closes the channels of the given items. Call it only after the commit.
func (w *watchRegistry) fire(keys map[string]struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq.Add(1)
	for k := range keys {
		if ch, ok := w.chans[k]; ok {
			close(ch)
			delete(w.chans, k)
		}
	}
}

// fireAll closes every channel (restore and close).
func (w *watchRegistry) fireAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq.Add(1)
	for k, ch := range w.chans {
		close(ch)
		delete(w.chans, k)
	}
}

// size returns the number of live channels.
func (w *watchRegistry) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.chans)
}

// WatchAll adds to ws a channel that is closed after any commit that changed the state,
// and on Restore and Close.
func (s *Store) WatchAll(ws *WatchSet) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		ws.Add(s.watches.closed)
		return
	}
	s.watches.add(ws, s.watches.sequence(), []string{watchAll})
}
