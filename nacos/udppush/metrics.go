package udppush

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/internal/prom"
)

// pushMetrics are the pusher's Prometheus collectors.
type pushMetrics struct {
	subscribers prometheus.Gauge
	refused     *prometheus.CounterVec
	sent        prometheus.Counter
	resent      prometheus.Counter
	acked       prometheus.Counter
	superseded  prometheus.Counter
	ignored     prometheus.Counter
	failed      *prometheus.CounterVec
	ackSeconds  prometheus.Histogram
}

func newPushMetrics(reg prometheus.Registerer) (*pushMetrics, error) {
	m := &pushMetrics{
		subscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "roster_nacos_push_subscribers", Help: "Nacos 1.x clients recorded on this node for UDP pushes.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_nacos_push_subscribers_refused_total",
			Help: "Instance-list queries asking for pushes that were not recorded, by reason (limit: the node's subscriber limit; " +
				"per_addr, per_port: the limit of the client address, or of the address and udpPort; low_port: udpPort below 1024).",
		}, []string{"reason"}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_nacos_push_sent_total", Help: "Pushes sent (one per changed view per subscriber; resends not counted).",
		}),
		resent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_nacos_push_resent_total", Help: "Copies of unacknowledged pushes sent again.",
		}),
		acked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_nacos_push_acked_total", Help: "Pushes the client acknowledged.",
		}),
		superseded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_nacos_push_superseded_total", Help: "Unacknowledged pushes replaced by a push of a newer state.",
		}),
		ignored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_nacos_push_acks_ignored_total",
			Help: "Datagrams received on the push socket that acknowledge no outstanding push (late, malformed or foreign).",
		}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_nacos_push_failed_total",
			Help: "Pushes given up, by reason (no_ack: retries exhausted; send_error; too_large: over what the client reads; " +
				"budget: the change's byte budget for the client address was spent, first send or resend).",
		}, []string{"reason"}),
		ackSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "roster_nacos_push_ack_seconds",
			Help:    "From a push's first send to its acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
	}
	for _, r := range []string{"no_ack", "send_error", "too_large", "budget"} {
		m.failed.WithLabelValues(r)
	}
	for _, r := range []string{refusedLimit, refusedPerAddr, refusedPerPort, refusedLowPort} {
		m.refused.WithLabelValues(r)
	}
	g := prom.On(reg)
	prom.Add(g, &m.subscribers)
	prom.Add(g, &m.refused, &m.failed)
	prom.Add(g, &m.sent, &m.resent, &m.acked, &m.superseded, &m.ignored)
	prom.Add(g, &m.ackSeconds)
	if err := g.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
