// Command registry-sandbox serves the reference registration API
// (internal/sandbox): the contract consumers are written against, with a
// strict per-seller limit, 429 + Retry-After, idempotency keys, GET /audit of
// what it counted, and optional injected faults. Every setting is a
// BULKREG_* environment variable or a flag of the same name in kebab case;
// -h lists them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bulkreg/bulkreg/internal/buildinfo"
	"github.com/bulkreg/bulkreg/internal/cli"
	"github.com/bulkreg/bulkreg/internal/config"
	"github.com/bulkreg/bulkreg/internal/sandbox"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command: internal/cli's convention for help, usage errors
// (exit 2) and completion; 1 when serving fails.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if buildinfo.Requested(args) {
		fmt.Fprintln(stdout, buildinfo.Line("registry-sandbox"))
		return cli.ExitOK
	}
	if len(args) > 0 && args[0] == "completion" {
		fs, _, _ := bind(getenv)
		return cli.RunCompletion(cli.Command{Name: "registry-sandbox", Flags: fs}, args[1:], stdout, stderr)
	}
	s, err := parse(args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	}
	if err != nil {
		return cli.UsageError(stderr, "registry-sandbox", err)
	}
	if err := start(ctx, s); err != nil {
		return cli.Failed(stderr, "registry-sandbox", err)
	}
	return cli.ExitOK
}

// settings are everything the sandbox reads from flags and environment.
type settings struct {
	listen   string
	opts     sandbox.Options
	timeouts timeouts
	logLevel slog.Level
	// logLevelText is --log-level as given, parsed into logLevel by check.
	logLevelText string
}

// timeouts are the HTTP server's limits.
type timeouts struct {
	readHeader, read, write, idle time.Duration
	// shutdown bounds the wait for answers in progress after SIGTERM. Its
	// default, 5 s, is below docker-compose's stop_grace_period (10 s) so the
	// process exits on its own rather than being killed.
	shutdown time.Duration
}

func defaultTimeouts() timeouts {
	return timeouts{readHeader: 5 * time.Second, read: 30 * time.Second, write: 30 * time.Second, idle: 2 * time.Minute, shutdown: 5 * time.Second}
}

const usageHeader = `registry-sandbox serves the reference registration API that bulkreg
consumers call, for tests, the demo and docker-compose:

  POST /v1/sellers/{seller_id}/products   register a product (Idempotency-Key required)
  GET  /audit                             what the API counted, per seller (JSON)
  GET  /healthz                           "ok"
  GET  /metrics                           Prometheus metrics

It accepts at most --limit registrations per seller in any trailing --window
(sliding; --policy fixed or token-bucket for an API that counts that way,
and to see what a client tuned for another API does) and, with --global-limit,
at most that many of all sellers together in any trailing --global-window
(sliding); beyond either it answers 429 with Retry-After and
X-RateLimit-Scope (seller or app), replays a known Idempotency-Key with 200 and refuses it
with 409 for a different product. The fault flags make it misbehave on
purpose so clients can be tested against a bad day.

Every setting is a flag or the BULKREG_* environment variable named beside it;
a flag wins over the environment.

Usage: registry-sandbox [flags]
       registry-sandbox --version
       registry-sandbox completion bash|zsh|fish

Exit status: 0 stopped cleanly; 1 cannot listen or serving failed; 2 bad flags
or settings (one line on stderr naming the flag).
`

// bind registers every setting on a new FlagSet, defaulting to the
// environment; check, after parsing, reports malformed or impossible values,
// each naming its flag.
func bind(getenv func(string) string) (*flag.FlagSet, *settings, func() error) {
	shared := config.Default()
	s := &settings{listen: "127.0.0.1:8081", opts: sandbox.Options{Limit: shared.Limit, Window: shared.Window, Policy: sandbox.PolicySliding,
		GlobalLimit: shared.GlobalLimit, GlobalWindow: shared.GlobalWindow},
		timeouts: defaultTimeouts()}
	s.logLevelText = "info"
	fs := flag.NewFlagSet("registry-sandbox", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHeader+"\nFlags:\n")
		fs.PrintDefaults()
	}
	b := config.NewBinder(fs, getenv)
	o := &s.opts
	b.String(&s.listen, "listen", "listen address; loopback by default, 0.0.0.0:8081 in a container")
	b.Int(&o.Limit, "limit", "registrations accepted per seller in any trailing window")
	b.Duration(&o.Window, "window", "the trailing window the limit applies to")
	b.String(&o.Policy, "policy", "how the limit is counted: sliding (the contract), fixed (--limit per --window aligned to the Unix epoch) or token-bucket (a bucket of --burst tokens refilled at --limit per --window)")
	b.Int(&o.Burst, "burst", "--policy token-bucket: the bucket's capacity (0 = --limit)")
	b.Int(&o.GlobalLimit, "global-limit", "registrations accepted for all sellers together in any trailing --global-window (sliding); 0 = no app-wide limit")
	b.Duration(&o.GlobalWindow, "global-window", "the trailing window the app-wide limit applies to")
	b.Duration(&o.Latency, "latency", "delay added to every answer, before the request is handled")
	b.Duration(&o.Jitter, "jitter", "random extra delay in [0, jitter) added to the latency")
	var envErrs []error
	fraction(fs, getenv, &envErrs, &o.FailRate, "fail-rate", "fraction of requests answered 503 without registering (0 to 1)")
	fraction(fs, getenv, &envErrs, &o.SlowRate, "slow-rate", "fraction of requests registered but answered only after --slow-delay (0 to 1)")
	b.Duration(&o.SlowDelay, "slow-delay", "how late a slow answer comes; above a client's timeout it provokes a retry")
	fraction(fs, getenv, &envErrs, &o.DropRate, "drop-rate", "fraction of requests whose connection is closed without an answer or registration (0 to 1)")
	b.Secret(&o.BasicAuth, "basic-auth", "user:password every registration must send as HTTP Basic auth (401 otherwise); empty: none")
	b.Int(&o.KeepRequests, "keep-requests", "how many requests to keep whole (method, target, header fields, body) for GET /admin/requests; 0 keeps none")
	tm := &s.timeouts
	b.Duration(&tm.readHeader, "read-header-timeout", "time to read a request's headers")
	b.Duration(&tm.read, "read-timeout", "time to read a whole request, body included")
	b.Duration(&tm.write, "write-timeout", "time to answer a request, on top of the fault delays (--latency, --jitter, --slow-delay)")
	b.Duration(&tm.idle, "idle-timeout", "how long an idle keep-alive connection is kept")
	b.Duration(&tm.shutdown, "shutdown-timeout", "after SIGTERM/SIGINT, how long answers in progress get before the process exits anyway")
	b.String(&s.logLevelText, "log-level", "debug (one line per answer), info, warn or error")
	return fs, s, func() error { return s.check(b, envErrs) }
}

// parse reads the settings. A malformed or impossible value, or a stray
// argument, is an error naming it; -h prints the usage to out and returns
// flag.ErrHelp.
func parse(args []string, getenv func(string) string, out io.Writer) (settings, error) {
	fs, s, check := bind(getenv)
	if err := cli.ParseFlags(fs, args, out); err != nil {
		return *s, err
	}
	return *s, check()
}

// check reports every malformed or impossible setting, naming its flag.
func (s *settings) check(b *config.Binder, envErrs []error) error {
	o, tm, logLevel := &s.opts, &s.timeouts, s.logLevelText
	errs := append([]error{b.Err()}, envErrs...)
	bad := func(flagName, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s (%s): %s", flagName, config.EnvName(flagName), fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(s.listen); err != nil {
		bad("listen", "must be host:port such as 127.0.0.1:8081, got %q", s.listen)
	}
	if o.Limit <= 0 {
		bad("limit", "must be greater than 0, got %d", o.Limit)
	}
	if o.Window <= 0 {
		bad("window", "must be greater than 0, got %s", o.Window)
	}
	if o.GlobalLimit < 0 {
		bad("global-limit", "must not be negative (0 means no app-wide limit), got %d", o.GlobalLimit)
	}
	if o.GlobalLimit > 0 && o.GlobalWindow <= 0 {
		bad("global-window", "must be greater than 0 when --global-limit is set, got %s", o.GlobalWindow)
	}
	switch o.Policy {
	case sandbox.PolicySliding, sandbox.PolicyFixed, sandbox.PolicyTokenBucket:
	default:
		bad("policy", "must be sliding, fixed or token-bucket, got %q", o.Policy)
	}
	switch {
	case o.Burst < 0:
		bad("burst", "must not be negative (0 means --limit), got %d", o.Burst)
	case o.Burst > 0 && o.Policy != sandbox.PolicyTokenBucket:
		bad("burst", "is the bucket of --policy token-bucket, but --policy is %q", o.Policy)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"latency", o.Latency}, {"jitter", o.Jitter}, {"slow-delay", o.SlowDelay}} {
		if d.v < 0 {
			bad(d.name, "must not be negative, got %s", d.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"read-header-timeout", tm.readHeader}, {"read-timeout", tm.read}, {"write-timeout", tm.write}, {"idle-timeout", tm.idle}, {"shutdown-timeout", tm.shutdown}} {
		if d.v <= 0 {
			bad(d.name, "must be greater than 0, got %s", d.v)
		}
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"fail-rate", o.FailRate}, {"slow-rate", o.SlowRate}, {"drop-rate", o.DropRate}} {
		if !(r.v >= 0 && r.v <= 1) {
			bad(r.name, "must be a fraction between 0 and 1, got %v", r.v)
		}
	}
	if err := s.logLevel.UnmarshalText([]byte(logLevel)); err != nil {
		bad("log-level", "must be debug, info, warn or error, got %q", logLevel)
	}
	return errors.Join(errs...)
}

// fraction binds a float setting the way config.Binder binds the others
// (the environment first, then the flag); Binder has no float kind.
func fraction(fs *flag.FlagSet, getenv func(string) string, errs *[]error, p *float64, name, usage string) {
	env := config.EnvName(name)
	if v := getenv(env); v != "" {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			*errs = append(*errs, fmt.Errorf("environment variable %s=%q is not a number such as 0.05", env, v))
		} else {
			*p = f
		}
	}
	fs.Float64Var(p, name, *p, fmt.Sprintf("%s (env %s)", usage, env))
}

// start serves until ctx ends, then lets answers in progress finish.
func start(ctx context.Context, s settings) error {
	log := slog.New(slog.NewJSONHandler(os.Stderr, config.LogOptions(s.logLevel)))
	ln, err := net.Listen("tcp", s.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.listen, err)
	}
	return serve(ctx, ln, s.opts, s.timeouts, log)
}

// serve runs the sandbox on ln until ctx ends, then lets answers in progress
// finish within tm.shutdown.
func serve(ctx context.Context, ln net.Listener, o sandbox.Options, tm timeouts, log *slog.Logger) error {
	o.Logger = log
	sb, err := sandbox.New(o)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           sb,
		ReadHeaderTimeout: tm.readHeader,
		ReadTimeout:       tm.read,
		// Room for the slowest answer the faults can make, or a slow answer
		// would be cut off by the server instead of timing out the client.
		WriteTimeout: tm.write + o.Latency + o.Jitter + o.SlowDelay,
		IdleTimeout:  tm.idle,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("registry sandbox listening", "addr", ln.Addr().String(), "limit", o.Limit, "window", o.Window, "policy", o.Policy, "burst", o.Burst,
		"global_limit", o.GlobalLimit, "global_window", o.GlobalWindow,
		"latency", o.Latency, "jitter", o.Jitter, "fail_rate", o.FailRate, "slow_rate", o.SlowRate, "slow_delay", o.SlowDelay, "drop_rate", o.DropRate)
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: no new connections, finishing answers in progress", "timeout", tm.shutdown)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tm.shutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("answers in progress did not finish within --shutdown-timeout %s, so the sandbox stopped without them: %w", tm.shutdown, err)
	}
	log.Info("registry sandbox stopped")
	return nil
}
