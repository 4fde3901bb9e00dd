package httpapi

import (
	"net/http"
	"strconv"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/registry"
)

// written answers a write the registry applied at idx with 200 api.WriteResult and
// X-Roster-Index, or returns its error: written(w)(s.reg.RegisterInstance(...)).
func written(w http.ResponseWriter) func(idx uint64, err error) error {
	return func(idx uint64, err error) error {
		if err != nil {
			return err
		}
		writeResult(w, idx)
		return nil
	}
}

// writeResult answers a successful write applied at idx.
func writeResult(w http.ResponseWriter, idx uint64) {
	setIndex(w, idx)
	writeJSON(w, http.StatusOK, api.WriteResult{Index: idx})
}

// casNeedsNewLeader refuses, on a follower, a conditional write (?cas=) while the
// leader runs a release without conditional writes: it would ignore the parameter and
// write unconditionally. The leader itself refuses it while any other server lacks them.
func (s *server) casNeedsNewLeader(next http.Handler) http.Handler {
	return s.leaderApplies(fsm.CASType, func(r *http.Request) bool { return r.URL.Query().Has("cas") })(next)
}

// leaderApplies refuses on a follower (503 upgrade_in_progress naming the leader) a
// write of command type t (when the request is one: applies nil means every request of
// the route) while the leader runs a release that lacks t: forwarded, the write would
// meet a route or a parameter the leader does not know. The leader itself refuses it
// while any server lacks t (raftnode.Prepare).
func (s *server) leaderApplies(t fsm.MessageType, applies func(*http.Request) bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// A follower that does not know its leader yet (just restarted) waits for
			// it, as forwarding would, before it decides.
			if (applies == nil || applies(r)) && !s.node.IsLeader() && s.fwd.AwaitLeader(r.Context()) {
				if err := s.node.LeaderLacks(t); err != nil {
					s.writeError(w, r, err)
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// casParam parses ?cas=N: absent, an unconditional write; 0, only if the object does
// not exist; N, only if its modify index is N.
func casParam(r *http.Request) (registry.Condition, error) {
	q := r.URL.Query()
	if !q.Has("cas") {
		return registry.Condition{}, nil
	}
	v := q.Get("cas")
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return registry.Condition{}, invalid("cas", "must be a non-negative integer (a modify index, or 0 for only if absent), got %q", v)
	}
	return registry.IfIndex(n), nil
}
