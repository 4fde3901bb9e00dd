package httpx

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A client that sends its headers and then trickles (or withholds) its body is answered
// 408 once the body's time is up, and its connection is closed: it cannot hold a
// connection and a goroutine for as long as it likes.
func TestBufferBody_SlowBodyIs408(t *testing.T) {
	reached := make(chan struct{}, 1)
	h := BufferBodyWithin(1<<20, 200*time.Millisecond, JSONBodies, func(w http.ResponseWriter, r *http.Request, err error) {
		status, _, _ := Classify(err)
		http.Error(w, err.Error(), status)
	})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached <- struct{}{} }))
	srv := httptest.NewServer(h)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "PUT /x HTTP/1.1\r\nHost: roster\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\"")
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a withheld body: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Fatalf("withheld body: %d, close %v", resp.StatusCode, resp.Close)
	}
	t.Logf("answered after %s", time.Since(start).Round(time.Millisecond))
	select {
	case <-reached:
		t.Fatal("the handler ran with a partial body")
	default:
	}
	// A body that arrives in time is read as usual.
	resp2, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	<-reached
}
