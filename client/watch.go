package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client/sse"
)

// WatchOptions configure a watch stream.
type WatchOptions struct {
	// HealthyOnly and Clusters filter the instances (WatchInstances only), as
	// InstancesQuery does.
	HealthyOnly bool
	Clusters    []string
	// Group, Page and Size select the page of the list (WatchServices only).
	Group      string
	Page, Size int
	// LastIndex resumes after an event the caller already holds: the stream starts with
	// the next change (or at once when the view changed since).
	LastIndex uint64
	// Fallback lists other nodes' addresses to reconnect to when the stream's node fails
	// (tried in turn after this client's own address).
	Fallback []string
	// MinBackoff and MaxBackoff bound the wait between reconnections (defaults 100ms, 5s).
	MinBackoff, MaxBackoff time.Duration
	// OnError, when set, is told of every failed connection or dropped stream before
	// the watch reconnects.
	OnError func(error)
}

// InstancesEvent is one event of WatchInstances: the service's instances under the
// watch's filter, or NotFound while the service does not exist. The channel's last
// event has Err set when the watch stopped for a reason other than its context.
type InstancesEvent struct {
	Index     uint64
	NotFound  bool
	Instances api.InstancesResponse
	// Node is the address of the node that served the event.
	Node string
	Err  error
}

// ServicesEvent is one event of WatchServices, like InstancesEvent for a namespace's
// service list.
type ServicesEvent struct {
	Index    uint64
	NotFound bool
	Services api.ServicesResponse
	Node     string
	Err      error
}

// WatchInstances streams a service's instances (server-sent events of GET
// .../instances): the current state first, then every change. Events are served from
// the connected node's state (stale reads). A dropped stream is resumed — at the next
// address when the node is gone — from the last index received, so no change is missed
// (intermediate states may be: a watcher sees the latest). The channel closes when ctx
// ends. The first connection is made before WatchInstances returns; its failure is
// the error.
func (c *Client) WatchInstances(ctx context.Context, ns, group, service string, o WatchOptions) (<-chan InstancesEvent, error) {
	v := url.Values{}
	if o.HealthyOnly {
		v.Set("healthy", "true")
	}
	if len(o.Clusters) > 0 {
		v.Set("cluster", strings.Join(o.Clusters, ","))
	}
	return watchEvents(ctx, c, newPath("v1").service(ns, group, service).lit("instances"), v, o, api.EventInstances,
		func(ev sseEvent, node string) (InstancesEvent, error) {
			out := InstancesEvent{Node: node, Index: ev.id, NotFound: ev.event == api.EventNotFound}
			if !out.NotFound {
				if err := json.Unmarshal(ev.data, &out.Instances); err != nil {
					return out, fmt.Errorf("roster client: decode instances event: %w", err)
				}
				out.Index = out.Instances.Index
			}
			return out, nil
		},
		func(e InstancesEvent) uint64 { return e.Index },
		func(err error) InstancesEvent { return InstancesEvent{Err: err} })
}

// WatchServices streams a page of a namespace's service list, as WatchInstances does.
func (c *Client) WatchServices(ctx context.Context, ns string, o WatchOptions) (<-chan ServicesEvent, error) {
	v := url.Values{}
	if o.Group != "" {
		v.Set("group", o.Group)
	}
	if o.Page > 0 {
		v.Set("page", strconv.Itoa(o.Page))
	}
	if o.Size > 0 {
		v.Set("size", strconv.Itoa(o.Size))
	}
	return watchEvents(ctx, c, newPath("v1").ns(ns).lit("services"), v, o, api.EventServices,
		func(ev sseEvent, node string) (ServicesEvent, error) {
			out := ServicesEvent{Node: node, Index: ev.id, NotFound: ev.event == api.EventNotFound}
			if !out.NotFound {
				if err := json.Unmarshal(ev.data, &out.Services); err != nil {
					return out, fmt.Errorf("roster client: decode services event: %w", err)
				}
				out.Index = out.Services.Index
			}
			return out, nil
		},
		func(e ServicesEvent) uint64 { return e.Index },
		func(err error) ServicesEvent { return ServicesEvent{Err: err} })
}

// watchEvents runs a watch whose view events are named event (plus not_found), decoding
// each into a T for the channel. failed builds the last event of a watch the server
// refused.
func watchEvents[T any](ctx context.Context, c *Client, path *pathBuilder, query url.Values, o WatchOptions, event string,
	decode func(sseEvent, string) (T, error), index func(T) uint64, failed func(error) T) (<-chan T, error) {
	ch := make(chan T, 1)
	send := func(v T) {
		select {
		case ch <- v:
		case <-ctx.Done():
		}
	}
	handle := func(ev sseEvent, node string) (uint64, error) {
		if ev.event != event && ev.event != api.EventNotFound {
			return 0, nil // an event this client does not know
		}
		v, err := decode(ev, node)
		if err != nil {
			return 0, err
		}
		send(v)
		return index(v), nil
	}
	if err := c.watch(ctx, path, query, o, handle, func(err error) { send(failed(err)) }, func() { close(ch) }); err != nil {
		return nil, err
	}
	return ch, nil
}

// watch connects (synchronously the first time), then reads and reconnects in the
// background until ctx ends or the server refuses the request (fail gets that error).
func (c *Client) watch(ctx context.Context, path *pathBuilder, query url.Values, o WatchOptions,
	decode func(sseEvent, string) (uint64, error), fail func(error), done func()) error {
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(5*time.Second, o.MinBackoff)
	}
	nodes := []*Client{c}
	for _, a := range o.Fallback {
		nodes = append(nodes, New(a, WithHTTPClient(c.hc), WithTLSConfig(c.tls)))
	}
	last := o.LastIndex
	var (
		resp *http.Response
		at   int
		err  error
	)
	for at = range nodes {
		if resp, err = nodes[at].openStream(ctx, path, query, last); err == nil || permanent(err) {
			break
		}
	}
	if err != nil {
		return err
	}
	go func() {
		defer done()
		backoff := o.MinBackoff
		for {
			if resp != nil {
				var got bool
				last, got, err = readStream(resp.Body, last, func(ev sseEvent) (uint64, error) {
					return decode(ev, nodes[at].Addr())
				})
				_ = resp.Body.Close()
				resp = nil
				if got {
					backoff = o.MinBackoff
				}
				if ctx.Err() != nil {
					return
				}
				if err == nil {
					err = errors.New("roster client: watch stream ended")
				}
				if o.OnError != nil {
					o.OnError(err)
				}
				at = (at + 1) % len(nodes) // a node that dropped the stream may be going away
			}
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, o.MaxBackoff)
			for range nodes {
				resp, err = nodes[at].openStream(ctx, path, query, last)
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return
				}
				if permanent(err) {
					fail(err)
					return
				}
				if o.OnError != nil {
					o.OnError(err)
				}
				at = (at + 1) % len(nodes)
			}
		}
	}()
	return nil
}

// permanent reports whether a failed connection will fail again: the server refused
// the request itself.
func permanent(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status >= 400 && e.Status < 500
}

// openStream starts one stream; the response is 200 text/event-stream.
func (c *Client) openStream(ctx context.Context, path *pathBuilder, query url.Values, last uint64) (*http.Response, error) {
	if c.baseErr != nil {
		return nil, c.baseErr
	}
	p, err := path.build()
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(c.base.String() + p)
	if err != nil {
		return nil, fmt.Errorf("roster client: %w", err)
	}
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("roster client: %w", err)
	}
	req.Header.Set("Accept", api.MediaEventStream)
	c.authorize(req)
	req.Header.Set("User-Agent", "roster-client")
	if last > 0 {
		req.Header.Set(api.HeaderLastEventID, strconv.FormatUint(last, 10))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, api.MediaEventStream) {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("roster client: %s answered %q, not an event stream", c.Addr(), ct)
	}
	return resp, nil
}

// sseEvent is one server-sent event of a watch stream: its type, its data and the index
// its id field carries (the stream's last id: 0 when none was a number).
type sseEvent struct {
	id    uint64
	event string
	data  []byte
}

// readStream parses server-sent events (sse.Reader) from r and hands each to handle,
// which returns the event's index. It returns the last index seen, whether any event
// arrived, and why the stream ended.
func readStream(r io.Reader, last uint64, handle func(sseEvent) (uint64, error)) (uint64, bool, error) {
	p := sse.NewReader(r, 4<<10)
	got := false
	for {
		ev, err := p.Next()
		if err != nil {
			if errors.Is(err, sse.ErrTooLarge) {
				err = fmt.Errorf("roster client: %w", err)
			}
			return last, got, err
		}
		id, _ := strconv.ParseUint(ev.ID, 10, 64)
		idx, err := handle(sseEvent{id: id, event: ev.Type, data: ev.Data})
		if err != nil {
			return last, got, err
		}
		if idx > 0 {
			last, got = idx, true
		}
	}
}
