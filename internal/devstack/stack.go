// Package devstack runs the whole of bulkreg in one process for a newcomer's
// first look and for the demo: an embedded Kafka-protocol broker, Redis, the
// sandbox registration API, the producer's HTTP service and several
// consumers. Each consumer has its own Redis and Kafka connections, exactly
// as separate processes would; only the process is shared.
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
	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/consumer"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/config"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/producer"
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
	// Redis is "auto" (redis-server when installed, else the in-process
	// stand-in), "real" (redis-server or fail) or "memory" (the stand-in).
	Redis      string
	Partitions int32 // of the rows topic (default 6)
	Consumers  int   // consumer instances in the group (default 3)

	Limit          int           // the API's limit per window (default 100)
	Window         time.Duration // the API's window (default 60 s)
	Margin         time.Duration // the throttle's margin (default 250 ms)
	SessionTimeout time.Duration // consumer group session timeout (default 10 s)

	RegistryLatency, RegistryJitter time.Duration // the sandbox's answer delay
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
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
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
	case o.SessionTimeout < 3*time.Second:
		return fmt.Errorf("--session-timeout must be at least 3s, got %v", o.SessionTimeout)
	}
	if len(o.Secret) == 0 {
		o.Secret = []byte(rand.Text() + rand.Text())
	}
	if len(o.Secret) < producer.MinSecretLen {
		return fmt.Errorf("the token secret must be at least %d bytes", producer.MinSecretLen)
	}
	return nil
}

// Stack is a running devstack.
type Stack struct {
	Brokers     []string
	Topic       string
	RedisAddr   string
	RedisReal   bool // false: the in-process stand-in
	RegistryURL string
	ProducerURL string
	Secret      []byte
	Sandbox     *sandbox.Server
	Redis       redis.UniversalClient
	Throttle    *throttle.Throttle // for reading (Peek) the sellers' windows
	Options     Options

	stops []func()
}

// Start starts every part; Close stops them. Consumers run until Close.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	s := &Stack{Topic: bulkreg.DefaultTopic, Secret: o.Secret, Options: o}
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

	rs, err := startRedis(ctx, o.Redis, log)
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, rs.stop)
	s.RedisAddr, s.RedisReal = rs.Addr, rs.Real
	s.Redis = s.redisClient()
	s.stops = append(s.stops, func() { s.Redis.Close() })
	if s.Throttle, err = throttle.New(s.Redis, throttle.Policy{Limit: o.Limit, Window: o.Window, Margin: o.Margin}); err != nil {
		return nil, err
	}

	s.Sandbox, err = sandbox.New(sandbox.Options{Limit: o.Limit, Window: o.Window, Latency: o.RegistryLatency, Jitter: o.RegistryJitter,
		Logger: log.With("part", "sandbox")})
	if err != nil {
		return nil, err
	}
	addr, err := s.serve(o.Host, o.SandboxPort, s.Sandbox)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	s.RegistryURL = "http://" + addr
	log.Info("registry: sandbox listening", "url", s.RegistryURL, "limit", o.Limit, "window", o.Window)

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

func (s *Stack) startProducer(o Options, log *slog.Logger) error {
	w, err := producer.NewWriter(producer.WriterOptions{Brokers: s.Brokers, Topic: s.Topic})
	if err != nil {
		return err
	}
	s.stops = append(s.stops, func() { w.Close() })
	rdb := s.redisClient()
	s.stops = append(s.stops, func() { rdb.Close() })
	reg := prometheus.NewRegistry()
	m := producer.NewMetrics(reg)
	plog := log.With("part", "producer")
	up := &producer.Uploader{Parser: excel.NewParser(excel.Options{}), Writer: w, Status: uploadstatus.New(rdb, 24*time.Hour),
		PublishTimeout: 30 * time.Second, StaleAfter: 2 * time.Minute, Logger: plog, Metrics: m}
	auth := producer.Auth{Secret: s.Secret, Leeway: 30 * time.Second}
	srv := &producer.Server{Uploader: up, Auth: auth, Gatherer: reg, Metrics: m, Logger: plog,
		Health:     func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
		Compliance: producer.ComplianceHandler(auth, compliance.NewRecorder(rdb, compliance.DefaultRetention), o.Limit, o.Window),
	}
	addr, err := s.serve(o.Host, o.ProducerPort, srv.Handler())
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	s.ProducerURL = "http://" + addr
	return nil
}

// startConsumer runs one consumer until ctx ends, with its own connections,
// configured as cmd/consumer configures itself from the same settings.
func (s *Stack) startConsumer(ctx context.Context, n int, o Options, log *slog.Logger) error {
	rdb := s.redisClient()
	th, err := throttle.New(rdb, throttle.Policy{Limit: o.Limit, Window: o.Window, Margin: o.Margin, MaxWait: o.SessionTimeout})
	if err != nil {
		rdb.Close()
		return err
	}
	rc, err := registryclient.New(registryclient.Options{BaseURL: s.RegistryURL, Timeout: 10 * time.Second, MaxConnsPerHost: 128})
	if err != nil {
		rdb.Close()
		return err
	}
	cfg := consumer.DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Group, cfg.SessionTimeout = s.Brokers, s.Topic, "bulkreg-registrar", o.SessionTimeout
	cfg.HeartbeatInterval = min(cfg.HeartbeatInterval, o.SessionTimeout/3)
	cfg.SellerConcurrency = o.Limit
	cfg.MaxConcurrentCalls = 128
	cfg.MaxLateness = o.Margin / 2
	cfg.Logger = log.With("part", "consumer", "consumer", n)
	retry := registryclient.DefaultRetryPolicy()
	retry.InitialInterval, retry.MaxInterval = 100*time.Millisecond, 2*time.Second
	c, err := consumer.New(cfg, consumer.Deps{
		Throttle: th, Registry: rc,
		Status:    uploadstatus.New(rdb, 24*time.Hour),
		Calls:     compliance.NewRecorder(rdb, compliance.DefaultRetention),
		Retry:     retry,
		PingRedis: func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
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
		case <-time.After(cfg.DrainTimeout + 5*time.Second):
			log.Warn("consumer did not stop in time", "consumer", n)
		}
		rc.Close()
		rdb.Close()
	})
	return nil
}

// redisClient opens one more connection pool to the stack's Redis, with the
// settings every bulkreg command uses.
func (s *Stack) redisClient() redis.UniversalClient {
	return config.Config{RedisAddrs: []string{s.RedisAddr}}.RedisClient()
}

// Close stops every part, the last started first.
func (s *Stack) Close() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}
