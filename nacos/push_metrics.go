package nacos

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/internal/prom"
)

// pushMetrics are the pusher's Prometheus collectors.
type pushMetrics struct {
	subscribers prometheus.Gauge
	refused     prometheus.Counter
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
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_nacos_push_subscribers_refused_total",
			Help: "Instance-list queries asking for pushes that were not recorded because the subscriber limit was reached.",
		}),
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
			Help: "Pushes given up, by reason (no_ack: retries exhausted; send_error; too_large: over what the client reads).",
		}, []string{"reason"}),
		ackSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "roster_nacos_push_ack_seconds",
			Help:    "From a push's first send to its acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
	}
	for _, r := range []string{"no_ack", "send_error", "too_large"} {
		m.failed.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.subscribers, err = prom.Register(reg, m.subscribers); err != nil {
		return nil, err
	}
	for _, c := range []*prometheus.Counter{&m.refused, &m.sent, &m.resent, &m.acked, &m.superseded, &m.ignored} {
		if *c, err = prom.Register(reg, *c); err != nil {
			return nil, err
		}
	}
	if m.failed, err = prom.Register(reg, m.failed); err != nil {
		return nil, err
	}
	if m.ackSeconds, err = prom.Register(reg, m.ackSeconds); err != nil {
		return nil, err
	}
	return m, nil
}
