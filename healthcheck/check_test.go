package healthcheck

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rosterhq/roster/internal/testnet"
	"github.com/rosterhq/roster/model"
)

func mustNewChecker(t *testing.T, cfg Config) *checker {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return newChecker(cfg)
}

func httpSpec(path string, expected []int, headers map[string]string, timeout time.Duration) *spec {
	return newSpec(model.HealthCheck{Type: model.CheckHTTP, Path: path, ExpectedStatus: expected,
		Headers: headers, Interval: model.Duration(10 * time.Second), Timeout: model.Duration(timeout), Rise: 1, Fall: 1})
}

// probeServer probes srv's URL + path.
func probeServer(t *testing.T, c *checker, srv *httptest.Server, sp *spec) outcome {
	t.Helper()
	addr := strings.TrimPrefix(srv.URL, "http://")
	return c.probe(context.Background(), sp, addr, probeURL(addr, sp))
}

func TestHTTPProbe_ExpectedStatus(t *testing.T) {
	var followed atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/target" {
			followed.Add(1)
			w.WriteHeader(http.StatusOK)
			return
		}
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		if code == http.StatusFound {
			http.Redirect(w, r, "/target", http.StatusFound)
			return
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	c := mustNewChecker(t, Config{})

	tests := []struct {
		name     string
		status   int
		expected []int
		ok       bool
	}{
		{"200 default set", 200, nil, true},
		{"302 not followed, in default set", 302, nil, true},
		{"399 default set", 399, nil, true},
		{"404 default set", 404, nil, false},
		{"503 default set", 503, nil, false},
		{"204 custom set", 204, []int{204}, true},
		{"200 not in custom set", 200, []int{204}, false},
		{"302 not in custom set", 302, []int{200}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := probeServer(t, c, srv, httpSpec("/"+strconv.Itoa(tc.status), tc.expected, nil, 2*time.Second))
			if o.ok != tc.ok {
				t.Fatalf("ok = %v, want %v (err %q)", o.ok, tc.ok, o.err)
			}
			if o.status != tc.status {
				t.Fatalf("status = %d, want %d", o.status, tc.status)
			}
			if !o.ok && !strings.Contains(o.err, strconv.Itoa(tc.status)) {
				t.Fatalf("error %q does not name the status", o.err)
			}
		})
	}
	if n := followed.Load(); n != 0 {
		t.Fatalf("redirect was followed %d times", n)
	}
}

func TestHTTPProbe_SendsConfiguredHeaders(t *testing.T) {
	type seen struct {
		host, token, ua, path, query string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Host, r.Header.Get("X-Probe-Token"), r.Header.Get("User-Agent"), r.URL.Path, r.URL.RawQuery}
	}))
	t.Cleanup(srv.Close)
	c := mustNewChecker(t, Config{})
	sp := httpSpec("/health/live?full=1", nil, map[string]string{"X-Probe-Token": "s3cret", "Host": "svc.example"}, 2*time.Second)
	if o := probeServer(t, c, srv, sp); !o.ok {
		t.Fatalf("probe failed: %s", o.err)
	}
	s := <-got
	want := seen{"svc.example", "s3cret", userAgent, "/health/live", "full=1"}
	if s != want {
		t.Fatalf("server saw %+v, want %+v", s, want)
	}
}

// silentListener accepts connections and never writes to them.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

func TestHTTPProbe_TimesOutOnSilentServer(t *testing.T) {
	addr := silentListener(t)
	c := mustNewChecker(t, Config{})
	sp := httpSpec("/", nil, nil, 200*time.Millisecond)
	o := c.probe(context.Background(), sp, addr, probeURL(addr, sp))
	if o.ok {
		t.Fatal("probe of a silent server succeeded")
	}
	if !strings.Contains(o.err, "timeout") {
		t.Fatalf("error %q does not say timeout", o.err)
	}
	if o.latency < 200*time.Millisecond || o.latency > 2*time.Second {
		t.Fatalf("latency %s, want about the 200ms timeout", o.latency)
	}
}

func TestHTTPProbe_CapsBodyRead(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		chunk := make([]byte, 32<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	c := mustNewChecker(t, Config{MaxBodyBytes: 64 << 10})
	sp := httpSpec("/", nil, nil, 5*time.Second)
	o := probeServer(t, c, srv, sp)
	if !o.ok {
		t.Fatalf("probe failed: %s", o.err)
	}
	// An endless body read to the end would hold the probe until its 5s timeout.
	if o.latency > 2*time.Second {
		t.Fatalf("probe took %s: the body was not capped", o.latency)
	}
}

func TestTCPProbe_SucceedsOnListener(t *testing.T) {
	addr := silentListener(t)
	c := mustNewChecker(t, Config{})
	sp := newSpec(tcpCheck(time.Second, 1, 1))
	if o := c.probe(context.Background(), sp, addr, ""); !o.ok {
		t.Fatalf("probe failed: %s", o.err)
	}
}

func TestTCPProbe_FailsOnClosedPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c := mustNewChecker(t, Config{})
	o := c.probe(context.Background(), newSpec(tcpCheck(time.Second, 1, 1)), addr, "")
	if o.ok {
		t.Fatal("probe of a closed port succeeded")
	}
	if !strings.Contains(o.err, "refused") {
		t.Fatalf("error %q does not say refused", o.err)
	}
}

func TestTCPProbe_TimesOutOnSilentDial(t *testing.T) {
	hang := func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	c := mustNewChecker(t, Config{Dial: hang})
	sp := newSpec(model.HealthCheck{Type: model.CheckTCP, Interval: model.Duration(time.Second),
		Timeout: model.Duration(150 * time.Millisecond), Rise: 1, Fall: 1})
	o := c.probe(context.Background(), sp, "192.0.2.1:80", "")
	if o.ok {
		t.Fatal("probe succeeded")
	}
	if o.err != "timeout after 150ms" {
		t.Fatalf("error %q, want timeout after 150ms", o.err)
	}
	if o.latency < 150*time.Millisecond || o.latency > 2*time.Second {
		t.Fatalf("latency %s, want about 150ms", o.latency)
	}
}

func TestProbeAddr_PortAndAddressForms(t *testing.T) {
	ref := func(ip string, port int) model.InstanceRef {
		return model.InstanceRef{Namespace: "public", Group: "G", Service: "s", IP: ip, Port: port}
	}
	own := newSpec(model.HealthCheck{Type: model.CheckHTTP, Path: "/hz"})
	other := newSpec(model.HealthCheck{Type: model.CheckTCP, Port: 9090})
	tests := []struct {
		name string
		ref  model.InstanceRef
		sp   *spec
		want string
	}{
		{"instance port", ref("127.100.0.1", 8080), own, "127.100.0.1:8080"},
		{"check port overrides", ref("127.100.0.1", 8080), other, "127.100.0.1:9090"},
		{"ipv6 bracketed", ref("2001:db8::1", 8080), own, "[2001:db8::1]:8080"},
		{"dns name", ref("db-1.example.com", 5432), own, "db-1.example.com:5432"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := probeAddr(tc.ref, tc.sp); got != tc.want {
				t.Fatalf("probeAddr = %q, want %q", got, tc.want)
			}
		})
	}
	if got := probeURL(probeAddr(ref("2001:db8::1", 80), own), own); got != "http://[2001:db8::1]:80/hz" {
		t.Fatalf("probeURL = %q", got)
	}
}

func TestTCPProbe_ResolvesDNSNames(t *testing.T) {
	port := testnet.New(t, "127.0.0.1").Port()
	c := mustNewChecker(t, Config{})
	sp := newSpec(tcpCheck(4*time.Second, 1, 1))
	addr := probeAddr(model.InstanceRef{IP: "localhost", Port: port}, sp)
	if o := c.probe(context.Background(), sp, addr, ""); !o.ok {
		t.Fatalf("probe of %s failed: %s", addr, o.err)
	}
}

func TestHTTPProbe_ReachesIPv6Loopback(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		// No IPv6 loopback here: the bracketing is covered by TestProbeAddr_PortAndAddressForms.
		t.Logf("no IPv6 loopback: %v", err)
		return
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	c := mustNewChecker(t, Config{})
	sp := httpSpec("/", nil, nil, 2*time.Second)
	addr := probeAddr(model.InstanceRef{IP: "::1", Port: ln.Addr().(*net.TCPAddr).Port}, sp)
	if o := c.probe(context.Background(), sp, addr, probeURL(addr, sp)); !o.ok {
		t.Fatalf("probe of %s failed: %s", addr, o.err)
	}
}

// rawServer answers every connection with handle, then closes it.
func rawServer(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer func() { _ = c.Close() }()
				handle(c)
			})
		}
	})
	return ln.Addr().String()
}

func TestHTTPProbe_SkipsInterimResponses(t *testing.T) {
	addr := rawServer(t, func(c net.Conn) {
		_, _ = c.Read(make([]byte, 4096))
		_, _ = io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n")
	})
	c := mustNewChecker(t, Config{})
	sp := httpSpec("/", []int{204}, nil, 2*time.Second)
	o := c.probe(context.Background(), sp, addr, probeURL(addr, sp))
	if !o.ok || o.status != 204 {
		t.Fatalf("outcome %+v, want healthy with status 204", o)
	}
}

func TestHTTPProbe_BoundsHeaderBytes(t *testing.T) {
	addr := rawServer(t, func(c net.Conn) {
		_, _ = c.Read(make([]byte, 4096))
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Endless: ")
		chunk := []byte(strings.Repeat("a", 4096))
		for {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	c := mustNewChecker(t, Config{MaxBodyBytes: 1024})
	sp := httpSpec("/", nil, nil, 5*time.Second)
	o := c.probe(context.Background(), sp, addr, probeURL(addr, sp))
	if o.ok {
		t.Fatal("a response with endless headers was accepted")
	}
	if o.latency > 2*time.Second {
		t.Fatalf("probe took %s: the header read was not bounded", o.latency)
	}
}

func TestHTTPProbe_AbortsOnCancel(t *testing.T) {
	accepted := make(chan struct{}, 1)
	addr := rawServer(t, func(c net.Conn) {
		accepted <- struct{}{}
		_, _ = io.Copy(io.Discard, c) // never answers
	})
	c := mustNewChecker(t, Config{})
	sp := httpSpec("/", nil, nil, 30*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan outcome, 1)
	go func() { done <- c.probe(ctx, sp, addr, probeURL(addr, sp)) }()
	<-accepted
	cancel()
	select {
	case o := <-done:
		if o.ok {
			t.Fatal("cancelled probe succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("probe did not stop when its context was cancelled")
	}
}

func TestHTTPProbe_ErrorsNeverEchoTargetBytes(t *testing.T) {
	const secret = "AKIA-SECRET-CREDENTIAL"
	c := mustNewChecker(t, Config{})
	sp := httpSpec("/", nil, nil, 2*time.Second)
	tests := []struct {
		name, reply, class string
	}{
		{"not HTTP at all", secret + "\r\n\r\n", OutcomeMalformed},
		{"bad status code", "HTTP/1.1 " + secret + " OK\r\n\r\n", OutcomeMalformed},
		{"bad header", "HTTP/1.1 200 OK\r\n" + secret + "\r\n\r\n", OutcomeMalformed},
		{"bad version", secret + "/1.1 200 OK\r\n\r\n", OutcomeMalformed},
		{"closed mid-headers", "HTTP/1.1 200 OK\r\nX-Token: " + secret, OutcomeReset},
		{"closed before anything", "", OutcomeReset},
		{"unexpected status", "HTTP/1.1 503 " + secret + "\r\nContent-Length: 0\r\n\r\n", OutcomeStatus},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := rawServer(t, func(c net.Conn) {
				_, _ = c.Read(make([]byte, 4096))
				_, _ = io.WriteString(c, tt.reply)
			})
			o := c.probe(context.Background(), sp, addr, probeURL(addr, sp))
			if o.ok || o.class != tt.class {
				t.Fatalf("outcome %+v, want class %q", o, tt.class)
			}
			if strings.Contains(o.err, "SECRET") || strings.Contains(o.err, "AKIA") {
				t.Fatalf("error %q echoes bytes the target sent", o.err)
			}
		})
	}
}

func TestProbe_ClassifiesConnectFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	c := mustNewChecker(t, Config{})
	if o := c.probe(context.Background(), tcpSpec(), closed, ""); o.class != OutcomeRefused || o.err != "connection refused" {
		t.Fatalf("closed port: %+v, want refused", o)
	}
}
