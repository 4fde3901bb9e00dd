package raftnode

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Heartbeats reach the consumer channel (the main Raft loop), never a fast-path
// handler, and the wrapper keeps the transport's optional interfaces.
func TestNoHeartbeatFastPath_HeartbeatsGoThroughConsumer(t *testing.T) {
	recv, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	send, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		send.CloseStreams()
		_ = send.Close()
		recv.CloseStreams()
	}()

	var wrapped raft.Transport = noHeartbeatFastPath{recv}
	if _, ok := wrapped.(raft.WithPreVote); !ok {
		t.Fatal("wrapper lost pre-vote support")
	}
	if _, ok := wrapped.(raft.WithClose); !ok {
		t.Fatal("wrapper lost Close")
	}
	fast := make(chan struct{}, 1)
	wrapped.SetHeartbeatHandler(func(rpc raft.RPC) {
		fast <- struct{}{}
		rpc.Respond(&raft.AppendEntriesResponse{}, nil)
	})

	go func() {
		select {
		case rpc := <-recv.Consumer():
			rpc.Respond(&raft.AppendEntriesResponse{Term: 7}, nil)
		case <-time.After(5 * time.Second):
		}
	}()
	hb := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("n2"), Addr: []byte(send.LocalAddr())}, Term: 7}
	var resp raft.AppendEntriesResponse
	if err := send.AppendEntries("n1", recv.LocalAddr(), hb, &resp); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fast:
		t.Fatal("heartbeat took the fast path")
	default:
	}
	if resp.Term != 7 {
		t.Fatalf("heartbeat not answered by the consumer: %+v", resp)
	}
}

// The transport Raft gets, with the commit notifier, keeps the optional interfaces.
func TestNotifyingTransport_KeepsOptionalInterfaces(t *testing.T) {
	inner, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	base := noHeartbeatFastPath{inner}
	var wrapped raft.Transport = notifyingTransport{base, newCommitNotifier(base, time.Second, true), &leaderCommit{}}
	if _, ok := wrapped.(raft.WithPreVote); !ok {
		t.Fatal("wrapper lost pre-vote support")
	}
	closer, ok := wrapped.(raft.WithClose)
	if !ok {
		t.Fatal("wrapper lost Close")
	}
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
}
