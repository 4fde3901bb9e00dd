// Package grpcapi is the Nacos 2.x gRPC server (docs/nacos-compatibility.md, "gRPC"):
// the connection lifecycle and its bounds before a client is trusted, the naming
// requests, and the pushes of subscribed services on each client's stream. Every
// request goes through the registry (Config.Registry), which authenticates its token
// and decides its write or read; the Open API (Config.API) serves a write only while
// the leader runs a release without the peer RPC.
package grpcapi
