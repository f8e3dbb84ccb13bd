package consumer

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

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
