package upload

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkreg/bulkreg/uploadstatus"
)

// Metrics are the upload use case's Prometheus metrics, registered on a registry
// the caller owns (never the global one). A nil *Metrics records nothing.
type Metrics struct {
	uploads *prometheus.CounterVec
	rowsPub prometheus.Counter
	rowsBad prometheus.Counter
	rowsOld prometheus.Counter
	publish prometheus.Histogram
	shareB  prometheus.Histogram
	shareR  prometheus.Histogram
}

// NewMetrics registers the producer's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bulkreg_producer_uploads_total",
			Help: "Uploads by outcome: published, duplicate, refused, publish_failed, share_full."}, []string{"outcome"}),
		rowsPub: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkreg_producer_rows_published_total",
			Help: "Rows acknowledged by Kafka."}),
		rowsBad: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkreg_producer_rows_invalid_total",
			Help: "Rows refused by validation, or as a changed product the seller registered before, and recorded as failed."}),
		rowsOld: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkreg_producer_rows_already_registered_total",
			Help: "Rows not published because the seller registered their SKU with the same content before."}),
		publish: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bulkreg_producer_publish_seconds",
			Help: "Time from handing an upload's rows to Kafka until every row was acknowledged.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		// One series whatever the number of sellers: a seller label would
		// keep a series per seller for the life of the process.
		shareB: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bulkreg_producer_seller_usage_bytes",
			Help:    "Bytes the seller's uploads keep in Redis, as their share counts them, observed each time this producer handles one of the seller's uploads.",
			Buckets: prometheus.ExponentialBuckets(64<<10, 4, 8)}),
		shareR: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bulkreg_producer_seller_share_used_ratio",
			Help:    "How full the seller's share of Redis is (the larger of bytes and uploads, as a fraction of the share), observed each time this producer handles one of the seller's uploads; not observed without a share.",
			Buckets: []float64{0.1, 0.25, 0.5, 0.8, 0.9, 1}}),
	}
	reg.MustRegister(m.uploads, m.rowsPub, m.rowsBad, m.rowsOld, m.publish, m.shareB, m.shareR)
	return m
}

func (m *Metrics) upload(outcome string) {
	if m != nil {
		m.uploads.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) rows(published, invalid, already int) {
	if m != nil {
		m.rowsPub.Add(float64(published))
		m.rowsBad.Add(float64(invalid))
		m.rowsOld.Add(float64(already))
	}
}

func (m *Metrics) publishSeconds(d time.Duration) {
	if m != nil {
		m.publish.Observe(d.Seconds())
	}
}

func (m *Metrics) share(u uploadstatus.Usage, sh uploadstatus.Share) {
	if m == nil {
		return
	}
	m.shareB.Observe(float64(u.Bytes))
	var r float64
	if sh.Bytes > 0 {
		r = float64(u.Bytes) / float64(sh.Bytes)
	}
	if sh.Uploads > 0 {
		r = max(r, float64(u.Uploads)/float64(sh.Uploads))
	}
	if sh.Bytes > 0 || sh.Uploads > 0 {
		m.shareR.Observe(r)
	}
}
