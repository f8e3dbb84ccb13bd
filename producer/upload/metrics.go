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
	shareB  *prometheus.GaugeVec
	shareN  *prometheus.GaugeVec
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
		shareB: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "bulkreg_producer_seller_share_bytes",
			Help: "Bytes a seller's uploads keep in Redis, as the seller's share counts them, when this producer last handled one of the seller's uploads."}, []string{"seller"}),
		shareN: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "bulkreg_producer_seller_share_uploads",
			Help: "Uploads a seller keeps in Redis, as the seller's share counts them, when this producer last handled one of the seller's uploads."}, []string{"seller"}),
	}
	reg.MustRegister(m.uploads, m.rowsPub, m.rowsBad, m.rowsOld, m.publish, m.shareB, m.shareN)
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

func (m *Metrics) share(seller string, u uploadstatus.Usage) {
	if m != nil {
		m.shareB.WithLabelValues(seller).Set(float64(u.Bytes))
		m.shareN.WithLabelValues(seller).Set(float64(u.Uploads))
	}
}
