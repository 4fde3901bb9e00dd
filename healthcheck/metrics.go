package healthcheck

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rosterhq/roster/internal/prom"
	"github.com/rosterhq/roster/model"
)

// metricFailure is the outcome label of failed probes in roster_health_probes_total
// (Result.Outcome classifies them further; the metric keeps two values).
const metricFailure = "failure"

// metrics are created once per Manager (or Prober) and shared by its runs.
type metrics struct {
	probes       *prometheus.CounterVec   // type, outcome
	latency      *prometheus.HistogramVec // type
	transitions  *prometheus.CounterVec   // to
	submitErrors prometheus.Counter
	lag          prometheus.Histogram
	inFlight     prometheus.Gauge
	targets      prometheus.Gauge
	skipped      prometheus.Counter
	discarded    prometheus.Counter
	denied       prometheus.Counter
	// confirmations counts transitions put to the other voters; overruled those so many
	// voters contradicted that no majority could confirm them; inconclusive (by reason)
	// those too few voters answered.
	confirmations, overruled prometheus.Counter
	inconclusive             *prometheus.CounterVec // reason
	autoDeregs               prometheus.Counter

	// Resolved children for the hot path.
	tcpOK, tcpFail, httpOK, httpFail prometheus.Counter
	tcpLatency, httpLatency          prometheus.Observer
	toHealthy, toUnhealthy           prometheus.Counter
}

// newMetrics creates the collectors and registers them on reg (nil: not registered).
// A collector already registered on reg by an earlier Manager or Prober is reused.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	buckets := prometheus.ExponentialBuckets(0.0005, 2, 14)      // 0.5ms .. ~4s
	lagBuckets := prometheus.ExponentialBuckets(0.000025, 2, 18) // 25µs .. ~3.3s
	m := &metrics{
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_health_probes_total",
			Help: "Health probes completed, by check type and outcome.",
		}, []string{"type", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "roster_health_probe_duration_seconds",
			Help:    "Duration of health probes, by check type.",
			Buckets: buckets,
		}, []string{"type"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_health_transitions_committed_total",
			Help: "Health transitions committed through Raft, by new state.",
		}, []string{"to"}),
		submitErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_health_submit_errors_total",
			Help: "SetHealth commands that failed while this node was leader (retried).",
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "roster_health_schedule_lag_seconds",
			Help:    "How late probes start compared with their due time.",
			Buckets: lagBuckets,
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "roster_health_probes_in_flight",
			Help: "Health probes currently running.",
		}),
		targets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "roster_health_probe_targets",
			Help: "Instances scheduled for probing (0 when this node is not leader).",
		}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_health_probes_skipped_total",
			Help: "Probe rounds skipped because the previous probe of the instance was still running or the scheduler fell a whole interval behind.",
		}),
		discarded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_health_results_discarded_total",
			Help: "Probe results discarded because their instance was removed, re-registered or re-specified meanwhile.",
		}),
		denied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_health_probes_denied_total",
			Help: "Probes refused by the probe target policy before any packet was sent.",
		}),
		confirmations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_health_confirmations_total",
			Help: "Health transitions the leader asked the other voters to confirm with a probe of their own.",
		}),
		overruled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_health_transitions_overruled_total",
			Help: "Health transitions not committed because so many voters saw otherwise that no majority of the voters could confirm them.",
		}),
		inconclusive: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_health_confirm_inconclusive_total",
			Help: "Health transitions not committed because too few voters answered the confirmation for a majority either way (reason unanswered), or the voters could not be listed (reason configuration); the committed health stands and the next probes decide.",
		}, []string{"reason"}),
		autoDeregs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_health_auto_deregistrations_total",
			Help: "Instances this node deregistered as leader because they stayed unhealthy for their cluster's deregisterAfter.",
		}),
	}
	g := prom.On(reg)
	prom.Add(g, &m.probes, &m.transitions, &m.inconclusive)
	prom.Add(g, &m.latency)
	prom.Add(g, &m.lag)
	prom.Add(g, &m.inFlight, &m.targets)
	prom.Add(g, &m.submitErrors, &m.skipped, &m.discarded, &m.denied, &m.confirmations, &m.overruled, &m.autoDeregs)
	if err := g.Err(); err != nil {
		return nil, err
	}
	m.tcpOK = m.probes.WithLabelValues(string(model.CheckTCP), OutcomeSuccess)
	m.tcpFail = m.probes.WithLabelValues(string(model.CheckTCP), metricFailure)
	m.httpOK = m.probes.WithLabelValues(string(model.CheckHTTP), OutcomeSuccess)
	m.httpFail = m.probes.WithLabelValues(string(model.CheckHTTP), metricFailure)
	m.tcpLatency = m.latency.WithLabelValues(string(model.CheckTCP))
	m.httpLatency = m.latency.WithLabelValues(string(model.CheckHTTP))
	m.inconclusive.WithLabelValues(inconclusiveUnanswered)
	m.inconclusive.WithLabelValues(inconclusiveConfiguration)
	m.toHealthy = m.transitions.WithLabelValues("healthy")
	m.toUnhealthy = m.transitions.WithLabelValues("unhealthy")
	return m, nil
}

// observeProbe counts one finished probe.
func (m *metrics) observeProbe(t model.CheckType, ok bool, seconds float64) {
	switch t {
	case model.CheckTCP:
		m.tcpLatency.Observe(seconds)
		if ok {
			m.tcpOK.Inc()
		} else {
			m.tcpFail.Inc()
		}
	case model.CheckHTTP:
		m.httpLatency.Observe(seconds)
		if ok {
			m.httpOK.Inc()
		} else {
			m.httpFail.Inc()
		}
	default:
		m.latency.WithLabelValues(string(t)).Observe(seconds)
		outcome := metricFailure
		if ok {
			outcome = OutcomeSuccess
		}
		m.probes.WithLabelValues(string(t), outcome).Inc()
	}
}
