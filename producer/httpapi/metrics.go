package httpapi

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the HTTP side's Prometheus metrics, registered on a registry
// the caller owns. A nil *Metrics records nothing.
type Metrics struct {
	requests    *prometheus.CounterVec
	slowReaders *prometheus.CounterVec
	refused     prometheus.Counter
}

// NewMetrics registers the HTTP metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bulkreg_producer_http_requests_total",
			Help: "HTTP requests by route and status code."}, []string{"route", "code"}),
		slowReaders: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bulkreg_producer_http_slow_readers_total",
			Help: "Clients cut off because they read an answer (a report, an upload's result) slower than --min-download-rate, by route."}, []string{"route"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkreg_producer_http_connections_refused_total",
			Help: "Connections closed at once because their client IP already held --max-conns-per-ip connections."}),
	}
	reg.MustRegister(m.requests, m.slowReaders, m.refused)
	return m
}

func (m *Metrics) slowReader(route string) {
	if m != nil {
		m.slowReaders.WithLabelValues(routeOrNone(route)).Inc()
	}
}

func (m *Metrics) connRefused() {
	if m != nil {
		m.refused.Inc()
	}
}

func (m *Metrics) request(route string, code int) {
	if m != nil {
		m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	}
}
