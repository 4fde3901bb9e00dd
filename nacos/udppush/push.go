package udppush

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/fanout"
	"github.com/rosterhq/roster/internal/clock"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
)

// Nacos 1.x UDP push (docs/nacos-compatibility.md, "UDP push"). A v1 instance-list query
// carrying udpPort records a subscriber; when the service changes, this node sends the
// subscriber's view as Nacos 1.x's PushService does, {"type":"dom","data":"<instance
// list JSON>","lastRefTime":N}, gzipped from 1 KiB on, to the query's source address at
// udpPort, and resends it until the client acknowledges lastRefTime or the retries run
// out. Pushes are driven by the node's fan-out (one subscription per watched service,
// whatever the number of its subscribers) and read from the node's own state.

// Push defaults (Options).
const (
	// CacheMillis is the cacheMillis answered to, and pushed to, a client that
	// receives pushes: Nacos's defaultPushCacheMillis. Its poll then only repairs lost
	// pushes.
	CacheMillis = 10000
	// DefaultSubscriberTTL is how long a subscriber is kept after its last query or
	// acknowledged push. Nacos drops a client 10 s (defaultPushCacheMillis) after its
	// last query, which is as long as the client waits between two queries, so a client
	// whose poll comes a moment late misses pushes; and nacos-sdk-go v1 postpones its
	// poll after every push, so while its service changes more often than every 10 s it
	// does not query at all. Roster counts acknowledged pushes as signs of life and keeps
	// a subscriber for three poll periods.
	DefaultSubscriberTTL = 3 * CacheMillis * time.Millisecond
	// DefaultRetryInterval is how long an unacknowledged push waits before it is sent
	// again (Nacos: 10 s).
	DefaultRetryInterval = time.Second
	// DefaultRetries is how many times an unacknowledged push is sent again before
	// it is given up (Nacos: once).
	DefaultRetries = 3
	// DefaultMaxSubscribers caps the subscribers one node records; a query beyond it
	// is answered (with the poll cacheMillis) without being recorded.
	DefaultMaxSubscribers = 10000
	// DefaultMaxPerAddr caps the subscribers one client IP address holds on a node,
	// whatever their ports; DefaultMaxPerPort those of one address and udpPort (one
	// client process). A query beyond either is answered as a poll without being
	// recorded: a list query is some 200 bytes, so without the caps a few hundred
	// queries with distinct cluster lists made every change send that many datagrams
	// (and their resends) to one port.
	DefaultMaxPerAddr = 256
	DefaultMaxPerPort = 64
	// DefaultChangeBudget bounds the bytes one change of a service sends to one
	// client IP address, resends included: room for one push of the largest datagram
	// and its first resend, or many pushes of ordinary views. A push beyond it is
	// skipped (counted as failed, reason budget) and its subscriber polls.
	DefaultChangeBudget = 128 << 10
	// PushMinPort is the lowest udpPort a subscriber may name: pushes are never sent to
	// a system port (DNS, NTP, syslog...), where a Nacos client never listens.
	PushMinPort = 1024
)

const (
	// pushGzipFrom is the packet size from which a push is gzipped (Nacos's
	// compressIfNecessary: 1024 bytes).
	pushGzipFrom = 1024
	// pushMaxDatagram is the largest UDP payload over IPv4.
	pushMaxDatagram = 65507
	// goClientMaxDatagram is what nacos-sdk-go v1's push receiver reads of a datagram
	// (push_receiver.go reads into a 4024-byte buffer): a larger push would arrive cut.
	goClientMaxDatagram = 4024
	// pushTick is how often retries and subscriber expiry are looked at.
	pushTick = 250 * time.Millisecond
	// pushSweepEvery is how often every subscriber's TTL is checked.
	pushSweepEvery = time.Second
	// pushRenderKey prefixes this package's encodings in a fanout.Update's memo.
	pushRenderKey = "nacos/v1-push\x00"
)

// AddrFor is the push socket address matching an HTTP listener's address: the same
// host, a port the system picks.
func AddrFor(httpAddr string) string {
	host, _, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return ""
	}
	return net.JoinHostPort(host, "0")
}

// packetConn is the push socket (*net.UDPConn); tests wrap it to see where packets go.
type packetConn interface {
	WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error)
	ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error)
	LocalAddr() net.Addr
	Close() error
}

// Options configure a pusher; zero values take the defaults.
type Options struct {
	Addr           string // UDP address to bind (default ":0")
	MaxSubscribers int
	MaxPerAddr     int
	MaxPerPort     int
	ChangeBudget   int // bytes per client address per change
	TTL            time.Duration
	RetryInterval  time.Duration
	Retries        int
	Clock          clock.Clock
	Registerer     prometheus.Registerer
	Logger         *slog.Logger
	// Conn replaces the socket (tests); Addr is then unused.
	Conn packetConn
	// OnTick, when set (tests), is called after each round of retries and expiry.
	OnTick func(now time.Time)
}

func (o *Options) defaults() {
	if o.Addr == "" {
		o.Addr = ":0"
	}
	if o.MaxSubscribers == 0 {
		o.MaxSubscribers = DefaultMaxSubscribers
	}
	if o.MaxPerAddr == 0 {
		o.MaxPerAddr = DefaultMaxPerAddr
	}
	if o.MaxPerPort == 0 {
		o.MaxPerPort = DefaultMaxPerPort
	}
	if o.ChangeBudget == 0 {
		o.ChangeBudget = DefaultChangeBudget
	}
	if o.TTL == 0 {
		o.TTL = DefaultSubscriberTTL
	}
	if o.RetryInterval == 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	if o.Retries == 0 {
		o.Retries = DefaultRetries
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Query is what a v1 instance-list query says about its subscriber.
type Query struct {
	Service     model.ServiceKey
	Clusters    string // as the client sent it (the list echoes it; the SDK keys its cache by it)
	HealthyOnly bool
	Addr        netip.AddrPort // the query's source IP at its udpPort
	Agent, App  string
	// Allowed reports whether the query's token still grants read access to the
	// service's namespace (nil: ACLs off).
	Allowed func() bool
}

// subKey identifies a subscriber: a client address watching one view of a service.
type subKey struct {
	service  model.ServiceKey
	clusters string
	addr     netip.AddrPort
}

// Subscription is one subscriber. Its fields are guarded by pusher.mu.
type Subscription struct {
	key         subKey
	agent, app  string
	healthyOnly bool
	maxDatagram int
	// allowed is the latest query's Query.allowed: a subscriber whose token no
	// longer grants read access is dropped instead of pushed.
	allowed func() bool
	// lastSeen is the time of the last query or acknowledged push.
	lastSeen time.Time
	// known is the index of the newest state the client has been answered or pushed,
	// and knownFound whether the service existed in it (knownUnsure: not known, as for
	// an answer the leader gave, which is taken for the state at that index). A state
	// at the same index but of the other existence is still news, as in the fan-out.
	known      uint64
	knownFound knownExistence
	// pollOnly is set while pushes do not reach the client (the last one went
	// unacknowledged, could not be sent, or was too large for it): its queries are
	// answered the poll cacheMillis, so that it keeps learning of changes by polling.
	pollOnly bool
	// inflight is the push awaiting the client's acknowledgement, if any.
	inflight *inflightPush
}

// knownExistence is whether a subscriber's known state had the service.
type knownExistence int8

const (
	knownUnsure knownExistence = iota
	knownMissing
	knownPresent
)

func existence(found bool) knownExistence {
	if found {
		return knownPresent
	}
	return knownMissing
}

// inflightPush is a sent, unacknowledged push.
type inflightPush struct {
	ref    int64 // lastRefTime, echoed by the ack
	packet []byte
	first  time.Time
	last   time.Time
	sends  int
	// budget is what the change may still send to the subscriber's address; every
	// copy, resends included, is charged to it.
	budget *changeBudget
}

// changeBudget is the bytes one change may still send to one client address. Its
// fields are guarded by pusher.mu.
type changeBudget struct {
	left   int
	logged bool // the first skip was logged
}

// ackKey matches an acknowledgement: its source address and lastRefTime.
type ackKey struct {
	addr netip.AddrPort
	ref  int64
}

// pushWatch is one watched service: its fan-out subscription and its subscribers.
type pushWatch struct {
	key  model.ServiceKey
	sub  *fanout.Subscription
	subs map[subKey]*Subscription
}

// Pusher records subscribers and pushes them changes. Its goroutines are the ack reader,
// the retry/expiry timer and one per watched service; it stops when the hub closes.
type Pusher struct {
	hub   *fanout.Hub
	store nacos.Reader
	conn  packetConn
	opts  Options
	clock clock.Clock
	log   *slog.Logger
	m     *pushMetrics

	mu        sync.Mutex
	watches   map[model.ServiceKey]*pushWatch
	subs      map[subKey]*Subscription
	pending   map[ackKey]*Subscription
	perAddr   map[netip.Addr]int     // subscribers by client address
	perPort   map[netip.AddrPort]int // subscribers by client address and udpPort
	closed    bool
	nextSweep time.Time
	warnedCap bool

	// seq numbers pushes (their lastRefTime): unique per node run, increasing.
	seq     atomic.Int64
	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
}

// New binds the push socket and starts the pusher; it stops when hub closes.
func New(hub *fanout.Hub, st nacos.Reader, opts Options) (*Pusher, error) {
	opts.defaults()
	m, err := newPushMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	conn := opts.Conn
	if conn == nil {
		addr, err := net.ResolveUDPAddr("udp", opts.Addr)
		if err != nil {
			return nil, fmt.Errorf("nacos push address %q: %w", opts.Addr, err)
		}
		c, err := net.ListenUDP("udp", addr)
		if err != nil {
			return nil, fmt.Errorf("nacos push socket: %w", err)
		}
		conn = c
	}
	// An empty subscription ends when the hub closes: the pusher's cue to stop.
	life, err := hub.Subscribe()
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	p := &Pusher{
		hub: hub, store: st, conn: conn, opts: opts, clock: opts.Clock, log: opts.Logger, m: m,
		watches: map[model.ServiceKey]*pushWatch{},
		subs:    map[subKey]*Subscription{},
		pending: map[ackKey]*Subscription{},
		perAddr: map[netip.Addr]int{},
		perPort: map[netip.AddrPort]int{},
		stop:    make(chan struct{}),
	}
	p.seq.Store(time.Now().UnixNano())
	p.nextSweep = p.clock.Now().Add(pushSweepEvery)
	timer := p.clock.NewTimer(pushTick)
	p.wg.Add(2)
	go p.readAcks()
	go p.run(life, timer)
	return p, nil
}

// LocalAddr is the address pushes are sent from.
func (p *Pusher) LocalAddr() net.Addr { return p.conn.LocalAddr() }

// Close stops the pusher and waits for its goroutines.
func (p *Pusher) Close() {
	p.shutdown()
	p.wg.Wait()
}

// shutdown stops the pusher without waiting: the socket closes, every watch ends and
// every subscriber is forgotten.
func (p *Pusher) shutdown() {
	p.stopped.Do(func() {
		close(p.stop)
		p.mu.Lock()
		p.closed = true
		watches := p.watches
		p.watches = map[model.ServiceKey]*pushWatch{}
		p.subs = map[subKey]*Subscription{}
		p.pending = map[ackKey]*Subscription{}
		p.perAddr, p.perPort = map[netip.Addr]int{}, map[netip.AddrPort]int{}
		p.m.subscribers.Set(0)
		p.mu.Unlock()
		for _, w := range watches {
			w.sub.Close()
		}
		_ = p.conn.Close()
	})
}

// Subscribe records q's subscriber, or renews it, and returns it; ok is false when
// nothing was recorded (the pusher stopped, udpPort is a system port, or a subscriber
// cap is reached).
func (p *Pusher) Subscribe(q Query) (sub *Subscription, ok bool) {
	if q.Addr.Port() < PushMinPort {
		p.m.refused.WithLabelValues(refusedLowPort).Inc()
		p.log.Debug("nacos push: udpPort below 1024 refused; the query is answered as a poll",
			"service", q.Service.String(), "addr", q.Addr.String())
		return nil, false
	}
	now := p.clock.Now()
	key := subKey{service: q.Service, clusters: q.Clusters, addr: q.Addr}
	p.mu.Lock()
	if s := p.subs[key]; s != nil && !p.closed {
		s.lastSeen, s.agent, s.app, s.healthyOnly, s.allowed = now, q.Agent, q.App, q.HealthyOnly, q.Allowed
		s.maxDatagram = maxDatagramFor(q.Agent)
		p.mu.Unlock()
		return s, true
	}
	p.mu.Unlock()
	// A new subscriber has the state this node holds now: a change applied from here
	// on is pushed to it, and the query it came with answers at least this state.
	known, _, err := p.store.ServiceView(nil, q.Service)
	knownFound := knownUnsure
	if err == nil || errors.Is(err, model.ErrNotFound) {
		knownFound = existence(err == nil)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false
	}
	if s := p.subs[key]; s != nil { // recorded meanwhile by a concurrent query
		s.lastSeen, s.allowed = now, q.Allowed
		return s, true
	}
	if len(p.subs) >= p.opts.MaxSubscribers {
		p.m.refused.WithLabelValues(refusedLimit).Inc()
		if !p.warnedCap {
			p.warnedCap = true
			p.log.Warn("nacos push: subscriber limit reached; further clients are answered without being recorded and learn of changes by polling",
				"limit", p.opts.MaxSubscribers, "service", q.Service.String(), "addr", q.Addr.String())
		}
		return nil, false
	}
	if reason, limit := p.overCapLocked(q.Addr); reason != "" {
		// Debug only: whoever reaches the HTTP port chooses how often this happens.
		p.m.refused.WithLabelValues(reason).Inc()
		p.log.Debug("nacos push: subscriber limit of the client address reached; the query is answered as a poll",
			"reason", reason, "limit", limit, "service", q.Service.String(), "addr", q.Addr.String())
		return nil, false
	}
	w := p.watches[q.Service]
	if w == nil {
		fs, err := p.hub.Subscribe(fanout.ServiceTopic(q.Service))
		if err != nil {
			return nil, false
		}
		w = &pushWatch{key: q.Service, sub: fs, subs: map[subKey]*Subscription{}}
		p.watches[q.Service] = w
		p.wg.Add(1)
		go p.watch(w)
	}
	s := &Subscription{
		key: key, agent: q.Agent, app: q.App, healthyOnly: q.HealthyOnly, allowed: q.Allowed,
		maxDatagram: maxDatagramFor(q.Agent), lastSeen: now, known: known, knownFound: knownFound,
	}
	p.subs[key] = s
	w.subs[key] = s
	p.perAddr[key.addr.Addr()]++
	p.perPort[key.addr]++
	p.m.subscribers.Set(float64(len(p.subs)))
	return s, true
}

// Reasons of roster_nacos_push_subscribers_refused_total.
const (
	refusedLimit   = "limit"    // the node's subscriber cap
	refusedPerAddr = "per_addr" // the cap of one client address
	refusedPerPort = "per_port" // the cap of one client address and udpPort
	refusedLowPort = "low_port" // udpPort below PushMinPort
)

// overCapLocked reports which per-client cap a new subscriber at addr would exceed
// ("" for none), and its value.
func (p *Pusher) overCapLocked(addr netip.AddrPort) (string, int) {
	if p.perPort[addr] >= p.opts.MaxPerPort {
		return refusedPerPort, p.opts.MaxPerPort
	}
	if p.perAddr[addr.Addr()] >= p.opts.MaxPerAddr {
		return refusedPerAddr, p.opts.MaxPerAddr
	}
	return "", 0
}

// forgetClientLocked takes a removed subscriber at addr out of the per-client counts.
func (p *Pusher) forgetClientLocked(addr netip.AddrPort) {
	if p.perPort[addr]--; p.perPort[addr] <= 0 {
		delete(p.perPort, addr)
	}
	if p.perAddr[addr.Addr()]--; p.perAddr[addr.Addr()] <= 0 {
		delete(p.perAddr, addr.Addr())
	}
}

// Answered records that s's query was Answered with the state at index idx (the
// X-Roster-Index of the answer, possibly the leader's): states up to it are not pushed.
func (p *Pusher) Answered(s *Subscription, idx uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if idx > s.known {
		s.known, s.knownFound = idx, knownUnsure
	}
}

// Polling reports whether s's queries are answered the poll cacheMillis.
func (p *Pusher) Polling(s *Subscription) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return s.pollOnly
}

// SubscriberInfo is one entry of GET /nacos/v1/ns/service/subscribers.
type SubscriberInfo struct {
	AddrStr     string `json:"addrStr"`
	Agent       string `json:"agent"`
	App         string `json:"app"`
	IP          string `json:"ip"`
	NamespaceID string `json:"namespaceId"`
	ServiceName string `json:"serviceName"`
}

// Subscribers lists the live Subscribers of key, ordered by address then clusters.
func (p *Pusher) Subscribers(key model.ServiceKey) []SubscriberInfo {
	now := p.clock.Now()
	p.mu.Lock()
	var list []*Subscription
	if w := p.watches[key]; w != nil {
		for _, s := range w.subs {
			if !p.expired(s, now) {
				list = append(list, s)
			}
		}
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i].key, list[j].key
		if c := a.addr.Compare(b.addr); c != 0 {
			return c < 0
		}
		return a.clusters < b.clusters
	})
	out := make([]SubscriberInfo, len(list))
	for i, s := range list {
		out[i] = SubscriberInfo{
			AddrStr: s.key.addr.String(), Agent: s.agent, App: s.app, IP: s.key.addr.Addr().String(),
			NamespaceID: key.Namespace, ServiceName: key.GroupedName(),
		}
	}
	p.mu.Unlock()
	return out
}

// Count is the number of recorded subscribers.
func (p *Pusher) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.subs)
}

func (p *Pusher) expired(s *Subscription, now time.Time) bool {
	return now.Sub(s.lastSeen) > p.opts.TTL
}

// removeLocked forgets s; the service's watch ends with its last subscriber.
func (p *Pusher) removeLocked(s *Subscription) {
	if p.subs[s.key] != s {
		return
	}
	delete(p.subs, s.key)
	p.forgetClientLocked(s.key.addr)
	if s.inflight != nil {
		delete(p.pending, ackKey{s.key.addr, s.inflight.ref})
		s.inflight = nil
	}
	if w := p.watches[s.key.service]; w != nil {
		delete(w.subs, s.key)
		if len(w.subs) == 0 {
			delete(p.watches, w.key)
			w.sub.Close()
		}
	}
	p.m.subscribers.Set(float64(len(p.subs)))
}

// watch pushes the changes of one service until its subscription ends.
func (p *Pusher) watch(w *pushWatch) {
	defer p.wg.Done()
	for range w.sub.C() {
		for _, u := range w.sub.Next() {
			p.publish(w, u)
		}
	}
}

// pushTarget is a subscriber a change is pushed to, with the view it asked for.
type pushTarget struct {
	s           *Subscription
	clusters    string
	healthyOnly bool
	allowed     func() bool
}

// publish pushes u to the subscribers of w that do not have it yet, rendering each
// distinct view (clusters, healthyOnly) once.
func (p *Pusher) publish(w *pushWatch, u *fanout.Update) {
	if u.Err != nil && !errors.Is(u.Err, model.ErrNotFound) {
		return // a failed read: the hub reads the topic again at its next change
	}
	now := p.clock.Now()
	var targets []pushTarget
	p.mu.Lock()
	for _, s := range w.subs {
		if p.expired(s, now) {
			p.removeLocked(s)
			continue
		}
		// A resync (a restore, a new leader) replaces what the client holds when its
		// index differs, even backwards; a leadership change alone keeps the index.
		found := existence(u.Err == nil)
		sameIndexNews := u.Index == s.known && s.knownFound != knownUnsure && s.knownFound != found
		if u.Index > s.known || sameIndexNews || (u.Resync && u.Index != s.known) {
			s.known, s.knownFound = u.Index, found
			targets = append(targets, pushTarget{s: s, clusters: s.key.clusters, healthyOnly: s.healthyOnly, allowed: s.allowed})
		}
	}
	p.mu.Unlock()
	// Each client address may receive at most opts.ChangeBudget bytes of this change.
	budgets := map[netip.Addr]*changeBudget{}
	for _, t := range targets {
		if t.allowed != nil && !t.allowed() {
			// The token the subscriber queried with was deleted or lost its right.
			p.mu.Lock()
			p.removeLocked(t.s)
			p.mu.Unlock()
			p.log.Debug("nacos push: subscriber dropped: its token no longer grants read access",
				"service", w.key.String(), "addr", t.s.key.addr.String())
			continue
		}
		ref, packet, err := p.render(w.key, u, t.clusters, t.healthyOnly, now)
		if err != nil {
			p.log.Error("nacos push: encoding failed", "service", w.key.String(), "err", err)
			continue
		}
		b := budgets[t.s.key.addr.Addr()]
		if b == nil {
			b = &changeBudget{left: p.opts.ChangeBudget}
			budgets[t.s.key.addr.Addr()] = b
		}
		p.send(t.s, ref, packet, b, now)
	}
}

// render returns the push packet of one view of u and its lastRefTime, encoding (and
// compressing) it once per update and view: subscribers of one view share the packet.
func (p *Pusher) render(key model.ServiceKey, u *fanout.Update, clusters string, healthyOnly bool, now time.Time) (int64, []byte, error) {
	memo := pushRenderKey + strconv.FormatBool(healthyOnly) + "\x00" + clusters
	b, err := u.Render(memo, func() ([]byte, error) {
		info := nacos.ServiceInfoFor(key, u.Service, u.Err == nil, clusters, healthyOnly, CacheMillis, now)
		ref := p.seq.Add(1)
		packet, err := encodePush(info, ref)
		if err != nil {
			return nil, err
		}
		// The memo holds the lastRefTime (8 bytes) in front of the packet.
		out := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(packet)), uint64(ref))
		return append(out, packet...), nil
	})
	if err != nil {
		return 0, nil, err
	}
	return int64(binary.BigEndian.Uint64(b[:8])), b[8:], nil
}

// pushPacket is a push as Nacos 1.x sends it (PushService.prepareHostsData): the
// instance list as a JSON string in data.
type pushPacket struct {
	Type        string `json:"type"`
	Data        string `json:"data"`
	LastRefTime int64  `json:"lastRefTime"`
}

// encodePush encodes a push of info, gzipped when it is 1 KiB or more.
func encodePush(info nacos.ServiceInfo, ref int64) ([]byte, error) {
	data, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(pushPacket{Type: "dom", Data: string(data), LastRefTime: ref})
	if err != nil {
		return nil, err
	}
	if len(b) < pushGzipFrom {
		return b, nil
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// send pushes packet to s, replacing a push of an older state still awaiting its ack,
// and charges it to the change's budget b for s's address.
func (p *Pusher) send(s *Subscription, ref int64, packet []byte, b *changeBudget, now time.Time) {
	p.mu.Lock()
	if p.closed || p.subs[s.key] != s {
		p.mu.Unlock()
		return
	}
	if old := s.inflight; old != nil {
		delete(p.pending, ackKey{s.key.addr, old.ref})
		s.inflight = nil
		p.m.superseded.Inc()
	}
	if len(packet) > s.maxDatagram {
		s.pollOnly = true
		p.mu.Unlock()
		p.m.failed.WithLabelValues("too_large").Inc()
		p.log.Debug("nacos push: view too large for the client; it polls instead",
			"service", s.key.service.String(), "addr", s.key.addr.String(), "bytes", len(packet), "limit", s.maxDatagram)
		return
	}
	if !p.chargeLocked(s, b, len(packet)) {
		p.mu.Unlock()
		return
	}
	in := &inflightPush{ref: ref, packet: packet, first: now, last: now, sends: 1, budget: b}
	s.inflight = in
	// Registered before sending: the ack may come back before WriteTo returns.
	p.pending[ackKey{s.key.addr, ref}] = s
	p.mu.Unlock()
	p.m.sent.Inc()
	p.write(s, in)
}

// chargeLocked takes n bytes from b for a copy of a push to s; when b has not that much
// left, the copy is skipped, counted, and s polls (as for a push it did not ack).
func (p *Pusher) chargeLocked(s *Subscription, b *changeBudget, n int) bool {
	if n <= b.left {
		b.left -= n
		return true
	}
	s.pollOnly = true
	p.m.failed.WithLabelValues("budget").Inc()
	if !b.logged {
		// Once per change and address: the rest of the change's pushes to it are
		// skipped too. Debug only, as the number of subscribers is the clients' choice.
		b.logged = true
		p.log.Debug("nacos push: byte budget of the change for the client address spent; further pushes of it are skipped and their clients poll",
			"service", s.key.service.String(), "addr", s.key.addr.Addr().String(), "budget", p.opts.ChangeBudget)
	}
	return false
}

// write sends one copy of in to s; a failed send gives the push up.
func (p *Pusher) write(s *Subscription, in *inflightPush) {
	if _, err := p.conn.WriteToUDPAddrPort(in.packet, s.key.addr); err != nil {
		p.mu.Lock()
		if s.inflight == in {
			delete(p.pending, ackKey{s.key.addr, in.ref})
			s.inflight = nil
			s.pollOnly = true
		}
		closed := p.closed
		p.mu.Unlock()
		if !closed {
			p.m.failed.WithLabelValues("send_error").Inc()
			p.log.Debug("nacos push: send failed", "addr", s.key.addr.String(), "err", err)
		}
	}
}

// run resends unacknowledged pushes, gives up those out of retries and drops expired
// subscribers, until the hub closes (life ends) or the pusher is closed.
func (p *Pusher) run(life *fanout.Subscription, timer clock.Timer) {
	defer p.wg.Done()
	defer timer.Stop()
	defer life.Close()
	for {
		select {
		case _, ok := <-life.C():
			if !ok {
				p.shutdown()
				return
			}
		case <-p.stop:
			return
		case <-timer.C():
			// Armed again before the work, so that a clock moved by a test while the
			// work runs still fires it.
			timer.Reset(pushTick)
			now := p.clock.Now()
			p.tick(now)
			if p.opts.OnTick != nil {
				p.opts.OnTick(now)
			}
		}
	}
}

// tick does one round of retries and expiry at now.
func (p *Pusher) tick(now time.Time) {
	type resend struct {
		s  *Subscription
		in *inflightPush
	}
	var todo []resend
	p.mu.Lock()
	for k, s := range p.pending {
		in := s.inflight
		if in == nil || in.ref != k.ref {
			delete(p.pending, k) // cannot happen: kept in step with inflight
			continue
		}
		if now.Sub(in.last) < p.opts.RetryInterval {
			continue
		}
		if in.sends > p.opts.Retries {
			delete(p.pending, k)
			s.inflight = nil
			s.pollOnly = true
			p.m.failed.WithLabelValues("no_ack").Inc()
			continue
		}
		if !p.chargeLocked(s, in.budget, len(in.packet)) {
			delete(p.pending, k)
			s.inflight = nil
			continue
		}
		in.sends++
		in.last = now
		todo = append(todo, resend{s, in})
	}
	if !now.Before(p.nextSweep) {
		p.nextSweep = now.Add(pushSweepEvery)
		for _, s := range p.subs {
			if p.expired(s, now) {
				p.removeLocked(s)
			}
		}
	}
	p.mu.Unlock()
	for _, r := range todo {
		p.m.resent.Inc()
		p.write(r.s, r.in)
	}
}

// pushAck is a client's answer to a push; nacos-sdk-go v1 and the Java client send
// lastRefTime as a JSON string, which Nacos reads as a number.
type pushAck struct {
	Type        string          `json:"type"`
	LastRefTime json.RawMessage `json:"lastRefTime"`
}

// parseAck returns the lastRefTime of a push-ack.
func parseAck(b []byte) (int64, bool) {
	var a pushAck
	if err := json.Unmarshal(bytes.TrimSpace(b), &a); err != nil || a.Type != "push-ack" {
		return 0, false
	}
	raw := strings.Trim(string(a.LastRefTime), `"`)
	ref, err := strconv.ParseInt(raw, 10, 64)
	return ref, err == nil
}

// readAcks matches acknowledgements, by source address and lastRefTime, to the pushes
// awaiting them, until the socket closes.
func (p *Pusher) readAcks() {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := p.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			continue // an ICMP error surfaced on the socket, or a truncated datagram
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		ref, ok := parseAck(buf[:n])
		if !ok {
			p.m.ignored.Inc()
			continue
		}
		now := p.clock.Now()
		p.mu.Lock()
		k := ackKey{from, ref}
		s := p.pending[k]
		var took time.Duration
		if s != nil {
			delete(p.pending, k)
			took = now.Sub(s.inflight.first)
			s.inflight = nil
			s.pollOnly = false
			s.lastSeen = now
		}
		p.mu.Unlock()
		if s == nil {
			p.m.ignored.Inc() // late (given up or superseded), or not ours
			continue
		}
		p.m.acked.Inc()
		p.m.ackSeconds.Observe(took.Seconds())
	}
}

// pushClients are the clients Nacos 1.x pushes to, by the prefix of their User-Agent,
// with the first version it pushes to (ClientInfo.ClientTypeDescription and
// SwitchDomain's push*Version defaults).
var pushClients = []struct {
	prefix string
	min    [3]int
}{
	{"Nacos-Java-Client", [3]int{0, 1, 0}},
	{"Nacos-Go-Client", [3]int{0, 1, 0}},
	{"Nacos-C-Client", [3]int{1, 0, 12}},
	{"vip-client4cpp", [3]int{1, 0, 12}},
	{"Nacos-CSharp-Client", [3]int{0, 9, 0}},
	{"Nacos-DNS", [3]int{0, 4, 3}},
}

// Supported reports whether a client with this User-Agent ("Nacos-Go-Client:v1.0.1")
// receives pushes, as Nacos's PushService.canEnablePush decides.
func Supported(agent string) bool {
	for _, c := range pushClients {
		if !strings.HasPrefix(agent, c.prefix) {
			continue
		}
		_, v, ok := strings.Cut(agent, ":v")
		if !ok {
			return false
		}
		ver, ok := parseVersion(v)
		return ok && compareVersion(ver, c.min) >= 0
	}
	return false
}

// parseVersion reads major.minor.patch from the start of v (missing parts are 0);
// anything after the numbers (-SNAPSHOT, ...) is ignored.
func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	parts := strings.FieldsFunc(v, func(r rune) bool { return strings.ContainsRune("-_./;:", r) })
	if len(parts) == 0 {
		return out, false
	}
	for i := 0; i < 3 && i < len(parts); i++ {
		digits := parts[i]
		for j, r := range digits {
			if r < '0' || r > '9' {
				digits = digits[:j]
				break
			}
		}
		n, err := strconv.Atoi(digits)
		if err != nil {
			if i == 0 {
				return out, false
			}
			break
		}
		out[i] = n
	}
	return out, true
}

func compareVersion(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// maxDatagramFor is the largest push a client reads whole.
func maxDatagramFor(agent string) int {
	if strings.HasPrefix(agent, "Nacos-Go-Client") {
		return goClientMaxDatagram
	}
	return pushMaxDatagram
}

// Target is where the pushes of a query from remoteAddr (an http.Request's
// RemoteAddr) go: its source IP at udpPort. ok is false for an address nothing may be
// sent to (unparsable, unspecified, multicast, broadcast).
func Target(remoteAddr string, udpPort int) (netip.AddrPort, bool) {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.AddrPort{}, false
	}
	ip := ap.Addr().Unmap()
	if !ip.IsValid() || ip.IsUnspecified() || ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip, uint16(udpPort)), true
}
