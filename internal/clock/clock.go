// Package clock is the time source of code whose schedule tests must drive: the system
// clock in production, a Manual clock in tests.
package clock

import (
	"sync"
	"time"
)

// Clock is a time source.
type Clock interface {
	Now() time.Time
	// NewTimer returns a started timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer. After Reset or Stop returns, C delivers no value of an
// earlier arming.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

// System returns the Clock of the time package.
func System() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

// systemTimer relies on the Go 1.23+ timer semantics: Reset and Stop discard a value
// not yet received.
type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time   { return t.t.C }
func (t systemTimer) Reset(d time.Duration) { t.t.Reset(d) }
func (t systemTimer) Stop()                 { t.t.Stop() }

// Manual is a Clock that moves only when Advance is called: its timers fire when
// Advance passes their deadline. It is safe for concurrent use.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
	stall  *Stall
}

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the clock's time. A Now call made while a Stall is armed blocks until
// the stall is released.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	if s := c.stall; s != nil {
		c.stall = nil
		c.mu.Unlock()
		close(s.reached)
		<-s.release
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer of this clock.
func (c *Manual) NewTimer(d time.Duration) Timer {
	t := &manualTimer{c: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	t.Reset(d)
	return t
}

// Advance moves the clock forward and fires the timers that are due.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for _, t := range c.timers {
		if t.armed && !t.at.After(c.now) {
			t.armed = false
			select {
			case t.ch <- c.now:
			default:
			}
		}
	}
}

// Stall is one held Now call: Reached is closed once a Now call blocks on it, Release
// lets that call return.
type Stall struct {
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

// StallNext makes the next Now call block until the returned stall is released, so a
// test can hold the clock's user between two steps. Release it in the test's cleanup.
func (c *Manual) StallNext() *Stall {
	s := &Stall{reached: make(chan struct{}), release: make(chan struct{})}
	c.mu.Lock()
	c.stall = s
	c.mu.Unlock()
	return s
}

// Reached is closed once a Now call blocks on the stall.
func (s *Stall) Reached() <-chan struct{} { return s.reached }

// Release lets the held Now call return (at once if it has not blocked yet).
func (s *Stall) Release() { s.once.Do(func() { close(s.release) }) }

type manualTimer struct {
	c     *Manual
	ch    chan time.Time
	at    time.Time
	armed bool
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.drainLocked()
	t.at, t.armed = t.c.now.Add(d), true
	if d <= 0 {
		t.armed = false
		t.ch <- t.c.now
	}
}

func (t *manualTimer) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.drainLocked()
	t.armed = false
}

func (t *manualTimer) drainLocked() {
	select {
	case <-t.ch:
	default:
	}
}
