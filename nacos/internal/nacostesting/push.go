package nacostesting

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/nacos"
)

// GoAgent is the User-Agent of nacos-sdk-go v1, a client Nacos 1.x pushes to.
const GoAgent = "Nacos-Go-Client:v1.0.1"

// GuardConn is a push socket on 127.0.0.1 that records where every packet goes and
// refuses (failing the test) any destination off loopback.
type GuardConn struct {
	*net.UDPConn
	t     testing.TB
	mu    sync.Mutex
	dests []netip.AddrPort
	bytes int
}

// NewGuardConn is a GuardConn on a fresh 127.0.0.1 socket.
func NewGuardConn(t testing.TB) *GuardConn {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	return &GuardConn{UDPConn: c, t: t}
}

// WriteToUDPAddrPort sends b to addr if it is on loopback, and fails the test otherwise.
func (c *GuardConn) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	if !addr.Addr().IsLoopback() {
		c.t.Errorf("a push was addressed to %s, off loopback", addr)
		return 0, errors.New("GuardConn: refused")
	}
	c.mu.Lock()
	c.dests = append(c.dests, addr)
	c.bytes += len(b)
	c.mu.Unlock()
	return c.UDPConn.WriteToUDPAddrPort(b, addr)
}

// Destinations lists where packets were sent, in order.
func (c *GuardConn) Destinations() []netip.AddrPort {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]netip.AddrPort(nil), c.dests...)
}

// SentBytes is the number of bytes sent.
func (c *GuardConn) SentBytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// PushClient is a UDP socket standing in for a Nacos client's push receiver.
type PushClient struct {
	t    testing.TB
	Conn *net.UDPConn
}

// NewPushClient is a PushClient listening on ip (a loopback address), closed with the test.
func NewPushClient(t testing.TB, ip string) *PushClient {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &PushClient{t: t, Conn: c}
}

// Addr is the client's address: where its subscription asks for pushes.
func (c *PushClient) Addr() netip.AddrPort { return c.Conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// PushPacket is a push datagram as a Nacos 1.x client decodes it (PushReceiver in
// nacos-sdk-go v1, clients/naming_client/push_receiver.go).
type PushPacket struct {
	Type        string `json:"type"`
	LastRefTime int64  `json:"lastRefTime"`
	Data        string `json:"data"`
}

// Push is one push as the client read it.
type Push struct {
	Raw    []byte
	Gzip   bool
	Packet PushPacket
	Info   nacos.ServiceInfo
	From   netip.AddrPort
}

// Next reads the Next push (10 s at most) and decodes it as nacos-sdk-go v1 does.
func (c *PushClient) Next() Push {
	c.t.Helper()
	buf := make([]byte, 64<<10)
	if err := c.Conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		c.t.Fatal(err)
	}
	n, from, err := c.Conn.ReadFromUDPAddrPort(buf)
	if err != nil {
		c.t.Fatalf("no push: %v", err)
	}
	r := Push{Raw: append([]byte(nil), buf[:n]...), From: from}
	body := r.Raw
	if bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
		r.Gzip = true
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			c.t.Fatal(err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := json.Unmarshal(body, &r.Packet); err != nil {
		c.t.Fatalf("push %q: %v", body, err)
	}
	if err := json.Unmarshal([]byte(r.Packet.Data), &r.Info); err != nil {
		c.t.Fatalf("push data %q: %v", r.Packet.Data, err)
	}
	return r
}

// Ack answers a push as nacos-sdk-go v1 does (lastRefTime as a string), to its source.
func (c *PushClient) Ack(r Push) {
	c.t.Helper()
	b := fmt.Sprintf(`{"data":"","lastRefTime":"%d","type":"push-ack"}`, r.Packet.LastRefTime)
	if _, err := c.Conn.WriteToUDPAddrPort([]byte(b), r.From); err != nil {
		c.t.Fatal(err)
	}
}

// HostPorts lists the ports of a pushed list.
func HostPorts(info nacos.ServiceInfo) []int {
	var out []int
	for _, h := range info.Hosts {
		out = append(out, h.Port)
	}
	return out
}
