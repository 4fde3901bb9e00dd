package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/httpx"
)

// maxPeerAnswer bounds the body read from another node's answer.
const maxPeerAnswer = 16 << 10

// errUnreadableAnswer is a peer's answer with an expected status and a body that is not
// the JSON expected.
var errUnreadableAnswer = errors.New("unreadable answer")

// peerJSON sends one request to another node's API (over HTTPS with this node's
// certificate in a TLS cluster, presenting --join-token when one is set) and decodes a
// JSON answer with one of the ok statuses into out. Any other answer is an error
// quoting the status and the start of the body.
func (s *Server) peerJSON(ctx context.Context, method, httpAddr, path string, body any, out any, ok ...int) error {
	if httpAddr == "" {
		return errors.New("no HTTP address recorded for this member")
	}
	base, err := api.BaseURL(s.peerURL(httpAddr))
	if err != nil {
		return err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base.String()+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.cfg.JoinToken != "" {
		req.Header.Set(api.HeaderToken, s.cfg.JoinToken)
	}
	if id := httpx.RequestIDOf(ctx); id != "" {
		req.Header.Set(httpx.HeaderRequestID, id) // asked while serving a request
	}
	resp, err := s.joinHTTP.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxPeerAnswer))
	for _, st := range ok {
		if resp.StatusCode == st {
			if err := json.Unmarshal(raw, out); err != nil {
				return fmt.Errorf("%s %s: %w: %.200s", method, path, errUnreadableAnswer, raw)
			}
			return nil
		}
	}
	return fmt.Errorf("%s %s: HTTP %d: %.200s", method, path, resp.StatusCode, raw)
}
