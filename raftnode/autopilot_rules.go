package raftnode

import (
	"fmt"
	"sort"
	"time"
)

// The pure rules of autopilot (autopilot.go): whether one server is healthy, the
// cluster's failure tolerance, and which dead server, if any, the leader removes. They
// read no clock and no Raft state, so they are tested with tables.

// progress is what the leader knows of one server at one moment.
type progress struct {
	// contact is the time of the last successful exchange in this leadership (zero:
	// none yet).
	contact time.Time
	// match and matchTerm are the last entry the server holds (0: none accepted yet
	// from this leader).
	match, matchTerm uint64
}

// leaderView is the leader's own log position.
type leaderView struct {
	term      uint64 // the leader's term, the term of its last entry once it wrote its first
	lastIndex uint64 // the leader's last log index
}

// healthRules are the thresholds of a server's health.
type healthRules struct {
	lastContact time.Duration // the longest time without contact that is still healthy
	maxTrailing uint64        // the most entries a healthy server may lack
}

// judge applies Consul autopilot's health rule to a follower: it is healthy when the
// leader heard from it within the last-contact threshold, its last entry is of the
// leader's term, and it lacks at most maxTrailing of the leader's entries. tracked is
// when the leader began following it (for the reason of a server never heard from).
// The reason says why it is unhealthy ("" when healthy).
func judge(now time.Time, p progress, l leaderView, r healthRules, tracked time.Time) (bool, string) {
	switch {
	case p.contact.IsZero():
		return false, fmt.Sprintf("no contact since this leader began tracking it %s ago", roundDur(now.Sub(tracked)))
	case now.Sub(p.contact) > r.lastContact:
		return false, fmt.Sprintf("no contact for %s (threshold %s)", roundDur(now.Sub(p.contact)), r.lastContact)
	case p.match == 0:
		return false, "has not accepted an entry from this leader yet"
	case p.matchTerm != l.term:
		return false, fmt.Sprintf("its last entry is of term %d, the leader's term is %d", p.matchTerm, l.term)
	case p.match+r.maxTrailing < l.lastIndex:
		return false, fmt.Sprintf("trails the leader by %d entries (at most %d)", l.lastIndex-p.match, r.maxTrailing)
	}
	return true, ""
}

// quorumOf is how many votes a configuration of voters needs.
func quorumOf(voters int) int { return voters/2 + 1 }

// failureTolerance is how many more healthy voters may fail before the voters left
// are no quorum: the healthy voters beyond a quorum (0 when there are none beyond).
func failureTolerance(voters, healthyVoters int) int {
	return max(healthyVoters-quorumOf(voters), 0)
}

// cleanupServer is one server as the dead-server rule sees it.
type cleanupServer struct {
	ID      string
	Voter   bool
	Leader  bool
	Healthy bool
	// OutOfContact is how long the leader has not heard from it (0: in contact).
	OutOfContact time.Duration
}

// cleanupRules are the dead-server rule's settings.
type cleanupRules struct {
	threshold time.Duration // out of contact longer than this: dead
	minQuorum int           // a removal never leaves fewer voters
}

// cleanupDecision is the outcome of one dead-server round.
type cleanupDecision struct {
	// Remove is the server to remove this round ("" for none).
	Remove string
	// Dead are the dead servers (out of contact past the threshold) by id, and Kept
	// those of them that stay, with the reason.
	Dead map[string]time.Duration
	Kept map[string]string
}

// decideCleanup picks at most one dead server to remove. A server is dead when it is
// not the leader, not healthy, and out of contact for longer than the threshold.
// Non-voters go first (their removal does not change the quorum), then the server out
// of contact longest, then by id. A dead voter is removed only when
//
//   - the voters left are at least minQuorum (Consul's MinQuorum), and
//   - the healthy voters are a quorum of the current voters, so that the change can
//     commit; the removed voter being unhealthy, they are then also a quorum of the
//     voters left: the failure tolerance after the removal is at least 0 and never
//     lower than before.
//
// Every dead voter these rules keep is in Kept with the reason. The leader is never
// removed, and never more than one server per round.
func decideCleanup(servers []cleanupServer, r cleanupRules) cleanupDecision {
	d := cleanupDecision{Dead: map[string]time.Duration{}, Kept: map[string]string{}}
	voters, healthyVoters := 0, 0
	var dead []cleanupServer
	for _, s := range servers {
		if s.Voter {
			voters++
			if s.Healthy {
				healthyVoters++
			}
		}
		if !s.Leader && !s.Healthy && s.OutOfContact > r.threshold {
			dead = append(dead, s)
			d.Dead[s.ID] = s.OutOfContact
		}
	}
	sort.Slice(dead, func(i, j int) bool {
		a, b := dead[i], dead[j]
		if a.Voter != b.Voter {
			return !a.Voter
		}
		if a.OutOfContact != b.OutOfContact {
			return a.OutOfContact > b.OutOfContact
		}
		return a.ID < b.ID
	})
	for _, s := range dead {
		if s.Voter {
			if why := voterRemovalRefused(voters, healthyVoters, r.minQuorum); why != "" {
				d.Kept[s.ID] = why
				continue
			}
		}
		if d.Remove == "" {
			d.Remove = s.ID
		}
	}
	return d
}

// voterRemovalRefused says why removing one unhealthy voter of voters, healthy of
// them healthy, is refused ("" when it is allowed).
func voterRemovalRefused(voters, healthy, minQuorum int) string {
	switch {
	case voters-1 < minQuorum:
		return fmt.Sprintf("removing it would leave %d voters, fewer than the minimum quorum of %d", voters-1, minQuorum)
	case healthy < quorumOf(voters):
		return fmt.Sprintf("only %d of %d voters are healthy, fewer than the %d the removal needs to commit", healthy, voters, quorumOf(voters))
	}
	return ""
}

// roundDur rounds d for messages: to the millisecond below a second, else to 100 ms.
func roundDur(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
