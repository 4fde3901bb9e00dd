package raftnode

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/model"
)

// mapRaftErr turns Raft's errors into this package's sentinels, including the ones
// Raft only gives as text: a leadership transfer that timed out, and a leader's failed
// log write (flattened by raft.LogCache), recognised by the watch's own error.
func TestMapRaftErr(t *testing.T) {
	watch := &appendWatch{}
	full := watch.record(fmt.Errorf("write raft.db: %w", syscall.ENOSPC))
	n := &Node{append: watch}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"leadership lost", raft.ErrLeadershipLost, ErrLeadershipLost},
		{"leadership lost: the outcome is unknown", raft.ErrLeadershipLost, model.ErrUnavailable},
		{"enqueue timeout", raft.ErrEnqueueTimeout, ErrTimeout},
		{"shutdown", raft.ErrRaftShutdown, ErrShutdown},
		{"shutdown: unavailable", raft.ErrRaftShutdown, model.ErrUnavailable},
		{"deadline", context.DeadlineExceeded, ErrTimeout},
		{"transfer timeout", fmt.Errorf("leadership transfer timeout"), ErrTimeout},
		{"no transfer target", fmt.Errorf("cannot find peer"), model.ErrConflict},
		{"log write through the cache", fmt.Errorf("unable to store logs within log store, err: %q", full), ErrStorage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := n.mapRaftErr(tc.err); !errors.Is(got, tc.want) {
				t.Fatalf("mapRaftErr(%v) = %v, want it to match %v", tc.err, got, tc.want)
			}
		})
	}
	other := errors.New("some other failure")
	if got := n.mapRaftErr(other); errors.Is(got, ErrStorage) || errors.Is(got, ErrTimeout) {
		t.Fatalf("an unrelated error was mapped to %v", got)
	}
}
