package consumer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkreg/bulkreg/deadletter"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
)

// metrics are the consumer's Prometheus series. None has a seller label: the
// number of sellers is unbounded, so per-seller views belong to the
// compliance report, not to the time-series database.
type metrics struct {
	rows          *prometheus.CounterVec   // result: registered, replayed, failed, dead_lettered
	calls         *prometheus.CounterVec   // class of every registry call
	latency       *prometheus.HistogramVec // class
	throttleWait  prometheus.Histogram
	lateness      prometheus.Histogram
	uncertainty   prometheus.Histogram
	rateLimited   prometheus.Counter
	inFlight      prometheus.Gauge
	waiting       prometheus.Gauge
	activeSellers prometheus.Gauge
	commits       *prometheus.CounterVec // result: ok, error
	rebalances    prometheus.Counter
	dlqWrites     *prometheus.CounterVec // class
	redisDown     prometheus.Counter
	abandoned     prometheus.Counter
	late          prometheus.Counter
	held          prometheus.Counter
	stale         prometheus.Counter
	stateLost     prometheus.Counter
	sellersHeld   prometheus.Gauge
	holdExpired   prometheus.Counter
	// callsBy and latencyBy are calls and latency for each class, looked
	// up once (registryclient.Class is their index).
	callsBy   [registryclient.Misconfigured + 1]prometheus.Counter
	latencyBy [registryclient.Misconfigured + 1]prometheus.Observer
}

func newMetrics(reg prometheus.Registerer, oldest func() float64) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	counters := func(name, help, label string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	histogram := func(name, help string, start, factor float64, n int) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: prometheus.ExponentialBuckets(start, factor, n)})
	}
	m := &metrics{
		rows:  counters("bulkreg_consumer_rows_total", "Rows finished, by result: registered (201), replayed (200, already registered), failed (refused by the API), dead_lettered, set_aside (a dead-lettered row read again, finished without a call).", "result"),
		calls: counters("bulkreg_consumer_registry_calls_total", "Calls to the registration API, by the class of the answer.", "class"),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bulkreg_consumer_registry_latency_seconds",
			Help: "Registration API latency, by the class of the answer.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}, []string{"class"}),
		throttleWait:  histogram("bulkreg_consumer_throttle_wait_seconds", "Time a row waited for its throttle slot, per attempt.", 0.001, 2.5, 14),
		lateness:      histogram("bulkreg_consumer_call_lateness_seconds", "How late after its slot a call was about to start, as far as the consumer can tell (an upper bound: the slot's place on this machine's clock is known only within the round trips that placed it). A call later than --max-lateness is not made: its slot is counted in bulkreg_consumer_slots_missed_total.", 0.001, 2, 12),
		uncertainty:   histogram("bulkreg_consumer_slot_uncertainty_seconds", "How far apart the earliest and the latest time at which a row's slot could fall on this machine's clock were when the row woke for it. The row wakes at the latest and counts its lateness from the earliest, so this eats into --max-lateness.", 0.001, 2, 12),
		rateLimited:   counter("bulkreg_consumer_rate_limited_total", "429 answers received from the registration API. Should stay 0: each one means the throttle and the API disagreed."),
		inFlight:      gauge("bulkreg_consumer_rows_in_flight", "Rows read from Kafka and not finished (bounded by the in-flight caps)."),
		waiting:       gauge("bulkreg_consumer_rows_waiting", "Rows queued on their seller's runner, not in a batch."),
		activeSellers: gauge("bulkreg_consumer_active_sellers", "Sellers with rows in flight in this consumer."),
		commits:       counters("bulkreg_consumer_commits_total", "Offset commits, by result.", "result"),
		rebalances:    counter("bulkreg_consumer_rebalances_total", "Consumer-group generations joined (each rebalance starts one)."),
		dlqWrites:     counters("bulkreg_consumer_dlq_writes_total", "Messages written to the dead-letter topic, by error class.", "class"),
		redisDown:     counter("bulkreg_consumer_redis_unavailable_total", "Times a Redis call failed because Redis did not answer; no registry call is made while it is down."),
		abandoned:     counter("bulkreg_consumer_rows_abandoned_total", "Rows given back unfinished at a rebalance or shutdown; they are read again from the committed offset."),
		late:          counter("bulkreg_consumer_slots_missed_total", "Slots given back because the call could not start within the allowed lateness (too few connections to the API, or an overloaded consumer)."),
		held:          counter("bulkreg_consumer_slots_held_back_total", "Slots the throttle no longer held when their row checked them shortly before the call (given back meanwhile): the row took a new one."),
		stale:         counter("bulkreg_consumer_slots_stale_total", "Slots not used because the Redis that granted them lost the seller's throttle state since (a restart or failover); each row took a new slot."),
		stateLost:     counter("bulkreg_consumer_redis_state_lost_total", "Reservations that found Redis had lost (or may have lost) the throttle's state of a hash slot: every seller there was held one window from that moment."),
		sellersHeld:   gauge("bulkreg_consumer_sellers_held", "Sellers whose calls the registration API fails while none is answered, held by their runners: their rows wait and spend no attempt, one is tried per growing interval."),
		holdExpired:   counter("bulkreg_consumer_seller_holds_expired_total", "Times rows of a held seller were held longer than --seller-hold-limit and sent to the dead-letter topic for an operator."),
	}
	oldestAge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "bulkreg_consumer_oldest_unfinished_row_age_seconds",
		Help: "Age of the oldest unfinished row in this consumer, since it was produced; 0 when none."}, oldest)
	m.initLabels()
	reg.MustRegister(m.rows, m.calls, m.latency, m.throttleWait, m.lateness, m.uncertainty, m.rateLimited, m.inFlight, m.waiting,
		m.activeSellers, m.commits, m.rebalances, m.dlqWrites, m.redisDown, m.abandoned, m.late, m.held, m.stale, m.stateLost, m.sellersHeld, m.holdExpired, oldestAge)
	return m
}

// initLabels creates every known label value at 0. A counter series that is
// born at 1 shows no increase() to Prometheus, so without this the first dead
// letter (or 429, or failed commit) after a consumer starts would never alert.
func (m *metrics) initLabels() {
	for _, result := range []string{"registered", "replayed", "failed", "dead_lettered", "set_aside"} {
		m.rows.WithLabelValues(result)
	}
	for _, c := range []registryclient.Class{registryclient.Registered, registryclient.Replayed,
		registryclient.Permanent, registryclient.RateLimited, registryclient.Transient, registryclient.Misconfigured} {
		m.callsBy[c] = m.calls.WithLabelValues(c.String())
		m.latencyBy[c] = m.latency.WithLabelValues(c.String())
	}
	// The classes a row can be dead-lettered with (record.go, deadLetter).
	for _, class := range []string{registryclient.Transient.String(), registryclient.RateLimited.String(), registryclient.Misconfigured.String(), deadletter.ClassBadMessage} {
		m.dlqWrites.WithLabelValues(class)
	}
	for _, result := range []string{"ok", "error"} {
		m.commits.WithLabelValues(result)
	}
}
