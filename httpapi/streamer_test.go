package httpapi

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rosterhq/roster/fanout"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
)

var watchTopic = fanout.ServiceTopic(model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders"})

// rawStream is a stream opened over a bare TCP connection, so that the test's own client
// adds no goroutine and reads only when told to.
type rawStream struct {
	conn net.Conn
	r    *bufio.Reader
	head string
}

// openRaw sends a stream request; with readFirst it reads the response head and the
// first event.
func (e *watchEnv) openRaw(path string, rcvBuf int, readFirst bool) *rawStream {
	e.t.Helper()
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = conn.Close() })
	if rcvBuf > 0 {
		if err := conn.(*net.TCPConn).SetReadBuffer(rcvBuf); err != nil {
			e.t.Fatal(err)
		}
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: roster\r\nAccept: text/event-stream\r\n\r\n", path); err != nil {
		e.t.Fatal(err)
	}
	rs := &rawStream{conn: conn, r: bufio.NewReader(conn)}
	if readFirst {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		rs.head = rs.block(e.t, "\r\n")
		rs.block(e.t, "\n")
	}
	return rs
}

// block reads lines up to the next empty one (lines end with eol) and returns them.
func (rs *rawStream) block(t *testing.T, eol string) string {
	t.Helper()
	var b strings.Builder
	for {
		line, err := rs.r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v (read %q)", err, b.String())
		}
		if line == eol {
			return b.String()
		}
		b.WriteString(line)
	}
}

// TestStream_DetachedResponseHead: a stream over HTTP/1.1 is the node's own response on
// the taken-over connection — a well-formed head that says the body ends with the
// connection, with the headers the handler and the middleware set.
func TestStream_DetachedResponseHead(t *testing.T) {
	e := newWatchEnv(t, 0)
	e.put(watchSvc+"/instances/127.0.0.1:8001", `{}`)
	rs := e.openRaw(watchSvc+"/instances", 0, true)
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(rs.head+"\r\n")), nil)
	if err != nil {
		t.Fatalf("response head %q: %v", rs.head, err)
	}
	for k, want := range map[string]string{
		"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
		"X-Roster-Served-By": "n1", "X-Roster-Consistency": "stale",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q (head %q)", k, got, want, rs.head)
		}
	}
	if resp.StatusCode != 200 || resp.ContentLength != -1 || len(resp.TransferEncoding) != 0 || !resp.Close {
		t.Errorf("status %d, length %d, transfer encoding %v, close %v: want 200 delimited by close", resp.StatusCode, resp.ContentLength, resp.TransferEncoding, resp.Close)
	}
	if resp.Header.Get("X-Roster-Index") == "" {
		t.Errorf("no index header in %q", rs.head)
	}
}

// TestStream_ClientLeavingEndsTheStream: the node notices a client that closes its
// connection at once, not at the next write, and drops its subscription.
func TestStream_ClientLeavingEndsTheStream(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "http1 detached", true: "http2 inline"}[h2], func(t *testing.T) {
			e := newWatchEnvWith(t, func(c *Config) { c.KeepAlive = time.Hour })
			if h2 {
				e.restartTLS()
			}
			e.put(watchSvc+"/instances/127.0.0.1:8001", `{}`)
			s := e.open(watchSvc+"/instances", nil)
			if want := map[bool]int{false: 1, true: 2}[h2]; s.resp.ProtoMajor != want {
				t.Fatalf("protocol %s, want HTTP/%d", s.resp.Proto, want)
			}
			s.nextInstances()
			if n := e.hub.Subscribers(watchTopic); n != 1 {
				t.Fatalf("%d subscribers, want 1", n)
			}
			if g := testutil.ToFloat64(e.api.streams.open); g != 1 {
				t.Fatalf("streams open %v, want 1", g)
			}
			s.close()
			wait.For(t, 5*time.Second, "the subscription to end after the client left", func() bool {
				return e.hub.Subscribers(watchTopic) == 0 && testutil.ToFloat64(e.api.streams.open) == 0
			})
		})
	}
}

// restartTLS serves the API over TLS with HTTP/2 instead, where connections cannot be
// taken over and the handler serves the stream itself.
func (e *watchEnv) restartTLS() {
	e.srv.Close()
	srv := httptest.NewUnstartedServer(e.h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	e.t.Cleanup(srv.Close)
	e.srv = srv
}

// TestStream_OverHTTP2: the inline path delivers the same events.
func TestStream_OverHTTP2(t *testing.T) {
	e := newWatchEnv(t, 20*time.Millisecond)
	e.restartTLS()
	first := e.put(watchSvc+"/instances/127.0.0.1:8001", `{}`)
	s := e.open(watchSvc+"/instances", nil)
	if got := s.nextInstances(); got.Index != first {
		t.Fatalf("first event at %d, want %d", got.Index, first)
	}
	next := e.put(watchSvc+"/instances/127.0.0.1:8002", `{}`)
	if got := s.nextInstances(); got.Index != next || len(got.Instances) != 2 {
		t.Fatalf("got index %d with %d instances, want %d with 2", got.Index, len(got.Instances), next)
	}
	for ev := range s.events {
		if ev.comment && ev.data == "keep-alive" {
			return
		}
	}
	t.Fatal("stream ended without a keep-alive")
}

// TestStream_IdleStreamsHoldNoServingGoroutine: an idle HTTP/1.1 stream costs the node
// one goroutine (the one that notices the client leaving), not net/http's serving
// goroutine and its background reader; a change is still delivered to every stream by
// a bounded number of writers.
func TestStream_IdleStreamsHoldNoServingGoroutine(t *testing.T) {
	const n = 200
	e := newWatchEnvWith(t, func(c *Config) { c.StreamWriters = 2 })
	e.put(watchSvc+"/instances/127.0.0.1:8001", `{}`)
	before := runtime.NumGoroutine()
	streams := make([]*rawStream, n)
	for i := range streams {
		streams[i] = e.openRaw(watchSvc+"/instances", 0, true)
	}
	var added int
	wait.For(t, 5*time.Second, "the streams' handlers to return", func() bool {
		added = runtime.NumGoroutine() - before
		return added <= n+8
	})
	t.Logf("%d idle streams added %d goroutines", n, added)
	idx := e.put(watchSvc+"/instances/127.0.0.1:8002", `{}`)
	want := fmt.Sprintf("id: %d\n", idx)
	for i, rs := range streams {
		_ = rs.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if ev := rs.block(t, "\n"); !strings.HasPrefix(ev, want) {
			t.Fatalf("stream %d got %q, want the event of index %d", i, ev, idx)
		}
	}
}

// TestStream_SlowClientIsClosedOthersKeepGoing: a client that stops reading fills its
// socket; the write that blocks is abandoned after the write timeout and the stream
// closed, and the only writer goes on serving the other streams.
func TestStream_SlowClientIsClosedOthersKeepGoing(t *testing.T) {
	e := newWatchEnvWith(t, func(c *Config) {
		c.StreamWriters = 1
		c.StreamWriteTimeout = 200 * time.Millisecond
		c.KeepAlive = time.Hour
	})
	e.put(watchSvc+"/instances/127.0.0.1:8001", `{}`)
	e.openRaw(watchSvc+"/instances", 1024, false) // never reads
	good := e.open(watchSvc+"/instances", nil)
	good.nextInstances()
	wait.For(t, 5*time.Second, "both streams to subscribe", func() bool { return e.hub.Subscribers(watchTopic) == 2 })
	meta := strings.Repeat("x", 900)
	var last uint64
	i := 0
	for ; e.hub.Subscribers(watchTopic) == 2; i++ {
		if i == 3000 {
			t.Fatal("the stream that does not read was never closed")
		}
		last = e.put(fmt.Sprintf("%s/instances/127.0.0.1:%d", watchSvc, 9000+i%300), fmt.Sprintf(`{"metadata":{"m":%q,"i":"%d"}}`, meta, i))
	}
	t.Logf("the stream that does not read was closed after %d writes", i)
	for {
		if got := good.nextInstances(); got.Index >= last {
			break
		}
	}
}
