package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/rosterhq/roster/client/sse"
)

// rosterHeaderIndex is the header carrying the index of the data read.
const rosterHeaderIndex = "X-Roster-Index"

// rosterPrefix is the path of the default namespace and group.
const rosterPrefix = "/v1/namespaces/public/groups/DEFAULT_GROUP/services/"

// rosterClient drives Roster's native REST API.
type rosterClient struct {
	h            *httpClients
	healthChecks bool
	transport    string // WatchSSE or WatchBlocking
	all          []string
	writeTo      []string
	readTo       []string
}

func newRosterClient(ctx context.Context, h *httpClients, eps []string, cfg ClientConfig) (*rosterClient, error) {
	h.tr.TLSClientConfig = cfg.TLS
	c := &rosterClient{h: h, all: eps, writeTo: eps, readTo: eps, healthChecks: cfg.HealthChecks,
		transport: cfg.WatchTransportOrDefault()}
	if cfg.WriteTarget == TargetLeader || cfg.ReadTarget == TargetLeader {
		leader, err := RosterLeader(ctx, h.req, eps)
		if err != nil {
			return nil, err
		}
		if cfg.WriteTarget == TargetLeader {
			c.writeTo = []string{leader}
		}
		if cfg.ReadTarget == TargetLeader {
			c.readTo = []string{leader}
		}
	}
	return c, nil
}

// RosterLeader asks the endpoints in turn for GET /v1/status/leader and returns the
// leader's HTTP base URL.
func RosterLeader(ctx context.Context, hc *http.Client, eps []string) (string, error) {
	var lastErr error
	for _, ep := range eps {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL(ep)+"/v1/status/leader", nil)
		if err != nil {
			return "", err
		}
		resp, err := hc.Do(req)
		if err != nil {
			lastErr = err
			continue
		}
		var l struct {
			ID       string `json:"id"`
			HTTPAddr string `json:"httpAddr"`
		}
		err = json.NewDecoder(resp.Body).Decode(&l)
		_ = resp.Body.Close()
		switch {
		case resp.StatusCode != http.StatusOK:
			lastErr = fmt.Errorf("%s: leader: http %d", ep, resp.StatusCode)
		case err != nil:
			lastErr = fmt.Errorf("%s: leader: %w", ep, err)
		case l.HTTPAddr == "":
			lastErr = fmt.Errorf("%s: leader %q has no HTTP address", ep, l.ID)
		default:
			return baseURL(l.HTTPAddr), nil
		}
	}
	return "", fmt.Errorf("bench: no roster leader found: %w", lastErr)
}

func (c *rosterClient) System() string { return SystemRoster }
func (c *rosterClient) Close()         { c.h.close() }

func rosterInstanceURL(base string, k InstanceKey) string {
	return base + rosterPrefix + k.Service + "/instances/" + k.Addr()
}

// rosterRegisterBody is the JSON body of a registration: small metadata carrying gen.
func rosterRegisterBody(gen uint64) []byte {
	return []byte(`{"metadata":{"k":"v","gen":"` + strconv.FormatUint(gen, 10) + `"}}`)
}

func parseWriteIndex(b []byte) (uint64, error) {
	var r struct {
		Index uint64 `json:"index"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("decode write result: %w", err)
	}
	return r.Index, nil
}

func (c *rosterClient) Register(ctx context.Context, w int, k InstanceKey, gen uint64) (uint64, error) {
	_, b, err := c.h.do(ctx, http.MethodPut, rosterInstanceURL(pick(c.writeTo, w), k), rosterRegisterBody(gen))
	if err != nil {
		return 0, err
	}
	return parseWriteIndex(b)
}

func (c *rosterClient) Deregister(ctx context.Context, w int, k InstanceKey) (uint64, error) {
	_, b, err := c.h.do(ctx, http.MethodDelete, rosterInstanceURL(pick(c.writeTo, w), k), nil)
	var se *statusError
	if errors.As(err, &se) && se.code == http.StatusNotFound {
		return 0, ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	return parseWriteIndex(b)
}

// PrepareService sets the DEFAULT cluster's health check to NONE (see Client).
func (c *rosterClient) PrepareService(ctx context.Context, service string) error {
	if c.healthChecks {
		return nil
	}
	_, _, err := c.h.do(ctx, http.MethodPut, c.writeTo[0]+rosterPrefix+service+"/clusters/DEFAULT",
		[]byte(`{"healthCheck":{"type":"NONE"}}`))
	if err != nil {
		return fmt.Errorf("prepare %s: %w", service, err)
	}
	return nil
}

// rosterInstances is the part of the instances list the bench decodes.
type rosterInstances struct {
	Index     uint64 `json:"index"`
	Instances []struct {
		IP   string `json:"ip"`
		Port int    `json:"port"`
	} `json:"instances"`
}

func (c *rosterClient) listURL(base, service, mode string) string {
	return base + rosterPrefix + service + "/instances?consistency=" + mode
}

func (c *rosterClient) readFrom(ctx context.Context, hc *http.Client, url string) (uint64, *rosterInstances, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	c.h.authorize(req)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, shortenNetErr(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		_, b, _ := drain(resp)
		return 0, nil, &statusError{code: resp.StatusCode, body: b}
	}
	var out rosterInstances
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, nil, fmt.Errorf("decode instances: %w", err)
	}
	_, _, _ = drain(resp)
	idx, err := strconv.ParseUint(resp.Header.Get(rosterHeaderIndex), 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("bad %s header %q", rosterHeaderIndex, resp.Header.Get(rosterHeaderIndex))
	}
	return idx, &out, nil
}

func (c *rosterClient) Read(ctx context.Context, w int, service, mode string) (uint64, int, error) {
	idx, out, err := c.readFrom(ctx, c.h.req, c.listURL(pick(c.readTo, w), service, mode))
	if err != nil {
		return 0, 0, err
	}
	return idx, len(out.Instances), nil
}

func (c *rosterClient) List(ctx context.Context, service string) ([]InstanceKey, error) {
	_, out, err := c.readFrom(ctx, c.h.req, c.listURL(c.writeTo[0], service, Leader))
	var se *statusError
	if errors.As(err, &se) && se.code == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	keys := make([]InstanceKey, 0, len(out.Instances))
	for _, in := range out.Instances {
		keys = append(keys, InstanceKey{Service: service, IP: in.IP, Port: in.Port})
	}
	return keys, nil
}

// Watch follows the service with the configured transport (see Client.Watch).
func (c *rosterClient) Watch(ctx context.Context, w int, service, mode string, seen func(uint64, time.Time)) error {
	if c.transport == WatchBlocking {
		return c.watchBlocking(ctx, w, service, mode, seen)
	}
	return c.watchSSE(ctx, w, service, mode, seen)
}

// watchBlocking runs blocking queries (?index=N&wait=30s) in a loop.
func (c *rosterClient) watchBlocking(ctx context.Context, w int, service, mode string, seen func(uint64, time.Time)) error {
	base := c.listURL(pick(c.readTo, w), service, mode)
	idx, _, err := c.readFrom(ctx, c.h.req, base)
	if err != nil {
		return err
	}
	seen(idx, time.Now())
	for ctx.Err() == nil {
		got, _, err := c.readFrom(ctx, c.h.stream, base+"&wait=30s&index="+strconv.FormatUint(idx, 10))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		now := time.Now()
		if got > idx {
			seen(got, now)
		}
		idx = got
	}
	return nil
}

// sseReadBuffer is the read buffer of one SSE watch (on top of the HTTP transport's own).
const sseReadBuffer = 1024

// errSSEStale rejects an SSE watch in a mode the stream cannot serve.
var errSSEStale = errors.New("the SSE watch is served from each node's local state: run the watch with --consistency stale, or use --watch-transport blocking")

// watchSSE opens one event stream on the service's instances and reports every event's
// index; the end of the stream is an error.
func (c *rosterClient) watchSSE(ctx context.Context, w int, service, mode string, seen func(uint64, time.Time)) error {
	if mode != Stale {
		return fmt.Errorf("watch %s in mode %s: %w", service, mode, errSSEStale)
	}
	url := pick(c.readTo, w) + rosterPrefix + service + "/instances"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", sseContentType)
	req.Header.Set("Cache-Control", "no-cache")
	c.h.authorize(req)
	resp, err := c.h.stream.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return shortenNetErr(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if err := checkSSEResponse(resp, "roster sse watch of "+service,
		"run against a server that has it, or use --watch-transport blocking"); err != nil {
		return err
	}
	p := sse.NewReader(resp.Body, sseReadBuffer)
	for n := 0; ; n++ {
		ev, err := p.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("sse stream ended by the server after %d events", n)
			}
			return fmt.Errorf("sse stream: %w", shortenNetErr(err))
		}
		idx, err := decodeRosterEvent(ev, "instances")
		if err != nil {
			return err
		}
		seen(idx, time.Now())
	}
}

// decodeRosterEvent checks one event of a Roster stream whose state events have type
// kind ("instances" or "services") and returns its index: the id field, which must agree
// with the JSON index of a state event. A not_found event carries an error object and its
// index in the id field.
func decodeRosterEvent(ev sse.Event, kind string) (uint64, error) {
	idx, err := parseSSEIndex(ev)
	if err != nil {
		return 0, err
	}
	switch ev.Type {
	case kind:
		var body struct {
			Index *uint64 `json:"index"`
		}
		if err := json.Unmarshal(ev.Data, &body); err != nil {
			return 0, fmt.Errorf("sse %s event %d: decode data: %w", ev.Type, idx, err)
		}
		if body.Index == nil {
			return 0, fmt.Errorf("sse %s event %d: data has no index", ev.Type, idx)
		}
		if *body.Index != idx {
			return 0, fmt.Errorf("sse %s event: id %d but data index %d", ev.Type, idx, *body.Index)
		}
	case "not_found":
		var body struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(ev.Data, &body); err != nil {
			return 0, fmt.Errorf("sse not_found event %d: decode data: %w", idx, err)
		}
		if body.Error.Code != "not_found" {
			return 0, fmt.Errorf("sse not_found event %d: error code %q", idx, body.Error.Code)
		}
	default:
		return 0, fmt.Errorf("sse: unexpected event type %q (id %s)", ev.Type, ev.ID)
	}
	return idx, nil
}
