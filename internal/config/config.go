// Package config reads the settings every bulkreg binary shares: each one
// from a BULKREG_* environment variable, overridden by a flag of the same
// name in kebab case (BULKREG_KAFKA_BROKERS → --kafka-brokers). Defaults are
// the production values from the operators' table in ARCHITECTURE.md.
package config

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg"
)

// Config holds the settings shared by the producer, the consumer and devstack.
type Config struct {
	KafkaBrokers   []string      // bootstrap brokers
	Topic          string        // rows topic; the DLQ is Topic + ".dlq"
	Group          string        // consumer group id
	RedisAddrs     []string      // one address: a single Redis; several: Redis Cluster
	RegistryURL    string        // base URL of the registration API
	Limit          int           // registrations per seller per window
	Window         time.Duration // the API's trailing window
	Margin         time.Duration // added to the window for the spread of network delay
	SessionTimeout time.Duration // consumer-group session timeout
	MetricsAddr    string        // where /metrics and /healthz listen
}

// Default returns the production defaults.
func Default() Config {
	return Config{
		KafkaBrokers:   []string{"localhost:9092"},
		Topic:          bulkreg.DefaultTopic,
		Group:          "bulkreg-registrar",
		RedisAddrs:     []string{"localhost:6379"},
		RegistryURL:    "http://localhost:8081",
		Limit:          100,
		Window:         60 * time.Second,
		Margin:         250 * time.Millisecond,
		SessionTimeout: 10 * time.Second,
		MetricsAddr:    ":9464",
	}
}

// Binder registers settings on a FlagSet, each defaulting to its environment
// variable when that is set. A malformed environment value is kept as an
// error that Err reports, naming the variable, instead of being ignored.
type Binder struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []error
}

// NewBinder binds settings to fs, reading the environment through getenv
// (os.Getenv in binaries, a map in tests).
func NewBinder(fs *flag.FlagSet, getenv func(string) string) *Binder {
	return &Binder{fs: fs, getenv: getenv}
}

// EnvName is the environment variable behind a flag: "kafka-brokers" → "BULKREG_KAFKA_BROKERS".
func EnvName(flagName string) string {
	return "BULKREG_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (b *Binder) env(name string) (string, bool) {
	v := b.getenv(EnvName(name))
	return v, v != ""
}

func (b *Binder) usage(name, usage string) string {
	return fmt.Sprintf("%s (env %s)", usage, EnvName(name))
}

// String binds a string setting.
func (b *Binder) String(p *string, name, usage string) {
	if v, ok := b.env(name); ok {
		*p = v
	}
	b.fs.StringVar(p, name, *p, b.usage(name, usage))
}

// List binds a comma-separated list.
func (b *Binder) List(p *[]string, name, usage string) {
	if v, ok := b.env(name); ok {
		*p = splitList(v)
	}
	b.fs.Func(name, b.usage(name, usage)+" (default "+strings.Join(*p, ",")+")", func(s string) error {
		*p = splitList(s)
		return nil
	})
}

// Int binds an integer setting.
func (b *Binder) Int(p *int, name, usage string) {
	if v, ok := b.env(name); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			b.errs = append(b.errs, fmt.Errorf("environment variable %s=%q is not a whole number", EnvName(name), v))
		} else {
			*p = n
		}
	}
	b.fs.IntVar(p, name, *p, b.usage(name, usage))
}

// Duration binds a duration setting ("60s", "250ms").
func (b *Binder) Duration(p *time.Duration, name, usage string) {
	if v, ok := b.env(name); ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			b.errs = append(b.errs, fmt.Errorf("environment variable %s=%q is not a duration such as 60s or 250ms", EnvName(name), v))
		} else {
			*p = d
		}
	}
	b.fs.DurationVar(p, name, *p, b.usage(name, usage))
}

// Bool binds a boolean setting.
func (b *Binder) Bool(p *bool, name, usage string) {
	if v, ok := b.env(name); ok {
		x, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			b.errs = append(b.errs, fmt.Errorf("environment variable %s=%q is not true or false", EnvName(name), v))
		} else {
			*p = x
		}
	}
	b.fs.BoolVar(p, name, *p, b.usage(name, usage))
}

// Err reports every malformed environment value seen while binding.
func (b *Binder) Err() error { return errors.Join(b.errs...) }

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// Bind registers every shared setting on b. Call it before fs.Parse, then
// Validate after.
func (c *Config) Bind(b *Binder) {
	b.List(&c.KafkaBrokers, "kafka-brokers", "comma-separated Kafka bootstrap brokers")
	b.String(&c.Topic, "topic", "rows topic; dead letters go to this name + .dlq")
	b.String(&c.Group, "group", "consumer group id")
	b.List(&c.RedisAddrs, "redis-addrs", "Redis address; several comma-separated addresses mean Redis Cluster")
	b.String(&c.RegistryURL, "registry-url", "base URL of the registration API")
	b.Int(&c.Limit, "limit", "registrations per seller per window")
	b.Duration(&c.Window, "window", "the registration API's trailing window")
	b.Duration(&c.Margin, "margin", "added to the window to cover the spread of network delay")
	b.Duration(&c.SessionTimeout, "session-timeout", "consumer-group session timeout: how soon a dead consumer's partitions move")
	b.String(&c.MetricsAddr, "metrics-addr", "listen address of /metrics and /healthz")
}

// Validate refuses settings that cannot work, naming the flag.
func (c Config) Validate() error {
	var errs []error
	bad := func(flagName, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s (%s): %s", flagName, EnvName(flagName), fmt.Sprintf(format, args...)))
	}
	if len(c.KafkaBrokers) == 0 {
		bad("kafka-brokers", "at least one broker address is needed")
	}
	if strings.TrimSpace(c.Topic) == "" {
		bad("topic", "must not be empty")
	}
	if strings.TrimSpace(c.Group) == "" {
		bad("group", "must not be empty")
	}
	if len(c.RedisAddrs) == 0 {
		bad("redis-addrs", "at least one Redis address is needed")
	}
	if !strings.HasPrefix(c.RegistryURL, "http://") && !strings.HasPrefix(c.RegistryURL, "https://") {
		bad("registry-url", "must start with http:// or https://, got %q", c.RegistryURL)
	}
	if c.Limit <= 0 {
		bad("limit", "must be greater than 0, got %d", c.Limit)
	}
	if c.Window <= 0 {
		bad("window", "must be greater than 0, got %s", c.Window)
	}
	if c.Margin < 0 {
		bad("margin", "must not be negative, got %s", c.Margin)
	}
	if c.SessionTimeout <= 0 {
		bad("session-timeout", "must be greater than 0, got %s", c.SessionTimeout)
	}
	return errors.Join(errs...)
}

// RedisClient opens the configured Redis: a single node for one address, a
// cluster client for several. Scripts keep every key of one seller under one
// hash tag, so they run unchanged on both.
//
// It fails fast. go-redis's defaults dial 5 times 100 ms apart and retry a
// failed command 3 times, so every call against a dead Redis takes about
// 2 s: a consumer's probe then cannot tell within its interval that Redis is
// gone, and shutdown waits on slots that cannot be given back. Every caller
// already decides for itself what a failure means (the consumer backs off
// and asks again, the throttle gives back a slot whose answer was lost, an
// upload fails and can be sent again under the same id), so go-redis does
// not retry behind their backs.
func (c Config) RedisClient() redis.UniversalClient {
	return redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:         c.RedisAddrs,
		DialTimeout:   time.Second,
		DialerRetries: 1,
		MaxRetries:    -1,
		ReadTimeout:   2 * time.Second,
		WriteTimeout:  2 * time.Second,
	})
}
