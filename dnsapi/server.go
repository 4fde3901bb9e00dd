// Package dnsapi is Roster's DNS interface: every node answers A, AAAA, SRV and CNAME
// queries for the healthy, enabled instances of its services from its own replicated
// state, over UDP and TCP, through github.com/miekg/dns.
//
// Answers are stale by nature, as a ?consistency=stale read is: a node answers from
// the entries it has applied, so it is at most as far behind as its last contact with
// the leader (plus its apply lag); Config.MaxStale turns that into a bound. The names
// are described in names.go and docs/dns.md. The server is authoritative for its
// domain only: names outside it are REFUSED, it never recurses and never sets RA.
package dnsapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"
)

// ErrListen marks New's failure to bind the address (as opposed to a bad Config).
var ErrListen = errors.New("cannot listen")

// Options are what a Server needs besides its Config.
type Options struct {
	// Store is the node's state (required).
	Store Store
	// Staleness returns the time since this node last heard from the leader (0 on the
	// leader, negative if never); required when Config.MaxStale is set.
	Staleness func() time.Duration
	// Alarm, when set and returning an error, makes every query SERVFAIL: the node's
	// state was found to differ from its peers'.
	Alarm func() error
	// Registerer receives the DNS metrics (nil: not registered).
	Registerer prometheus.Registerer
	// Logger receives the server's logs (nil: discarded).
	Logger *slog.Logger
}

// Server serves DNS on one UDP and one TCP socket bound to the same address.
type Server struct {
	cfg     Config
	log     *slog.Logger
	h       *handler
	metrics *metrics
	udp     net.PacketConn
	tcp     net.Listener
	addr    string

	udpSrv, tcpSrv *dns.Server
	cancel         context.CancelFunc
	watchDone      chan struct{}
	started        bool
	closeOnce      sync.Once
	closeErr       error
}

// New validates cfg and binds its address over UDP and TCP (Start serves them). With
// port 0 both sockets get the same free port.
func New(cfg Config, o Options) (*Server, error) {
	if o.Store == nil {
		return nil, errors.New("dns: Options.Store is required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.MaxStale > 0 && o.Staleness == nil {
		return nil, errors.New("dns: Options.Staleness is required with MaxStale")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: o.Logger}
	s.h = newHandler(cfg, newCatalog(o.Store), o.Staleness)
	s.h.alarm = o.Alarm
	s.metrics, err = newMetrics(o.Registerer, func() float64 {
		if s.h.limit == nil {
			return 0
		}
		return float64(s.h.limit.size())
	})
	if err != nil {
		return nil, err
	}
	if s.udp, s.tcp, err = listen(cfg.Addr); err != nil {
		return nil, fmt.Errorf("dns-addr: %w: %w", ErrListen, err)
	}
	s.addr = s.udp.LocalAddr().String()
	return s, nil
}

// listen binds addr over UDP and TCP. With port 0 it binds UDP on a free port and then
// TCP on the same one, trying again if that TCP port is taken.
func listen(addr string) (net.PacketConn, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	tries := 1
	if port == "0" {
		tries = 20
	}
	for i := 0; ; i++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, err
		}
		p := strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
		ln, err := net.Listen("tcp", net.JoinHostPort(host, p))
		if err == nil {
			return pc, ln, nil
		}
		_ = pc.Close()
		if i+1 >= tries || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, err
		}
	}
}

// Addr is the address DNS is served on (with the real port when 0 was asked for).
func (s *Server) Addr() string { return s.addr }

// Domain is the zone served, in canonical form.
func (s *Server) Domain() string { return s.cfg.Domain }

// Start serves UDP and TCP until Close; it returns once both sockets are served.
func (s *Server) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.watchDone = make(chan struct{})
	go func() {
		defer close(s.watchDone)
		s.h.cat.run(ctx)
	}()
	var ready sync.WaitGroup
	newSrv := func() *dns.Server {
		ready.Add(1)
		var once sync.Once
		return &dns.Server{
			Handler:           s,
			UDPSize:           udpReadSize,
			ReadTimeout:       2 * time.Second,
			WriteTimeout:      2 * time.Second,
			MsgAcceptFunc:     s.accept,
			MsgInvalidFunc:    func([]byte, error) { s.metrics.queries.WithLabelValues("none", rcodeLabel(dns.RcodeFormatError)).Inc() },
			NotifyStartedFunc: func() { once.Do(ready.Done) },
		}
	}
	s.udpSrv, s.tcpSrv = newSrv(), newSrv()
	s.udpSrv.PacketConn = s.udp
	s.tcpSrv.Listener = netutil.LimitListener(s.tcp, s.cfg.MaxTCPConns)
	for _, srv := range []*dns.Server{s.udpSrv, s.tcpSrv} {
		go func() {
			err := srv.ActivateAndServe()
			if err != nil {
				s.log.Error("dns server stopped", "err", err)
			}
			srv.NotifyStartedFunc() // unblocks Start if it never started
		}()
	}
	ready.Wait()
	s.started = true
	s.log.Info("serving dns", "addr", s.addr, "domain", s.cfg.Domain)
}

// accept is the DNS library's early check of a message header; it counts what it rejects.
func (s *Server) accept(dh dns.Header) dns.MsgAcceptAction {
	a := acceptFunc(dh)
	switch a {
	case dns.MsgReject:
		s.metrics.queries.WithLabelValues("none", rcodeLabel(dns.RcodeFormatError)).Inc()
	case dns.MsgRejectNotImplemented:
		s.metrics.queries.WithLabelValues("none", rcodeLabel(dns.RcodeNotImplemented)).Inc()
	}
	return a
}

// ServeDNS answers one query (dns.Handler).
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	start := time.Now()
	tcp := false
	proto := "udp"
	var client netip.Addr
	switch a := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		client = a.AddrPort().Addr()
	case *net.TCPAddr:
		client, tcp, proto = a.AddrPort().Addr(), true, "tcp"
	}
	m := s.h.answer(req, tcp, client)
	// Counted before the answer leaves: a client that has its answer finds it counted.
	s.metrics.count(req, m.Rcode)
	if m.Truncated {
		s.metrics.truncated.Inc()
	}
	if err := w.WriteMsg(m); err != nil {
		s.log.Debug("dns: writing an answer failed", "client", client, "err", err)
	}
	s.metrics.latency.WithLabelValues(proto).Observe(time.Since(start).Seconds())
}

// Close stops serving and closes the sockets. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if !s.started {
			s.closeErr = errors.Join(s.udp.Close(), s.tcp.Close())
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var errs []error
		for _, srv := range []*dns.Server{s.udpSrv, s.tcpSrv} {
			if err := srv.ShutdownContext(ctx); err != nil && err.Error() != "dns: server not started" {
				errs = append(errs, err)
			}
		}
		// The library closes the sockets it served; these are no-ops then.
		_, _ = s.udp.Close(), s.tcp.Close()
		s.closeErr = errors.Join(errs...)
		s.cancel()
		<-s.watchDone
	})
	return s.closeErr
}
