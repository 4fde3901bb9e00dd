package httpapi

import (
	"bytes"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rosterhq/roster/fanout"
)

// Defaults of the detached streams (Config.StreamWriters, Config.StreamWriteTimeout).
const (
	// DefaultStreamWriters bounds the goroutines writing detached streams at once.
	DefaultStreamWriters = 8
	// DefaultStreamWriteTimeout is how long one write to a stream's client may block (its
	// socket buffer full) before the stream is closed as too slow; the client resumes
	// with Last-Event-ID.
	DefaultStreamWriteTimeout = 5 * time.Second
)

// A streamer serves detached event streams: HTTP/1.x connections taken over from
// net/http (hijacked) once the stream's headers are decided. An idle detached stream
// holds its connection, its fan-out subscription and one goroutine blocked in a small
// read that notices the client leaving — not net/http's serving goroutine with its
// request, buffers and handler stack. Writes are done by at most maxWorkers goroutines,
// started when a stream has something to send and gone when none has: a change seen by
// 10,000 streams wakes a handful of goroutines, not 10,000, so the node's other
// goroutines (Raft's heartbeats among them) keep their turn on the CPU.
type streamer struct {
	maxWorkers   int
	writeTimeout time.Duration
	keepAlive    time.Duration
	m            *streamMetrics

	mu       sync.Mutex
	queue    []*detached
	head     int
	workers  int
	streams  map[*detached]struct{}
	sweeping bool
}

func newStreamer(workers int, writeTimeout, keepAlive time.Duration, m *streamMetrics) *streamer {
	return &streamer{
		maxWorkers: workers, writeTimeout: writeTimeout, keepAlive: keepAlive, m: m,
		streams: make(map[*detached]struct{}),
	}
}

// States of a detached stream's writer.
const (
	stIdle    int32 = iota // nothing to do
	stQueued               // in the streamer's queue
	stRunning              // a worker is flushing it
	stRerun                // a worker is flushing it and more became pending meanwhile
)

// detached is one hijacked stream.
type detached struct {
	sr   *streamer
	conn net.Conn
	sub  *fanout.Subscription
	es   eventStream

	unhold    func() // gives the stream's watcher place back (nil: none)
	state     atomic.Int32
	lastWrite atomic.Int64 // unix nanoseconds of the last complete write
	keepAlive atomic.Bool  // a keep-alive comment is due
	closeOnce sync.Once
	readBuf   [16]byte
}

// newDetached returns a stream whose writer is held (state running) until start: updates
// that become pending while the handler sets the stream up wait for it.
func (sr *streamer) newDetached() *detached {
	d := &detached{sr: sr}
	d.state.Store(stRunning)
	return d
}

// notify is the subscription's callback: the stream has updates pending, or ended.
func (d *detached) notify() {
	for {
		switch s := d.state.Load(); s {
		case stIdle:
			if d.state.CompareAndSwap(stIdle, stQueued) {
				d.sr.enqueue(d)
				return
			}
		case stRunning:
			if d.state.CompareAndSwap(stRunning, stRerun) {
				return
			}
		default: // queued, or a rerun is already due
			return
		}
	}
}

// release ends a writer's turn: the stream goes idle, or back to the queue when more
// became pending during the turn.
func (d *detached) release() {
	if d.state.CompareAndSwap(stRunning, stIdle) {
		return
	}
	d.state.Store(stQueued)
	d.sr.enqueue(d)
}

// start hands a set-up stream to the streamer: it joins the keep-alive sweep, a goroutine
// waits for its client to leave, and updates pending meanwhile are written.
func (d *detached) start() {
	d.lastWrite.Store(time.Now().UnixNano())
	d.sr.mu.Lock()
	d.sr.streams[d] = struct{}{}
	sweep := !d.sr.sweeping
	d.sr.sweeping = true
	d.sr.mu.Unlock()
	if sweep {
		go d.sr.sweep()
	}
	go d.watchClient()
	d.release()
}

// enqueue puts d in the queue and starts a worker when fewer than maxWorkers run.
func (sr *streamer) enqueue(d *detached) {
	sr.mu.Lock()
	sr.queue = append(sr.queue, d)
	spawn := sr.workers < sr.maxWorkers
	if spawn {
		sr.workers++
	}
	sr.mu.Unlock()
	if spawn {
		go sr.work()
	}
}

// work flushes queued streams until the queue is empty.
func (sr *streamer) work() {
	for {
		sr.mu.Lock()
		if sr.head == len(sr.queue) {
			sr.queue, sr.head = sr.queue[:0], 0
			sr.workers--
			sr.mu.Unlock()
			return
		}
		d := sr.queue[sr.head]
		sr.queue[sr.head] = nil
		sr.head++
		sr.mu.Unlock()
		d.state.Store(stRunning)
		d.flush()
		d.release()
	}
}

// sweep marks a keep-alive comment due on every stream that wrote nothing for a
// keep-alive interval, while any stream is open.
func (sr *streamer) sweep() {
	tick := time.NewTicker(max(sr.keepAlive/4, time.Millisecond))
	defer tick.Stop()
	var due []*detached
	for range tick.C {
		cutoff := time.Now().Add(-sr.keepAlive).UnixNano()
		sr.mu.Lock()
		if len(sr.streams) == 0 {
			sr.sweeping = false
			sr.mu.Unlock()
			return
		}
		for d := range sr.streams {
			if d.lastWrite.Load() <= cutoff && !d.keepAlive.Load() {
				due = append(due, d)
			}
		}
		sr.mu.Unlock()
		for i, d := range due {
			d.keepAlive.Store(true)
			d.notify()
			due[i] = nil
		}
		due = due[:0]
	}
}

// flush writes what is pending in one write; a failed or timed-out write closes the
// stream.
func (d *detached) flush() {
	if d.sub.Ended() || !d.es.isAllowed() {
		d.close()
		return
	}
	var (
		out []byte // the one event, shared with other streams, or the events joined
		sig []byte
		n   int
	)
	for _, u := range d.sub.Next() {
		if f, fs, ok := d.es.frame(u); ok {
			if n++; n == 1 {
				out = f
			} else {
				out = append(append([]byte(nil), out...), f...)
			}
			sig = fs
		}
	}
	if d.keepAlive.Swap(false) && n == 0 {
		out = []byte(keepAliveComment)
	}
	if len(out) == 0 {
		return
	}
	if err := d.write(out); err != nil {
		d.close()
		return
	}
	d.es.sent(sig)
}

// write writes b within the streamer's write timeout.
func (d *detached) write(b []byte) error {
	if err := d.conn.SetWriteDeadline(time.Now().Add(d.sr.writeTimeout)); err != nil {
		return err
	}
	if _, err := d.conn.Write(b); err != nil {
		return err
	}
	d.lastWrite.Store(time.Now().UnixNano())
	return nil
}

// watchClient reads (and discards) what the client sends until it closes the connection,
// then closes the stream. A stream's client sends nothing after its request.
func (d *detached) watchClient() {
	for {
		if _, err := d.conn.Read(d.readBuf[:]); err != nil {
			d.close()
			return
		}
	}
}

// close ends the stream: the connection, the subscription and its place in the streamer.
func (d *detached) close() {
	d.closeOnce.Do(func() {
		_ = d.conn.Close()
		d.sub.Close()
		d.sr.mu.Lock()
		delete(d.sr.streams, d)
		d.sr.mu.Unlock()
		d.sr.m.open.Dec()
		if d.unhold != nil {
			d.unhold()
		}
	})
}

// keepAliveComment is the line an idle stream gets every keep-alive interval.
const keepAliveComment = ": keep-alive\n\n"

// responseHead is the status line and header block of a detached stream: HTTP/1.1 200
// with h, the body delimited by the connection's close.
func responseHead(h http.Header) []byte {
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\n")
	h.Set("Connection", "close")
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	_ = h.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}
