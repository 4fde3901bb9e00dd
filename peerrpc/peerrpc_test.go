package peerrpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/registry"
)

// listen serves every accepted connection with serve (after the tag byte, as
// raftnode's stream layer hands them over) and returns a client dialing it.
func listen(t *testing.T, serve func(net.Conn)) (*Client, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	addr := ln.Addr().String()
	c := NewClient(dialAsN2, func() (string, string, bool) { return "n1", addr, true })
	t.Cleanup(c.Close)
	return c, addr
}

// dialAsN2 dials as raftnode.DialPeer does after the tag byte: the sender's id.
func dialAsN2(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte{2, 'n', '2'}); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func write(t *testing.T) registry.Forwarded {
	t.Helper()
	data, err := fsm.Encode(fsm.DeleteNamespaceRequest{ID: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	return registry.Forwarded{Command: data, Secret: "s3cret", RequestID: "req-1", From: "n2"}
}

// A call reaches the handler with everything the forwarding node sent, and the
// handler's error comes back matching what it matched (sentinels and typed errors).
// handlerFuncs is a Handler of functions (nil: the call is refused).
type handlerFuncs struct {
	write func(context.Context, registry.Forwarded) (uint64, error)
	read  func(context.Context, registry.Consistency) (uint64, error)
}

func (h handlerFuncs) ServeForwarded(ctx context.Context, f registry.Forwarded) (uint64, error) {
	if h.write == nil {
		return 0, errors.New("no write expected")
	}
	return h.write(ctx, f)
}

func (h handlerFuncs) ServeReadIndex(ctx context.Context, mode registry.Consistency) (uint64, error) {
	if h.read == nil {
		return 0, errors.New("no read index expected")
	}
	return h.read(ctx, mode)
}

// A read index call reaches the handler with its mode and request id, and the leader's
// refusal comes back as its answer (a not-leader answer tells the caller to ask again).
func TestClient_ReadIndex(t *testing.T) {
	var mode atomic.Value
	var rid atomic.Value
	notLeader := atomic.Bool{}
	srv := NewServer(handlerFuncs{read: func(ctx context.Context, m registry.Consistency) (uint64, error) {
		mode.Store(m)
		rid.Store(registry.RequestID(ctx))
		if notLeader.Load() {
			return 0, fmt.Errorf("%w: n1 does not lead", registry.ErrNotLeader)
		}
		return 77, nil
	}}, nil)
	t.Cleanup(srv.Close)
	c, _ := listen(t, srv.ServeConn)
	idx, err := c.ReadIndex(registry.WithRequestID(ctxT(t), "req-9"), "n1", registry.Leader)
	if err != nil || idx != 77 || mode.Load() != registry.Leader || rid.Load() != "req-9" {
		t.Fatalf("ReadIndex: %d %v (mode %v, request id %v)", idx, err, mode.Load(), rid.Load())
	}
	notLeader.Store(true)
	_, err = c.ReadIndex(ctxT(t), "n1", registry.Linearizable)
	var ans *registry.Answered
	if !errors.Is(err, registry.ErrNotLeader) || !errors.As(err, &ans) {
		t.Fatalf("a not-leader answer came back as %v (%T)", err, err)
	}
	if _, err := c.ReadIndex(ctxT(t), "n3", registry.Linearizable); !errors.Is(err, registry.ErrNotSent) {
		t.Fatalf("a read index for a server that does not lead: %v, want not sent", err)
	}
}

func TestClient_CallsAndRebuildsErrors(t *testing.T) {
	var got atomic.Pointer[registry.Forwarded]
	refuse := atomic.Bool{}
	srv := NewServer(handlerFuncs{write: func(_ context.Context, f registry.Forwarded) (uint64, error) {
		got.Store(&f)
		if refuse.Load() {
			return 0, errors.Join(&model.CASError{What: "instance", Expected: 3, Current: 7}, model.Invalid("weight", "too heavy"))
		}
		return 42, nil
	}}, nil)
	t.Cleanup(srv.Close)
	c, _ := listen(t, srv.ServeConn)
	f := write(t)
	idx, err := c.Forward(ctxT(t), "n1", f)
	if err != nil || idx != 42 {
		t.Fatalf("Forward: %d %v", idx, err)
	}
	if g := got.Load(); g == nil || string(g.Command) != string(f.Command) || g.Secret != f.Secret || g.RequestID != f.RequestID || g.From != f.From {
		t.Fatalf("the handler got %+v, want %+v", g, f)
	}
	refuse.Store(true)
	_, err = c.Forward(ctxT(t), "n1", f) // on the idle connection of the first call
	var cas *model.CASError
	var ve *model.ValidationError
	if !errors.As(err, &cas) || cas.Current != 7 || !errors.Is(err, model.ErrCASMismatch) ||
		!errors.As(err, &ve) || ve.Field != "weight" || !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("the refusal came back as %v (%T)", err, err)
	}
	var ans *registry.Answered
	if !errors.As(err, &ans) {
		t.Fatalf("a refusal is the leader's answer: %T", err)
	}
}

// A server of a release without the peer RPC reads the tag byte (and, buffered, what
// follows it) and closes the connection without a word: the write was not sent, and the
// client says the leader is legacy. A reset before the greeting is no such server (a
// port nobody serves, answered by a proxy or a firewall): not sent, and not legacy.
func TestClient_LegacyLeaderAndBusyLeader(t *testing.T) {
	c, _ := listen(t, func(conn net.Conn) {
		_, _ = io.ReadFull(conn, make([]byte, 3)) // the id dialAsN2 sends
		_ = conn.Close()
	})
	if _, err := c.Forward(ctxT(t), "n1", write(t)); !errors.Is(err, registry.ErrLegacyLeader) {
		t.Fatalf("a silent close: %v, want ErrLegacyLeader", err)
	}
	reset, _ := listen(t, func(conn net.Conn) {
		_, _ = io.ReadFull(conn, make([]byte, 3))
		_ = conn.(*net.TCPConn).SetLinger(0)
		_ = conn.Close()
	})
	if _, err := reset.Forward(ctxT(t), "n1", write(t)); !errors.Is(err, registry.ErrNotSent) || errors.Is(err, registry.ErrLegacyLeader) {
		t.Fatalf("a reset before the greeting: %v, want ErrNotSent (not legacy)", err)
	}
	busy, _ := listen(t, func(conn net.Conn) { _, _ = conn.Write([]byte{GreetBusy}); _ = conn.Close() })
	if _, err := busy.Forward(ctxT(t), "n1", write(t)); !errors.Is(err, registry.ErrNotSent) || errors.Is(err, registry.ErrLegacyLeader) {
		t.Fatalf("a busy server: %v, want ErrNotSent", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	refused := NewClient(dialAsN2, func() (string, string, bool) { return "n1", addr, true })
	if _, err := refused.Forward(ctxT(t), "n1", write(t)); !errors.Is(err, registry.ErrNotSent) {
		t.Fatalf("a refused connection: %v, want ErrNotSent", err)
	}
}

// An idle connection the server closed is never written to: the next call opens a new
// one, so a restarted leader does not turn a write into an unknown outcome.
func TestClient_IdleConnectionClosedByTheServerIsNotUsed(t *testing.T) {
	var conns atomic.Int32
	// Each connection answers one call and is closed, as a leader that stops does.
	answerOnce := func(conn net.Conn) {
		conns.Add(1)
		defer conn.Close()
		h := newHandle()
		r := bufio.NewReader(conn)
		if _, err := r.Discard(3); err != nil { // the sender's id
			return
		}
		w := bufio.NewWriter(conn)
		_ = w.WriteByte(greetReady)
		_ = w.Flush()
		var req request
		if codec.NewDecoder(r, h).Decode(&req) != nil {
			return
		}
		_ = codec.NewEncoder(w, h).Encode(&response{Index: 1})
		_ = w.Flush()
	}
	c, _ := listen(t, answerOnce)
	if _, err := c.Forward(ctxT(t), "n1", write(t)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the idle connection to be closed by the server", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, l := range c.idle {
			for _, cc := range l {
				return peerClosed(cc.c)
			}
		}
		return false
	})
	if _, err := c.Forward(ctxT(t), "n1", write(t)); err != nil {
		t.Fatalf("the call after the server closed the idle connection: %v", err)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (the closed idle one was not reused)", n)
	}
}

// At most maxConns calls are in flight to one server: one beyond waits for a slot, and
// is not sent when its deadline comes first; the connections are kept for later calls.
func TestClient_BoundsTheCallsInFlight(t *testing.T) {
	release := make(chan struct{})
	var served atomic.Int32
	srv := NewServer(handlerFuncs{read: func(ctx context.Context, _ registry.Consistency) (uint64, error) {
		served.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return 5, nil
	}}, nil)
	t.Cleanup(srv.Close)
	c, _ := listen(t, srv.ServeConn)
	c.maxConns = 2
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := c.ReadIndex(ctxT(t), "n1", registry.Linearizable)
			errs <- err
		}()
	}
	wait.For(t, 10*time.Second, "two calls in flight", func() bool { return served.Load() == 2 })
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.ReadIndex(short, "n1", registry.Linearizable); !errors.Is(err, registry.ErrNotSent) {
		t.Fatalf("a third call while two are in flight: %v, want not sent", err)
	}
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if idx, err := c.ReadIndex(ctxT(t), "n1", registry.Linearizable); err != nil || idx != 5 {
		t.Fatalf("a call once the others ended: %d %v", idx, err)
	}
	c.mu.Lock()
	idle := len(c.idle)
	c.mu.Unlock()
	if idle != 1 {
		t.Fatalf("idle connections kept for %d servers, want 1", idle)
	}
}
