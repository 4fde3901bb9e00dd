// Package nacospb holds the wire types of the Nacos 2.x gRPC API: the Payload message
// (generated from roster_nacos_payload.proto) and the two gRPC services clients call,
// declared here by hand with the names Nacos gives them.
package nacospb

import (
	"context"

	"google.golang.org/grpc"
)

// Full method names, as Nacos clients call them.
const (
	RequestMethod  = "/Request/request"
	BiStreamMethod = "/BiRequestStream/requestBiStream"
)

// RequestServer answers the unary /Request/request.
type RequestServer interface {
	Request(ctx context.Context, in *Payload) (*Payload, error)
}

// BiStream is the server's side of one /BiRequestStream/requestBiStream.
type BiStream interface {
	Send(*Payload) error
	Recv() (*Payload, error)
	grpc.ServerStream
}

// BiStreamServer serves /BiRequestStream/requestBiStream.
type BiStreamServer interface {
	RequestBiStream(BiStream) error
}

// RequestServiceDesc describes the Request service; register it with
// grpc.Server.RegisterService and a RequestServer.
var RequestServiceDesc = grpc.ServiceDesc{
	ServiceName: "Request",
	HandlerType: (*RequestServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "request",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(Payload)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return srv.(RequestServer).Request(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: RequestMethod}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return srv.(RequestServer).Request(ctx, req.(*Payload))
			})
		},
	}},
	Metadata: "nacos_grpc_service.proto",
}

// BiRequestStreamServiceDesc describes the BiRequestStream service; register it with a
// BiStreamServer.
var BiRequestStreamServiceDesc = grpc.ServiceDesc{
	ServiceName: "BiRequestStream",
	HandlerType: (*BiStreamServer)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "requestBiStream",
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			return srv.(BiStreamServer).RequestBiStream(&biStream{stream})
		},
	}},
	Metadata: "nacos_grpc_service.proto",
}

type biStream struct{ grpc.ServerStream }

func (s *biStream) Send(p *Payload) error { return s.SendMsg(p) }

func (s *biStream) Recv() (*Payload, error) {
	p := new(Payload)
	if err := s.RecvMsg(p); err != nil {
		return nil, err
	}
	return p, nil
}

// Call sends one request over /Request/request (the client side, for tools and tests).
func Call(ctx context.Context, cc grpc.ClientConnInterface, in *Payload, opts ...grpc.CallOption) (*Payload, error) {
	out := new(Payload)
	if err := cc.Invoke(ctx, RequestMethod, in, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}

// ClientBiStream is the client's side of /BiRequestStream/requestBiStream.
type ClientBiStream struct{ grpc.ClientStream }

// Send sends a payload on the stream.
func (s *ClientBiStream) Send(p *Payload) error { return s.SendMsg(p) }

// Recv receives the next payload.
func (s *ClientBiStream) Recv() (*Payload, error) {
	p := new(Payload)
	if err := s.RecvMsg(p); err != nil {
		return nil, err
	}
	return p, nil
}

// OpenBiStream opens /BiRequestStream/requestBiStream (the client side).
func OpenBiStream(ctx context.Context, cc grpc.ClientConnInterface, opts ...grpc.CallOption) (*ClientBiStream, error) {
	st, err := cc.NewStream(ctx, &BiRequestStreamServiceDesc.Streams[0], BiStreamMethod, opts...)
	if err != nil {
		return nil, err
	}
	return &ClientBiStream{st}, nil
}
