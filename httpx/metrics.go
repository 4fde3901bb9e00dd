package httpx

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/internal/prom"
)

// Metrics are the HTTP layer's Prometheus collectors, shared by every API of a node.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// Forwarded counts requests forwarded to the leader by outcome.
	Forwarded *prometheus.CounterVec
	// LeaderMoved counts requests refused here as not-leader while being served and
	// sent on to the new leader.
	LeaderMoved prometheus.Counter
}

// NewMetrics registers the collectors in reg. Collectors already registered there
// (another handler sharing the registry) are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "roster", Subsystem: "http", Name: "requests_total",
			Help: "HTTP requests served, by method, route pattern and status code.",
		}, []string{"method", "route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "roster", Subsystem: "http", Name: "request_duration_seconds",
			Help:    "HTTP request latency, by method and route pattern.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"method", "route"}),
		Forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "roster", Subsystem: "http", Name: "forwarded_total",
			Help: "Requests forwarded to the leader, by outcome (ok, retry, error, no_leader, loop).",
		}, []string{"outcome"}),
		LeaderMoved: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "roster", Subsystem: "http", Name: "leader_moved_total",
			Help: "Requests refused here as not-leader while being served and sent on to the new leader.",
		}),
	}
	var err error
	if m.requests, err = prom.Register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.latency, err = prom.Register(reg, m.latency); err != nil {
		return nil, err
	}
	if m.Forwarded, err = prom.Register(reg, m.Forwarded); err != nil {
		return nil, err
	}
	if m.LeaderMoved, err = prom.Register(reg, m.LeaderMoved); err != nil {
		return nil, err
	}
	return m, nil
}

// Middleware counts every request by its route pattern and status and observes its latency.
func (m *Metrics) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		defer func() {
			route := "unmatched"
			if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
				route = rc.RoutePattern()
			}
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			method := methodLabel(r.Method)
			m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
			// A watch stream lasts as long as its client stays: its duration is not a latency.
			if ww.Header().Get("Content-Type") != api.MediaEventStream {
				m.latency.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
			}
		}()
		next.ServeHTTP(ww, r)
	})
}

// Handler serves the registry in the Prometheus text format.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// methodLabel bounds the method label to the standard methods.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	default:
		return "other"
	}
}
