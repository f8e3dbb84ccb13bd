package consumer

import (
	"strconv"
	"time"

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
	// The classes a row can be dead-lettered with (runcall.go, deadLetter).
	for _, class := range []string{registryclient.Transient.String(), registryclient.RateLimited.String(), registryclient.Misconfigured.String(), deadletter.ClassBadMessage} {
		m.dlqWrites.WithLabelValues(class)
	}
	for _, result := range []string{"ok", "error"} {
		m.commits.WithLabelValues(result)
	}
}

// backlogCollector exports what an operator or an autoscaler needs to judge
// the work a consumer holds, computed at scrape time from the live state:
//
//   - bulkreg_consumer_partition_lag: per assigned partition, messages between
//     the group's commit point and the partition's high watermark. Raw lag
//     counts rows that only a seller's quota holds back, so it is for seeing,
//     not for scaling.
//   - bulkreg_consumer_backlog_seconds: how long the rows this consumer holds
//     take at the API's allowed rate, n×W/L for the seller with the most rows
//     (sellers proceed in parallel, each at most L per W). More consumers do
//     not shorten it.
//   - bulkreg_consumer_sendable_rows: Σ over sellers of min(rows, L), the rows
//     the quota lets through within one window. This is the signal to scale on.
//   - bulkreg_consumer_redis_up: 1 while Redis answers, 0 while the consumer
//     fails closed.
type backlogCollector struct {
	c                               *Consumer
	lag, backlog, sendable, redisUp *prometheus.Desc
}

func newBacklogCollector(c *Consumer) *backlogCollector {
	return &backlogCollector{
		c: c,
		lag: prometheus.NewDesc("bulkreg_consumer_partition_lag",
			"Messages on an assigned partition not yet committed by the group (high watermark of the last fetch minus the commit point); a lower bound while reading is paused at the in-flight cap.",
			[]string{"topic", "partition"}, nil),
		backlog: prometheus.NewDesc("bulkreg_consumer_backlog_seconds",
			"Seconds the rows this consumer holds need at the API's allowed rate (rows × window ÷ limit of the seller with the most rows). More consumers do not shorten it.",
			nil, nil),
		sendable: prometheus.NewDesc("bulkreg_consumer_sendable_rows",
			"Rows this consumer holds that the sellers' quotas let through within one window: the sum over sellers of min(rows, limit). Scale consumers on this, not on lag.",
			nil, nil),
		redisUp: prometheus.NewDesc("bulkreg_consumer_redis_up",
			"1 while Redis answers; 0 while the consumer fails closed and makes no registry call.",
			nil, nil),
	}
}

func (b *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- b.lag
	ch <- b.backlog
	ch <- b.sendable
	ch <- b.redisUp
}

func (b *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range b.c.group.Partitions() {
		lag, ok := p.Lag()
		if !ok {
			continue // nothing fetched yet: the high watermark is unknown
		}
		ch <- prometheus.MustNewConstMetric(b.lag, prometheus.GaugeValue, float64(lag), b.c.cfg.Topic, strconv.Itoa(p.ID()))
	}
	up := 0.0
	if b.c.redis.Healthy() {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(b.redisUp, prometheus.GaugeValue, up)
	p := b.c.deps.Throttle.Policy()
	seconds, sendable := quotaBacklog(b.c.runners.rowsBySeller(), p.Limit, p.Window)
	ch <- prometheus.MustNewConstMetric(b.backlog, prometheus.GaugeValue, seconds)
	ch <- prometheus.MustNewConstMetric(b.sendable, prometheus.GaugeValue, float64(sendable))
}

// quotaBacklog is the time the longest seller needs at limit per window, and
// the rows all sellers may send within one window.
func quotaBacklog(rows map[string]int, limit int, window time.Duration) (seconds float64, sendable int) {
	if limit <= 0 {
		return 0, 0
	}
	for _, n := range rows {
		seconds = max(seconds, float64(n)*window.Seconds()/float64(limit))
		sendable += min(n, limit)
	}
	return seconds, sendable
}
