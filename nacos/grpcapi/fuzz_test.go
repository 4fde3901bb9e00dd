package grpcapi

import (
	"context"
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/rosterhq/roster/nacos/nacospb"
)

// FuzzGRPCRequest sends arbitrary request types and bodies through the gRPC server's
// dispatch on a registered connection. It must never panic, and every answer must be a
// payload of a response type Roster sends whose JSON carries resultCode (200 or 500),
// errorCode and success, with an ErrorResponse only ever a failure. An ephemeral
// registration must never be written.
func FuzzGRPCRequest(f *testing.F) {
	seeds := []struct{ typ, body string }{
		{rpcSubscribeServiceRequest, `{"namespace":"public","serviceName":"orders","groupName":"DEFAULT_GROUP","subscribe":true,"clusters":"c1,c2"}`},
		{rpcSubscribeServiceRequest, `{"serviceName":"orders","subscribe":false}`},
		{rpcServiceQueryRequest, `{"serviceName":"g@@orders","groupName":"g","cluster":"","healthyOnly":true,"udpPort":0}`},
		{rpcServiceListRequest, `{"namespace":"public","groupName":"DEFAULT_GROUP","pageNo":1,"pageSize":100,"selector":""}`},
		{rpcInstanceRequest, `{"serviceName":"orders","type":"registerInstance","instance":{"ip":"127.100.0.1","port":80,"ephemeral":true}}`},
		{rpcInstanceRequest, `{"serviceName":"orders","type":"deregisterInstance","instance":{"ip":"127.100.0.1","port":80}}`},
		{rpcPersistentInstanceRequest, `{"serviceName":"orders","type":"registerInstance","instance":{"ip":"127.100.0.1","port":80,"weight":2,"clusterName":"c1","metadata":{"a":"b"}}}`},
		{rpcPersistentInstanceRequest, `{"serviceName":"orders","type":"registerInstance","instance":{"ip":"::1","port":65536,"weight":-1}}`},
		{rpcBatchInstanceRequest, `{"serviceName":"orders","type":"batchRegisterInstance","instances":[{"ip":"127.100.0.1","port":80}]}`},
		{rpcHealthCheckRequest, `{}`},
		{rpcServerLoaderInfoRequest, `null`},
		{rpcServerCheckRequest, ``},
		{"NoSuchRequest", `{"a":1}`},
		{rpcSubscribeServiceRequest, `{"serviceName":`},
	}
	for _, s := range seeds {
		f.Add(s.typ, []byte(s.body))
	}
	e := newGRPCEnv(f, nil)
	e.connect(false)
	var conn *rpcConn
	e.g.mu.Lock()
	for _, c := range e.g.conns {
		if c.current() != nil {
			conn = c
		}
	}
	e.g.mu.Unlock()
	ctx := context.WithValue(context.Background(), rpcConnKey{}, conn)
	sent := map[string]bool{rpcErrorResponse: true, rpcServerCheckResponse: true, rpcHealthCheckResponse: true,
		rpcServerLoaderInfoResponse: true, rpcSubscribeServiceResponse: true, rpcQueryServiceResponse: true,
		rpcServiceListResponse: true, rpcInstanceResponse: true, rpcBatchInstanceResponse: true}
	f.Fuzz(func(t *testing.T, typ string, body []byte) {
		before := e.st.AppliedIndex()
		out, err := e.g.Request(ctx, &nacospb.Payload{Metadata: &nacospb.Metadata{Type: typ}, Body: &anypb.Any{Value: body}})
		if err != nil {
			t.Fatalf("%s %q: gRPC error %v", typ, body, err)
		}
		rt := out.GetMetadata().GetType()
		if !sent[rt] {
			t.Fatalf("%s %q: answered with type %q", typ, body, rt)
		}
		var r struct {
			ResultCode *int  `json:"resultCode"`
			ErrorCode  *int  `json:"errorCode"`
			Success    *bool `json:"success"`
		}
		if err := json.Unmarshal(out.GetBody().GetValue(), &r); err != nil || r.ResultCode == nil || r.ErrorCode == nil || r.Success == nil {
			t.Fatalf("%s %q: answer %s %q lacks the base fields (%v)", typ, body, rt, out.GetBody().GetValue(), err)
		}
		if (*r.ResultCode != 200 && *r.ResultCode != 500) || *r.Success != (*r.ResultCode == 200) || (rt == rpcErrorResponse && *r.ResultCode != 500) {
			t.Fatalf("%s %q: answer %s %q", typ, body, rt, out.GetBody().GetValue())
		}
		var op rpcInstanceOp
		_ = json.Unmarshal(body, &op)
		if typ == rpcBatchInstanceRequest || (typ == rpcInstanceRequest && op.Type != rpcInstanceTypeDeregister) {
			if after := e.st.AppliedIndex(); after != before {
				t.Fatalf("%s %q wrote (applied index %d -> %d)", typ, body, before, after)
			}
		}
	})
}
