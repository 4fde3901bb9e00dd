package dnsapi

import (
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/internal/prom"
)

// metrics are the DNS interface's collectors.
type metrics struct {
	queries   *prometheus.CounterVec   // type, rcode
	latency   *prometheus.HistogramVec // proto
	truncated prometheus.Counter
	clients   prometheus.GaugeFunc
}

// typeLabels are the query types counted by name; every other type is "other", and a
// message without a question is "none".
var typeLabels = map[uint16]string{
	dns.TypeA: "A", dns.TypeAAAA: "AAAA", dns.TypeSRV: "SRV", dns.TypeCNAME: "CNAME",
	dns.TypeSOA: "SOA", dns.TypeNS: "NS", dns.TypeANY: "ANY", dns.TypeTXT: "TXT", dns.TypePTR: "PTR",
}

func typeLabel(m *dns.Msg) string {
	if m == nil || len(m.Question) == 0 {
		return "none"
	}
	if l, ok := typeLabels[m.Question[0].Qtype]; ok {
		return l
	}
	return "other"
}

func rcodeLabel(rcode int) string {
	if rcode == dns.RcodeBadVers {
		return "BADVERS" // the library names 16 BADSIG; Roster answers no TSIG
	}
	if s, ok := dns.RcodeToString[rcode]; ok {
		return s
	}
	return "other"
}

// newMetrics creates the collectors and registers them on reg (nil: not registered).
func newMetrics(reg prometheus.Registerer, clients func() float64) (*metrics, error) {
	m := &metrics{
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_dns_queries_total",
			Help: "DNS queries answered (or dropped as malformed), by query type and response code.",
		}, []string{"type", "rcode"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "roster_dns_query_duration_seconds",
			Help:    "Time from a DNS query's arrival at the handler to its answer being written, by transport.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 2, 16), // 10µs .. ~330ms
		}, []string{"proto"}),
		truncated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_dns_truncated_total",
			Help: "UDP answers sent with the TC bit because they did not fit the client's buffer.",
		}),
		clients: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "roster_dns_rate_limit_clients",
			Help: "Client addresses in the DNS rate limiter's table.",
		}, clients),
	}
	g := prom.On(reg)
	prom.Add(g, &m.queries)
	prom.Add(g, &m.latency)
	prom.Add(g, &m.truncated)
	prom.Add(g, &m.clients)
	if err := g.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) count(req *dns.Msg, rcode int) {
	m.queries.WithLabelValues(typeLabel(req), rcodeLabel(rcode)).Inc()
}
