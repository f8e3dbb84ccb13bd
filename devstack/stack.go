// Package devstack runs the whole of bulkreg in one process for a newcomer's
// first look and for the demo: an embedded Kafka-protocol broker, Redis, the
// sandbox registration API, the producer's HTTP service and several
// consumers. Each consumer has its own Redis and Kafka connections, exactly
// as separate processes would; only the process is shared.
//
// It is a composition root: it imports every package it wires,
// so it sits above them beside cmd/devstack, not under internal/, which
// holds leaves only (layout_test.go). cmd/devstack and the browser test of
// producer/httpapi start it.
package devstack

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/consumer"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/autopipe"
	"github.com/bulkreg/bulkreg/internal/config"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/ledger"
	"github.com/bulkreg/bulkreg/producer/httpapi"
	"github.com/bulkreg/bulkreg/producer/upload"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// Options configure a Stack. Zero values take the defaults noted.
type Options struct {
	Host         string // interface every part listens on (default 127.0.0.1)
	KafkaPort    int    // 0: a free port
	SandboxPort  int    // 0: a free port
	ProducerPort int    // 0: a free port
	AdminPort    int    // the upload service's /metrics and /healthz; 0: a free port
	RedisPort    int    // redis-server's or the stand-in's, on 127.0.0.1; 0: a free port
	// Redis is "auto" (redis-server when installed, else the in-process
	// stand-in), "real" (redis-server or fail) or "memory" (the stand-in).
	Redis      string
	Partitions int32 // of the rows topic (default 6)
	Consumers  int   // consumer instances in the group (default 3)

	Limit          int           // the API's limit per window (default 100)
	Window         time.Duration // the API's window (default 60 s)
	Margin         time.Duration // the throttle's margin (default 250 ms)
	Policy         string        // how the sandbox counts the limit and the consumers keep it (config.Policies; default "sliding")
	Burst          int           // Policy "token-bucket": the bucket's capacity (0: Limit)
	SessionTimeout time.Duration // consumer group session timeout (default 10 s)
	GlobalLimit    int           // the API's app-wide limit per GlobalWindow, enforced by the sandbox and kept by the throttle (default 0: none)
	GlobalWindow   time.Duration // the app-wide limit's window (default Window)

	RegistryLatency, RegistryJitter time.Duration // the sandbox's answer delay
	// Circuit configures the consumers' circuit breaker; zero fields take
	// circuit.DefaultSettings.
	Circuit circuit.Settings
	// EventsInterval is how often the pages' progress streams read an
	// upload (default 1 s).
	EventsInterval time.Duration
	// SellerCenterURL is the seller center's sign-in address the pages link
	// to when they ask to sign in (empty: none, the pages say it in words).
	SellerCenterURL string
	// Secret signs the producer's bearer tokens; empty: a random one.
	Secret []byte
	Logger *slog.Logger
}

func (o *Options) defaults() error {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Redis == "" {
		o.Redis = "auto"
	}
	if o.Partitions == 0 {
		o.Partitions = 6
	}
	if o.Consumers == 0 {
		o.Consumers = 3
	}
	if o.Limit == 0 {
		o.Limit = 100
	}
	if o.Window == 0 {
		o.Window = time.Minute
	}
	if o.Margin == 0 {
		o.Margin = 250 * time.Millisecond
	}
	if o.Policy == "" {
		o.Policy = "sliding"
	}
	if o.GlobalWindow == 0 {
		o.GlobalWindow = o.Window
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if len(o.Secret) == 0 {
		o.Secret = []byte(rand.Text() + rand.Text())
	}
	if len(o.Secret) < httpapi.MinSecretLen {
		return fmt.Errorf("the token secret must be at least %d bytes", httpapi.MinSecretLen)
	}
	return nil
}

// Validate checks the options as given, zero values included: a command
// calls it on what its flags set, where a zero is what was asked for, not
// "the default", so --consumers 0 or --session-timeout 1s is a usage error
// before anything starts (not three consumers, nor a failure after
// "starting"). Start calls it once the zero fields have their defaults.
func (o Options) Validate() error {
	switch {
	case o.Redis != "auto" && o.Redis != "real" && o.Redis != "memory":
		return fmt.Errorf("--redis must be auto, real or memory, got %q", o.Redis)
	case o.Partitions < 1:
		return fmt.Errorf("--partitions must be at least 1, got %d", o.Partitions)
	case o.Consumers < 1:
		return fmt.Errorf("--consumers must be at least 1, got %d", o.Consumers)
	case o.Limit < 1:
		return fmt.Errorf("--limit must be at least 1, got %d", o.Limit)
	case o.Window <= 0:
		return fmt.Errorf("--window must be positive, got %v", o.Window)
	case o.Margin < 0:
		return fmt.Errorf("--margin must not be negative, got %v", o.Margin)
	case o.GlobalLimit < 0:
		return fmt.Errorf("--global-limit must not be negative (0 means no app-wide limit), got %d", o.GlobalLimit)
	case o.GlobalWindow < 0:
		return fmt.Errorf("--global-window must not be negative, got %v", o.GlobalWindow)
	case o.SessionTimeout < 6*time.Second:
		// The embedded broker refuses a shorter one at every join (Kafka's
		// group.min.session.timeout.ms), and the consumers would never start.
		return fmt.Errorf("--session-timeout must be at least 6s (the embedded broker's minimum), got %v", o.SessionTimeout)
	}
	if err := config.ValidatePolicy(o.Policy, o.Burst, o.Limit, o.Window, o.Margin); err != nil {
		return err
	}
	return o.Circuit.Validate()
}

// Stack is a running devstack.
type Stack struct {
	Brokers     []string
	Topic       string
	RedisAddr   string
	RedisReal   bool // false: the in-process stand-in
	RegistryURL string
	ProducerURL string
	// AdminURL serves the upload service's /metrics and /healthz.
	AdminURL string
	Secret   []byte
	// OperatorSecret signs operators' tokens (the compliance report); always random.
	OperatorSecret []byte
	Sandbox        *sandbox.Server
	Redis          redis.UniversalClient
	Throttle       *throttle.Throttle // for reading (Peek) the sellers' windows
	Options        Options

	stops []func()
}

// Start starts every part; Close stops them. Consumers run until Close.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	s := &Stack{Topic: bulkreg.DefaultTopic, Secret: o.Secret, OperatorSecret: []byte(rand.Text() + rand.Text()), Options: o}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	log := o.Logger

	kc, err := startKafka(o.Host, o.Partitions, s.Topic, o.KafkaPort)
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, kc.Close)
	s.Brokers = kc.ListenAddrs()
	log.Info("kafka: embedded broker (kfake) listening", "brokers", s.Brokers, "topic", s.Topic, "partitions", o.Partitions)

	rs, err := startRedis(ctx, o.Redis, o.RedisPort, log)
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, rs.stop)
	s.RedisAddr, s.RedisReal = rs.Addr, rs.Real
	s.Redis = s.redisClient()
	s.stops = append(s.stops, func() { s.Redis.Close() })
	// A new Redis, as an operator prepares one (producer redis-init):
	// without it the first window of every seller would be held as after a loss.
	if _, err := throttle.Initialize(ctx, s.Redis); err != nil {
		return nil, fmt.Errorf("prepare Redis for the throttle: %w", err)
	}
	if s.Throttle, err = throttle.New(s.Redis, o.throttlePolicy(s.consumerConfig(o, nil))); err != nil {
		return nil, err
	}

	// The sandbox counts as the consumers do: the API they are set up for.
	s.Sandbox, err = sandbox.New(sandbox.Options{Limit: o.Limit, Window: o.Window, Policy: o.Policy, Burst: o.Burst,
		GlobalLimit: o.GlobalLimit, GlobalWindow: o.GlobalWindow,
		Latency: o.RegistryLatency, Jitter: o.RegistryJitter, Logger: log.With("part", "sandbox")})
	if err != nil {
		return nil, err
	}
	addr, err := s.serve(o.Host, o.SandboxPort, s.Sandbox)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	s.RegistryURL = "http://" + addr
	log.Info("registry: sandbox listening", "url", s.RegistryURL, "limit", o.Limit, "window", o.Window, "policy", o.Policy, "burst", o.Burst,
		"global_limit", o.GlobalLimit, "global_window", o.GlobalWindow)

	if err := s.startProducer(o, log); err != nil {
		return nil, err
	}
	log.Info("producer: upload service listening", "url", s.ProducerURL)

	// One context for all consumers: Close ends it first, so they drain and
	// leave the group together instead of one by one, each departure
	// rebalancing the rest.
	cctx, stopConsumers := context.WithCancel(context.Background())
	for i := range o.Consumers {
		if err := s.startConsumer(cctx, i+1, o, log); err != nil {
			stopConsumers()
			return nil, err
		}
	}
	s.stops = append(s.stops, stopConsumers)
	log.Info("consumers started", "count", o.Consumers, "group", "bulkreg-registrar")
	return s, nil
}

func (s *Stack) serve(host string, port int, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return "", fmt.Errorf("listen on %s:%d: %w", host, port, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	s.stops = append(s.stops, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return ln.Addr().String(), nil
}

// LinkTTL is how long devstack's sign-in links are valid: long enough to
// open one from a terminal while the stack runs; the service is local.
const LinkTTL = 12 * time.Hour

func (s *Stack) startProducer(o Options, log *slog.Logger) error {
	w, err := upload.NewWriter(upload.WriterOptions{Brokers: s.Brokers, Topic: s.Topic})
	if err != nil {
		return err
	}
	s.stops = append(s.stops, func() { w.Close() })
	rdb := s.redisClient()
	s.stops = append(s.stops, func() { rdb.Close() })
	reg := prometheus.NewRegistry()
	plog := log.With("part", "producer")
	store := uploadstatus.New(rdb, 24*time.Hour)
	up := &upload.Uploader{Parser: excel.NewParser(excel.Options{}), Writer: w, Statuses: store, Index: store, Ledger: ledger.New(rdb, ledger.Options{}),
		Slots: s.Throttle, PublishTimeout: 30 * time.Second, StaleAfter: 2 * time.Minute, Logger: plog, Metrics: upload.NewMetrics(reg)}
	auth := httpapi.Auth{Secret: s.Secret, OperatorSecret: s.OperatorSecret, Leeway: 30 * time.Second}
	srv := &httpapi.Server{Uploader: up, Auth: auth, Sessions: httpapi.NewRedisSessions(rdb), LinkMaxAge: LinkTTL,
		SellerCenterURL: o.SellerCenterURL, Metrics: httpapi.NewMetrics(reg), Logger: plog, EventsInterval: o.EventsInterval,
		Compliance: httpapi.ComplianceHandler(auth, compliance.NewRecorder(rdb, compliance.DefaultRetention).SetGlobal(o.GlobalLimit, o.GlobalWindow), s.Throttle.Policy()),
	}
	if b, err := circuit.New(rdb, o.Circuit); err == nil {
		up.Marketplace = upload.HoldFailing(b, o.Window+o.Margin)
	}
	addr, err := s.serve(o.Host, o.ProducerPort, srv.Handler())
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	s.ProducerURL = "http://" + addr
	s.stops = append(s.stops, srv.StopStreams) // before the server's shutdown (stops run last first)
	admin, err := s.serve(o.Host, o.AdminPort, httpapi.AdminHandler(reg, func(ctx context.Context) error { return rdb.Ping(ctx).Err() }, plog))
	if err != nil {
		return fmt.Errorf("producer admin: %w", err)
	}
	s.AdminURL = "http://" + admin
	return nil
}

// SignInLink returns a link that signs seller in to the upload service's
// pages, once, within LinkTTL.
func (s *Stack) SignInLink(seller string) (string, error) {
	return httpapi.Minter{Secret: s.Secret}.Link(s.ProducerURL, seller, LinkTTL, time.Now())
}

// throttlePolicy is the consumers' throttle policy, as cmd/consumer makes it.
func (o Options) throttlePolicy(cfg consumer.Config) throttle.Policy {
	p := cfg.ThrottlePolicy(o.Limit, o.Window, o.Margin)
	p.Kind, p.Burst = throttle.Kind(o.Policy), o.Burst
	p.Global = throttle.Global{Limit: o.GlobalLimit, Window: o.GlobalWindow}
	return p
}

// startConsumer runs one consumer until ctx ends, with its own connections,
// configured as cmd/consumer configures itself from the same settings.
func (s *Stack) startConsumer(ctx context.Context, n int, o Options, log *slog.Logger) error {
	rdb := s.redisClient()
	autopipe.Install(rdb, autopipe.Options{})
	cfg := s.consumerConfig(o, log.With("part", "consumer", "consumer", n))
	th, err := throttle.New(rdb, o.throttlePolicy(cfg))
	if err != nil {
		rdb.Close()
		return err
	}
	rc, err := registryclient.New(registryclient.Options{BaseURL: s.RegistryURL, Timeout: cfg.CallTimeout, MaxConnsPerHost: cfg.MaxConcurrentCalls})
	if err != nil {
		rdb.Close()
		return err
	}
	retry := registryclient.DefaultRetryPolicy()
	retry.InitialInterval, retry.MaxInterval = 100*time.Millisecond, 2*time.Second
	breaker, err := circuit.New(rdb, o.Circuit)
	if err != nil {
		rdb.Close()
		return err
	}
	status := uploadstatus.New(rdb, 24*time.Hour)
	c, err := consumer.New(cfg, consumer.Deps{
		Throttle: th, Registry: rc, Circuit: breaker,
		Status:    status,
		Uploads:   status,
		Calls:     compliance.NewRecorder(rdb, compliance.DefaultRetention),
		Ledger:    ledger.New(rdb, ledger.Options{}),
		Retry:     retry,
		PingRedis: func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
		RedisTime: func(ctx context.Context) (time.Time, error) { return rdb.Time(autopipe.Direct(ctx)).Result() },
	})
	if err != nil {
		rdb.Close()
		return err
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	s.stops = append(s.stops, func() {
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				log.Warn("consumer stopped with an error", "consumer", n, "err", err)
			}
		case <-time.After(cfg.WithDefaults(th.Policy()).DrainTimeout + 5*time.Second):
			log.Warn("consumer did not stop in time", "consumer", n)
		}
		rc.Close()
		rdb.Close()
	})
	return nil
}

// consumerConfig is every consumer's settings, as cmd/consumer reads them
// from the same options; the rest are the consumer package's defaults.
func (s *Stack) consumerConfig(o Options, log *slog.Logger) consumer.Config {
	return consumer.Config{Brokers: s.Brokers, Topic: s.Topic, Group: "bulkreg-registrar", SessionTimeout: o.SessionTimeout,
		MaxConcurrentCalls: 128, CallTimeout: 10 * time.Second, Logger: log}
}

// redisClient opens one more connection pool to the stack's Redis: with the
// settings every bulkreg command uses, or longer timeouts for the stand-in.
func (s *Stack) redisClient() redis.UniversalClient {
	if !s.RedisReal {
		// The stand-in runs the scripts' Lua in Go, several times slower
		// than redis-server: the throttle's initialization (a marker per
		// hash slot) can outlast the 2 s read timeout on a loaded machine.
		return redis.NewClient(&redis.Options{Addr: s.RedisAddr, DialTimeout: time.Second, DialerRetries: 1, MaxRetries: -1,
			ReadTimeout: standInTimeout, WriteTimeout: standInTimeout})
	}
	return config.Config{RedisAddrs: []string{s.RedisAddr}}.RedisClient()
}

// standInTimeout bounds one command to the in-process stand-in.
const standInTimeout = 30 * time.Second

// Close stops every part, the last started first.
func (s *Stack) Close() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}
