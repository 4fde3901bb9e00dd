package httpx

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

type followerRaft struct{}

func (followerRaft) Apply(context.Context, fsm.Command) (uint64, error) {
	return 0, registry.ErrNotLeader
}
func (followerRaft) IsLeader() bool                                  { return false }
func (followerRaft) ConsistentRead(context.Context) error            { return registry.ErrNotLeader }
func (followerRaft) LeaderRead(context.Context) error                { return registry.ErrNotLeader }
func (followerRaft) ReadIndex(context.Context, bool) (uint64, error) { return 0, registry.ErrNotLeader }
func (followerRaft) CatchUp(context.Context, uint64) error           { return nil }
func (followerRaft) Settings(*store.WatchSet) (uint64, model.Settings, error) {
	return 1, model.Settings{}, nil
}

type noPeer struct{}

func (noPeer) Leader() (string, bool) { return "", false }
func (noPeer) Forward(context.Context, string, registry.Forwarded) (uint64, error) {
	return 0, registry.ErrNotSent
}
func (noPeer) ReadIndex(context.Context, string, registry.Consistency) (uint64, error) {
	return 0, registry.ErrNotSent
}

// HandOver sends a request on over HTTP when the leader cannot take it typed (an older
// release), when this node's registry does not reach the leader itself and it turned
// out not to lead, or when a route served only by the leader found this node no longer
// leads; never a request forwarded already, nor one the registry already tried to hand
// to the leader.
func TestHandOver(t *testing.T) {
	typed, err := registry.New(registry.Config{Settings: followerRaft{}, Raft: followerRaft{}, Peer: noPeer{}, NodeID: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := registry.New(registry.Config{Settings: followerRaft{}, Raft: followerRaft{}})
	if err != nil {
		t.Fatal(err)
	}
	notLeader := fmt.Errorf("%w: moved", registry.ErrNotLeader)
	legacy := fmt.Errorf("%w: v0.2.0", registry.ErrLegacyLeader)
	req := func(forwarded, leaderOnly bool) *http.Request {
		r := httptest.NewRequest(http.MethodPut, "/v1/x", nil)
		if forwarded {
			r.Header.Set(api.HeaderForwardedBy, "n1")
		}
		if leaderOnly {
			r = r.WithContext(context.WithValue(r.Context(), leaderOnlyKey{}, true))
		}
		return r
	}
	tests := []struct {
		name                  string
		reg                   *registry.Registry
		forwarded, leaderOnly bool
		err                   error
		want                  bool
	}{
		{"legacy leader", typed, false, false, legacy, true},
		{"legacy leader, forwarded already", typed, true, false, legacy, false},
		{"not leader, typed registry", typed, false, false, notLeader, false},
		{"not leader, typed registry, leader-only route", typed, false, true, notLeader, true},
		{"not leader, no peer", plain, false, false, notLeader, true},
		{"not leader, no peer, forwarded already", plain, true, false, notLeader, false},
		{"another error", plain, false, true, model.ErrInvalid, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := HandOver(tc.reg, req(tc.forwarded, tc.leaderOnly), tc.err); got != tc.want {
				t.Fatalf("HandOver = %v, want %v", got, tc.want)
			}
		})
	}
	if !ReadsHere(typed, ReadOptions{Mode: api.ConsistencyLinearizable}) || ReadsHere(plain, ReadOptions{Mode: api.ConsistencyLinearizable}) ||
		!ReadsHere(plain, ReadOptions{Mode: api.ConsistencyStale}) {
		t.Fatal("ReadsHere: a typed registry reads every mode here, one without a peer only stale reads (not leading)")
	}
}
