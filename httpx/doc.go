// Package httpx is the HTTP plumbing Roster's APIs share: forwarding a request to the
// Raft leader (one hop, one retry when leadership moved, streaming for snapshot
// archives), read options (?consistency=, ?index=, ?wait=) and the headers that report
// them, request-body buffering and strict JSON decoding, the one mapping from an error
// to an HTTP status, panic recovery, and the HTTP metrics.
//
// Each API (the native REST API in httpapi, the Nacos API in nacos) keeps its own routes
// and its own error shape: the helpers here take an ErrorWriter that answers in it.
package httpx

import "net/http"

// ErrorWriter answers err in the shape of the API that serves r.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, err error)
