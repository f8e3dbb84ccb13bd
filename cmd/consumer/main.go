// Command consumer registers the rows of uploads: it joins the consumer group
// on the rows topic and calls the registration API for each row at the time
// the shared throttle grants. Run more processes with the same group id to
// scale. Every setting is a BULKREG_* environment variable or a flag of the
// same name in kebab case (--kafka-brokers); -h lists them.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/consumer"
	"github.com/bulkreg/bulkreg/internal/autopipe"
	"github.com/bulkreg/bulkreg/internal/buildinfo"
	"github.com/bulkreg/bulkreg/internal/cli"
	"github.com/bulkreg/bulkreg/internal/config"
	"github.com/bulkreg/bulkreg/internal/health"
	"github.com/bulkreg/bulkreg/internal/logsum"
	"github.com/bulkreg/bulkreg/internal/redischeck"
	"github.com/bulkreg/bulkreg/ledger"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command under internal/cli's convention: -h on stdout, a
// usage error in one line (exit 2), a failure while running exit 1.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if buildinfo.Requested(args) {
		fmt.Fprintln(stdout, buildinfo.Line("consumer"))
		return cli.ExitOK
	}
	if len(args) > 0 && args[0] == "completion" {
		fs, _, _ := bind(getenv)
		return cli.RunCompletion(cli.Command{Name: "consumer", Flags: fs}, args[1:], stdout, stderr)
	}
	s, err := parse(args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	}
	if err != nil {
		return cli.UsageError(stderr, "consumer", err)
	}
	if err := consume(ctx, s, stderr); err != nil {
		return cli.Failed(stderr, "consumer", err)
	}
	return cli.ExitOK
}

const usageHeader = `Usage: consumer [flags]
       consumer --version
       consumer completion bash|zsh|fish

Exit status: 0 stopped cleanly; 1 failed while running; 2 bad flags or
settings (one line on stderr naming the flag; nothing was started).

Every flag is also the BULKREG_* environment variable named in its help; a flag wins.

--policy is how the registration API counts its limit; its documentation on rate
limits says which:
  sliding       (the default, the contract) at most --limit calls in any trailing
                --window. Compliant with the two below as well (a bucket holding
                at least --limit), but slower at each window's start: after a
                seller's first --limit calls the next waits --window + --margin.
  fixed         the count starts over at fixed times: "--limit per minute, reset at
                the start of each minute" (windows aligned to the clock from the
                Unix epoch). --limit calls at once, the next at the next window's
                start; each window's last --margin stays unused. Redis's clock and
                the API's must agree (NTP) well within --margin.
  token-bucket  a bucket of capacity C refilled at R per second: --limit and
                --window give R (--limit 120 --window 1m for 2 a second), --burst C
                (at most --limit; a larger bucket is --limit C --window C/R).
                C calls at once, less --margin's worth, then one every
                --window / --limit.
A wrong choice costs 429s: fixed and token-bucket put more than --limit calls in
some trailing window, which a sliding-window API refuses. Set --policy alike for
every consumer and the producer (its finish estimate and compliance report).

On --metrics-addr: GET /metrics; GET /livez, 200 while the consumer runs (503:
restart it); GET /readyz, 200 while it is a member of its group's current
generation, Redis answers and a Kafka broker names the rows topic with its
leaders (checked every --readiness-interval, each check at most
--readiness-timeout), else 503 naming what is not ready; GET /healthz, 200
while the consumer runs, as JSON with "redis" telling whether Redis answers
(503 when it does not run).

`

// settings are the consumer's own settings, next to the shared ones.
type settings struct {
	shared          config.Config
	consumer        consumer.Config
	retry           registryclient.RetryPolicy
	registryTimeout time.Duration
	registryConns   int
	registryAuth    string
	registryPlain   bool
	maxWait         time.Duration
	policy          throttle.Policy // the throttle's, from the shared settings and the consumer's (Config.ThrottlePolicy)
	callRetention   time.Duration
	statusRetention time.Duration
	ledger          ledger.Options
	circuit         circuit.Settings
	shutdownTimeout time.Duration
	logLevel        string
	logRepeat       time.Duration
	pprofAddr       string          // servePprof; empty: no profiles
	readiness       health.Settings // /readyz's check of Kafka
	redisPipelining string          // checkPipelining

	// registered, when set, receives the metrics registry once every
	// collector is on it, and the consumer stops there without starting:
	// the docs' check (TestDocs) reads what the consumer really exports.
	registered func(*prometheus.Registry)
}

// bind registers every setting on a new FlagSet, each defaulting to its
// environment variable.
func bind(getenv func(string) string) (*flag.FlagSet, *settings, *config.Binder) {
	s := &settings{
		shared:          config.Default(),
		consumer:        consumer.DefaultConfig(),
		retry:           registryclient.DefaultRetryPolicy(),
		registryTimeout: 10 * time.Second,
		registryConns:   128,
		callRetention:   compliance.DefaultRetention,
		statusRetention: 7 * 24 * time.Hour,
		ledger:          ledger.Options{Retention: ledger.DefaultRetention, Lease: ledger.DefaultLease, AsideRetention: ledger.DefaultAsideRetention},
		circuit:         circuit.DefaultSettings(),
		shutdownTimeout: 45 * time.Second,
		logLevel:        "info",
		logRepeat:       logsum.DefaultInterval,
		redisPipelining: pipeAutopipe,
		readiness:       health.DefaultSettings(),
	}
	// Derived by the consumer package from the other settings unless set.
	s.consumer.SellerConcurrency = 0 // the limit
	s.consumer.MaxLateness = 0       // half the margin
	s.consumer.DrainTimeout = 0      // the longest the session timeout allows
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHeader)
		fs.PrintDefaults()
	}
	b := config.NewBinder(fs, getenv)
	s.shared.Bind(b)
	c := &s.consumer
	b.Duration(&c.HeartbeatInterval, "heartbeat-interval", "how often this member tells the group coordinator it is alive; at most a third of the session timeout")
	b.Duration(&c.RebalanceTimeout, "rebalance-timeout", "how long the coordinator waits for members to rejoin at a rebalance; above the drain timeout")
	b.Duration(&c.CommitInterval, "commit-interval", "how often finished offsets are committed")
	b.Duration(&c.DrainTimeout, "drain-timeout", "at a rebalance or shutdown, how long calls already made get to be answered and recorded; at most the session timeout − 2 × the heartbeat interval, since no heartbeat is sent meanwhile (0 = that much)")
	b.Duration(&s.shutdownTimeout, "shutdown-timeout", "after SIGTERM/SIGINT, exit after at most this long even if calls are still in progress")
	b.Int(&c.MaxInFlight, "max-in-flight", "most rows read and not finished, over all partitions; reading pauses at the cap")
	b.Int(&c.MaxInFlightPerPartition, "max-in-flight-per-partition", "most rows read and not finished per partition; keep it well above one upload (500 rows)")
	b.Int(&c.MaxDueNow, "max-due-now", "most slots due now that a consumer holds before calling; about what it can call within the maximum lateness (half the margin)")
	b.Int(&c.SellerConcurrency, "seller-concurrency", "most rows of one seller holding a throttle slot or calling at once (0 = the limit)")
	b.Int(&c.MaxRateLimited, "max-rate-limited", "429 answers one row may get before it is dead-lettered")
	b.Duration(&c.SellerProbeMin, "seller-probe-min", "first wait before the probe of a seller whose calls the registration API fails while none is answered (the seller is held: its rows wait and spend no attempt)")
	b.Duration(&c.SellerProbeMax, "seller-probe-max", "longest wait between two probes of a held seller (the wait doubles after each failed probe); 0: 15s, or half the window and margin when that is shorter, so the seller's page says failing for as long as the seller is held")
	b.Duration(&c.SellerHoldLimit, "seller-hold-limit", "a row held this long (its seller's calls all failing, none answered) is dead-lettered for an operator, and so is every row the fleet's circuit holds once it has been open this long (alert BulkregSellerHoldExpired)")
	b.Duration(&c.RedisRetryMin, "redis-retry-min", "first wait before asking Redis again when it does not answer")
	b.Duration(&c.RedisRetryMax, "redis-retry-max", "longest wait between attempts while Redis does not answer")
	b.Duration(&c.RedisProbeInterval, "redis-probe-interval", "how often Redis is pinged; no registry call is made while it does not answer")
	b.Duration(&c.ClockSync, "clock-sync", "how often Redis's clock is read in a round trip of its own, to place slots on this machine's clock; negative: never")
	b.Duration(&s.registryTimeout, "registry-timeout", "timeout of one call to the registration API")
	b.Secret(&s.registryAuth, "registry-auth-header", `a header sent with every registry call, written "Name: value" (for example "Authorization: Bearer <token>"); empty sends none; needs an https registry URL`)
	b.Bool(&s.registryPlain, "registry-insecure-auth", "allow the auth header over plain http to a loopback registry URL (a sandbox on this machine)")
	b.Int(&s.registryConns, "registry-max-conns", "most connections to, and calls in progress at, the registration API")
	b.Duration(&c.MaxLateness, "max-lateness", "a call that cannot start this soon after its slot takes a new slot instead (0 = half the margin)")
	b.Duration(&c.KeepWarm, "keep-warm", "while calls pause and rows wait, how often the connections to the registration API are used by a request that registers nothing (HEAD of the base URL) so they stay open (negative = never)")
	b.Duration(&s.retry.InitialInterval, "retry-initial", "first backoff after a transient registry failure")
	b.Duration(&s.retry.MaxInterval, "retry-max-interval", "longest backoff between attempts of one row")
	b.Duration(&s.retry.MaxElapsed, "retry-max-elapsed", "give a row up (dead-letter) after retrying this long")
	b.Int(&s.retry.MaxAttempts, "retry-max-attempts", "give a row up (dead-letter) after this many transient failures")
	b.Duration(&s.maxWait, "max-wait", "a throttle slot farther ahead than this is not taken yet, the row asks again later (0 = the session timeout: a crashed consumer's unused slots then delay its successor by at most that, two registry timeouts and one window)")
	b.Duration(&s.callRetention, "call-retention", "how long each call stays in the compliance history")
	b.Duration(&s.statusRetention, "status-retention", "how long an upload's row results are kept")
	b.Duration(&c.UploadPresenceSlack, "upload-presence-slack", "a row whose upload has no record is dead-lettered as a bad message only if Redis lost nothing of the upload's hash slot since this long before the row was queued, and the row is younger than --status-retention less this (0 = 10m)")
	b.Duration(&s.ledger.Retention, "ledger-retention", "how long a seller's SKU ledger (what it registered) is kept after the seller's last claim or registration; a re-upload after that registers again")
	b.Duration(&s.ledger.Lease, "ledger-lease", "how long a row's claim on its SKU holds without being renewed; after it another upload's row with that SKU may take it over")
	b.Duration(&s.ledger.AsideRetention, "ledger-aside-retention", "how long the Kafka records of a seller's dead-lettered rows are kept after its last one, so that a record read again (its consumer died before committing it) is not registered; at least the rows topic's retention")
	bindCircuit(b, &s.circuit)
	s.readiness.Bind(b, "Kafka (a connection of their own that asks for the rows topic's leaders)")
	b.String(&s.logLevel, "log-level", "debug, info, warn or error")
	b.Duration(&s.logRepeat, "log-repeat-interval", "a log line repeated with the same level and message is written once, then once per this interval with the count of repeats (repeated, within_seconds); 0 writes every line")
	b.String(&s.pprofAddr, "pprof-addr", "listen address of /debug/pprof (heap, CPU profile, trace), apart from --metrics-addr; empty (the default): not served. Anyone who reaches it can read the heap: keep it on loopback (127.0.0.1:6060) and reach it with kubectl port-forward")
	b.String(&s.redisPipelining, "redis-pipelining", "how the single Redis commands of many rows share round trips: autopipe (bulkreg's own, internal/autopipe), goredis (go-redis's AutoPipeline, its defaults), goredis-2x64 (the same with 2 batches of up to 64 in flight, as autopipe) or none (a round trip each); see ARCHITECTURE.md, \"What a row costs\"")
	return fs, s, b
}

// parse reads the settings: -h prints the usage to out and returns
// flag.ErrHelp; any other error is a usage error naming the flag or the
// stray argument, for the caller to print. No secret's value is ever in
// either.
func parse(args []string, getenv func(string) string, out io.Writer) (settings, error) {
	fs, s, b := bind(getenv)
	c := &s.consumer
	if err := cli.ParseFlags(fs, args, out); err != nil {
		return *s, err
	}
	var errs []error
	if err := b.Err(); err != nil {
		errs = append(errs, err)
	}
	if err := s.shared.Validate(); err != nil {
		errs = append(errs, err)
	}
	for name, d := range map[string]time.Duration{"ledger-retention": s.ledger.Retention, "ledger-lease": s.ledger.Lease, "ledger-aside-retention": s.ledger.AsideRetention} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("--%s (%s) must be greater than 0, got %s", name, config.EnvName(name), d))
		}
	}
	if err := checkCircuit(s.circuit, s.registryTimeout); err != nil {
		errs = append(errs, err)
	}
	if err := checkPipelining(s.redisPipelining); err != nil {
		errs = append(errs, err)
	}
	if err := s.readiness.Validate(); err != nil {
		errs = append(errs, err)
	}
	c.Brokers, c.Topic, c.Group, c.SessionTimeout = s.shared.KafkaBrokers, s.shared.Topic, s.shared.Group, s.shared.SessionTimeout
	c.MaxConcurrentCalls = s.registryConns
	// The hold after a loss of Redis's data covers a call counted until the
	// client abandons it.
	c.CallTimeout = s.registryTimeout
	s.policy = c.ThrottlePolicy(s.shared.Limit, s.shared.Window, s.shared.Margin)
	s.policy.Kind, s.policy.Burst = throttle.Kind(s.shared.Policy), s.shared.Burst
	s.policy.Global = throttle.Global{Limit: s.shared.GlobalLimit, Window: s.shared.GlobalWindow}
	if s.maxWait != 0 {
		s.policy.MaxWait = s.maxWait
	}
	if drain := c.WithDefaults(s.policy).DrainTimeout; s.shutdownTimeout <= drain {
		errs = append(errs, fmt.Errorf("--shutdown-timeout (%s) must be longer than --drain-timeout (%s)", s.shutdownTimeout, drain))
	}
	if len(errs) == 0 {
		c.KafkaDialer, c.KafkaTransport = s.shared.KafkaDialer(), s.shared.KafkaTransport()
		// Checked here too, so a wrong combination (a drain longer than
		// the session allows) stops the process before it joins anything.
		if err := c.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.logLevel)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level (%s): want debug, info, warn or error, got %q", config.EnvName("log-level"), s.logLevel))
	}
	if s.logRepeat < 0 {
		errs = append(errs, fmt.Errorf("--log-repeat-interval (%s) must not be negative (0 writes every line), got %s", config.EnvName("log-repeat-interval"), s.logRepeat))
	}
	return *s, errors.Join(errs...)
}

// consume runs the consumer until ctx ends, then shuts it down; logs go to
// stderr.
func consume(ctx context.Context, s settings, stderr io.Writer) error {
	var level slog.Level
	_ = level.UnmarshalText([]byte(s.logLevel)) // checked by parse
	// Closed last: the counts of lines repeated until shutdown are written.
	summarised := logsum.New(slog.NewJSONHandler(stderr, config.LogOptions(level)), s.logRepeat)
	defer summarised.Close()
	log := slog.New(summarised)
	config.RouteRedisLogs(log)
	s.consumer.Logger = log

	redisDirect := s.shared.RedisClient()
	defer redisDirect.Close()
	// First, so the hooks after it (the command counter) see the pipelines
	// it sends: the commands of hundreds of rows share round trips.
	rdb, closePipelining, err := pipelined(redisDirect, s.redisPipelining)
	if err != nil {
		return err
	}
	defer closePipelining()
	th, err := throttle.New(rdb, s.policy)
	if err != nil {
		return fmt.Errorf("throttle: %w", err)
	}
	reg, err := registryclient.New(registryclient.Options{BaseURL: s.shared.RegistryURL, Timeout: s.registryTimeout, MaxConnsPerHost: s.registryConns, AuthHeader: s.registryAuth, AllowInsecureAuth: s.registryPlain})
	if err != nil {
		return fmt.Errorf("registry client: %w", err)
	}
	breaker, err := circuit.New(rdb, circuitSettings(s.circuit))
	if err != nil {
		return fmt.Errorf("circuit breaker: %w", err)
	}
	metrics := prometheus.NewRegistry()
	// The scheduler's latencies besides the defaults: their count is how
	// often goroutines are woken, the hand-offs a row costs (bench).
	goMetrics := collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/latencies:seconds$`)}))
	metrics.MustRegister(goMetrics, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector("consumer"))
	redisCommands := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "bulkreg_consumer_redis_commands_total",
		Help: "Commands this consumer sent to Redis (a script counts as one).",
	})
	redisRoundTrips := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "bulkreg_consumer_redis_roundtrips_total",
		Help: "Round trips this consumer made to Redis: one per command or pipeline sent to a node and answered (a pipeline to a Cluster counts once per node it reaches; setting up a connection counts too).",
	})
	reserveTime := newReserveHistogram()
	metrics.MustRegister(redisCommands, redisRoundTrips, reserveTime)
	countRedis(redisDirect, redisCommands, redisRoundTrips)
	status := uploadstatus.New(rdb, s.statusRetention)
	c, err := consumer.New(s.consumer, consumer.Deps{
		Throttle:   timedThrottle{Throttle: th, reserve: reserveTime},
		Registry:   reg,
		Status:     status,
		Uploads:    status,
		Calls:      compliance.NewRecorder(rdb, s.callRetention),
		Ledger:     ledger.New(rdb, s.ledger),
		Retry:      s.retry,
		PingRedis:  func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
		RedisTime:  func(ctx context.Context) (time.Time, error) { return redisDirect.Time(autopipe.Direct(ctx)).Result() },
		Registerer: metrics,
		Circuit:    breaker,
	})
	if err != nil {
		return err
	}
	if s.registered != nil {
		s.registered(metrics)
		return nil
	}
	if err := checkRedis(ctx, redisDirect, log); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", s.shared.MetricsAddr)
	if err != nil {
		return fmt.Errorf("listen for /metrics on %s: %w", s.shared.MetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
	mux.Handle("/healthz", healthz(c.Health, c.RedisHealthy))
	monCtx, stopMonitor := context.WithCancel(context.Background())
	defer stopMonitor()
	kafkaCheck := health.Check{Name: "kafka", Probe: health.Kafka(s.consumer.KafkaDialer, s.shared.KafkaBrokers, s.shared.Topic)}
	mon := s.readiness.Monitor(log, kafkaCheck)
	go mon.Run(monCtx)
	mux.Handle("GET /livez", health.Live(c.Health))
	mux.Handle("GET /readyz", health.Ready(
		func() error { return stopping(ctx) }, c.Health, c.InGroup,
		func() error { return redisAnswers(c.RedisHealthy()) }, mon.Err))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	stopPprof, err := servePprof(s.pprofAddr, log)
	if err != nil {
		return err
	}
	defer stopPprof()

	log.Info("consumer starting", "group", s.shared.Group, "topic", s.shared.Topic, "brokers", s.shared.KafkaBrokers,
		"limit", s.shared.Limit, "window", s.shared.Window, "margin", s.shared.Margin, "policy", s.shared.Policy, "burst", s.shared.Burst,
		"global_limit", s.shared.GlobalLimit, "global_window", s.shared.GlobalWindow, "metrics", ln.Addr().String())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: no new rows, giving back unused slots, finishing calls in progress", "timeout", s.shutdownTimeout)
	select {
	case err := <-done:
		log.Info("consumer stopped")
		return err
	case <-time.After(s.shutdownTimeout):
		return fmt.Errorf("shutdown took longer than %s; unfinished rows will be read again by the group", s.shutdownTimeout)
	}
}

// stopping fails /readyz once the consumer was told to stop, so no probe
// counts it in while it drains.
func stopping(ctx context.Context) error {
	if ctx.Err() != nil {
		return errors.New("shutting down")
	}
	return nil
}

// redisAnswers is /readyz's Redis condition: the consumer's own probe
// (--redis-probe-interval) and its calls tell whether Redis answers; while
// it does not, no registry call is made.
func redisAnswers(ok bool) error {
	if !ok {
		return errors.New("redis: no answer to the last probe or command")
	}
	return nil
}

// checkRedis refuses a Redis that would evict keys or cannot run the
// scripts (internal/redischeck) before the consumer joins the group, with
// a bound of its own: a Redis that does not answer is logged and the
// consumer waits for it as it does for any outage.
func checkRedis(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(autopipe.Direct(ctx), 5*time.Second)
	defer cancel()
	return redischeck.Check(ctx, rdb, log)
}

// healthz answers 200 while the consumer runs and 503 with the reason
// otherwise. Redis being down is reported but keeps the answer 200: the
// consumer waits for it on its own, and restarting the process would not help.
func healthz(health func() error, redisOK func() bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, code := map[string]any{"ok": true, "redis": redisOK()}, http.StatusOK
		if err := health(); err != nil {
			status["ok"], status["error"], code = false, err.Error(), http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(status)
	})
}
