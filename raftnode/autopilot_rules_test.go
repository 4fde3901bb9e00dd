package raftnode

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A follower is healthy when the leader heard from it within the threshold, its last
// entry is of the leader's term, and it trails by at most MaxTrailingLogs entries.
func TestJudge_ConsulHealthRule(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rules := healthRules{lastContact: 500 * time.Millisecond, maxTrailing: 250}
	leader := leaderView{term: 7, lastIndex: 1000}
	tracked := now.Add(-time.Minute)
	for _, tc := range []struct {
		name    string
		p       progress
		healthy bool
		reason  string
	}{
		{"caught up", progress{contact: now.Add(-10 * time.Millisecond), match: 1000, matchTerm: 7}, true, ""},
		{"contact at the threshold", progress{contact: now.Add(-500 * time.Millisecond), match: 1000, matchTerm: 7}, true, ""},
		{"trailing exactly the limit", progress{contact: now, match: 750, matchTerm: 7}, true, ""},
		{"never heard from", progress{}, false, "no contact since this leader began tracking it 1m0s ago"},
		{"contact too old", progress{contact: now.Add(-501 * time.Millisecond), match: 1000, matchTerm: 7}, false, "no contact for 501ms (threshold 500ms)"},
		{"only heartbeats answered", progress{contact: now}, false, "has not accepted an entry from this leader yet"},
		{"older term", progress{contact: now, match: 1000, matchTerm: 6}, false, "its last entry is of term 6, the leader's term is 7"},
		{"trailing one too many", progress{contact: now, match: 749, matchTerm: 7}, false, "trails the leader by 251 entries (at most 250)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			healthy, reason := judge(now, tc.p, leader, rules, tracked)
			if healthy != tc.healthy || reason != tc.reason {
				t.Fatalf("judge = %v %q, want %v %q", healthy, reason, tc.healthy, tc.reason)
			}
		})
	}
}

// The failure tolerance is the healthy voters beyond a quorum, never negative.
func TestFailureTolerance(t *testing.T) {
	for _, tc := range []struct{ voters, healthy, want int }{
		{1, 1, 0}, {3, 3, 1}, {3, 2, 0}, {3, 1, 0}, {4, 4, 1}, {5, 5, 2}, {5, 4, 1}, {5, 3, 0}, {5, 2, 0},
	} {
		if got := failureTolerance(tc.voters, tc.healthy); got != tc.want {
			t.Errorf("failureTolerance(%d voters, %d healthy) = %d, want %d", tc.voters, tc.healthy, got, tc.want)
		}
	}
}

// decideCleanup removes at most one dead server per round, non-voters first, never the
// leader, never below the minimum quorum and never unless the healthy voters stay a
// quorum; every dead voter it keeps has a reason.
func TestDecideCleanup(t *testing.T) {
	const th = time.Minute
	ok := func(id string) cleanupServer { return cleanupServer{ID: id, Voter: true, Healthy: true} }
	lead := func(id string) cleanupServer { return cleanupServer{ID: id, Voter: true, Leader: true, Healthy: true} }
	dead := func(id string, out time.Duration) cleanupServer {
		return cleanupServer{ID: id, Voter: true, OutOfContact: out}
	}
	deadNV := func(id string, out time.Duration) cleanupServer { return cleanupServer{ID: id, OutOfContact: out} }
	for _, tc := range []struct {
		name      string
		servers   []cleanupServer
		minQuorum int
		remove    string
		kept      map[string]string // id → substring of the reason
	}{
		{"all healthy", []cleanupServer{lead("n1"), ok("n2"), ok("n3")}, 3, "", nil},
		{"unhealthy but not past the threshold", []cleanupServer{lead("n1"), ok("n2"), ok("n3"), ok("n4"), dead("n5", th)}, 3, "", nil},
		{"5 voters, one dead", []cleanupServer{lead("n1"), ok("n2"), ok("n3"), ok("n4"), dead("n5", th+1)}, 3, "n5", nil},
		{"4 voters, one dead", []cleanupServer{lead("n1"), ok("n2"), ok("n3"), dead("n4", 2*th)}, 3, "n4", nil},
		{"3 voters, minimum quorum 3", []cleanupServer{lead("n1"), ok("n2"), dead("n3", 2*th)}, 3,
			"", map[string]string{"n3": "would leave 2 voters, fewer than the minimum quorum of 3"}},
		{"3 voters, minimum quorum 2", []cleanupServer{lead("n1"), ok("n2"), dead("n3", 2*th)}, 2, "n3", nil},
		{"one per round, longest out of contact first", []cleanupServer{lead("n1"), ok("n2"), ok("n3"), ok("n4"), dead("n5", 2*th), dead("n6", 3*th), ok("n7")}, 3, "n6", nil},
		{"ties by id", []cleanupServer{lead("n1"), ok("n2"), ok("n3"), ok("n4"), dead("n6", 2*th), dead("n5", 2*th), ok("n7")}, 3, "n5", nil},
		{"non-voters first", []cleanupServer{lead("n1"), ok("n2"), ok("n3"), ok("n4"), dead("n5", 5*th), deadNV("r1", 2*th)}, 3, "r1", nil},
		{"a dead non-voter goes even at the minimum quorum", []cleanupServer{lead("n1"), ok("n2"), ok("n3"), deadNV("r1", 2*th)}, 3, "r1", nil},
		{"healthy voters no quorum", []cleanupServer{lead("n1"), ok("n2"), dead("n3", 2*th), dead("n4", 2*th), dead("n5", 2*th)}, 1,
			"", map[string]string{"n3": "only 2 of 5 voters are healthy, fewer than the 3", "n4": "only 2 of 5", "n5": "only 2 of 5"}},
		{"dead leader entry is never removed", []cleanupServer{{ID: "n1", Voter: true, Leader: true, OutOfContact: 9 * th}, ok("n2"), ok("n3"), ok("n4")}, 1, "", nil},
		{"the healthy are not dead however long", []cleanupServer{lead("n1"), {ID: "n2", Voter: true, Healthy: true, OutOfContact: 9 * th}, ok("n3"), ok("n4")}, 1, "", nil},
		{"7 voters, 3 dead: the healthy stay a quorum", []cleanupServer{lead("n1"), ok("n2"), ok("n3"), ok("n4"), dead("n5", 2*th), dead("n6", 3*th), dead("n7", 4*th)}, 3, "n7", nil},
		{"6 voters, 3 dead: no quorum of healthy voters", []cleanupServer{lead("n1"), ok("n2"), ok("n3"), dead("n5", 2*th), dead("n6", 3*th), dead("n7", 4*th)}, 3,
			"", map[string]string{"n5": "only 3 of 6", "n6": "only 3 of 6", "n7": "only 3 of 6"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideCleanup(tc.servers, cleanupRules{threshold: th, minQuorum: tc.minQuorum})
			if d.Remove != tc.remove {
				t.Fatalf("remove %q, want %q (kept %v)", d.Remove, tc.remove, d.Kept)
			}
			if len(d.Kept) != len(tc.kept) {
				t.Fatalf("kept %v, want %v", d.Kept, tc.kept)
			}
			for id, want := range tc.kept {
				if !strings.Contains(d.Kept[id], want) {
					t.Errorf("kept[%s] = %q, want it to say %q", id, d.Kept[id], want)
				}
			}
			for id := range d.Kept {
				if id == d.Remove {
					t.Errorf("%s is both kept and removed", id)
				}
			}
		})
	}
}

// Whatever the servers' state, a removal never leaves fewer voters than the minimum
// quorum, never removes the leader or a healthy server, and never leaves the healthy
// voters short of a quorum.
func TestDecideCleanup_NeverUnsafe(t *testing.T) {
	const th = time.Second
	for voters := 1; voters <= 7; voters++ {
		for deadMask := 0; deadMask < 1<<voters; deadMask++ {
			for minQuorum := 1; minQuorum <= 5; minQuorum++ {
				var servers []cleanupServer
				healthy := 0
				for i := range voters {
					s := cleanupServer{ID: string(rune('a' + i)), Voter: true, Leader: i == 0, Healthy: true}
					if deadMask&(1<<i) != 0 {
						s.Healthy, s.OutOfContact = false, 2*th
					} else {
						healthy++
					}
					servers = append(servers, s)
				}
				d := decideCleanup(servers, cleanupRules{threshold: th, minQuorum: minQuorum})
				if d.Remove == "" {
					continue
				}
				var removed cleanupServer
				for _, s := range servers {
					if s.ID == d.Remove {
						removed = s
					}
				}
				switch {
				case removed.Leader || removed.Healthy:
					t.Fatalf("voters %d dead %b minQuorum %d: removed %+v", voters, deadMask, minQuorum, removed)
				case voters-1 < minQuorum:
					t.Fatalf("voters %d dead %b: removal leaves %d voters, minimum %d", voters, deadMask, voters-1, minQuorum)
				case healthy < quorumOf(voters) || healthy < quorumOf(voters-1):
					t.Fatalf("voters %d dead %b: removal with %d healthy voters", voters, deadMask, healthy)
				}
			}
		}
	}
}

// The autopilot settings take their defaults from the heartbeat timeout and refuse a
// last-contact threshold shorter than the gap between heartbeats.
func TestAutopilotConfig_Defaults(t *testing.T) {
	var a AutopilotConfig
	if err := a.fill(500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	want := AutopilotConfig{LastContactThreshold: 500 * time.Millisecond, DeadServerThreshold: DefaultDeadServerThreshold, MinQuorum: DefaultMinQuorum}
	if a != want {
		t.Fatalf("defaults %+v, want %+v", a, want)
	}
	for _, tc := range []struct {
		name  string
		cfg   AutopilotConfig
		field string
	}{
		{"threshold below the heartbeat gap", AutopilotConfig{LastContactThreshold: 99 * time.Millisecond}, "Autopilot.LastContactThreshold"},
		{"negative threshold", AutopilotConfig{LastContactThreshold: -time.Second}, "Autopilot.LastContactThreshold"},
		{"dead before unhealthy", AutopilotConfig{LastContactThreshold: time.Second, DeadServerThreshold: 999 * time.Millisecond}, "Autopilot.DeadServerThreshold"},
		{"negative minimum quorum", AutopilotConfig{MinQuorum: -1}, "Autopilot.MinQuorum"},
	} {
		err := tc.cfg.fill(500 * time.Millisecond)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: %v, want a ConfigError for %s", tc.name, err, tc.field)
		}
	}
}
