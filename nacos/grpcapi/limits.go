package grpcapi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc/credentials"
)

// Bounds on what a client without credentials can make the gRPC port hold
// (docs/security.md, "The Nacos gRPC port"). A connection goes through three phases:
//
//   - accepted, not registered: from the TCP accept until its ConnectionSetupRequest.
//     It has HandshakeTimeout for TLS and HTTP/2's preface, SetupTimeout in all to
//     register, and may send messages of at most UnregisteredMessageBytes;
//   - registered, not trusted (only with ACLs on): it has sent its setup, which carries
//     no token in Nacos's protocol, but no request of it has yet presented a token that
//     authenticates. It has AuthTimeout from its registration to do so, and may send
//     messages of at most UntrustedMessageBytes;
//   - trusted: registered with ACLs off, or a request presented a valid token. Its
//     messages are bounded by gRPC's limit (MaxBodyBytes plus the envelope), and it has
//     no timeout but the ejection of silent connections.
//
// Before a connection is trusted, the bytes of its incomplete messages are bounded too
// (twice its message limit), and breaking a limit closes the connection. Every
// connection counts against MaxConnsPerIP and MaxTransports and takes a token of its
// source's accept bucket (AcceptRatePerIP, AcceptBurstPerIP), and an untrusted one
// counts against MaxUntrustedPerIP and MaxUntrusted; one beyond a bound is closed as
// soon as it is accepted, before TLS, so that it costs a file descriptor for a moment
// only. A source is an IPv4 address or an IPv6 /64. When MaxUntrusted is full, a
// source holding fewer untrusted connections than another takes the oldest of that
// other's (max-min fairness): a few flooding sources cannot keep a new one out.

// Defaults of the connection bounds (Config).
const (
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultSetupTimeout     = 10 * time.Second
	DefaultAuthTimeout      = time.Minute
	// DefaultMaxConnsPerIP bounds the connections of one source address: Nacos
	// clients open one per client object, so a host of many applications behind one
	// address stays far below it.
	DefaultMaxConnsPerIP = 256
	// DefaultMaxUntrusted bounds the connections not yet trusted, node-wide. A
	// legitimate connection is untrusted for the few round trips from its accept to
	// its first authenticated request, so this is the handshakes in flight at once.
	DefaultMaxUntrusted = 512
	// DefaultMaxUntrustedPerIP bounds the connections not yet trusted from one
	// source: at most 512/8 = 64 sources take every untrusted slot, and beyond that
	// the slots are shared fairly between sources (guardListener.admit).
	DefaultMaxUntrustedPerIP = 8
	// DefaultAcceptRatePerIP is the token bucket of the connections accepted from
	// one source: a source may open a burst of 4 seconds of it (32) at once, then 8 a
	// second. Each accepted connection costs a TLS handshake; a refused one only its
	// accept and close.
	DefaultAcceptRatePerIP = 8.0
	// DefaultMaxStreams is HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS: a client's
	// further requests wait for one to end.
	DefaultMaxStreams = 64
	// DefaultUnregisteredMessageBytes bounds a message before the setup: a
	// ServerCheckRequest or a ConnectionSetupRequest (its labels), well under 1 KiB from
	// the SDKs.
	DefaultUnregisteredMessageBytes = 16 << 10
	// DefaultUntrustedMessageBytes bounds a message of a registered connection not
	// yet trusted: its first authenticated request, a subscription or a persistent
	// registration whose metadata is within the cluster's limit (1 KiB by default).
	DefaultUntrustedMessageBytes = 64 << 10
	// rpcEnvelopeBytes is what a message may carry beyond its JSON body: the type, the
	// client IP and the headers (the access token among them).
	rpcEnvelopeBytes = 64 << 10
	// rpcMaxHeaderListBytes bounds a request's HTTP/2 headers (gRPC's default is
	// 16 MiB): Nacos requests carry their own headers inside the message.
	rpcMaxHeaderListBytes = 64 << 10
)

// Reasons for refusing or closing a connection, the reason label of
// roster_nacos_grpc_transports_refused_total and roster_nacos_grpc_transports_closed_total.
const (
	rpcRefusedPerIP          = "per_ip"
	rpcRefusedTotal          = "total"
	rpcRefusedUntrusted      = "untrusted"
	rpcRefusedUntrustedPerIP = "untrusted_per_ip"
	rpcRefusedRate           = "rate"

	rpcClosedSetupTimeout = "setup_timeout"
	rpcClosedAuthTimeout  = "auth_timeout"
	rpcClosedTooLarge     = "message_too_large"
	rpcClosedEvicted      = "evicted"
)

// guardListener bounds the connections the gRPC server accepts and remembers, by remote
// address, the guard of each (the gRPC transport's stats handler finds it there).
type guardListener struct {
	net.Listener
	g *Server

	mu        sync.Mutex
	srcs      map[netip.Addr]*srcState
	total     int
	untrusted int
	// levels[k] holds the sources with k untrusted connections (k >= 1): the sources
	// holding the most are found without a scan of every source.
	levels []map[*srcState]struct{}
	guards map[string]*connGuard
	swept  time.Time

	// The duplicate of a TCP listener's descriptor that rawAccept accepts on.
	rawOnce sync.Once
	rawFile *os.File
	rawConn syscall.RawConn
}

// Close closes the listener (and the duplicate rawAccept accepts on).
func (l *guardListener) Close() error {
	err := l.Listener.Close()
	l.rawOnce.Do(func() {}) // no duplicate made from now on
	if l.rawFile != nil {
		_ = l.rawFile.Close()
	}
	return err
}

// srcState is what one source (an IPv4 address, an IPv6 /64) holds, and its accept
// token bucket. It outlives the source's connections until its bucket is full again, so
// that closing every connection does not refill it.
type srcState struct {
	key       netip.Addr
	conns     int
	untrusted []*connGuard // oldest first
	tokens    float64
	refilled  time.Time
}

func newGuardListener(g *Server, ln net.Listener) *guardListener {
	return &guardListener{
		Listener: ln, g: g, srcs: map[netip.Addr]*srcState{}, guards: map[string]*connGuard{},
		levels: make([]map[*srcState]struct{}, g.cfg.MaxUntrustedPerIP+1),
	}
}

// Accept returns the next connection within the bounds; those beyond are closed here,
// before any TLS, with a reset (no FIN exchange, no TIME_WAIT on this side) and no log
// line. On Linux a TCP listener's connections are accepted on its socket directly
// (rawAccept), so that a refusal costs an accept(2) and a close(2) only.
func (l *guardListener) Accept() (net.Conn, error) {
	if c, err, ok := l.rawAccept(); ok {
		return c, err
	}
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		gc := l.admitFrom(remoteIP(c.RemoteAddr()))
		if gc == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			continue
		}
		l.bind(gc, c)
		return gc, nil
	}
}

// bind makes c the connection of gc, admitted for it.
func (l *guardListener) bind(gc *connGuard, c net.Conn) {
	gc.Conn, gc.key = c, c.RemoteAddr().String()
	l.mu.Lock()
	l.guards[gc.key] = gc
	l.mu.Unlock()
}

// admitFrom admits a connection from ip, or refuses it (nil); it closes the connection
// evicted for it, if any.
func (l *guardListener) admitFrom(ip netip.Addr) *connGuard {
	gc, victim := l.admit(ip)
	if victim != nil {
		victim.cut(rpcClosedEvicted)
	}
	return gc
}

// sourceOf is the key of the per-source bounds: an IPv4 address, or the /64 of an IPv6
// one (a host commonly holds a whole /64).
func sourceOf(ip netip.Addr) netip.Addr {
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return ip
}

// admit counts c in, or reports why not (and counts the refusal). When the node-wide
// untrusted bound is full, a connection from a source holding fewer untrusted
// connections than another takes the place of that other's oldest: victim, which the
// caller closes.
// The connection is bound to the guard afterwards (bind).
func (l *guardListener) admit(ip netip.Addr) (gc *connGuard, victim *connGuard) {
	key := sourceOf(ip)
	cfg := &l.g.cfg
	now := time.Now()
	reason := ""
	l.mu.Lock()
	l.sweepLocked(now)
	src := l.srcs[key]
	if src == nil {
		src = &srcState{key: key, tokens: float64(cfg.AcceptBurstPerIP), refilled: now}
		l.srcs[key] = src
	} else {
		src.refill(now, cfg)
	}
	switch {
	case l.total >= cfg.MaxTransports:
		reason = rpcRefusedTotal
	case src.conns >= cfg.MaxConnsPerIP:
		reason = rpcRefusedPerIP
	case len(src.untrusted) >= cfg.MaxUntrustedPerIP:
		reason = rpcRefusedUntrustedPerIP
	case src.tokens < 1:
		reason = rpcRefusedRate
	case l.untrusted >= cfg.MaxUntrusted:
		if victim = l.fairVictimLocked(src); victim == nil {
			reason = rpcRefusedUntrusted
		}
	}
	if reason != "" {
		l.mu.Unlock()
		l.g.m.transportsRefused.WithLabelValues(reason).Inc()
		return nil, nil
	}
	if victim != nil {
		l.releaseUntrustedLocked(victim)
	}
	src.tokens--
	gc = &connGuard{l: l, src: src, accepted: now}
	l.total++
	src.conns++
	l.addUntrustedLocked(gc)
	n := l.total
	l.mu.Unlock()
	l.g.m.transports.Set(float64(n))
	return gc, victim
}

// refill adds the tokens earned since the last refill, up to the burst.
func (s *srcState) refill(now time.Time, cfg *Config) {
	if d := now.Sub(s.refilled); d > 0 {
		s.tokens = min(float64(cfg.AcceptBurstPerIP), s.tokens+d.Seconds()*cfg.AcceptRatePerIP)
		s.refilled = now
	}
}

// sweepLocked forgets, once a second, the sources without connections whose bucket is
// full again: the map holds only the sources of the last few seconds.
func (l *guardListener) sweepLocked(now time.Time) {
	if now.Sub(l.swept) < time.Second {
		return
	}
	l.swept = now
	cfg := &l.g.cfg
	for k, s := range l.srcs {
		if s.conns == 0 {
			if s.refill(now, cfg); s.tokens >= float64(cfg.AcceptBurstPerIP) {
				delete(l.srcs, k)
			}
		}
	}
}

// fairVictimLocked is, when the untrusted bound is full, the oldest untrusted
// connection of a source holding at least two more of them than src (so that taking
// one from it never makes it the one holding fewer); nil when no source does.
func (l *guardListener) fairVictimLocked(src *srcState) *connGuard {
	for k := len(l.levels) - 1; k >= len(src.untrusted)+2; k-- {
		for s := range l.levels[k] {
			return s.untrusted[0]
		}
	}
	return nil
}

// addUntrustedLocked counts gc among its source's untrusted connections.
func (l *guardListener) addUntrustedLocked(gc *connGuard) {
	s := gc.src
	l.setLevelLocked(s, len(s.untrusted), len(s.untrusted)+1)
	s.untrusted = append(s.untrusted, gc)
	gc.counted = true
	l.untrusted++
}

// releaseUntrustedLocked takes gc out of the untrusted counts (it was trusted, closed
// or evicted); a no-op when it is not in them.
func (l *guardListener) releaseUntrustedLocked(gc *connGuard) {
	if !gc.counted {
		return
	}
	gc.counted = false
	l.untrusted--
	s := gc.src
	l.setLevelLocked(s, len(s.untrusted), len(s.untrusted)-1)
	if i := slices.Index(s.untrusted, gc); i >= 0 {
		s.untrusted = slices.Delete(s.untrusted, i, i+1)
	}
}

// setLevelLocked moves s from the level of from untrusted connections to that of to.
func (l *guardListener) setLevelLocked(s *srcState, from, to int) {
	if from > 0 && from < len(l.levels) {
		delete(l.levels[from], s)
	}
	if to > 0 && to < len(l.levels) {
		if l.levels[to] == nil {
			l.levels[to] = map[*srcState]struct{}{}
		}
		l.levels[to][s] = struct{}{}
	}
}

// guard returns the guard of the connection from remote, nil when none.
func (l *guardListener) guard(remote net.Addr) *connGuard {
	if remote == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.guards[remote.String()]
}

func remoteIP(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// connGuard is one accepted TCP connection: it counts in its listener's bounds until it
// closes, and knows its phase.
type connGuard struct {
	net.Conn
	l        *guardListener
	src      *srcState
	key      string
	accepted time.Time
	counted  bool // among the untrusted connections (guarded by l.mu)

	registered atomic.Bool // it has sent a ConnectionSetupRequest
	trusted    atomic.Bool // its messages are no longer inspected
	closed     atomic.Bool
	closeOnce  sync.Once
}

// trust ends the connection's untrusted phase.
func (c *connGuard) trust() {
	if c == nil || c.trusted.Load() {
		return
	}
	c.l.mu.Lock()
	c.trusted.Store(true)
	c.l.releaseUntrustedLocked(c)
	c.l.mu.Unlock()
}

// Close closes the connection and takes it out of its listener's counts.
func (c *connGuard) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// release takes the connection out of its listener's counts.
func (c *connGuard) release() {
	c.closeOnce.Do(func() {
		l := c.l
		l.mu.Lock()
		c.closed.Store(true)
		l.total--
		c.src.conns--
		l.releaseUntrustedLocked(c)
		if l.guards[c.key] == c {
			delete(l.guards, c.key)
		}
		n := l.total
		l.mu.Unlock()
		l.g.m.transports.Set(float64(n))
	})
}

// cut closes the connection for reason (a closed-transport metric label).
func (c *connGuard) cut(reason string) {
	if c == nil || c.closed.Load() {
		return
	}
	c.l.g.m.transportsClosed.WithLabelValues(reason).Inc()
	_ = c.Close()
}

// limits are the message bound and the bound on incomplete messages' bytes of the
// connection's current phase; 0 once it is trusted.
func (c *connGuard) limits() (msg, inflight int) {
	if c.trusted.Load() {
		return 0, 0
	}
	cfg := &c.l.g.cfg
	msg = cfg.UntrustedMessageBytes
	if !c.registered.Load() {
		msg = cfg.UnregisteredMessageBytes
	}
	return msg, 2 * msg
}

// guardCreds wraps the server's transport credentials: the connection gRPC reads from
// after the handshake (TLS's plain text) is inspected while it is untrusted.
type guardCreds struct {
	credentials.TransportCredentials
}

func (c guardCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, ai, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	if gc, ok := raw.(*connGuard); ok {
		return &inspectedConn{Conn: conn, g: gc, h2: h2Inspector{preface: len(http2Preface)}}, ai, nil
	}
	return conn, ai, nil
}

func (c guardCreds) Clone() credentials.TransportCredentials {
	return guardCreds{c.TransportCredentials.Clone()}
}

// http2Preface is what an HTTP/2 client sends first.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// inspectedConn reads the client's HTTP/2 frames as gRPC's transport reads them (one
// goroutine), while the connection is untrusted, and fails the read that breaks a bound
// of its phase: the transport then closes the connection.
type inspectedConn struct {
	net.Conn
	g    *connGuard
	h2   h2Inspector
	done bool // trusted: no more inspection
}

func (c *inspectedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.done {
		msg, inflight := c.g.limits()
		if msg == 0 {
			c.done, c.h2 = true, h2Inspector{}
		} else if verr := c.h2.feed(b[:n], msg, inflight); verr != nil {
			c.g.cut(rpcClosedTooLarge)
			c.g.l.g.log.Debug("nacos connection over its limits before authentication", "remote", c.g.key, "err", verr)
			return 0, verr
		}
	}
	return n, err
}

// errOverLimit is a read that broke an untrusted connection's bound.
var errOverLimit = errors.New("nacos grpc: an unauthenticated connection exceeded its message limits")

// h2Inspector follows the frames of an HTTP/2 client connection to find the gRPC
// messages in its DATA frames: each message's 5-byte prefix gives its length.
type h2Inspector struct {
	preface int // client preface bytes still to skip

	hdr    [9]byte
	hdrN   int
	inBody bool
	remain int // payload bytes left in the current frame
	typ    byte
	flags  byte
	stream uint32
	// For a DATA frame: whether its pad length byte is still to come, and the padding
	// at its end.
	padLenNext bool
	pad        int

	streams  map[uint32]*h2Message
	inflight int // bytes of incomplete messages, all streams
}

// h2Message is the message in progress on one stream.
type h2Message struct {
	prefix  [5]byte
	prefixN int
	left    int // message bytes still to come, once the prefix is complete
	got     int // bytes of this message received so far (prefix included)
}

const (
	h2FrameData      = 0x0
	h2FrameRSTStream = 0x3
	h2FlagEndStream  = 0x1
	h2FlagPadded     = 0x8
)

// feed inspects b, the next bytes of the connection.
func (p *h2Inspector) feed(b []byte, maxMsg, maxInflight int) error {
	for len(b) > 0 {
		if p.preface > 0 {
			k := min(p.preface, len(b))
			p.preface -= k
			b = b[k:]
			continue
		}
		if !p.inBody {
			k := copy(p.hdr[p.hdrN:], b)
			p.hdrN += k
			b = b[k:]
			if p.hdrN < len(p.hdr) {
				continue
			}
			p.hdrN = 0
			p.remain = int(p.hdr[0])<<16 | int(p.hdr[1])<<8 | int(p.hdr[2])
			p.typ, p.flags = p.hdr[3], p.hdr[4]
			p.stream = binary.BigEndian.Uint32(p.hdr[5:9]) & 0x7fffffff
			p.padLenNext = p.typ == h2FrameData && p.flags&h2FlagPadded != 0
			p.pad = 0
			if p.typ == h2FrameRSTStream {
				p.drop(p.stream)
			}
			p.inBody = true
			if p.remain == 0 {
				p.endFrame()
			}
			continue
		}
		k := min(p.remain, len(b))
		chunk := b[:k]
		b = b[k:]
		p.remain -= k
		if p.typ == h2FrameData {
			if p.padLenNext && len(chunk) > 0 {
				p.pad = int(chunk[0])
				p.padLenNext = false
				chunk = chunk[1:]
			}
			// The last p.pad bytes of the frame are padding.
			if data := len(chunk) - max(0, p.pad-p.remain); data > 0 {
				if err := p.data(chunk[:data], maxMsg, maxInflight); err != nil {
					return err
				}
			}
		}
		if p.remain == 0 {
			p.endFrame()
		}
	}
	return nil
}

func (p *h2Inspector) endFrame() {
	p.inBody = false
	if p.typ == h2FrameData && p.flags&h2FlagEndStream != 0 {
		p.drop(p.stream)
	}
}

// drop forgets the message in progress on stream (the stream ended).
func (p *h2Inspector) drop(stream uint32) {
	if m := p.streams[stream]; m != nil {
		p.inflight -= m.got
		delete(p.streams, stream)
	}
}

// data takes the gRPC bytes of one DATA frame of the current stream.
func (p *h2Inspector) data(d []byte, maxMsg, maxInflight int) error {
	if p.streams == nil {
		p.streams = map[uint32]*h2Message{}
	}
	m := p.streams[p.stream]
	if m == nil {
		m = &h2Message{}
		p.streams[p.stream] = m
	}
	for len(d) > 0 {
		if m.prefixN < len(m.prefix) {
			k := copy(m.prefix[m.prefixN:], d)
			m.prefixN += k
			m.got += k
			p.inflight += k
			d = d[k:]
			if m.prefixN < len(m.prefix) {
				break
			}
			length := binary.BigEndian.Uint32(m.prefix[1:])
			if int64(length) > int64(maxMsg) {
				return fmt.Errorf("%w: a message of %d bytes, the limit is %d until the connection is registered and authenticated", errOverLimit, length, maxMsg)
			}
			m.left = int(length)
		} else {
			k := min(m.left, len(d))
			m.left -= k
			m.got += k
			p.inflight += k
			d = d[k:]
		}
		if m.prefixN == len(m.prefix) && m.left == 0 { // complete: gRPC hands it on
			p.inflight -= m.got
			*m = h2Message{}
		}
		if p.inflight > maxInflight {
			return fmt.Errorf("%w: %d bytes of incomplete messages, the limit is %d", errOverLimit, p.inflight, maxInflight)
		}
	}
	return nil
}
