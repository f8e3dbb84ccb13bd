package main

import (
	"math"
	"testing"
)

func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	// 100 observations: 50 ≤ 1 ms, 40 in (1, 2] ms, 9 in (2, 4] ms, 1 beyond.
	bs := []bucket{{0.001, 50}, {0.002, 90}, {0.004, 99}, {inf, 100}}
	for _, tc := range []struct {
		name string
		q    float64
		bs   []bucket
		want float64
	}{
		{"median at a bound", 0.5, bs, 0.001},
		{"within the first bucket, from 0", 0.25, bs, 0.0005},
		{"linear within a bucket", 0.7, bs, 0.0015},
		{"p99 at the last finite bound", 0.99, bs, 0.004},
		{"in +Inf: the largest finite bound", 0.999, bs, 0.004},
		{"empty buckets skipped", 0.5, []bucket{{0.001, 0}, {0.002, 10}, {inf, 10}}, 0.0015},
	} {
		if got := quantile(tc.q, tc.bs); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: quantile(%v) = %v, want %v", tc.name, tc.q, got, tc.want)
		}
	}
	if got := quantile(0.5, []bucket{{0.001, 0}, {inf, 0}}); !math.IsNaN(got) {
		t.Errorf("nothing observed: %v, want NaN", got)
	}
}

// The histogram is summed over consumers between the two samples, read from
// the scrape's keys; an older build without it gives no figure.
func TestReserveLatency(t *testing.T) {
	sample := func(le1, le2, inf float64) consumerSample {
		return consumerSample{metrics: map[string]float64{
			reserveHistogram + `_bucket{le="0.001"}`: le1,
			reserveHistogram + `_bucket{le="0.002"}`: le2,
			reserveHistogram + `_bucket{le="+Inf"}`:  inf,
			"bulkreg_consumer_redis_commands_total":  7,
		}}
	}
	before := []consumerSample{sample(10, 10, 10), sample(0, 0, 0)}
	after := []consumerSample{sample(60, 100, 100), sample(0, 100, 100)}
	// Over the span: 50 ≤ 1 ms, 140 in (1, 2] ms, 0 beyond; 190 in all.
	got := reserveLatency(before, after)
	if got == nil || got.Count != 190 || got.P50 != 1.321 || got.P99 != 1.986 {
		t.Errorf("reserveLatency = %+v, want count 190, p50 1.321 ms, p99 1.986 ms", got)
	}
	old := []consumerSample{{metrics: map[string]float64{"bulkreg_consumer_redis_commands_total": 7}}}
	if got := reserveLatency(old, old); got != nil {
		t.Errorf("a build without the histogram: %+v, want nil", got)
	}
}

func TestPipeliningModes(t *testing.T) {
	if m, err := pipeliningModes(""); err != nil || len(m) != 1 || m[0] != "" {
		t.Errorf(`"" = %q, %v; want the default alone`, m, err)
	}
	if m, err := pipeliningModes("autopipe, goredis,none"); err != nil || len(m) != 3 || m[1] != "goredis" {
		t.Errorf("three = %q, %v", m, err)
	}
	if _, err := pipeliningModes("autopipe,fast"); err == nil {
		t.Error("an unknown mode was accepted")
	}
}
