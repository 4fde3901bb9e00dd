package httpapi

import (
	"testing"

	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/store"
)

// The production types satisfy the interfaces the API declares.
var (
	_ Consensus = (*raftnode.Node)(nil)
	_ Reader    = (*store.Store)(nil)
)

// TestDefaultConsensusErrors_AreRaftnodes checks a zero Config.Errors maps raftnode's
// sentinels.
func TestDefaultConsensusErrors_AreRaftnodes(t *testing.T) {
	s := &server{cfg: Config{}}
	node := newLeaderNode("n1")
	cfg, err := Config{Store: seededReader(), Node: node, Registry: testRegistry(node, &fakeReader{})}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	s.cfg = cfg
	for err, want := range map[error]int{
		raftnode.ErrNotLeader:      503,
		raftnode.ErrNoLeader:       503,
		raftnode.ErrLeadershipLost: 503,
		raftnode.ErrShutdown:       503,
		raftnode.ErrTimeout:        504,
	} {
		if status, _, _ := s.classify(err); status != want {
			t.Fatalf("%v: %d, want %d", err, status, want)
		}
	}
	if _, code, _ := s.classify(raftnode.ErrNoLeader); code != "no_leader" {
		t.Fatalf("no leader code %q", code)
	}
}
