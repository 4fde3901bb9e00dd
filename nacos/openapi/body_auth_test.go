package openapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// countingBody is a request body that counts the bytes the server reads of it.
type countingBody struct {
	r    io.Reader
	read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error { return nil }

// TestNacosACL_TokenCheckedBeforeTheBody: with ACLs on, the token of a Nacos request is
// checked before its body is buffered. A bad token in the query string or a header is
// refused (403) without a byte of a 1 MiB body read; without a token outside the body
// (the SDKs put it in the form) at most 64 KiB are read, a larger body is 413 naming
// the limit. A valid token outside the body still sends a large body through, and a
// token in a small form still works.
func TestNacosACL_TokenCheckedBeforeTheBody(t *testing.T) {
	h, _, _, tok, _ := newACLAPI(t)
	form := "serviceName=orders&ip=127.100.0.1&port=8080&ephemeral=false&metadata=" + url.QueryEscape(`{"k":"`+strings.Repeat("x", 1<<20-200)+`"}`)
	send := func(target, header string, body string, chunked bool) (*httptest.ResponseRecorder, int64) {
		b := &countingBody{r: strings.NewReader(body)}
		req := httptest.NewRequest(http.MethodPost, target, nil)
		req.Body = b
		req.ContentLength = int64(len(body))
		if chunked {
			req.ContentLength = -1
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if header != "" {
			req.Header.Set("X-Roster-Token", header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec, b.read.Load()
	}
	const path = "/nacos/v1/ns/instance"
	for _, tc := range []struct {
		name         string
		target, hdr  string
		body         string
		chunked      bool
		code         int
		maxRead      int64
		bodyMentions string
	}{
		{"a bad token in the query", path + "?accessToken=not-a-token", "", form, false, http.StatusForbidden, 0, "token invalid!"},
		{"a bad token in a header", path, "not-a-token", form, false, http.StatusForbidden, 0, "token invalid!"},
		{"no token outside a large body", path, "", form, false, http.StatusRequestEntityTooLarge, 0, "65536"},
		{"no token outside a large body of unknown length", path, "", form, true, http.StatusRequestEntityTooLarge, 64<<10 + 1, "65536"},
	} {
		rec, read := send(tc.target, tc.hdr, tc.body, tc.chunked)
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.bodyMentions) {
			t.Errorf("%s: %d %s, want %d mentioning %q", tc.name, rec.Code, rec.Body, tc.code, tc.bodyMentions)
		}
		if read > tc.maxRead {
			t.Errorf("%s: %d bytes of the body read before the refusal, want at most %d", tc.name, read, tc.maxRead)
		}
	}
	// A valid token in the query: the large body is read and the request served
	// (refused by the metadata limit, which needs the body).
	rec, read := send(path+"?accessToken="+url.QueryEscape(tok.Mgmt.Secret), "", form, false)
	if rec.Code == http.StatusForbidden || rec.Code == http.StatusRequestEntityTooLarge || read < 1<<20-200 {
		t.Fatalf("a valid token in the query with a large body: %d %s (%d bytes read)", rec.Code, rec.Body, read)
	}
	// A token in a small form body still authenticates.
	small := "serviceName=orders&ip=127.100.0.1&port=8080&ephemeral=false&accessToken=" + url.QueryEscape(tok.Mgmt.Secret)
	if rec, _ := send(path, "", small, false); rec.Code != http.StatusOK {
		t.Fatalf("a token in a small form: %d %s", rec.Code, rec.Body)
	}
}
