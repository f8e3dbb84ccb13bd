// Command devstack runs the whole of bulkreg in one process: an embedded
// Kafka-protocol broker, Redis, the sandbox registration API, the producer's
// upload service and several consumers.
//
//	devstack up     start everything, print the addresses, run until Ctrl-C
//	devstack demo   start everything, upload the sample spreadsheets of three
//	                sellers, show the throttle pacing them, print the
//	                compliance report; exit 0 only if every row was registered
//	                without a 429 and no window was exceeded
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/bulkreg/bulkreg/devstack"
	"github.com/bulkreg/bulkreg/internal/buildinfo"
	"github.com/bulkreg/bulkreg/internal/cli"
	"github.com/bulkreg/bulkreg/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

const usage = `devstack runs the whole of bulkreg in one process, for a first look and the demo:
an embedded Kafka-protocol broker (kfake), Redis (redis-server when installed,
otherwise an in-process stand-in that says so), the sandbox registration API,
the producer's upload service and several consumers in one group.

usage:
  devstack up   [flags]   start everything, print the addresses, run until Ctrl-C
  devstack demo [flags]   upload the sample spreadsheets of three sellers (500, 120
                          and 40 rows), show the throttle pacing them, print the
                          compliance report; exit 0 only when every row was
                          registered, no 429 was answered and no window exceeded
  devstack --version      print the build
  devstack completion bash|zsh|fish
                          print a shell completion script

"devstack demo --window 12s" shrinks the API's window so the demo takes about
a minute; the default is the real 60s (about 4 minutes for 500 rows).
Run "devstack up -h" or "devstack demo -h" for the flags.

exit status: 0 done (demo: every row registered, no 429, no window exceeded);
1 something failed or the demo's checks did not hold; 2 bad flags, arguments or
settings (one line on stderr naming what is wrong).
`

type settings struct {
	opts       devstack.Options
	partitions int
	testdata   string
	interval   time.Duration
	logLevel   string
	timeout    time.Duration
}

// bind registers the settings of cmd (up or demo) on a new FlagSet,
// defaulting to the environment.
func bind(cmd string, getenv func(string) string) (*flag.FlagSet, *settings, *config.Binder) {
	s := &settings{
		opts:       devstack.Options{Host: "127.0.0.1", Redis: "auto", Consumers: 3, Limit: 100, Window: time.Minute, Margin: 250 * time.Millisecond, Policy: "sliding", SessionTimeout: 10 * time.Second},
		partitions: 6,
		testdata:   "testdata/demo",
		interval:   2 * time.Second,
		logLevel:   "warn",
	}
	if cmd == "up" {
		// Ports an operator's tools default to, so `producer` and `consumer`
		// work against it without flags.
		s.opts.KafkaPort, s.opts.SandboxPort, s.opts.ProducerPort = 9092, 8081, 8080
		s.opts.AdminPort, s.opts.RedisPort = 9465, 6379
		s.logLevel = "info"
	}
	fs := flag.NewFlagSet("devstack "+cmd, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: devstack %s [flags]\n\n%s\n\nflags (each also the BULKREG_* variable named beside it; a flag wins):\n", cmd, summaries[cmd])
		fs.PrintDefaults()
	}
	b := config.NewBinder(fs, getenv)
	o := &s.opts
	b.String(&o.Host, "host", "interface every part listens on")
	b.Int(&o.KafkaPort, "kafka-port", "port of the embedded Kafka broker (0 = a free port)")
	b.Int(&o.SandboxPort, "sandbox-port", "port of the sandbox registration API (0 = a free port)")
	b.Int(&o.ProducerPort, "producer-port", "port of the producer's upload service (0 = a free port)")
	b.Int(&o.AdminPort, "admin-port", "port of the upload service's /metrics and /healthz (0 = a free port)")
	b.Int(&o.RedisPort, "redis-port", "port of redis-server, or of the in-process stand-in, on 127.0.0.1 (0 = a free port)")
	b.String(&o.Redis, "redis", "auto (redis-server when installed, else an in-process stand-in), real or memory")
	b.Int(&s.partitions, "partitions", "partitions of the rows topic")
	b.Int(&o.Consumers, "consumers", "consumers in the group")
	b.Int(&o.Limit, "limit", "registrations per seller per window, enforced by the sandbox and kept by the throttle")
	b.Duration(&o.Window, "window", "the API's trailing window")
	b.Duration(&o.Margin, "margin", "added to the window for network delay spread")
	b.String(&o.Policy, "policy", "how the sandbox counts the limit and the consumers keep it: sliding (any trailing window), fixed (windows aligned to the clock) or token-bucket (consumer -h says when each fits)")
	b.Int(&o.Burst, "burst", "with --policy token-bucket: the bucket's capacity (0 = --limit)")
	b.Int(&o.GlobalLimit, "global-limit", "registrations of all sellers together per --global-window, enforced by the sandbox and kept by the throttle (0 = no app-wide limit)")
	b.Duration(&o.GlobalWindow, "global-window", "the app-wide limit's trailing window (0 = --window)")
	b.Duration(&o.SessionTimeout, "session-timeout", "consumer group session timeout")
	b.Duration(&o.RegistryLatency, "registry-latency", "the sandbox's answer delay")
	b.Duration(&o.RegistryJitter, "registry-jitter", "random extra answer delay, up to this")
	b.String(&s.logLevel, "log-level", "debug, info, warn or error (logs go to stderr as JSON)")
	if cmd == "demo" {
		b.String(&s.testdata, "testdata", "folder of the sample spreadsheets")
		b.Duration(&s.interval, "interval", "how often progress is printed")
		b.Duration(&s.timeout, "timeout", "give up when the uploads are not finished this long after they were sent (0 = 10 × the lower bound + 1 minute)")
	}
	return fs, s, b
}

// parse reads the settings of cmd: -h prints its usage to stdout and
// returns flag.ErrHelp; every other error is a usage error, for the caller
// to print. Logs go to stderr.
func parse(cmd string, args []string, stdout, stderr io.Writer, getenv func(string) string) (settings, error) {
	fs, sp, b := bind(cmd, getenv)
	s, o := sp, &sp.opts
	if err := cli.ParseFlags(fs, args, stdout); err != nil {
		return *s, err
	}
	if err := b.Err(); err != nil {
		return *s, err
	}
	if s.partitions < 1 || s.partitions > 1000 {
		return *s, fmt.Errorf("--partitions must be between 1 and 1000, got %d", s.partitions)
	}
	o.Partitions = int32(s.partitions)
	if err := o.Validate(); err != nil {
		return *s, err
	}
	if s.interval <= 0 {
		return *s, fmt.Errorf("--interval must be positive, got %v", s.interval)
	}
	if s.timeout < 0 {
		return *s, fmt.Errorf("--timeout must not be negative, got %v", s.timeout)
	}
	if s.timeout == 0 {
		s.timeout = 10*time.Duration(500/max(o.Limit, 1))*(o.Window+o.Margin) + time.Minute
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.logLevel)); err != nil {
		return *s, fmt.Errorf("--log-level: %w", err)
	}
	o.Logger = slog.New(slog.NewJSONHandler(stderr, config.LogOptions(level)))
	config.RouteRedisLogs(o.Logger)
	return *s, nil
}

// summaries are what -h of each command says it does.
var summaries = map[string]string{
	"up":   "Starts everything, prints the addresses, runs until Ctrl-C.",
	"demo": "Uploads the sample spreadsheets of three sellers, shows the throttle pacing them,\nprints the compliance report; exit 0 only when every row was registered, no 429\nwas answered and no window exceeded.",
}

// commandTree is devstack's commands with the flag sets they parse.
func commandTree(getenv func(string) string) cli.Command {
	root := cli.Command{Name: "devstack"}
	for _, cmd := range []string{"up", "demo"} {
		fs, _, _ := bind(cmd, getenv)
		root.Commands = append(root.Commands, cli.Command{Name: cmd, Summary: strings.SplitN(summaries[cmd], ",", 2)[0], Flags: fs})
	}
	return root
}

// run is the command, under internal/cli's convention: help on stdout,
// one-line usage errors (exit 2), runtime failures exit 1.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		return cli.UsageError(stderr, "devstack", errors.New("a command is needed: up or demo"))
	}
	if cli.IsHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return cli.ExitOK
	}
	if buildinfo.Requested(args) || args[0] == "version" {
		fmt.Fprintln(stdout, buildinfo.Line("devstack"))
		return cli.ExitOK
	}
	cmd := args[0]
	if cmd == "completion" {
		return cli.RunCompletion(commandTree(getenv), args[1:], stdout, stderr)
	}
	if cmd != "up" && cmd != "demo" {
		return cli.UsageError(stderr, "devstack", fmt.Errorf("unknown command %q: want up or demo", cmd))
	}
	s, err := parse(cmd, args[1:], stdout, stderr, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	}
	if err != nil {
		return cli.UsageError(stderr, "devstack "+cmd, err)
	}
	if cmd == "demo" {
		for _, u := range devstack.DemoUploads(s.testdata) {
			if _, err := os.Stat(u.Path); err != nil {
				return cli.UsageError(stderr, "devstack demo", fmt.Errorf("sample spreadsheet missing: %w (run from the repository root or set --testdata)", err))
			}
		}
	}

	fmt.Fprintln(stdout, "starting: embedded Kafka broker, Redis, sandbox registry, producer service, consumers…")
	stack, err := devstack.Start(ctx, s.opts)
	if err != nil {
		return cli.Failed(stderr, "devstack", err)
	}
	defer stack.Close()
	printAddresses(stdout, stack)

	if cmd == "up" {
		link, err := stack.SignInLink(demoSeller)
		if err != nil {
			return cli.Failed(stderr, "devstack", err)
		}
		printTryIt(stdout, stack, link)
		fmt.Fprintln(stdout, "\nrunning; Ctrl-C stops everything.")
		<-ctx.Done()
		fmt.Fprintln(stdout, "stopping…")
		return cli.ExitOK
	}
	dctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := stack.Demo(dctx, stdout, devstack.DemoUploads(s.testdata), s.interval)
	if err != nil {
		return cli.Failed(stderr, "devstack demo", err)
	}
	if err := out.OK(); err != nil {
		return cli.Failed(stderr, "devstack demo", err)
	}
	fmt.Fprintln(stdout, "\nOK: every row registered once, no 429 from the registry, no seller's window exceeded.")
	return cli.ExitOK
}

func printAddresses(w io.Writer, s *devstack.Stack) {
	redis := "redis-server"
	if !s.RedisReal {
		redis = "in-process stand-in (install redis-server for the real thing)"
	}
	o := s.Options
	fmt.Fprintf(w, `
  kafka (kfake)      %s   topic %s (%d partitions) and %s.dlq
  redis              %s   %s
  registry sandbox   %s   limit %d per %v, counted %s
  producer service   %s   (metrics and health: %s)
  consumers          %d in group bulkreg-registrar, margin %v, session timeout %v
`, s.Brokers[0], s.Topic, o.Partitions, s.Topic, s.RedisAddr, redis, s.RegistryURL, o.Limit, o.Window, devstack.Counting(o), s.ProducerURL, s.AdminURL, o.Consumers, o.Margin, o.SessionTimeout)
}

// demoSeller is the seller `devstack up` signs in and its examples upload as.
const demoSeller = "my-shop"

func printTryIt(w io.Writer, s *devstack.Stack, link string) {
	fmt.Fprintf(w, `
  sign in as %s in a browser (the link works once, for %v), then upload
  testdata/demo/seller-c-40.xlsx and watch it register:
    %s

  or from another terminal:
    export BULKREG_KAFKA_BROKERS=%s BULKREG_REDIS_ADDRS=%s BULKREG_REGISTRY_URL=%s
    go run ./cmd/producer upload --seller %s --wait testdata/demo/seller-c-40.xlsx
    curl -s %s/audit
`, demoSeller, devstack.LinkTTL, link, s.Brokers[0], s.RedisAddr, s.RegistryURL, demoSeller, s.RegistryURL)
}
