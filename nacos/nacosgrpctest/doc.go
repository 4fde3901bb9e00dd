// Package nacosgrpctest holds the tests that drive running Roster clusters with the real
// nacos-sdk-go v2 naming client, which writes persistent instances over HTTP and reads,
// subscribes and receives pushes over the Nacos gRPC API. It has no code of its own; it
// is a package apart from nacostest so that the v1 and v2 SDKs are not linked into one
// test binary.
package nacosgrpctest
