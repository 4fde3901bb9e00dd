package httpapi

import (
	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/healthcheck"
	"github.com/rosterhq/roster/model"
)

// This file turns the lower layers' types into the native API's wire types (package
// api). The handlers build their responses only through these functions, so the JSON
// the API shows is decided here and nowhere else.

// wireProbeResults converts the prober's results, in order ([] when there are none).
func wireProbeResults(rs []healthcheck.Result) []api.ProbeResult {
	out := make([]api.ProbeResult, len(rs))
	for i, r := range rs {
		out[i] = wireProbeResult(r)
	}
	return out
}

func wireProbeResult(r healthcheck.Result) api.ProbeResult {
	return api.ProbeResult{
		IP:                   r.IP,
		Port:                 r.Port,
		Cluster:              r.Cluster,
		Epoch:                r.Epoch,
		CheckType:            r.CheckType,
		Target:               r.Target,
		Healthy:              r.Healthy,
		Pending:              r.Pending,
		LastCheck:            r.LastCheck,
		Latency:              model.Duration(r.Latency),
		Outcome:              r.Outcome,
		Status:               r.Status,
		Error:                r.Error,
		ConsecutiveSuccesses: r.ConsecutiveSuccesses,
		ConsecutiveFailures:  r.ConsecutiveFailures,
		Rise:                 r.Rise,
		Fall:                 r.Fall,
		Interval:             model.Duration(r.Interval),
		NextCheck:            r.NextCheck,
	}
}
