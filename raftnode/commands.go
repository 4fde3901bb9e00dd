package raftnode

import (
	"sync"
	"time"

	"github.com/rosterhq/roster/fsm"
)

// commandsCheckInterval is how long the answer of ServersApply is reused.
const commandsCheckInterval = time.Second

// commandGate remembers the newest command type every server of the configuration
// applies, as their member records announce it.
type commandGate struct {
	mu      sync.Mutex
	checked time.Time
	newest  uint8
}

// ServersApply reports whether every server of the latest configuration, voters and
// non-voters, announced that it applies command type t (model.Member.NewestCommand): a
// server that meets a type it does not know panics rather than diverge, so during a
// rolling upgrade the leader keeps to the types every server knows. A server without a
// member record, or with one written before servers announced their newest type, counts
// as knowing none of the newer types. The answer is recomputed at most once a second.
// A server that joins later must be at least as new as the log it replicates.
func (n *Node) ServersApply(t fsm.MessageType) bool {
	return n.newestCommandOfAll() >= uint8(t)
}

func (n *Node) newestCommandOfAll() uint8 {
	g := &n.commands
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.checked.IsZero() && time.Since(g.checked) < commandsCheckInterval {
		return g.newest
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	newest := uint8(fsm.NewestType)
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.cfg.NodeID {
			continue
		}
		rec, ok := n.member(string(s.ID))
		if !ok {
			newest = 0
			break
		}
		newest = min(newest, rec.NewestCommand)
	}
	g.newest, g.checked = newest, time.Now()
	return newest
}
