package bench

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// etcdRegistryPrefix is where instances live in etcd: /registry/<service>/<ip:port>.
const etcdRegistryPrefix = "/registry/"

// etcdClient drives etcd's v3 JSON gateway (/v3/kv/put, /v3/kv/range, /v3/kv/deleterange,
// /v3/watch), the closest plain-HTTP equivalent of Roster's API.
type etcdClient struct {
	h       *httpClients
	all     []string
	writeTo []string
	readTo  []string
	leader  string
}

func newEtcdClient(ctx context.Context, h *httpClients, eps []string, cfg ClientConfig) (*etcdClient, error) {
	c := &etcdClient{h: h, all: eps, writeTo: eps, readTo: eps, leader: eps[0]}
	if cfg.WriteTarget != TargetLeader && cfg.ReadTarget != TargetLeader {
		return c, nil
	}
	leader, err := EtcdLeader(ctx, h.req, eps)
	if err != nil {
		return nil, err
	}
	c.leader = leader
	if cfg.WriteTarget == TargetLeader {
		c.writeTo = []string{leader}
	}
	if cfg.ReadTarget == TargetLeader {
		c.readTo = []string{leader}
	}
	return c, nil
}

// etcdStatus is the part of /v3/maintenance/status the bench uses. The gateway encodes
// 64-bit integers as JSON strings.
type etcdStatus struct {
	Header struct {
		MemberID string `json:"member_id"`
	} `json:"header"`
	Leader  string `json:"leader"`
	Version string `json:"version"`
}

// EtcdLeader asks every endpoint for its status and returns the base URL of the one
// whose member ID is the leader's.
func EtcdLeader(ctx context.Context, hc *http.Client, eps []string) (string, error) {
	var lastErr error
	for _, ep := range eps {
		st, err := etcdStatusOf(ctx, hc, ep)
		if err != nil {
			lastErr = err
			continue
		}
		if st.Leader != "" && st.Header.MemberID == st.Leader {
			return baseURL(ep), nil
		}
	}
	if lastErr == nil {
		lastErr = errors.New("no endpoint reports itself as leader")
	}
	return "", fmt.Errorf("bench: no etcd leader found: %w", lastErr)
}

func etcdStatusOf(ctx context.Context, hc *http.Client, ep string) (*etcdStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL(ep)+"/v3/maintenance/status", strings.NewReader("{}"))
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status: http %d", ep, resp.StatusCode)
	}
	var st etcdStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("%s: status: %w", ep, err)
	}
	return &st, nil
}

func (c *etcdClient) System() string { return SystemEtcd }
func (c *etcdClient) Close()         { c.h.close() }

// EtcdKey is the key of an instance: /registry/<service>/<ip:port>.
func EtcdKey(k InstanceKey) string { return etcdRegistryPrefix + k.Service + "/" + k.Addr() }

// EtcdServicePrefix is the key prefix of a service's instances.
func EtcdServicePrefix(service string) string { return etcdRegistryPrefix + service + "/" }

// EtcdValue is the ~200-byte JSON document stored for an instance, shaped like a
// registry record (address, cluster, weight, flags, metadata carrying gen).
func EtcdValue(k InstanceKey, gen uint64) []byte {
	return []byte(`{"ip":"` + k.IP + `","port":` + strconv.Itoa(k.Port) +
		`,"cluster":"DEFAULT","weight":1,"enabled":true,"healthy":true,"metadata":{"k":"v","gen":"` +
		strconv.FormatUint(gen, 10) + `"},"instanceId":"` + k.IP + "#" + strconv.Itoa(k.Port) +
		`#DEFAULT#DEFAULT_GROUP@@` + k.Service + `"}`)
}

// PrefixEnd is the range_end that selects every key starting with prefix: the prefix
// with its last byte incremented (bytes 0xff are dropped first); "\x00" when the prefix
// is all 0xff bytes, meaning "to the end of the keyspace".
func PrefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "\x00"
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// EncodePut is the JSON body of /v3/kv/put.
func EncodePut(key string, value []byte) []byte {
	return []byte(`{"key":"` + b64(key) + `","value":"` + base64.StdEncoding.EncodeToString(value) + `"}`)
}

// EncodeDelete is the JSON body of /v3/kv/deleterange for one key.
func EncodeDelete(key string) []byte {
	return []byte(`{"key":"` + b64(key) + `"}`)
}

// EncodeRange is the JSON body of /v3/kv/range over every key with the prefix;
// serializable asks for a member-local read, keysOnly leaves values out.
func EncodeRange(prefix string, serializable, keysOnly bool) []byte {
	s := `{"key":"` + b64(prefix) + `","range_end":"` + b64(PrefixEnd(prefix)) + `"`
	if serializable {
		s += `,"serializable":true`
	}
	if keysOnly {
		s += `,"keys_only":true`
	}
	return []byte(s + `}`)
}

// EncodeWatch is the JSON body of /v3/watch over every key with the prefix.
func EncodeWatch(prefix string) []byte {
	return []byte(`{"create_request":{"key":"` + b64(prefix) + `","range_end":"` + b64(PrefixEnd(prefix)) + `"}}`)
}

// etcdHeader is the response header every gateway answer carries.
type etcdHeader struct {
	Revision string `json:"revision"`
}

func (h etcdHeader) rev() (uint64, error) {
	if h.Revision == "" {
		return 0, errors.New("etcd response without revision")
	}
	return strconv.ParseUint(h.Revision, 10, 64)
}

// etcdRangeResponse is the decoded answer of /v3/kv/range.
type etcdRangeResponse struct {
	Header etcdHeader `json:"header"`
	Kvs    []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"kvs"`
}

// DecodeRange parses a /v3/kv/range answer: the revision and the keys and values,
// base64-decoded.
func DecodeRange(b []byte) (rev uint64, keys []string, values [][]byte, err error) {
	var r etcdRangeResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, nil, nil, fmt.Errorf("decode range: %w", err)
	}
	if rev, err = r.Header.rev(); err != nil {
		return 0, nil, nil, err
	}
	for _, kv := range r.Kvs {
		k, err := base64.StdEncoding.DecodeString(kv.Key)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("decode key: %w", err)
		}
		v, err := base64.StdEncoding.DecodeString(kv.Value)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("decode value: %w", err)
		}
		keys = append(keys, string(k))
		values = append(values, v)
	}
	return rev, keys, values, nil
}

func (c *etcdClient) Register(ctx context.Context, w int, k InstanceKey, gen uint64) (uint64, error) {
	_, b, err := c.h.do(ctx, http.MethodPost, pick(c.writeTo, w)+"/v3/kv/put", EncodePut(EtcdKey(k), EtcdValue(k, gen)))
	if err != nil {
		return 0, err
	}
	var r struct {
		Header etcdHeader `json:"header"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("decode put: %w", err)
	}
	return r.Header.rev()
}

func (c *etcdClient) Deregister(ctx context.Context, w int, k InstanceKey) (uint64, error) {
	_, b, err := c.h.do(ctx, http.MethodPost, pick(c.writeTo, w)+"/v3/kv/deleterange", EncodeDelete(EtcdKey(k)))
	if err != nil {
		return 0, err
	}
	var r struct {
		Header  etcdHeader `json:"header"`
		Deleted string     `json:"deleted"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("decode deleterange: %w", err)
	}
	if r.Deleted == "" || r.Deleted == "0" {
		return 0, ErrNotFound
	}
	return r.Header.rev()
}

// Read maps linearizable to a default range and leader/stale to a serializable one;
// leader reads go to the leader found when the client was built (the first endpoint
// when no target needed the leader).
func (c *etcdClient) Read(ctx context.Context, w int, service, mode string) (uint64, int, error) {
	ep := pick(c.readTo, w)
	if mode == Leader {
		ep = c.leader
	}
	_, b, err := c.h.do(ctx, http.MethodPost, ep+"/v3/kv/range", EncodeRange(EtcdServicePrefix(service), mode != Linearizable, false))
	if err != nil {
		return 0, 0, err
	}
	rev, keys, _, err := DecodeRange(b)
	return rev, len(keys), err
}

// PrepareService does nothing: etcd has no per-service settings.
func (c *etcdClient) PrepareService(context.Context, string) error { return nil }

func (c *etcdClient) List(ctx context.Context, service string) ([]InstanceKey, error) {
	prefix := EtcdServicePrefix(service)
	_, b, err := c.h.do(ctx, http.MethodPost, c.writeTo[0]+"/v3/kv/range", EncodeRange(prefix, false, true))
	if err != nil {
		return nil, err
	}
	_, keys, _, err := DecodeRange(b)
	if err != nil {
		return nil, err
	}
	out := make([]InstanceKey, 0, len(keys))
	for _, k := range keys {
		addr := strings.TrimPrefix(k, prefix)
		i := strings.LastIndexByte(addr, ':')
		if i < 0 {
			continue
		}
		port, err := strconv.Atoi(addr[i+1:])
		if err != nil {
			continue
		}
		out = append(out, InstanceKey{Service: service, IP: strings.Trim(addr[:i], "[]"), Port: port})
	}
	return out, nil
}

// etcdWatchMessage is one message of the /v3/watch stream.
type etcdWatchMessage struct {
	Result *struct {
		Header  etcdHeader `json:"header"`
		Created bool       `json:"created"`
		Events  []struct {
			Kv struct {
				ModRevision string `json:"mod_revision"`
			} `json:"kv"`
		} `json:"events"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Watch opens one /v3/watch stream over the service's prefix; mode is ignored (etcd
// watches are served by the member the stream is on).
func (c *etcdClient) Watch(ctx context.Context, w int, service, _ string, seen func(uint64, time.Time)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pick(c.readTo, w)+"/v3/watch",
		strings.NewReader(string(EncodeWatch(EtcdServicePrefix(service)))))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.h.stream.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return shortenNetErr(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		_, b, _ := drain(resp)
		return &statusError{code: resp.StatusCode, body: b}
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var m etcdWatchMessage
		if err := dec.Decode(&m); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch stream: %w", err)
		}
		now := time.Now()
		if m.Error != nil {
			return fmt.Errorf("watch: %s", m.Error.Message)
		}
		if m.Result == nil {
			continue
		}
		if m.Result.Created {
			rev, err := m.Result.Header.rev()
			if err != nil {
				return fmt.Errorf("watch created: %w", err)
			}
			seen(rev, now)
		}
		var top uint64
		for _, ev := range m.Result.Events {
			if r, err := strconv.ParseUint(ev.Kv.ModRevision, 10, 64); err == nil && r > top {
				top = r
			}
		}
		if top > 0 {
			seen(top, now)
		}
	}
}
