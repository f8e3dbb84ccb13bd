package httpapi

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the HTTP side's Prometheus metrics, registered on a registry
// the caller owns. A nil *Metrics records nothing.
type Metrics struct {
	requests    *prometheus.CounterVec
	durations   *prometheus.HistogramVec
	slowReaders *prometheus.CounterVec
	refused     prometheus.Counter
}

// NewMetrics registers the HTTP metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bulkreg_producer_http_requests_total",
			Help: "HTTP requests by route and status code; route is the endpoint's name, unmatched (no such path: 404) or method_not_allowed (a known path asked with another method: 405)."}, []string{"route", "code"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bulkreg_producer_http_request_duration_seconds",
			Help:    "Time from a request's arrival until its answer was written, by route (as bulkreg_producer_http_requests_total) and code class (2xx, 3xx, 4xx, 5xx); the event stream (route events), which lasts as long as its upload, is not observed.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}}, []string{"route", "code_class"}),
		slowReaders: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bulkreg_producer_http_slow_readers_total",
			Help: "Clients cut off because they read an answer (a report, an upload's result) slower than --min-download-rate, by route."}, []string{"route"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkreg_producer_http_connections_refused_total",
			Help: "Connections closed at once because their client IP already held --max-conns-per-ip connections."}),
	}
	reg.MustRegister(m.requests, m.durations, m.slowReaders, m.refused)
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

// Route labels of requests no endpoint served: bounded, whatever the path.
const (
	routeUnmatched        = "unmatched"
	routeMethodNotAllowed = "method_not_allowed"
)

func (m *Metrics) request(route string, code int, took time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	if route != "events" {
		m.durations.WithLabelValues(route, codeClass(code)).Observe(took.Seconds())
	}
}

// codeClass is "2xx" for 200 to 299, and so on; "other" outside 100 to 599.
func codeClass(code int) string {
	if code < 100 || code > 599 {
		return "other"
	}
	return strconv.Itoa(code/100) + "xx"
}
