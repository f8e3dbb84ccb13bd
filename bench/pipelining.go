package main

import (
	"fmt"
	"strings"
)

// pipeliningModes reads -redis-pipelining: the consumers' --redis-pipelining
// values to run each scenario with, in order; one "" (the consumer's
// default) when empty.
func pipeliningModes(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return []string{""}, nil
	}
	var modes []string
	for m := range strings.SplitSeq(list, ",") {
		m = strings.TrimSpace(m)
		switch m {
		case "autopipe", "goredis", "goredis-2x64", "none":
		default:
			return nil, fmt.Errorf("-redis-pipelining %q: %q is none of autopipe, goredis, goredis-2x64, none", list, m)
		}
		modes = append(modes, m)
	}
	return modes, nil
}

// runName names one run in messages and -times files:
// many-sellers-goredis-2 for round 2 (of several) of many-sellers with
// goredis; the scenario's name alone for one run with the defaults.
func runName(scenario, pipelining string, round, rounds int) string {
	name := scenario
	if pipelining != "" {
		name += "-" + pipelining
	}
	if rounds > 1 {
		name += fmt.Sprintf("-%d", round)
	}
	return name
}

// brief is one line of a run's main figures, printed to stderr as each run
// ends, so a long series can be followed.
func brief(r result) string {
	if r.RegisteredRows == 0 {
		s := fmt.Sprintf("load %.2f, consumer cpu %.2f ms/s each over %.0f s with no rows", r.LoadAvg1mAtStart, r.CPUMsPerSEach, r.SpanS)
		s += fmt.Sprintf(", %.2f fetches/s each", r.FetchesPerSEach)
		return s + fmt.Sprintf(", redis cpu %.3f s, peak rss %.1f MiB", r.CPU.Redis, r.PeakRSSMiBMax)
	}
	s := fmt.Sprintf("load %.2f, %.0f reg/s, cpu %.0f µs/row, 429s %d", r.LoadAvg1mAtStart, r.RegistrationsPerS, r.CPUUsPerRow, r.RateLimited)
	if r.RoundTripsPerRow != nil {
		s += fmt.Sprintf(", round trips %.3f/row", *r.RoundTripsPerRow)
	}
	if r.Ratio != nil {
		s += fmt.Sprintf(", ratio median %.3f max %.3f", r.Ratio.Median, r.Ratio.Max)
	}
	if r.ReserveLatency != nil {
		s += fmt.Sprintf(", reserve p50 %.2f p99 %.2f ms", r.ReserveLatency.P50, r.ReserveLatency.P99)
	}
	s += fmt.Sprintf(", redis cpu %.0f µs/row", r.RedisCPUUsPerRow)
	if r.AllocsPerRow != nil {
		s += fmt.Sprintf(", allocs %.0f/row", *r.AllocsPerRow)
	}
	if r.WakesPerRow != nil {
		s += fmt.Sprintf(", wakes %.1f/row", *r.WakesPerRow)
	}
	if r.GCCycles != nil {
		s += fmt.Sprintf(", %.0f GC cycles", *r.GCCycles)
	}
	s += fmt.Sprintf(", peak rss %.1f MiB", r.PeakRSSMiBMax)
	return s
}
