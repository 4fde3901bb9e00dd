package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fanout"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/internal/prom"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// DefaultKeepAlive is how often an idle stream gets a comment line, so that proxies and
// clients see it alive.
const DefaultKeepAlive = 15 * time.Second

// wantsStream reports whether the request accepts server-sent events (and Accept does
// not refuse them with q=0).
func wantsStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || mt != api.MediaEventStream {
				continue
			}
			if q, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}

// streamMetrics count the open streams and the events they sent.
type streamMetrics struct {
	open   prometheus.Gauge
	events *prometheus.CounterVec
}

func newStreamMetrics(reg prometheus.Registerer) (*streamMetrics, error) {
	m := &streamMetrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "roster_http_streams_open", Help: "Open server-sent-event watch streams on this node.",
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_http_stream_events_total", Help: "Events sent on watch streams, by event type.",
		}, []string{"event"}),
	}
	g := prom.On(reg)
	prom.Add(g, &m.open)
	prom.Add(g, &m.events)
	if err := g.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// streamSpec is what one stream watches and how it shows an update.
type streamSpec struct {
	// ns is the namespace whose data the stream sends: it needs read access to it, at
	// the start and before every write.
	ns    string
	topic fanout.Topic
	// event names the event of a view that exists.
	event string
	// key identifies the filter, so that streams with equal filters share encodings.
	key string
	// body is the response for u, and sig the same with every index that changes on
	// unrelated changes zeroed: two updates with equal sigs look the same to this filter.
	body func(u *fanout.Update, withIndexes bool) any
}

// checkStreamQuery refuses the parameters a stream cannot honour.
func checkStreamQuery(r *http.Request) (last uint64, hasLast bool, err error) {
	q := r.URL.Query()
	for _, p := range []string{"index", "wait"} {
		if q.Has(p) {
			return 0, false, model.Invalid(p, "a stream sends every change; %s is for blocking queries", p)
		}
	}
	if c := q.Get("consistency"); c != "" && c != api.ConsistencyStale {
		return 0, false, model.Invalid("consistency", "a stream is served from this node's state: only %q is allowed, got %q", api.ConsistencyStale, c)
	}
	v := r.Header.Get(api.HeaderLastEventID)
	field := api.HeaderLastEventID
	if v == "" {
		v, field = q.Get("last-event-id"), "last-event-id"
	}
	if v == "" {
		return 0, false, nil
	}
	last, err = strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false, model.Invalid(field, "must be an index (a non-negative integer), got %q", v)
	}
	return last, true, nil
}

// serveStream answers a watch as server-sent events from the local state until the
// client leaves or the node's fan-out closes. Errors before the stream starts are
// returned (and answered as JSON); afterwards the stream just ends.
//
// Over HTTP/1.x the connection is taken over (hijacked) once the headers are decided and
// the stream is served by the node's streamer, without a goroutine of its own; the
// response then has neither Content-Length nor chunking and ends when the connection
// closes ("Connection: close"). Where a connection cannot be taken over (HTTP/2) the
// handler serves the stream itself.
func (s *server) serveStream(w http.ResponseWriter, r *http.Request, spec streamSpec) error {
	last, hasLast, err := checkStreamQuery(r)
	if err != nil {
		return err
	}
	perm := acl.NamespacePermission(spec.ns, acl.Read)
	if err := s.reg.Authorize(r.Context(), perm); err != nil {
		return err
	}
	if s.cfg.Watch == nil {
		return fmt.Errorf("%w: this node serves no streams", httpx.ErrNotAcceptable)
	}
	if err := s.reg.CheckConsistency(r.Context(), registry.Stale); err != nil {
		return err
	}
	release, err := s.reg.HoldWatcher()
	if err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(registry.WatchRetryAfter))
		return err
	}
	held := true
	defer func() {
		if held {
			release()
		}
	}()
	var (
		d      *detached
		wake   chan struct{}
		notify func()
	)
	if r.ProtoMajor == 1 && canHijack(w) {
		d = s.streamer.newDetached()
		notify = d.notify
	} else {
		wake = make(chan struct{}, 1)
		notify = func() {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
	sub, err := s.cfg.Watch.SubscribeFunc(notify, spec.topic)
	if err != nil {
		return fmt.Errorf("%w: %v", httpx.ErrUnavailable, err)
	}

	h := w.Header()
	h.Set("Content-Type", api.MediaEventStream)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	httpx.SetLeaderHeaders(w, s.node, api.ConsistencyStale)
	st := newEventStream(spec, s.streams)
	st.allowed = s.reg.StillAllowed(httpx.TokenOf(r), perm)
	var initial, sig []byte
	for i, u := range sub.Next() {
		if i == 0 {
			httpx.SetIndex(w, u.Index)
		}
		if hasLast && u.Index == last {
			// Resumed with nothing new: remember what the client holds, send nothing.
			st.lastSig, _ = st.sig(u)
			continue
		}
		if f, fs, ok := st.frame(u); ok {
			initial, sig = append(initial, f...), fs
		}
	}

	if d == nil {
		defer sub.Close()
		return s.streamInline(w, r, sub, wake, &st, initial, sig)
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// The connection is gone or already taken: there is nobody to answer.
		sub.Close()
		return nil
	}
	// The detached stream gives its place back when it closes.
	d.unhold, held = release, false
	// What net/http buffered of the connection is dropped with its reader: a stream's
	// client sends nothing after its request.
	s.streams.open.Inc()
	d.conn, d.sub, d.es = conn, sub, st
	_ = conn.SetReadDeadline(time.Time{})
	if err := d.write(append(responseHead(h), initial...)); err != nil {
		d.close()
		return nil
	}
	d.es.sent(sig)
	d.start()
	return nil
}

// canHijack reports whether w (or a writer it wraps) can hand over its connection.
func canHijack(w http.ResponseWriter) bool {
	for {
		if _, ok := w.(http.Hijacker); ok {
			return true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return false
		}
		w = u.Unwrap()
	}
}

// streamInline writes the stream's head, its first events and every later one from the
// handler's goroutine until the client leaves or the subscription ends.
func (s *server) streamInline(w http.ResponseWriter, r *http.Request, sub *fanout.Subscription, wake <-chan struct{}, st *eventStream, initial, sig []byte) error {
	w.WriteHeader(http.StatusOK)
	s.streams.open.Inc()
	defer s.streams.open.Dec()
	rc := http.NewResponseController(w)
	write := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write(initial) {
		return nil
	}
	st.sent(sig)
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	ctx := r.Context()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
			if sub.Ended() || !st.isAllowed() {
				return nil
			}
			for _, u := range sub.Next() {
				if f, fs, ok := st.frame(u); ok {
					if !write(f) {
						return nil
					}
					st.sent(fs)
				}
			}
		case <-keepAlive.C:
			if !st.isAllowed() || !write([]byte(keepAliveComment)) {
				return nil
			}
		}
	}
}

// eventStream turns one stream's updates into events.
type eventStream struct {
	spec     streamSpec
	allowed  func() bool // nil: ACLs off
	m        *streamMetrics
	sigKey   string // the memo keys of the stream's filter in an Update
	frameKey string
	lastSig  []byte
}

// isAllowed reports whether the stream may still write.
func (st *eventStream) isAllowed() bool { return st.allowed == nil || st.allowed() }

func newEventStream(spec streamSpec, m *streamMetrics) eventStream {
	return eventStream{spec: spec, m: m, sigKey: spec.key + "\x00sig", frameKey: spec.key + "\x00event"}
}

// sig is the update's look under the stream's filter, shared by equal filters.
func (st *eventStream) sig(u *fanout.Update) ([]byte, error) {
	if u.Err != nil {
		return []byte("\x00" + u.Err.Error()), nil
	}
	return u.Render(st.sigKey, func() ([]byte, error) {
		return json.Marshal(st.spec.body(u, false))
	})
}

// frame is u as one event, with its signature; ok is false when there is nothing to send:
// u looks like the last event sent (a resync is always sent) or its read failed (the next
// change reads again). The event is counted; sent records its signature once written.
func (st *eventStream) frame(u *fanout.Update) (frame, sig []byte, ok bool) {
	sig, err := st.sig(u)
	if err != nil {
		return nil, nil, false
	}
	if !u.Resync && st.lastSig != nil && bytes.Equal(sig, st.lastSig) {
		return nil, nil, false
	}
	if u.Err != nil && !errors.Is(u.Err, model.ErrNotFound) {
		return nil, nil, false
	}
	event := st.spec.event
	if u.Err != nil {
		event = api.EventNotFound
	}
	// The whole event is encoded once per update and filter, and shared by the streams
	// that send it.
	frame, err = u.Render(st.frameKey, func() ([]byte, error) {
		var data []byte
		var err error
		if u.Err != nil {
			_, code, _ := httpx.Classify(u.Err)
			data, err = json.Marshal(api.ErrorBody{Error: api.Error{Code: code, Message: u.Err.Error()}})
		} else {
			data, err = json.Marshal(st.spec.body(u, true))
		}
		if err != nil {
			return nil, err
		}
		b := make([]byte, 0, len(data)+len(event)+48)
		b = append(b, "id: "...)
		b = strconv.AppendUint(b, u.Index, 10)
		b = append(b, "\nevent: "...)
		b = append(b, event...)
		b = append(b, "\ndata: "...)
		b = append(b, data...) // json.Marshal output holds no newline
		return append(b, "\n\n"...), nil
	})
	if err != nil {
		return nil, nil, false
	}
	st.m.events.WithLabelValues(event).Inc()
	return frame, sig, true
}

// sent records the signature of the last event written.
func (st *eventStream) sent(sig []byte) {
	if sig != nil {
		st.lastSig = sig
	}
}

// instancesStream watches a service's instances under the list's filter.
func instancesStream(key model.ServiceKey, f instanceFilter) streamSpec {
	return streamSpec{
		ns:    key.Namespace,
		topic: fanout.ServiceTopic(key),
		event: api.EventInstances,
		key:   f.key(),
		body: func(u *fanout.Update, withIndexes bool) any {
			resp := instancesResponse(u.Index, u.Service, f)
			if !withIndexes {
				// The service's indexes move with every change to any of its instances.
				resp.Index, resp.Service.ModifyIndex = 0, 0
			}
			return resp
		},
	}
}

// servicesStream watches a page of a namespace's service list.
func servicesStream(ns string, f store.ServiceFilter, page, size int) streamSpec {
	return streamSpec{
		ns:    ns,
		topic: fanout.ServicesTopic(ns, f, page, size),
		event: api.EventServices,
		key:   "services",
		body: func(u *fanout.Update, withIndexes bool) any {
			resp := api.ServicesResponse{
				Index: u.Index, Namespace: ns, Page: page, Size: size, Total: u.Total,
				Services: wireList(u.Services, wireServiceSummary),
			}
			if !withIndexes {
				resp.Index = 0
			}
			return resp
		},
	}
}

// key is a canonical string of the filter.
func (f instanceFilter) key() string {
	var b strings.Builder
	b.WriteString("instances")
	if f.healthy != nil {
		b.WriteString(" healthy=" + strconv.FormatBool(*f.healthy))
	}
	if f.clusters != nil {
		names := make([]string, 0, len(f.clusters))
		for c := range f.clusters {
			names = append(names, c)
		}
		slices.Sort(names)
		b.WriteString(" clusters=" + strings.Join(names, ","))
	}
	return b.String()
}
