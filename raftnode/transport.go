package raftnode

import "github.com/hashicorp/raft"

// noHeartbeatFastPath hands Raft the network transport without its heartbeat fast path:
// heartbeats then reach the main Raft loop like every other RPC.
//
// hashicorp/raft v1.7.3 processes heartbeats on the transport's goroutine, outside the
// main loop (hashicorp/raft#695). A leader that was paused can take the new term from a
// heartbeat while its loop still holds an uncommitted client entry, stamp that entry
// with the new term and later apply it as if the new leader had sent it: the fault
// suite caught a paused leader applying a write the cluster never committed. Without
// the fast path a term change is always handled by the loop that also steps the node
// down, at the cost of heartbeats waiting behind log appends.
type noHeartbeatFastPath struct {
	*raft.NetworkTransport
}

// SetHeartbeatHandler ignores the handler, so the transport delivers heartbeats on the
// consumer channel.
func (noHeartbeatFastPath) SetHeartbeatHandler(func(raft.RPC)) {}
