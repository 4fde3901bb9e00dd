package healthcheck

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/rosterhq/roster/model"
)

// Result is the leader's view of one instance: its last probe and its state machine.
type Result struct {
	IP      string
	Port    int
	Cluster string
	// Epoch is the instance's registration epoch (CreateIndex).
	Epoch     uint64
	CheckType model.CheckType
	// Target is what is probed: the URL for HTTP and HTTPS, host:port for the other
	// types, empty for NONE.
	Target string
	// Healthy is the committed health as last known to the prober.
	Healthy bool
	// Pending is true when the prober has decided the opposite of Healthy and the
	// transition is not yet known to be committed.
	Pending bool
	// LastCheck is when the last probe started (zero: not probed yet in this term or
	// since the cluster's spec changed).
	LastCheck time.Time
	// Latency is how long the last probe took (zero before the first probe).
	Latency time.Duration
	// Outcome is "success" or the class of the failure: "denied" (outside the probe
	// policy; nothing was sent), "refused", "timeout", "reset", "unreachable", "dns",
	// "status" (an unexpected HTTP status), "tls" (the handshake failed),
	// "not serving" (a gRPC health status other than SERVING), "auth failed" (a
	// MYSQL check's login was refused), "query error", "malformed response" or
	// "error"; empty before the first probe.
	Outcome string
	// Status is the HTTP status of the last HTTP probe that got a response.
	Status int
	// Error describes a failure in Roster's words; it never contains bytes the target sent.
	Error string
	// CertificateExpiry is when the peer's leaf certificate expires, as the last probe
	// saw it in its TLS handshake (zero when it did no handshake or got no certificate).
	CertificateExpiry time.Time

	ConsecutiveSuccesses int
	ConsecutiveFailures  int
	Rise                 int
	Fall                 int
	Interval             time.Duration
	// NextCheck is when the next probe is due (zero for NONE clusters).
	NextCheck time.Time
	// Vantages are the views of the last majority confirmation of a transition of the
	// instance in this term, this node's first (nil when none was asked).
	Vantages []Vantage
	// DeregisterAt is when the instance is deregistered if it stays unhealthy: its
	// committed unhealthy time plus its cluster's DeregisterAfter (zero: not due, or
	// decided healthy).
	DeregisterAt time.Time
}

// result snapshots a target; the caller holds Prober.mu.
func (t *target) result() Result {
	hc := t.spec.hc
	r := Result{
		IP:                   t.ref.IP,
		Port:                 t.ref.Port,
		Cluster:              t.cluster,
		Epoch:                t.epoch,
		CheckType:            hc.Type,
		Healthy:              t.committed,
		Pending:              t.pending(),
		ConsecutiveSuccesses: int(t.st.succ),
		ConsecutiveFailures:  int(t.st.fail),
		Rise:                 hc.Rise,
		Fall:                 hc.Fall,
		Interval:             t.spec.interval,
	}
	if !t.st.healthy {
		r.DeregisterAt = t.deregDeadline()
	}
	if t.spec.probed() {
		addr, url := probeTarget(t.ref, t.spec)
		r.Target = addr
		if hc.Type.IsHTTP() {
			r.Target = url
		}
		r.NextCheck = t.next
	}
	if t.probed != nil && len(t.probed.vantages) > 0 {
		r.Vantages = append([]Vantage(nil), t.probed.vantages...)
	}
	if last := t.last(); last.done {
		o := last.outcome
		r.LastCheck = last.at
		r.Latency = o.latency
		r.Outcome = o.class
		r.Status = o.status
		r.Error = o.err
		r.CertificateExpiry = o.certExpiry
	}
	return r
}

func sortResults(rs []Result) {
	slices.SortFunc(rs, func(a, b Result) int {
		return cmp.Or(strings.Compare(a.IP, b.IP), cmp.Compare(a.Port, b.Port))
	})
}
