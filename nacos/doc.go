// Package nacos is what Roster's Nacos surfaces share, in Nacos's shapes and result
// codes (docs/nacos-compatibility.md): the one reading of a service reference
// (ResolveServiceKey) and of a cluster list (CheckClusterList), the instance a
// registration describes (InstanceForm), the instance-list views and the selection
// under the protect threshold (Select, ServiceInfoFor, Host), the error vocabulary
// every surface answers in (Error, the Code constants, Classify), and the
// access-control refusals (AuthError). It speaks no protocol itself; its sub-packages
// do, each parsing its wire format into these and model types, calling the registry,
// which decides every write and read (and hands a follower's to the leader), and
// rendering the result:
//
//   - openapi: the Open API over HTTP (/nacos/v1/ns/..., /nacos/v2/ns/...), whose v1
//     instance-list route records Nacos 1.x clients for UDP pushes;
//   - udppush: the UDP pushes to those clients;
//   - grpcapi: the Nacos 2.x gRPC server and its pushes (wire types in nacospb).
//
// nacostest and nacosgrpctest test the surfaces with the real Nacos SDKs.
//
// The two push paths share what a client is shown (ServiceInfoFor, Select) and the
// rule that an unacknowledged push is superseded by the newest state and the state a
// client already holds is never pushed again, but not a delivery loop: a UDP push is
// a datagram acknowledged by its lastRefTime from the client's source address,
// resent on a timer, bounded per client address and per change, and tracked by the
// index of the state the client was answered; a gRPC push is a request on the
// client's own stream, answered by its request id, with one push per subscription in
// flight and the list's content deciding what is news. One loop for both would carry
// each transport's failure handling into the other.
package nacos
