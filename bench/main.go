// Command bench measures the consumer end to end and prints JSON: the
// embedded Kafka broker, a real redis-server, the sandbox registration API
// (in this process) and N cmd/consumer processes, every window shrunk from
// 60 s to 3 s so a scenario takes seconds, not an hour. It is a program, not
// a test: everything shares the machine, so run it alone (check `uptime`).
//
//	go run ./bench                                  # every scenario this build has
//	go run ./bench -scenario many-sellers           # one; or a list: one-seller,many-sellers
//	go run ./bench -consumer-bin /tmp/old/consumer  # measure another build of cmd/consumer
//	go run ./bench -scenario many-sellers -sellers 40 -consumer-bin /tmp/old/consumer  # a load an older build can finish
//	go run ./bench -scenario many-sellers -redis-pipelining autopipe,goredis -rounds 2 -pause 20s  # interleaved
//
// Scenarios (the sandbox answers each call after 5 ms):
//
//	one-seller    1 seller × 500 rows, 4 consumers, 100 per 3 s, margin 50 ms
//	many-sellers  100 sellers × 500 rows, 4 consumers, 100 per 3 s, margin 100 ms
//	              (issue 12's target: about 3,200 registrations/s)
//	global        20 sellers, one with 500 rows (published first) and 19 with
//	              10, 100 per seller and 200 for the whole application per 3 s,
//	              margin 100 ms.
//
// Per scenario it prints registrations/s sustained, consumer CPU µs and
// Redis round trips and commands per registered row, each seller's ratio to
// its lower bound (min/median/max), 429s and each consumer's peak RSS; with
// an app-wide limit also how much of it was used while rows waited and how
// many windows the small sellers took. The JSON's "definitions" say exactly
// how each figure is computed; "machine" says where it ran.
package main

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/redisproc"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/throttle"
)

// sellerGroup is Sellers sellers with RowsEach rows each.
type sellerGroup struct {
	Sellers  int `json:"sellers"`
	RowsEach int `json:"rows_each"`
}

type scenario struct {
	Name       string
	Groups     []sellerGroup // published in this order
	Consumers  int
	Partitions int
	Limit      int // per seller per Window
	Window     time.Duration
	Margin     time.Duration
	Latency    time.Duration // the sandbox's, before it handles a call
	// GlobalLimit per GlobalWindow for the whole application; 0: none.
	GlobalLimit  int
	GlobalWindow time.Duration
}

func scenarios() []scenario {
	const w = 3 * time.Second
	return []scenario{
		{Name: "one-seller", Groups: []sellerGroup{{1, 500}}, Consumers: 4, Partitions: 4, Limit: 100, Window: w, Margin: 50 * time.Millisecond, Latency: 5 * time.Millisecond},
		{Name: "many-sellers", Groups: []sellerGroup{{100, 500}}, Consumers: 4, Partitions: 8, Limit: 100, Window: w, Margin: 100 * time.Millisecond, Latency: 5 * time.Millisecond},
		{Name: "global", Groups: []sellerGroup{{1, 500}, {19, 10}}, Consumers: 4, Partitions: 8, Limit: 100, Window: w, Margin: 100 * time.Millisecond, Latency: 5 * time.Millisecond,
			GlobalLimit: 200, GlobalWindow: w},
	}
}

func (sc scenario) sellers() int {
	n := 0
	for _, g := range sc.Groups {
		n += g.Sellers
	}
	return n
}

func (sc scenario) rows() int {
	n := 0
	for _, g := range sc.Groups {
		n += g.Sellers * g.RowsEach
	}
	return n
}

// finishWindow is the unit the sellers' finish times are given in: the
// app-wide window when there is one, else the seller window.
func (sc scenario) finishWindow() time.Duration {
	if sc.GlobalLimit > 0 {
		return sc.GlobalWindow
	}
	return sc.Window
}

// eachSeller calls fn for every seller with its group and rows, in
// publishing order.
func (sc scenario) eachSeller(fn func(id string, group, rows int)) {
	i := 0
	for gi, g := range sc.Groups {
		for range g.Sellers {
			fn(fmt.Sprintf("seller-%03d", i), gi, g.RowsEach)
			i++
		}
	}
}

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

	CPUS        float64 `json:"consumer_cpu_s"`
	CPUUsPerRow float64 `json:"consumer_cpu_us_per_registered_row"`
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
		"consumer_cpu_us_per_registered_row":                    "user + system CPU of all consumer processes (/proc/PID/stat, 10 ms ticks) from just before publishing to 1 s after the last registration, ÷ registered_rows",
		"redis_round_trips_per_registered_row":                  "the consumers' bulkreg_consumer_redis_roundtrips_total over the same span ÷ registered_rows: one per command or pipeline a Redis node received; null when the consumer binary has no such counter",
		"redis_commands_sent_per_registered_row":                "the consumers' bulkreg_consumer_redis_commands_total over the same span ÷ registered_rows (a script is one command)",
		"redis_commands_executed_per_registered_row":            "redis-server's total_commands_processed over the same span ÷ registered_rows (commands run inside scripts included)",
		"redis_commands_executed_per_registered_row_by_command": "the same, per command, from INFO commandstats (calls); the sampling INFOs themselves show as info",
		"consumer_peak_rss_mib":                                 "VmHWM of each consumer process at the end of the scenario",
		"finish_windows_max":                                    "per seller group: the largest (seller's last registration − the run's first registration) ÷ the app-wide window (the seller window without one)",
		"global_limit.periods":                                  "the run from its first registration to its last cut into consecutive periods of the app-wide window; accepted = 201s of all sellers in the period; seller_limits_capacity = how many the sellers' own limits alone would have allowed in it (each seller's rows left, placed as early as a sliding log of limit per window + margin allows after its earlier registrations); counted = capacity ≥ the app-wide limit, i.e. rows were waiting that only the app-wide limit held back",
		"global_limit.window_used_fraction_while_rows_wait":     "Σ accepted ÷ (app-wide limit × periods counted); the worst period's accepted ÷ limit beside it; null when no period counted",
		"rate_limited_429":                                      "429 answers of the sandbox, every limit together",
		"redis_cpu_us_per_registered_row":                       "redis-server's user + system CPU (INFO cpu) over the same span ÷ registered_rows",
		"machine_cpu_s":                                         "CPU seconds over the same span: busy_all_processes from /proc/stat (every CPU, idle and iowait left out), consumers as above, redis from INFO cpu, bench_process from /proc/self/stat; other_processes is the rest, work on the machine that is not this scenario's and skews it",
		"consumer_counters":                                     "these consumer counters over the same span, summed over the consumers; one the binary lacks is left out",
		"reserve_latency_ms":                                    "quantiles of the consumers' bulkreg_consumer_reserve_seconds over the same span (a reservation from the call to the throttle's answer, waiting for a shared pipeline included), buckets summed over the consumers and read as Prometheus's histogram_quantile does (linear within a bucket; the buckets grow by 1.5×, so within 25 %); count = reservations; null for a build without the histogram",
		"redis_pipelining":                                      "the consumers' --redis-pipelining (autopipe, goredis or none); absent: the binary's default",
		"round":                                                 "with -rounds N, which round (1 to N) of the interleaved runs this is",
	}
}

func main() {
	which := flag.String("scenario", "all", "comma-separated scenarios: one-seller, many-sellers, global, or all")
	window := flag.Duration("window", 0, "override the seller window (and an equal app-wide window) of every scenario; 0 keeps 3s")
	consumerBin := flag.String("consumer-bin", "", "cmd/consumer binary to run, for example an older build (default: built from this tree)")
	manySellers := flag.Int("sellers", 0, "override the number of sellers of many-sellers (500 rows each); 0 keeps 100. A lighter load lets an older, slower consumer finish, so CPU per row can be compared in the same session")
	timesDir := flag.String("times", "", "also write each scenario's registration times, per seller in seconds from the run's first, to DIR/<scenario>-times.json (to see where a slow seller lost its time)")
	pipelining := flag.String("redis-pipelining", "", "comma-separated --redis-pipelining values of the consumers (autopipe, goredis, none), each scenario run once with each, interleaved; empty: the consumer's default")
	rounds := flag.Int("rounds", 1, "run every scenario (with every -redis-pipelining) this many times, round after round, so that what is compared is interleaved")
	pause := flag.Duration("pause", 0, "wait this long between two runs, so one run's load does not skew the next")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	chosen, err := choose(*which)
	if err == nil && *window < 0 {
		err = fmt.Errorf("-window is %s, it must be positive (or 0 for each scenario's own)", *window)
	}
	if err == nil && *manySellers < 0 {
		err = fmt.Errorf("-sellers is %d, it must be positive (or 0 for 100)", *manySellers)
	}
	if err == nil && *manySellers > 0 && !slices.ContainsFunc(chosen, func(sc scenario) bool { return sc.Name == "many-sellers" }) {
		err = errors.New("-sellers changes the many-sellers scenario, which -scenario does not run")
	}
	var modes []string
	if err == nil {
		modes, err = pipeliningModes(*pipelining)
	}
	if err == nil && *rounds < 1 {
		err = fmt.Errorf("-rounds is %d, it must be at least 1", *rounds)
	}
	if err == nil && *pause < 0 {
		err = fmt.Errorf("-pause is %s, it must not be negative", *pause)
	}
	if err == nil && *timesDir != "" {
		// Made before the runs, so a directory that cannot be written
		// fails now and not after minutes of work.
		if mkErr := os.MkdirAll(*timesDir, 0o755); mkErr != nil {
			err = fmt.Errorf("-times: %w", mkErr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "bulkreg-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	bin, err := consumerBinary(dir, *consumerBin)
	if err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}

	var out []result
	for round := 1; round <= *rounds; round++ {
		for _, sc := range chosen {
			if *manySellers > 0 && sc.Name == "many-sellers" {
				sc.Groups = []sellerGroup{{*manySellers, sc.Groups[0].RowsEach}}
			}
			if *window > 0 {
				if sc.GlobalWindow == sc.Window {
					sc.GlobalWindow = *window
				}
				sc.Window = *window
			}
			for _, mode := range modes {
				if len(out) > 0 {
					time.Sleep(*pause)
				}
				r, err := run(context.Background(), sc, mode, bin.Path, dir, log)
				if err != nil {
					os.RemoveAll(dir)
					fmt.Fprintln(os.Stderr, "bench:", runName(sc.Name, mode, round, *rounds)+":", err)
					os.Exit(1)
				}
				r.Round = round
				if *timesDir != "" {
					if err := writeTimes(filepath.Join(*timesDir, runName(sc.Name, mode, round, *rounds)+"-times.json"), r.times); err != nil {
						os.RemoveAll(dir)
						fmt.Fprintln(os.Stderr, "bench:", err)
						os.Exit(1)
					}
				}
				out = append(out, r)
				fmt.Fprintf(os.Stderr, "bench: %s done: %s\n", runName(sc.Name, mode, round, *rounds), brief(r))
			}
		}
	}
	os.RemoveAll(dir)
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{
		"machine":         machine(),
		"consumer_binary": bin,
		"note": "windows shrunk from 60 s; the broker, Redis, the sandbox and every consumer share this machine, " +
			"so the figures include their contention",
		"definitions": definitions(),
		"results":     out,
	}); err != nil {
		fmt.Fprintln(os.Stderr, "bench: write the JSON:", err)
		os.Exit(1)
	}
}

// choose resolves -scenario into scenarios, in the order given.
func choose(which string) ([]scenario, error) {
	all := scenarios()
	var names []string
	for _, sc := range all {
		names = append(names, sc.Name)
	}
	if which == "all" {
		return all, nil
	}
	var out []scenario
	for name := range strings.SplitSeq(which, ",") {
		i := slices.IndexFunc(all, func(sc scenario) bool { return sc.Name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("-scenario %q: no scenario %q; choose from %s or all", which, name, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// binaryInfo says which consumer was measured.
type binaryInfo struct {
	Path         string `json:"path"`
	BuiltByBench bool   `json:"built_from_this_tree_by_bench"`
	GoVersion    string `json:"go_version,omitempty"`
	Revision     string `json:"vcs_revision,omitempty"`
	RevisionAt   string `json:"vcs_time,omitempty"`
	Modified     string `json:"vcs_modified,omitempty"`
}

// consumerBinary builds cmd/consumer from this tree into dir, or checks the
// one given with -consumer-bin, and reads what the Go toolchain stamped in it.
func consumerBinary(dir, given string) (binaryInfo, error) {
	b := binaryInfo{Path: given}
	if given == "" {
		b.Path, b.BuiltByBench = filepath.Join(dir, "consumer"), true
		if out, err := exec.Command("go", "build", "-o", b.Path, "github.com/bulkreg/bulkreg/cmd/consumer").CombinedOutput(); err != nil {
			return b, fmt.Errorf("build cmd/consumer: %w\n%s", err, out)
		}
		// go build does not stamp the revision in every checkout (a git
		// worktree here), so ask git.
		if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
			b.Revision = strings.TrimSpace(string(out))
		}
		if out, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
			b.Modified = strconv.FormatBool(len(out) > 0)
		}
	} else {
		abs, err := filepath.Abs(given)
		if err != nil {
			return b, fmt.Errorf("-consumer-bin %s: %w", given, err)
		}
		st, err := os.Stat(abs)
		if err != nil {
			return b, fmt.Errorf("-consumer-bin: %w", err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return b, fmt.Errorf("-consumer-bin %s is not an executable file", given)
		}
		b.Path = abs
	}
	if bi, err := buildinfo.ReadFile(b.Path); err == nil {
		b.GoVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.RevisionAt = s.Value
			case "vcs.modified":
				b.Modified = s.Value
			}
		}
	}
	return b, nil
}

func run(ctx context.Context, sc scenario, pipelining, bin, parent string, log *slog.Logger) (result, error) {
	dir, err := os.MkdirTemp(parent, sc.Name+"-")
	if err != nil {
		return result{}, err
	}
	res := result{Scenario: sc.Name, RedisPipelining: pipelining, LoadAvg1mAtStart: loadAvg(), Settings: settingsJSON{
		Groups: sc.Groups, Sellers: sc.sellers(), Rows: sc.rows(), Consumers: sc.Consumers, Partitions: sc.Partitions,
		LimitPerSeller: sc.Limit, WindowS: sc.Window.Seconds(), MarginS: sc.Margin.Seconds(),
		GlobalLimit: sc.GlobalLimit, GlobalWindowS: sc.GlobalWindow.Seconds(), LatencyS: sc.Latency.Seconds(),
	}}

	topic := bulkreg.DefaultTopic
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(sc.Partitions), topic, bulkreg.DLQTopic(topic)),
		kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		return res, err
	}
	defer kc.Close()
	brokers := kc.ListenAddrs()

	rp, err := redisproc.Start(ctx, dir, 0)
	if err != nil {
		return res, err
	}
	defer rp.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: rp.Addr})
	defer rdb.Close()
	// A new Redis, prepared as an operator does (producer redis-init), so
	// the first window is not held as after a loss and the makespan measures pacing.
	if _, err := throttle.Initialize(ctx, rdb); err != nil {
		return res, err
	}

	opts := sandbox.Options{Limit: sc.Limit, Window: sc.Window, Policy: "sliding", Latency: sc.Latency, Logger: log}
	opts.GlobalLimit, opts.GlobalWindow = sc.GlobalLimit, sc.GlobalWindow
	sb, err := sandbox.New(opts)
	if err != nil {
		return res, err
	}
	// Counted here so waiting for the last row does not take the sandbox's
	// lock (Audit) every poll while 4,000 calls a second want it.
	var requests, created atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		rec := &statusRecorder{ResponseWriter: w}
		sb.ServeHTTP(rec, r)
		if rec.status == http.StatusCreated {
			created.Add(1)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	var procs []*exec.Cmd
	var metricsAddrs []string
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	// All at once: ports taken one by one may repeat.
	ports, err := redisproc.FreePorts(sc.Consumers)
	if err != nil {
		return res, err
	}
	for i, port := range ports {
		metricsAddr := fmt.Sprintf("127.0.0.1:%d", port)
		metricsAddrs = append(metricsAddrs, metricsAddr)
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(),
			"BULKREG_KAFKA_BROKERS="+strings.Join(brokers, ","), "BULKREG_TOPIC="+topic, "BULKREG_GROUP=bench",
			"BULKREG_REDIS_ADDRS="+rp.Addr, "BULKREG_REGISTRY_URL=http://"+ln.Addr().String(),
			"BULKREG_LIMIT="+strconv.Itoa(sc.Limit), "BULKREG_WINDOW="+sc.Window.String(), "BULKREG_MARGIN="+sc.Margin.String(),
			"BULKREG_SESSION_TIMEOUT=3s", "BULKREG_HEARTBEAT_INTERVAL=300ms", "BULKREG_DRAIN_TIMEOUT=2s", "BULKREG_METRICS_ADDR="+metricsAddr, "BULKREG_LOG_LEVEL=warn")
		if pipelining != "" {
			cmd.Env = append(cmd.Env, "BULKREG_REDIS_PIPELINING="+pipelining)
		}
		if sc.GlobalLimit > 0 {
			cmd.Env = append(cmd.Env, "BULKREG_GLOBAL_LIMIT="+strconv.Itoa(sc.GlobalLimit), "BULKREG_GLOBAL_WINDOW="+sc.GlobalWindow.String())
		}
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("consumer-%d.log", i)))
		if err != nil {
			return res, err
		}
		defer logf.Close()
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return res, fmt.Errorf("start %s: %w", bin, err)
		}
		procs = append(procs, cmd)
	}
	if err := waitStable(ctx, brokers, "bench", sc.Consumers); err != nil {
		return res, fmt.Errorf("%w; first consumer's log:\n%s", err, logTail(filepath.Join(dir, "consumer-0.log")))
	}

	before, err := sampleAll(ctx, rdb, procs, metricsAddrs)
	if err != nil {
		return res, err
	}
	start := time.Now()
	if err := publish(ctx, brokers, topic, sc); err != nil {
		return res, err
	}
	res.PublishS = round(time.Since(start).Seconds())
	total := sc.rows()
	var longest time.Duration
	for _, g := range sc.Groups {
		longest = max(longest, lowerBound(g.RowsEach, sc.Limit, sc.Window, sc.Margin))
	}
	deadline := time.Now().Add(3*longest + 2*time.Minute)
	for {
		if created.Load() >= int64(total) {
			n := 0
			for _, a := range sb.Audit().Sellers {
				n += a.Products
			}
			if n >= total {
				break
			}
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("only %d of %d rows registered (201) by the deadline; first consumer's log:\n%s",
				created.Load(), total, logTail(filepath.Join(dir, "consumer-0.log")))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Let the last results be recorded and offsets committed: that work
	// belongs to the rows too.
	time.Sleep(time.Second)
	after, err := sampleAll(ctx, rdb, procs, metricsAddrs)
	if err != nil {
		return res, err
	}

	audit := sb.Audit()
	times, rows := map[string][]time.Time{}, map[string]int{}
	groupRatios := make([][]float64, len(sc.Groups))
	finish := make([]time.Duration, len(sc.Groups))
	var ratios []float64
	sc.eachSeller(func(id string, _, n int) {
		times[id], rows[id] = sb.AcceptedTimes(id), n
	})
	first, last := span(times)
	res.times = map[string][]float64{}
	for id, ts := range times {
		for _, t := range ts {
			res.times[id] = append(res.times[id], round(t.Sub(first).Seconds()))
		}
	}
	if sc.sellers() <= 20 { // a hundred would bury the rest of the JSON
		res.SellerRatios = map[string]float64{}
	}
	sc.eachSeller(func(id string, g, n int) {
		a := audit.Sellers[id]
		res.RegisteredRows += a.Products
		res.Accepted += a.Accepted
		res.Replays += a.Replays
		res.RateLimited += a.RateLimited
		res.MaxInWindow = max(res.MaxInWindow, a.MaxInWindow)
		if ts := times[id]; len(ts) > 0 {
			finish[g] = max(finish[g], ts[len(ts)-1].Sub(first))
		}
		if lb := lowerBound(n, sc.Limit, sc.Window, sc.Margin); lb > 0 {
			r := a.Last.Sub(a.First).Seconds() / lb.Seconds()
			ratios = append(ratios, r)
			groupRatios[g] = append(groupRatios[g], r)
			if res.SellerRatios != nil {
				res.SellerRatios[id] = round(r)
			}
		}
	})
	res.APIRequests = requests.Load()
	res.Ratio = summarize(ratios)
	for g, grp := range sc.Groups {
		res.Groups = append(res.Groups, groupResult{sellerGroup: grp,
			LowerBoundS:      lowerBound(grp.RowsEach, sc.Limit, sc.Window, sc.Margin).Seconds(),
			Ratio:            summarize(groupRatios[g]),
			FinishWindowsMax: round(finish[g].Seconds() / sc.finishWindow().Seconds()),
		})
	}
	res.FirstToLastS = round(last.Sub(first).Seconds())
	res.PublishToLastS = round(last.Sub(start).Seconds())
	if d := last.Sub(first).Seconds(); d > 0 {
		res.RegistrationsPerS = math.Round(float64(res.RegisteredRows) / d)
	}
	if sc.GlobalLimit > 0 {
		periods, used, worst := globalUse(times, rows, sc.Limit, sc.Window, sc.Margin, sc.GlobalLimit, sc.GlobalWindow)
		gr := &globalResult{Periods: periods}
		for _, p := range periods {
			if p.Counted {
				gr.PeriodsCounted++
			}
		}
		if !math.IsNaN(used) {
			gr.UsedFraction, gr.UsedFractionWorst = ptr(round(used)), ptr(round(worst))
		}
		res.Global = gr
	}

	perRow := func(x float64) float64 { return x / float64(max(res.RegisteredRows, 1)) }
	var cpu, sent, trips float64
	haveTrips := true
	for i := range procs {
		cpu += after.consumers[i].cpuS - before.consumers[i].cpuS
		sent += after.consumers[i].commands - before.consumers[i].commands
		haveTrips = haveTrips && after.consumers[i].roundTrips != nil && before.consumers[i].roundTrips != nil
		if haveTrips {
			trips += *after.consumers[i].roundTrips - *before.consumers[i].roundTrips
		}
		mib := peakRSS(procs[i].Process.Pid)
		res.PeakRSSMiB = append(res.PeakRSSMiB, round(mib))
		res.PeakRSSMiBMax = max(res.PeakRSSMiBMax, round(mib))
	}
	res.CPUS, res.CPUUsPerRow = round(cpu), math.Round(perRow(cpu)*1e6)
	res.CommandsSent, res.CommandsSentPerRow = sent, round(perRow(sent))
	if haveTrips {
		res.RoundTrips, res.RoundTripsPerRow = ptr(trips), ptr(round(perRow(trips)))
	}
	res.ReserveLatency = reserveLatency(before.consumers, after.consumers)
	redisCPU := after.redisCPUS - before.redisCPUS
	res.RedisCPUUsPerRow = math.Round(perRow(redisCPU) * 1e6)
	res.CPU = cpuShare{Busy: round(after.machineBusyS - before.machineBusyS), Consumers: round(cpu), Redis: round(redisCPU),
		Bench: round(after.benchCPUS - before.benchCPUS)}
	res.CPU.Other = round(res.CPU.Busy - res.CPU.Consumers - res.CPU.Redis - res.CPU.Bench)
	res.Counters = map[string]float64{}
	for _, name := range diagnostics {
		sum, ok := 0.0, true
		for i := range procs {
			a, okA := after.consumers[i].metrics[name]
			b, okB := before.consumers[i].metrics[name]
			ok = ok && okA && okB
			sum += a - b
		}
		if ok {
			res.Counters[name] = sum
		}
	}
	// −1: the first sample's INFO is itself a command.
	res.CommandsExecuted = after.redisCommands - before.redisCommands - 1
	res.CommandsExecutedPerRow = round(perRow(float64(res.CommandsExecuted)))
	res.CommandsExecutedByName = map[string]float64{}
	for name, calls := range after.redisByCommand {
		if per := round(perRow(float64(calls - before.redisByCommand[name]))); per > 0 {
			res.CommandsExecutedByName[name] = per
		}
	}
	return res, nil
}

func ptr[T any](v T) *T { return &v }

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// sample is the consumers', Redis's and the machine's counters at one moment.
type sample struct {
	consumers      []consumerSample
	redisCommands  int64
	redisByCommand map[string]int64 // calls, from INFO commandstats
	redisCPUS      float64
	benchCPUS      float64 // this process: the sandbox and the broker
	machineBusyS   float64 // every CPU, every process
}

type consumerSample struct {
	cpuS       float64
	commands   float64
	roundTrips *float64 // nil: the binary has no such counter
	metrics    map[string]float64
}

// diagnostics are consumer counters printed as they are (summed over the
// consumers, over the scenario) when the binary has them: they explain a
// slow run (slots given back, rows handed back at a rebalance).
var diagnostics = [...]string{
	"bulkreg_consumer_slots_missed_total",
	"bulkreg_consumer_rows_abandoned_total",
	"bulkreg_consumer_rebalances_total",
	"bulkreg_consumer_redis_unavailable_total",
	"bulkreg_consumer_rate_limited_total",
}

func sampleAll(ctx context.Context, rdb *redis.Client, procs []*exec.Cmd, metricsAddrs []string) (sample, error) {
	var s sample
	client := &http.Client{Timeout: 5 * time.Second}
	for i, p := range procs {
		m, err := scrape(ctx, client, metricsAddrs[i])
		if err != nil {
			return s, err
		}
		c := consumerSample{cpuS: cpuSeconds(fmt.Sprintf("/proc/%d/stat", p.Process.Pid)), metrics: m}
		var ok bool
		if c.commands, ok = m["bulkreg_consumer_redis_commands_total"]; !ok {
			return s, fmt.Errorf("consumer %d's /metrics has no bulkreg_consumer_redis_commands_total", i)
		}
		if v, ok := m["bulkreg_consumer_redis_roundtrips_total"]; ok {
			c.roundTrips = &v
		}
		s.consumers = append(s.consumers, c)
	}
	var err error
	if s.redisCommands, s.redisCPUS, s.redisByCommand, err = redisStats(ctx, rdb); err != nil {
		return s, err
	}
	s.benchCPUS, s.machineBusyS = cpuSeconds("/proc/self/stat"), machineBusy()
	return s, nil
}

func publish(ctx context.Context, brokers []string, topic string, sc scenario) error {
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Hash{}, BatchSize: 500, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	now := time.Now()
	var err error
	sc.eachSeller(func(seller string, _, rows int) {
		if err != nil {
			return
		}
		msgs := make([]kafka.Message, 0, rows)
		for i := 1; i <= rows; i++ {
			p := bulkreg.Product{SellerSKU: fmt.Sprintf("%s-%d", seller, i), Name: "bench product", CategoryCode: "50000001", Price: 12000, Stock: 10}
			v, merr := json.Marshal(bulkreg.NewMessage("up-"+seller, seller, i, p, now))
			if merr != nil {
				err = merr
				return
			}
			msgs = append(msgs, kafka.Message{Key: []byte(seller), Value: v})
		}
		if werr := w.WriteMessages(ctx, msgs...); werr != nil {
			err = fmt.Errorf("publish seller %s: %w", seller, werr)
		}
	})
	return err
}

func waitStable(ctx context.Context, brokers []string, group string, n int) error {
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].GroupState == "Stable" && len(resp.Groups[0].Members) == n {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("consumer group %s did not reach %d stable members within 30 s", group, n)
}

// redisStats reads, from one INFO, the commands Redis has processed, the
// CPU it has used, and how often it has run each command (commandstats:
// "cmdstat_zadd:calls=12,usec=…", subcommands as "client|setname").
func redisStats(ctx context.Context, rdb *redis.Client) (commands int64, cpuS float64, byCommand map[string]int64, err error) {
	info, err := rdb.Info(ctx, "stats", "cpu", "commandstats").Result()
	if err != nil {
		return 0, 0, nil, fmt.Errorf("INFO of the bench's Redis: %w", err)
	}
	found := 0
	byCommand = map[string]int64{}
	for line := range strings.SplitSeq(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "total_commands_processed":
			commands, err = strconv.ParseInt(v, 10, 64)
			found++
		case "used_cpu_user", "used_cpu_sys":
			var f float64
			f, err = strconv.ParseFloat(v, 64)
			cpuS += f
			found++
		default:
			if name, ok := strings.CutPrefix(k, "cmdstat_"); ok {
				calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
				byCommand[name], err = strconv.ParseInt(calls, 10, 64)
			}
		}
		if err != nil {
			return 0, 0, nil, fmt.Errorf("INFO %s: %w", k, err)
		}
	}
	if found != 3 {
		return 0, 0, nil, errors.New("INFO of the bench's Redis lacks total_commands_processed, used_cpu_user or used_cpu_sys")
	}
	return commands, cpuS, byCommand, nil
}

// machineBusy is the CPU time every CPU of the machine has spent on
// anything but idling since boot (/proc/stat, in USER_HZ ticks of 10 ms).
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	busy := 0.0
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		x, _ := strconv.ParseFloat(v, 64)
		busy += x
	}
	return busy / 100
}

// peakRSS is a process's peak resident set size (VmHWM) in MiB.
func peakRSS(pid int) float64 {
	return kibToMiB(procField(fmt.Sprintf("/proc/%d/status", pid), "VmHWM:"))
}

// kibToMiB reads a /proc size ("1234 kB") as MiB; 0 when unreadable.
func kibToMiB(v string) float64 {
	kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 64)
	return round(kb / 1024)
}

// cpuSeconds is the user + system CPU time a live process has used so far,
// from its /proc/PID/stat (fields 14 and 15, in USER_HZ ticks, 100 on Linux).
func cpuSeconds(statPath string) float64 {
	b, err := os.ReadFile(statPath)
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after it are
	// counted from its closing parenthesis.
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest) // f[0] is field 3
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// procField is the value after the first line starting with key in a
// /proc file, trimmed; "" when there is none.
func procField(path, key string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return ""
}

type machineInfo struct {
	NProc     int     `json:"nproc"`
	CPUModel  string  `json:"cpu_model"`
	MemMiB    float64 `json:"mem_total_mib"`
	Kernel    string  `json:"kernel"`
	GoVersion string  `json:"go_version_of_bench"`
	LoadAvg1m float64 `json:"load_avg_1m_at_end"`
}

func machine() machineInfo {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return machineInfo{
		NProc:     runtime.NumCPU(),
		CPUModel:  procField("/proc/cpuinfo", "model name"),
		MemMiB:    kibToMiB(procField("/proc/meminfo", "MemTotal:")),
		Kernel:    strings.TrimSpace(string(kernel)),
		GoVersion: runtime.Version(),
		LoadAvg1m: loadAvg(),
	}
}

// loadAvg is the 1-minute load average: other work on the machine skews
// every figure, and this says how much there was.
func loadAvg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0 // unknown; JSON has no NaN
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// scrape reads the plain samples (no labels) of a consumer's /metrics, and
// the buckets of the reservation histogram (keyed by name and label).
func scrape(ctx context.Context, client *http.Client, addr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape a consumer's /metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s/metrics: %w", addr, err)
	}
	m := map[string]float64{}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") || strings.Contains(name, "{") && !strings.HasPrefix(name, reserveHistogram+"_bucket{") {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			m[name] = f
		}
	}
	return m, nil
}

// logTail is the end of a consumer's log, for an error message.
func logTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
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
