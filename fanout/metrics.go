package fanout

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/internal/prom"
)

// metrics are a hub's Prometheus collectors.
type metrics struct {
	subscribers prometheus.Gauge
	topics      prometheus.Gauge
	updates     prometheus.Counter
	resyncs     *prometheus.CounterVec
	readErrors  prometheus.Counter
	publish     prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		subscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "roster_watch_subscribers", Help: "Open watch subscriptions on this node (streams, pushes).",
		}),
		topics: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "roster_watch_topics", Help: "Distinct views (services, service lists) watched on this node.",
		}),
		updates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_watch_updates_total", Help: "Updates offered to watch subscribers.",
		}),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_watch_resyncs_total", Help: "Full resends of watched views, by reason (reset, leadership, overflow).",
		}, []string{"reason"}),
		readErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_watch_read_errors_total", Help: "Failed reads of a watched view.",
		}),
		publish: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "roster_watch_publish_seconds",
			Help:    "From receiving applied changes to offering them to every subscriber.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16),
		}),
	}
	g := prom.On(reg)
	prom.Add(g, &m.subscribers, &m.topics)
	prom.Add(g, &m.updates, &m.readErrors)
	prom.Add(g, &m.resyncs)
	prom.Add(g, &m.publish)
	if err := g.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
