package httpapi

import (
	"net/http"
	"strconv"

	"github.com/rosterhq/roster/api"
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
