package main

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// reserveHistogram is the consumers' histogram of how long a batch's reservation
// took, from the call to the throttle's answer (cmd/consumer).
const reserveHistogram = "bulkreg_consumer_reserve_seconds"

// latencyMS is a histogram's quantiles over the scenario, in milliseconds.
type latencyMS struct {
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Count int64   `json:"count"`
}

// bucket is a histogram's cumulative count of observations ≤ le.
type bucket struct {
	le    float64
	count float64
}

// histogramDelta is the cumulative buckets of the histogram name over the
// span between each consumer's before and after samples, summed over the
// consumers; nil when a sample lacks the histogram (an older build).
func histogramDelta(name string, before, after []consumerSample) []bucket {
	sum := map[float64]float64{}
	for i := range after {
		a, b := buckets(name, after[i].metrics), buckets(name, before[i].metrics)
		if a == nil || b == nil {
			return nil
		}
		for le, n := range a {
			sum[le] += n - b[le]
		}
	}
	out := make([]bucket, 0, len(sum))
	for le, n := range sum {
		out = append(out, bucket{le, n})
	}
	slices.SortFunc(out, func(x, y bucket) int { return compareFloat(x.le, y.le) })
	return out
}

func compareFloat(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// buckets reads the histogram name's cumulative buckets (le → count) from a
// scrape; nil when it has none.
func buckets(name string, metrics map[string]float64) map[float64]float64 {
	prefix := name + `_bucket{le="`
	var out map[float64]float64
	for k, v := range metrics {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		le, err := strconv.ParseFloat(strings.TrimSuffix(rest, `"}`), 64) // "+Inf" parses as +Inf
		if err != nil {
			continue
		}
		if out == nil {
			out = map[float64]float64{}
		}
		out[le] = v
	}
	return out
}

// quantile is the q-quantile of cumulative buckets sorted by le, as
// Prometheus's histogram_quantile reads it: linear within the bucket it
// falls in (from 0 for the first), the largest finite bound when it falls
// in +Inf; NaN when nothing was observed.
func quantile(q float64, bs []bucket) float64 {
	if len(bs) == 0 || bs[len(bs)-1].count <= 0 {
		return math.NaN()
	}
	rank := q * bs[len(bs)-1].count
	lowLE, lowCount := 0.0, 0.0
	for i, b := range bs {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				if i == 0 {
					return math.NaN()
				}
				return bs[i-1].le
			}
			if b.count == lowCount {
				return b.le
			}
			return lowLE + (b.le-lowLE)*(rank-lowCount)/(b.count-lowCount)
		}
		lowLE, lowCount = b.le, b.count
	}
	return bs[len(bs)-1].le
}

// reserveLatency summarises the consumers' reservation times over the
// scenario; nil when the binary has no such histogram or none was observed.
func reserveLatency(before, after []consumerSample) *latencyMS {
	bs := histogramDelta(reserveHistogram, before, after)
	if len(bs) == 0 || bs[len(bs)-1].count <= 0 {
		return nil
	}
	ms := func(q float64) float64 { return round(quantile(q, bs) * 1000) }
	return &latencyMS{P50: ms(0.5), P90: ms(0.9), P99: ms(0.99), Count: int64(bs[len(bs)-1].count)}
}
