package bench

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sort"
	"testing"
	"time"
)

func TestPrefixEnd_IncrementsLastByte(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/registry/svc/", "/registry/svc0"},
		{"a", "b"},
		{"a\xff", "b"},
		{"\xff\xff", "\x00"},
	}
	for _, tc := range tests {
		if got := PrefixEnd(tc.in); got != tc.want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func decodeJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	return m
}

func unb64(t *testing.T, v any) string {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%v is not a string", v)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("bad base64 %q: %v", s, err)
	}
	return string(b)
}

func TestEtcdEncoding_RequestsAreBase64JSON(t *testing.T) {
	k := InstanceKey{Service: "orders", IP: "127.101.2.3", Port: 8080}
	if got := EtcdKey(k); got != "/registry/orders/127.101.2.3:8080" {
		t.Fatalf("key %q", got)
	}
	val := EtcdValue(k, 42)
	if len(val) < 150 || len(val) > 260 {
		t.Errorf("value is %d bytes, want about 200: %s", len(val), val)
	}
	var doc map[string]any
	if err := json.Unmarshal(val, &doc); err != nil {
		t.Fatalf("value is not JSON: %v", err)
	}
	if doc["ip"] != "127.101.2.3" || doc["port"] != float64(8080) || doc["metadata"].(map[string]any)["gen"] != "42" {
		t.Errorf("value %s", val)
	}

	put := decodeJSON(t, EncodePut(EtcdKey(k), val))
	if unb64(t, put["key"]) != "/registry/orders/127.101.2.3:8080" || unb64(t, put["value"]) != string(val) {
		t.Errorf("put %v", put)
	}

	lin := decodeJSON(t, EncodeRange("/registry/orders/", false, false))
	if unb64(t, lin["key"]) != "/registry/orders/" || unb64(t, lin["range_end"]) != "/registry/orders0" {
		t.Errorf("range %v", lin)
	}
	if _, ok := lin["serializable"]; ok {
		t.Errorf("linearizable range carries serializable: %v", lin)
	}
	ser := decodeJSON(t, EncodeRange("/registry/orders/", true, true))
	if ser["serializable"] != true || ser["keys_only"] != true {
		t.Errorf("serializable keys-only range %v", ser)
	}

	del := decodeJSON(t, EncodeDelete("/registry/orders/127.101.2.3:8080"))
	if unb64(t, del["key"]) != "/registry/orders/127.101.2.3:8080" || len(del) != 1 {
		t.Errorf("delete %v", del)
	}

	w := decodeJSON(t, EncodeWatch("/registry/orders/"))
	cr := w["create_request"].(map[string]any)
	if unb64(t, cr["key"]) != "/registry/orders/" || unb64(t, cr["range_end"]) != "/registry/orders0" {
		t.Errorf("watch %v", w)
	}
}

func TestDecodeRange_ParsesGatewayAnswer(t *testing.T) {
	body := `{"header":{"cluster_id":"1","member_id":"2","revision":"17","raft_term":"3"},` +
		`"kvs":[{"key":"` + b64("/registry/s/127.100.0.1:80") + `","create_revision":"5","mod_revision":"9","version":"2","value":"` + b64(`{"a":1}`) + `"}],"count":"1"}`
	rev, keys, vals, err := DecodeRange([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if rev != 17 || len(keys) != 1 || keys[0] != "/registry/s/127.100.0.1:80" || string(vals[0]) != `{"a":1}` {
		t.Fatalf("rev %d keys %v vals %q", rev, keys, vals)
	}
	// An empty range has neither kvs nor count.
	rev, keys, _, err = DecodeRange([]byte(`{"header":{"revision":"4"}}`))
	if err != nil || rev != 4 || len(keys) != 0 {
		t.Fatalf("empty range: rev %d keys %v err %v", rev, keys, err)
	}
	if _, _, _, err := DecodeRange([]byte(`{"header":{}}`)); err == nil {
		t.Fatal("missing revision accepted")
	}
}

func TestEtcdClient_RegisterReadDeregisterList(t *testing.T) {
	st := newFakeStore()
	leader := newFakeEtcd(t, st, "22", "22")
	follower := newFakeEtcd(t, st, "11", "22")
	c := mustNewClient(t, ClientConfig{System: SystemEtcd, Endpoints: []string{follower.URL, leader.URL}})
	ec := c.(*etcdClient)
	if len(ec.writeTo) != 1 || ec.writeTo[0] != leader.URL {
		t.Fatalf("writes go to %v, want the leader %s", ec.writeTo, leader.URL)
	}
	ctx := testCtx(t)
	var last uint64
	for i := 0; i < 10; i++ {
		rev, err := c.Register(ctx, i, fixedKey("orders", i), 1)
		if err != nil {
			t.Fatal(err)
		}
		if rev <= last {
			t.Fatalf("revision %d after %d", rev, last)
		}
		last = rev
	}
	for _, mode := range []string{Linearizable, Leader, Stale} {
		rev, n, err := c.Read(ctx, 0, "orders", mode)
		if err != nil || n != 10 || rev != last {
			t.Fatalf("%s read: rev %d n %d err %v", mode, rev, n, err)
		}
	}
	keys, err := c.List(ctx, "orders")
	if err != nil || len(keys) != 10 {
		t.Fatalf("list %v %v", keys, err)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].IP < keys[j].IP })
	if keys[0] != fixedKey("orders", 0) {
		t.Fatalf("list[0] %+v", keys[0])
	}
	if _, err := c.Deregister(ctx, 0, keys[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Deregister(ctx, 0, keys[0]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second deregister: %v, want ErrNotFound", err)
	}
	if st.count("orders") != 9 {
		t.Fatalf("store holds %d", st.count("orders"))
	}
}

func TestEtcdClient_WatchSeesWrites(t *testing.T) {
	st := newFakeStore()
	srv := newFakeEtcd(t, st, "1", "1")
	c := mustNewClient(t, ClientConfig{System: SystemEtcd, Endpoints: []string{srv.URL}})
	ctx := testCtx(t)
	seen := make(chan uint64, 16)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- c.Watch(wctx, 0, "w", Stale, func(idx uint64, _ time.Time) { seen <- idx })
	}()
	<-seen // established
	rev, err := c.Register(ctx, 0, fixedKey("w", 0), 1)
	if err != nil {
		t.Fatal(err)
	}
	for got := range seen {
		if got >= rev {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch returned %v after cancel", err)
	}
}
