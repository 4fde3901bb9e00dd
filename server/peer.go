package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

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

// stateCheckPeerWait bounds how long a node waits for a peer to have applied a state check.
const stateCheckPeerWait = 30 * time.Second

// peerStateCheck fetches a peer's hash at index, waiting while the peer has not applied
// it yet ("" when it never answers with one).
func (s *Server) peerStateCheck(ctx context.Context, httpAddr string, index uint64) (string, error) {
	if httpAddr == "" {
		return "", errors.New("no HTTP address recorded")
	}
	ctx, cancel := context.WithTimeout(ctx, stateCheckPeerWait)
	defer cancel()
	path := fmt.Sprintf("/v1/status/state-check?index=%d", index)
	for wait := 100 * time.Millisecond; ; wait = min(wait*2, 2*time.Second) {
		var sc api.StateCheck
		err := s.peerJSON(ctx, http.MethodGet, httpAddr, path, nil, &sc, http.StatusOK)
		switch {
		case err == nil && sc.Index == index:
			return sc.Hash, nil
		case err == nil:
			return "", fmt.Errorf("unreadable state check: index %d where %d was asked for", sc.Index, index)
		case errors.Is(err, errUnreadableAnswer):
			return "", err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(wait):
		}
	}
}

// peerReady asks a peer for its readiness (GET /v1/status/ready, which answers 503 with
// the same body when the peer is not ready).
func (s *Server) peerReady(ctx context.Context, httpAddr string) (api.Ready, error) {
	var rd api.Ready
	err := s.peerJSON(ctx, http.MethodGet, httpAddr, "/v1/status/ready", nil, &rd, http.StatusOK, http.StatusServiceUnavailable)
	return rd, err
}
