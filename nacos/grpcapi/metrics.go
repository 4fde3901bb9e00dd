package grpcapi

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/internal/prom"
)

// rpcMetrics are the gRPC server's Prometheus collectors.
type rpcMetrics struct {
	connections   prometheus.Gauge
	subscriptions prometheus.Gauge
	refused       prometheus.Counter
	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	pushes        *prometheus.CounterVec
	pushLatency   prometheus.Histogram
	detections    *prometheus.CounterVec
	resets        prometheus.Counter

	transports        prometheus.Gauge
	transportsRefused *prometheus.CounterVec
	transportsClosed  *prometheus.CounterVec
}

func newRPCMetrics(reg prometheus.Registerer) (*rpcMetrics, error) {
	m := &rpcMetrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "roster_nacos_grpc_connections", Help: "Nacos 2.x gRPC connections registered on this node.",
		}),
		subscriptions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "roster_nacos_grpc_subscriptions", Help: "Service subscriptions of the gRPC connections on this node.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_nacos_grpc_connections_refused_total", Help: "Connection setups refused because the connection limit was reached.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_nacos_grpc_requests_total",
			Help: "gRPC requests answered, by request type (unknown types as \"other\") and result (success, failure, error: an ErrorResponse).",
		}, []string{"type", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "roster_nacos_grpc_request_seconds", Help: "Time to answer a gRPC request, by request type.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"type"}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_nacos_grpc_pushes_total",
			Help: "NotifySubscriberRequest pushes by outcome: sent, acked, failed (a failed ack or send), timeout (no ack in time).",
		}, []string{"result"}),
		pushLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "roster_nacos_grpc_push_seconds",
			Help:    "From a change reaching a connection's push goroutine to the client acknowledging the push that carried it.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		detections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_nacos_grpc_client_detections_total",
			Help: "ClientDetectionRequests sent to idle connections, by outcome (answered, closed).",
		}, []string{"outcome"}),
		resets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_nacos_grpc_connect_resets_total", Help: "ConnectResetRequests answered by clients while this node shut down.",
		}),
		transports: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "roster_nacos_grpc_transports", Help: "TCP connections open on the gRPC port, registered or not.",
		}),
		transportsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_nacos_grpc_transports_refused_total",
			Help: "TCP connections closed as soon as accepted, by the bound they were beyond: per_ip, total, untrusted (not yet authenticated, node-wide), " +
				"untrusted_per_ip (not yet authenticated, from the source), rate (the source's accept rate).",
		}, []string{"reason"}),
		transportsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_nacos_grpc_transports_closed_total",
			Help: "Connections closed before they were authenticated, by reason: setup_timeout (no ConnectionSetupRequest in time), " +
				"auth_timeout (no authenticated request in time, ACLs on), message_too_large (over the limits of unauthenticated connections), " +
				"evicted (the oldest unauthenticated connection of the source holding the most, for a source holding fewer).",
		}, []string{"reason"}),
	}
	for _, r := range []string{rpcRefusedPerIP, rpcRefusedTotal, rpcRefusedUntrusted, rpcRefusedUntrustedPerIP, rpcRefusedRate} {
		m.transportsRefused.WithLabelValues(r)
	}
	for _, r := range []string{rpcClosedSetupTimeout, rpcClosedAuthTimeout, rpcClosedTooLarge, rpcClosedEvicted} {
		m.transportsClosed.WithLabelValues(r)
	}
	for _, r := range []string{"sent", "acked", "failed", "timeout"} {
		m.pushes.WithLabelValues(r)
	}
	g := prom.On(reg)
	prom.Add(g, &m.connections, &m.subscriptions, &m.transports)
	prom.Add(g, &m.refused, &m.resets)
	prom.Add(g, &m.requests, &m.pushes, &m.detections, &m.transportsRefused, &m.transportsClosed)
	prom.Add(g, &m.latency)
	prom.Add(g, &m.pushLatency)
	if err := g.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// rpcKnownTypes bounds the type label to the request types Roster knows.
var rpcKnownTypes = map[string]bool{
	rpcServerCheckRequest: true, rpcHealthCheckRequest: true, rpcServerLoaderInfoRequest: true,
	rpcSubscribeServiceRequest: true, rpcServiceQueryRequest: true, rpcServiceListRequest: true,
	rpcInstanceRequest: true, rpcPersistentInstanceRequest: true, rpcBatchInstanceRequest: true,
}

// observeRequest counts one answered request.
func (m *rpcMetrics) observeRequest(typ, respType string, body any, d time.Duration) {
	if !rpcKnownTypes[typ] {
		typ = "other"
	}
	result := "success"
	switch {
	case respType == rpcErrorResponse:
		result = "error"
	case !rpcSucceeded(body):
		result = "failure"
	}
	m.requests.WithLabelValues(typ, result).Inc()
	m.latency.WithLabelValues(typ).Observe(d.Seconds())
}

// rpcSucceeded reports whether a response body says success.
func rpcSucceeded(body any) bool {
	switch b := body.(type) {
	case rpcResponse:
		return b.ResultCode == rpcResultSuccess
	case rpcServerCheckAnswer:
		return b.ResultCode == rpcResultSuccess
	case rpcServiceInfoAnswer:
		return b.ResultCode == rpcResultSuccess
	case rpcServiceListAnswer:
		return b.ResultCode == rpcResultSuccess
	case rpcServerLoaderInfoAnswer:
		return b.ResultCode == rpcResultSuccess
	}
	return true
}
