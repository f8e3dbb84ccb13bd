// The JSON a scenario prints, what each figure means, and the -times file.

package main

import (
	"encoding/json"
	"fmt"
	"os"
)

type settingsJSON struct {
	Groups         []sellerGroup `json:"seller_groups"`
	Sellers        int           `json:"sellers"`
	Rows           int           `json:"rows"`
	Consumers      int           `json:"consumers"`
	Partitions     int           `json:"partitions"`
	LimitPerSeller int           `json:"limit_per_seller"`
	WindowS        float64       `json:"window_s"`
	MarginS        float64       `json:"margin_s"`
	GlobalLimit    int           `json:"global_limit,omitempty"`
	GlobalWindowS  float64       `json:"global_window_s,omitempty"`
	LatencyS       float64       `json:"registry_latency_s"`
	BusyProcesses  int           `json:"busy_processes,omitempty"`
}

type groupResult struct {
	sellerGroup
	LowerBoundS float64 `json:"lower_bound_s"`
	Ratio       *stats  `json:"ratio,omitempty"`
	// FinishWindowsMax: the group's slowest seller, see definitions.
	FinishWindowsMax float64 `json:"finish_windows_max"`
}

type globalResult struct {
	Periods           []period `json:"periods"`
	PeriodsCounted    int      `json:"periods_counted"`
	UsedFraction      *float64 `json:"window_used_fraction_while_rows_wait"`
	UsedFractionWorst *float64 `json:"window_used_fraction_worst_period"`
}

type result struct {
	Scenario string `json:"scenario"`
	// RedisPipelining is the consumers' --redis-pipelining; "" their default.
	RedisPipelining  string       `json:"redis_pipelining,omitempty"`
	RowPath          string       `json:"row_path,omitempty"`
	Round            int          `json:"round"`
	Settings         settingsJSON `json:"settings"`
	LoadAvg1mAtStart float64      `json:"load_avg_1m_at_start"`

	RegisteredRows int   `json:"registered_rows"`
	Accepted       int   `json:"accepted_201"`
	Replays        int   `json:"replays_200"`
	RateLimited    int   `json:"rate_limited_429"`
	MaxInWindow    int   `json:"max_registrations_of_one_seller_in_any_window"`
	APIRequests    int64 `json:"api_requests"`

	PublishS          float64 `json:"publish_s"`
	FirstToLastS      float64 `json:"first_to_last_registration_s"`
	PublishToLastS    float64 `json:"publish_to_last_registration_s"`
	RegistrationsPerS float64 `json:"registrations_per_s_sustained"`

	Ratio        *stats             `json:"seller_ratio"`
	Groups       []groupResult      `json:"seller_groups"`
	SellerRatios map[string]float64 `json:"seller_ratios,omitempty"`
	// times: each seller's accepted registrations, seconds from the run's first (-times)
	times  map[string][]float64
	Global *globalResult `json:"global_limit,omitempty"`

	SpanS         float64 `json:"measured_span_s"`
	CPUS          float64 `json:"consumer_cpu_s"`
	CPUMsPerSEach float64 `json:"consumer_cpu_ms_per_s_each"`
	// FetchesPerSEach: the Fetch requests the broker received ÷ consumers ÷ span.
	FetchesPerSEach float64 `json:"kafka_fetches_per_s_each"`
	CPUUsPerRow     float64 `json:"consumer_cpu_us_per_registered_row"`
	// AllocsPerRow is nil when the consumer binary does not export
	// go_memstats_mallocs_total.
	AllocsPerRow *float64 `json:"consumer_heap_allocs_per_registered_row,omitempty"`
	// WakesPerRow is nil when the consumer binary does not export
	// go_sched_latencies_seconds.
	WakesPerRow *float64 `json:"consumer_goroutine_wakes_per_registered_row,omitempty"`
	// GCCycles is nil when the consumer binary does not export
	// go_gc_duration_seconds.
	GCCycles *float64 `json:"consumer_gc_cycles,omitempty"`
	// Nil when the consumer binary has no round-trip counter (older builds).
	RoundTrips             *float64 `json:"redis_round_trips"`
	RoundTripsPerRow       *float64 `json:"redis_round_trips_per_registered_row"`
	CommandsSent           float64  `json:"redis_commands_sent"`
	CommandsSentPerRow     float64  `json:"redis_commands_sent_per_registered_row"`
	CommandsExecuted       int64    `json:"redis_commands_executed"`
	CommandsExecutedPerRow float64  `json:"redis_commands_executed_per_registered_row"`
	// Which commands those were, inside scripts included: where Redis's
	// CPU goes.
	CommandsExecutedByName map[string]float64 `json:"redis_commands_executed_per_registered_row_by_command"`
	RedisUsByCommand       map[string]float64 `json:"redis_us_per_registered_row_by_command"`
	PeakRSSMiB             []float64          `json:"consumer_peak_rss_mib"`
	PeakRSSMiBMax          float64            `json:"consumer_peak_rss_mib_max"`
	RedisCPUUsPerRow       float64            `json:"redis_cpu_us_per_registered_row"`
	// Nil when the consumer binary has no reservation histogram.
	ReserveLatency *latencyMS `json:"reserve_latency_ms"`
	// Where the machine's CPU went over the scenario: the rest is other work
	// on the machine, which skews every figure above.
	CPU      cpuShare           `json:"machine_cpu_s"`
	Counters map[string]float64 `json:"consumer_counters"`
}

type cpuShare struct {
	Busy      float64 `json:"busy_all_processes"`
	Consumers float64 `json:"consumers"`
	Redis     float64 `json:"redis"`
	Bench     float64 `json:"bench_process_sandbox_and_broker"`
	Other     float64 `json:"other_processes"`
}

// definitions say how each figure of the JSON is computed; they are printed
// with it.
func definitions() map[string]string {
	return map[string]string{
		"lower_bound_s":                                         "(⌈rows/limit⌉ − 1) × (window + margin): the least time from a seller's first registration to its last",
		"seller_ratio":                                          "per seller: (last − first registration at the sandbox) ÷ its lower bound; min, median and max over the sellers whose lower bound is above 0 (more rows than the limit)",
		"registrations_per_s_sustained":                         "registered_rows ÷ first_to_last_registration_s (the sandbox's first and last 201 of the run, all sellers)",
		"registered_rows":                                       "distinct products the sandbox registered (accepted_201 minus double registrations)",
		"publish_s":                                             "time to publish every row to the broker (acks from all replicas); publish_to_last_registration_s counts from the same start",
		"measured_span_s":                                       "the span every figure below is taken over: from just before publishing to 1 s after the last registration; in the idle scenario, which publishes nothing, the scenario's idle time, starting 5 s after the consumer group is stable",
		"consumer_cpu_us_per_registered_row":                    "user + system CPU of all consumer processes (/proc/PID/stat, 10 ms ticks) over measured_span_s ÷ registered_rows; every figure per registered row is 0 in the idle scenario",
		"kafka_fetches_per_s_each":                              "Fetch requests the embedded broker received over measured_span_s ÷ the consumers ÷ the span: a count, steady where CPU a second is not (an idle reader's fetches are most of what it does)",
		"consumer_cpu_ms_per_s_each":                            "the same CPU ÷ the consumers ÷ measured_span_s, in ms: what a consumer costs a second, with rows or (idle scenario) without",
		"consumer_heap_allocs_per_registered_row":               "heap allocations of all consumer processes (go_memstats_mallocs_total) over the same span ÷ registered_rows: a count, so unlike CPU it does not move with the machine's load",
		"consumer_goroutine_wakes_per_registered_row":           "goroutines made runnable and run in all consumer processes over the same span (8 × the count of go_sched_latencies_seconds, which the Go runtime samples one in 8 of) ÷ registered_rows: every hand-off between goroutines, the timers' and the network poller's wakes included, and every time the GC's background sweeper yields to a runnable goroutine (thousands of times a cycle in a busy process, more the busier it is while the sweeper runs: the figure varies from run to run at the same consumer_gc_cycles)",
		"consumer_gc_cycles":                                    "GC cycles completed in all consumer processes over the same span (go_gc_duration_seconds_count)",
		"redis_round_trips_per_registered_row":                  "the consumers' bulkreg_consumer_redis_roundtrips_total over the same span ÷ registered_rows: one per command or pipeline a Redis node received; null when the consumer binary has no such counter",
		"redis_commands_sent_per_registered_row":                "the consumers' bulkreg_consumer_redis_commands_total over the same span ÷ registered_rows (a script is one command)",
		"redis_commands_executed_per_registered_row":            "redis-server's total_commands_processed over the same span ÷ registered_rows (commands run inside scripts included)",
		"redis_commands_executed_per_registered_row_by_command": "the same, per command, from INFO commandstats (calls); the sampling INFOs themselves show as info",
		"redis_us_per_registered_row_by_command":                "µs Redis spent running each command (INFO commandstats usec) ÷ registered_rows; a script's (evalsha) includes the commands it ran, which also show under their own names; Redis CPU outside commands (the network, the event loop) is in none",
		"consumer_peak_rss_mib":                                 "VmHWM of each consumer process at the end of the scenario",
		"finish_windows_max":                                    "per seller group: the largest (seller's last registration − the run's first registration) ÷ the app-wide window (the seller window without one)",
		"global_limit.periods":                                  "the run from its first registration to its last cut into consecutive periods of the app-wide window; accepted = 201s of all sellers in the period; seller_limits_capacity = how many the sellers' own limits alone would have allowed in it (each seller's rows left, placed as early as a sliding log of limit per window + margin allows after its earlier registrations); counted = capacity ≥ the app-wide limit, i.e. rows were waiting that only the app-wide limit held back",
		"global_limit.window_used_fraction_while_rows_wait":     "Σ accepted ÷ (app-wide limit × periods counted); the worst period's accepted ÷ limit beside it; null when no period counted",
		"rate_limited_429":                                      "429 answers of the sandbox, every limit together",
		"redis_cpu_us_per_registered_row":                       "redis-server's user + system CPU (INFO cpu) over the same span ÷ registered_rows",
		"machine_cpu_s":                                         "CPU seconds over the same span: busy_all_processes from /proc/stat (every CPU, idle and iowait left out), consumers as above, redis from INFO cpu, bench_process from /proc/self/stat; other_processes is the rest, work on the machine that is not this scenario's and skews it",
		"consumer_counters":                                     "these consumer counters over the same span, summed over the consumers; one the binary lacks is left out",
		"reserve_latency_ms":                                    "quantiles of the consumers' bulkreg_consumer_reserve_seconds over the same span (a batch's reservation from the call to the throttle's answer, waiting for a shared pipeline included), buckets summed over the consumers and read as Prometheus's histogram_quantile does (linear within a bucket; the buckets grow by 1.5×, so within 25 %); count = batches reserved; null for a build without the histogram",
		"redis_pipelining":                                      "the consumers' --redis-pipelining (autopipe, goredis or none); absent: the binary's default",
		"round":                                                 "with -rounds N, which round (1 to N) of the interleaved runs this is",
	}
}

// writeTimes writes what -times asks for.
func writeTimes(path string, times map[string][]float64) error {
	b, err := json.Marshal(times)
	if err != nil {
		return fmt.Errorf("encode the registration times: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write the registration times (-times): %w", err)
	}
	return nil
}
