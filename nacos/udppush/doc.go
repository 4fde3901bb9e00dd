// Package udppush sends Nacos 1.x clients UDP pushes of the services they list
// (docs/nacos-compatibility.md, "UDP push"): the Open API's v1 instance-list route
// records a subscriber (Pusher.Subscribe) for a query carrying udpPort, and every
// change of the service is pushed to the query's source address from the node's own
// state, acknowledged, resent and given up as Nacos 1.x's PushService does. It imports
// no HTTP or gRPC code.
package udppush
