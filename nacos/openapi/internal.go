package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/rosterhq/roster/nacos"
)

// ServeInternal runs one of the Nacos API's write routes for a request that did not
// arrive over HTTP (a gRPC write), with the query q, and returns the v2 envelope it
// answered. remote is the client's address, as the forwarder reports it to the leader.
func (s *API) ServeInternal(ctx context.Context, method, path string, q url.Values, remote string) (int, nacos.Result) {
	h := s.internal[method]
	if h == nil {
		return http.StatusMethodNotAllowed, nacos.Result{Code: nacos.CodeParameterValidate, Data: "no internal route for " + method}
	}
	r, err := http.NewRequestWithContext(ctx, method, path+"?"+q.Encode(), nil)
	if err != nil {
		return http.StatusBadRequest, nacos.Result{Code: nacos.CodeParameterValidate, Data: err.Error()}
	}
	r.RemoteAddr = remote
	w := &internalResponse{header: http.Header{}, status: http.StatusOK}
	func() {
		defer func() {
			if v := recover(); v != nil {
				w.status = http.StatusBadGateway
				w.body.Reset()
				fmt.Fprintf(&w.body, `{"code":%d,"message":"server error","data":"the write was cut off: %v"}`, nacos.CodeServerError, v)
			}
		}()
		h.ServeHTTP(w, r)
	}()
	var res nacos.Result
	if err := json.Unmarshal(w.body.Bytes(), &res); err != nil {
		return http.StatusBadGateway, nacos.Result{Code: nacos.CodeServerError, Data: "unreadable answer: " + strings.TrimSpace(w.body.String())}
	}
	return w.status, res
}

// internalResponse collects an internal route's answer.
type internalResponse struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (w *internalResponse) Header() http.Header { return w.header }

func (w *internalResponse) WriteHeader(status int) {
	if !w.wrote {
		w.status, w.wrote = status, true
	}
}

func (w *internalResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}
