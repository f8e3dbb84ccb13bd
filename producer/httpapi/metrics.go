package httpapi

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the HTTP side's Prometheus metrics, registered on a registry
// the caller owns. A nil *Metrics records nothing.
type Metrics struct {
	requests *prometheus.CounterVec
}

// NewMetrics registers the HTTP metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bulkreg_producer_http_requests_total",
		Help: "HTTP requests by route and status code."}, []string{"route", "code"})}
	reg.MustRegister(m.requests)
	return m
}

func (m *Metrics) request(route string, code int) {
	if m != nil {
		m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	}
}
