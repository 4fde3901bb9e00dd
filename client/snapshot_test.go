package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
)

func TestClient_SaveSnapshotStreamsBodyAndReadsHeaders(t *testing.T) {
	f := newFakeAPI(t, 200, map[string]string{api.HeaderIndex: "42", api.HeaderServedBy: "n2"}, "archive-bytes")
	var buf bytes.Buffer
	info, err := f.client().SaveSnapshot(context.Background(), &buf, true)
	if err != nil {
		t.Fatal(err)
	}
	if buf.String() != "archive-bytes" || info != (SnapshotInfo{Index: 42, Bytes: 13, ServedBy: "n2"}) {
		t.Fatalf("wrote %q, info %+v", buf.String(), info)
	}
	got := f.requests()[0]
	if got.method != http.MethodGet || got.path != "/v1/snapshot" || got.query.Get("consistency") != api.ConsistencyStale {
		t.Fatalf("request %+v", got)
	}
	if _, err := f.client().SaveSnapshot(context.Background(), io.Discard, false); err != nil {
		t.Fatal(err)
	}
	if q := f.requests()[1].query; len(q) != 0 {
		t.Fatalf("default save sent query %v", q)
	}
}

func TestClient_RestoreSnapshotUploadsAndMapsErrors(t *testing.T) {
	f := newFakeAPI(t, 200, nil, `{"index":9}`)
	if err := f.client().RestoreSnapshot(context.Background(), strings.NewReader("the archive")); err != nil {
		t.Fatal(err)
	}
	got := f.requests()[0]
	if got.method != http.MethodPut || got.path != "/v1/snapshot" || got.body != "the archive" || got.contentType != "application/gzip" {
		t.Fatalf("request %+v", got)
	}

	bad := newFakeAPI(t, 400, nil, `{"error":{"code":"invalid_argument","message":"invalid snapshot archive: state.db: checksum mismatch","field":"state.db"}}`)
	err := bad.client().RestoreSnapshot(context.Background(), strings.NewReader("x"))
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Field != "state.db" || !strings.Contains(apiErr.Message, "checksum mismatch") {
		t.Fatalf("error %v", err)
	}
	busy := newFakeAPI(t, 409, nil, `{"error":{"code":"conflict","message":"another snapshot restore is in progress"}}`)
	if err := busy.client().RestoreSnapshot(context.Background(), strings.NewReader("x")); !IsConflict(err) {
		t.Fatalf("409: %v", err)
	}
}

// The client's request timeout does not cut a long download; ctx does.
func TestClient_SnapshotIgnoresRequestTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		for range 4 {
			_, _ = w.Write([]byte("chunk"))
			w.(http.Flusher).Flush()
			select {
			case <-time.After(60 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	c := New(srv.Listener.Addr().String(), WithTimeout(50*time.Millisecond))
	var buf bytes.Buffer
	if _, err := c.SaveSnapshot(context.Background(), &buf, false); err != nil || buf.String() != strings.Repeat("chunk", 4) {
		t.Fatalf("got %q, %v", buf.String(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Millisecond)
	defer cancel()
	if _, err := c.SaveSnapshot(ctx, io.Discard, false); err == nil {
		t.Fatal("ctx did not end the download")
	}
}
