package circuit

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names; the package comment says what each means.
const (
	MetricState       = "bulkreg_circuit_state"
	MetricOpenSeconds = "bulkreg_circuit_open_seconds"
	MetricRefused     = "bulkreg_circuit_refused_total"
	MetricProbes      = "bulkreg_circuit_probes_total"
	MetricLocal       = "bulkreg_circuit_allowed_locally_total"
	MetricBatched     = "bulkreg_circuit_reports_batched_total"
	// MetricMisconfigured is 1 while the circuit is held open because the
	// API refused bulkreg itself (Reason Misconfigured). The alert
	// BulkregRegistryRefusesBulkreg (deploy/alerts.yml) watches it.
	MetricMisconfigured = "bulkreg_circuit_misconfigured"
)

var (
	descState = prometheus.NewDesc(MetricState,
		"State of the fleet's circuit breaker in front of the registration API: 0 closed, 1 open, 2 half-open (one probe call out).", nil, nil)
	descOpen = prometheus.NewDesc(MetricOpenSeconds,
		"How long the circuit breaker has been open (half-open included); 0 when closed. Rows wait in Kafka while it is open.", nil, nil)
	descRefused = prometheus.NewDesc(MetricRefused,
		"Registration calls this consumer did not make because the circuit breaker was open or a probe was out.", nil, nil)
	descProbes = prometheus.NewDesc(MetricProbes,
		"Probe calls this consumer made to test whether the registration API answers again.", nil, nil)
	descLocal = prometheus.NewDesc(MetricLocal,
		"Calls this consumer allowed without asking Redis, because it had learned within TrustClosed that the circuit is closed.", nil, nil)
	descMisconfigured = prometheus.NewDesc(MetricMisconfigured,
		"1 while the circuit breaker is held open because the registration API refused bulkreg itself (401, 403, a 404 off the route, 405, a redirect): fix the registry credentials or URL. Rows wait in Kafka, none fails.", nil, nil)
	descBatched = prometheus.NewDesc(MetricBatched,
		"Answered calls this consumer counted in a batch sent with its next report, instead of reporting each to Redis, while it knew the circuit closed.", nil, nil)
)

// collector exports a Breaker's state and counters.
type collector struct{ b *Breaker }

// Collector returns a prometheus.Collector of the breaker's metrics
// (bulkreg_circuit_*). At each scrape it reads the fleet's state from Redis
// (bounded by Settings.PeekTimeout); when Redis does not answer it exports
// what this process last learned, or closed when it never learned anything.
func (b *Breaker) Collector() prometheus.Collector { return collector{b} }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descState
	ch <- descOpen
	ch <- descRefused
	ch <- descProbes
	ch <- descLocal
	ch <- descBatched
	ch <- descMisconfigured
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	// A scrape has no context of its own; the timeout keeps a dead Redis
	// from holding /metrics.
	ctx, cancel := context.WithTimeout(context.Background(), c.b.s.PeekTimeout)
	defer cancel()
	state, openFor, misconfigured := Closed, 0.0, 0.0
	if st, err := c.b.Peek(ctx); err == nil {
		state, openFor = st.State, st.OpenFor.Seconds()
		if st.State != Closed && st.Reason == Misconfigured {
			misconfigured = 1
		}
	} else if s, d, known := c.b.Local(); known {
		state, openFor = s, d.Seconds()
	}
	ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, float64(state))
	ch <- prometheus.MustNewConstMetric(descOpen, prometheus.GaugeValue, openFor)
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(c.b.Refused()))
	ch <- prometheus.MustNewConstMetric(descProbes, prometheus.CounterValue, float64(c.b.Probes()))
	ch <- prometheus.MustNewConstMetric(descLocal, prometheus.CounterValue, float64(c.b.allowedLocally.Load()))
	ch <- prometheus.MustNewConstMetric(descBatched, prometheus.CounterValue, float64(c.b.batched.Load()))
	ch <- prometheus.MustNewConstMetric(descMisconfigured, prometheus.GaugeValue, misconfigured)
}
