// Package config reads the settings every bulkreg binary shares: each one
// from a BULKREG_* environment variable, overridden by a flag of the same
// name in kebab case (BULKREG_KAFKA_BROKERS → --kafka-brokers). Defaults are
// the production values from the operators' table in ARCHITECTURE.md.
package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/redact"
)

// Config holds the settings shared by the producer, the consumer and devstack.
type Config struct {
	KafkaBrokers   []string      // bootstrap brokers
	Topic          string        // rows topic; the DLQ is Topic + ".dlq"
	Group          string        // consumer group id
	RedisAddrs     []string      // one address: a single Redis; several: Redis Cluster; with RedisSentinelMaster: the sentinels
	RegistryURL    string        // base URL of the registration API
	Limit          int           // registrations per seller per window
	Window         time.Duration // the API's trailing window
	Margin         time.Duration // added to the window for the spread of network delay
	Policy         string        // how the API counts its limit: one of Policies
	Burst          int           // Policy "token-bucket": the bucket's capacity; 0 = Limit
	GlobalLimit    int           // registrations of all sellers together per GlobalWindow; 0: no app-wide limit
	GlobalWindow   time.Duration // the app-wide limit's trailing window
	SessionTimeout time.Duration // consumer-group session timeout
	MetricsAddr    string        // where /metrics and /healthz listen

	// RedisSentinelMaster names the master that Redis Sentinel watches; when
	// set, RedisAddrs are the sentinels and every command follows failovers.
	RedisSentinelMaster string
	// Redis authentication and transport. Empty: no AUTH, plain TCP.
	RedisUsername string // ACL user; empty with a password: the "default" user (requirepass)
	RedisPassword string // secret: never printed
	RedisTLS      bool   // TLS to Redis, verified against the system's CAs
	RedisTLSCA    string // PEM file of the CAs that sign Redis's certificate, instead of the system's

	// Kafka authentication and transport. Empty mechanism: no SASL.
	KafkaSASLMechanism string // "plain", "scram-sha-256" or "scram-sha-512"
	KafkaUsername      string
	KafkaPassword      string // secret: never printed
	KafkaTLS           bool   // TLS to the brokers, verified against the system's CAs
	KafkaTLSCA         string // PEM file of the CAs that sign the brokers' certificates, instead of the system's
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
		Policy:         "sliding",
		GlobalWindow:   60 * time.Second,
		SessionTimeout: 10 * time.Second,
		// Loopback, like the upload service's admin listener: /metrics and
		// /healthz are for operators; a deployment that scrapes the pod sets
		// :9464 (deploy/k8s, docker-compose.yml). Profiles have a listener
		// of their own, off by default (the consumer's --pprof-addr).
		MetricsAddr: "127.0.0.1:9464",
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

// Secret binds a string setting whose value is never printed: -h shows no
// default, and a usage error does not echo it. The environment is the
// place for secrets (a flag's value shows in the process list).
func (b *Binder) Secret(p *string, name, usage string) {
	if v, ok := b.env(name); ok {
		*p = v
	}
	b.fs.Var(secretValue{p}, name, fmt.Sprintf("%s (env %s; the value is never printed)", usage, EnvName(name)))
}

// secretValue is a flag.Value whose String is always empty, so flag's
// PrintDefaults treats it as unset and prints no default.
type secretValue struct{ p *string }

func (v secretValue) String() string { return "" }

func (v secretValue) Set(s string) error {
	*v.p = s
	return nil
}

// URL binds a URL setting whose password, if it carries one
// (https://user:secret@host), is never printed.
func (b *Binder) URL(p *string, name, usage string) {
	if v, ok := b.env(name); ok {
		*p = v
	}
	b.fs.Var(urlValue{p}, name, b.usage(name, usage))
}

type urlValue struct{ p *string }

func (v urlValue) String() string {
	if v.p == nil {
		return ""
	}
	return Redacted(*v.p)
}

func (v urlValue) Set(s string) error {
	*v.p = s
	return nil
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
	b.fs.Var(listValue{p}, name, b.usage(name, usage))
}

// listValue is a comma-separated list flag whose default, like any other
// flag's, is in its DefValue (-h prints it, the docs' check reads it).
type listValue struct{ p *[]string }

// String shows an item that holds credentials (an address written as a URL,
// which Validate refuses) redacted, so -h never prints a password.
func (v listValue) String() string {
	if v.p == nil {
		return ""
	}
	items := make([]string, len(*v.p))
	for i, s := range *v.p {
		items[i] = s
		if strings.Contains(s, "@") {
			items[i] = redact.URL(s)
		}
	}
	return strings.Join(items, ",")
}

func (v listValue) Set(s string) error {
	*v.p = splitList(s)
	return nil
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

// Float binds a decimal setting ("0.5").
func (b *Binder) Float(p *float64, name, usage string) {
	if v, ok := b.env(name); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			b.errs = append(b.errs, fmt.Errorf("environment variable %s=%q is not a number such as 0.5", EnvName(name), v))
		} else {
			*p = f
		}
	}
	b.fs.Float64Var(p, name, *p, b.usage(name, usage))
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
	b.List(&c.RedisAddrs, "redis-addrs", "Redis address; several comma-separated addresses mean Redis Cluster (or, with --redis-sentinel-master, the sentinels)")
	b.String(&c.RedisSentinelMaster, "redis-sentinel-master", "the master name Redis Sentinel watches; set it to use Sentinel, with the sentinels' addresses in --redis-addrs")
	b.URL(&c.RegistryURL, "registry-url", "base URL of the registration API")
	b.Int(&c.Limit, "limit", "registrations per seller per window")
	b.Duration(&c.Window, "window", "the registration API's trailing window")
	b.Duration(&c.Margin, "margin", "added to the window to cover the spread of network delay")
	c.BindPolicy(b)
	c.BindGlobal(b)
	b.Duration(&c.SessionTimeout, "session-timeout", "consumer-group session timeout: how soon a dead consumer's partitions move")
	b.String(&c.MetricsAddr, "metrics-addr", "listen address of /metrics and /healthz; loopback by default: set :9464 where Prometheus or a probe reaches the process from elsewhere")
	c.BindKafkaAuth(b)
	c.BindRedisAuth(b)
}

// Policies are the ways an API may count its limit, the throttle's kinds
// (throttle.Kind) and the sandbox's policies by the same names.
var Policies = []string{"sliding", "fixed", "token-bucket"}

// BindPolicy registers how the API counts its limit (--policy, --burst).
func (c *Config) BindPolicy(b *Binder) {
	b.String(&c.Policy, "policy", "how the registration API counts --limit per --window: sliding (any trailing window, the contract), fixed (windows aligned to the clock) or token-bucket (a bucket of --burst refilled at --limit per --window)")
	b.Int(&c.Burst, "burst", "with --policy token-bucket: the bucket's capacity, the calls the API accepts back to back (0 = --limit; at most --limit)")
}

// ValidatePolicy refuses a counting policy the throttle cannot keep, naming
// the flag: an unknown policy, a burst without a bucket or larger than the
// limit (a loss of Redis's data holds sellers one window, which would not
// refill it), a fixed window no longer than its margin.
func ValidatePolicy(policy string, burst, limit int, window, margin time.Duration) error {
	var errs []error
	bad := func(flagName, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s (%s): %s", flagName, EnvName(flagName), fmt.Sprintf(format, args...)))
	}
	if !slices.Contains(Policies, policy) {
		bad("policy", "must be %s, got %q", strings.Join(Policies, ", "), policy)
	}
	switch {
	case burst < 0:
		bad("burst", "must not be negative (0 means --limit), got %d", burst)
	case burst > 0 && policy != "token-bucket":
		bad("burst", "is the bucket of --policy token-bucket, but --policy is %q", policy)
	case limit > 0 && burst > limit:
		bad("burst", "must not exceed --limit (%d), got %d: for a bucket of C tokens refilled at R per second set --limit C and --window C/R", limit, burst)
	}
	if policy == "fixed" && window > 0 && margin >= window {
		bad("margin", "must be shorter than --window (%s) with --policy fixed, which keeps each window's last margin free, got %s", window, margin)
	}
	return errors.Join(errs...)
}

// BindGlobal registers the app-wide limit: --global-limit and --global-window.
func (c *Config) BindGlobal(b *Binder) {
	b.Int(&c.GlobalLimit, "global-limit", "registrations of all sellers together per --global-window, the API's app-wide limit, besides --limit per seller (0 = none)")
	b.Duration(&c.GlobalWindow, "global-window", "the registration API's trailing window of the app-wide limit")
}

// BindRedisAuth registers the Redis authentication and TLS settings.
func (c *Config) BindRedisAuth(b *Binder) {
	b.String(&c.RedisUsername, "redis-username", "Redis ACL user (empty: the default user, as with requirepass)")
	b.Secret(&c.RedisPassword, "redis-password", "Redis password (AUTH); empty sends none")
	b.Bool(&c.RedisTLS, "redis-tls", "connect to Redis over TLS, verifying its certificate against the system's CAs")
	b.String(&c.RedisTLSCA, "redis-tls-ca-file", "PEM file of the CAs that sign Redis's certificate (with --redis-tls), instead of the system's")
}

// BindKafkaAuth registers the Kafka SASL and TLS settings.
func (c *Config) BindKafkaAuth(b *Binder) {
	b.String(&c.KafkaSASLMechanism, "kafka-sasl-mechanism", "SASL mechanism: plain, scram-sha-256 or scram-sha-512; empty: no SASL")
	b.String(&c.KafkaUsername, "kafka-username", "SASL user name")
	b.Secret(&c.KafkaPassword, "kafka-password", "SASL password")
	b.Bool(&c.KafkaTLS, "kafka-tls", "connect to the brokers over TLS, verifying their certificates against the system's CAs")
	b.String(&c.KafkaTLSCA, "kafka-tls-ca-file", "PEM file of the CAs that sign the brokers' certificates (with --kafka-tls), instead of the system's")
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
	// An address is host:port. One written as a URL would be dialled as it
	// is, and the dial error, which names the address, would print the
	// password it carries.
	for _, a := range c.RedisAddrs {
		if strings.Contains(a, "@") || strings.Contains(a, "://") {
			bad("redis-addrs", "%q is not host:port: a URL such as redis://user:password@host:6379 is not read here; give host:port, the password in --redis-password (%s) and the user in --redis-username", redact.URL(a), EnvName("redis-password"))
		}
	}
	for _, a := range c.KafkaBrokers {
		if strings.Contains(a, "@") || strings.Contains(a, "://") {
			bad("kafka-brokers", "%q is not host:port: give host:port, and SASL credentials in --kafka-username and --kafka-password (%s)", redact.URL(a), EnvName("kafka-password"))
		}
	}
	if err := ValidHTTPURL(c.RegistryURL); err != nil {
		bad("registry-url", "%v", err)
	}
	if _, err := c.kafkaSASL(); err != nil {
		bad("kafka-sasl-mechanism", "%v", err)
	}
	if c.KafkaSASLMechanism == "" && (c.KafkaUsername != "" || c.KafkaPassword != "") {
		bad("kafka-sasl-mechanism", "a Kafka user name or password is set but no mechanism: set plain, scram-sha-256 or scram-sha-512")
	}
	if c.RedisUsername != "" && c.RedisPassword == "" {
		bad("redis-password", "the Redis user %q needs a password", c.RedisUsername)
	}
	for _, t := range []struct {
		flag, ca string
		on       bool
	}{{"redis-tls-ca-file", c.RedisTLSCA, c.RedisTLS}, {"kafka-tls-ca-file", c.KafkaTLSCA, c.KafkaTLS}} {
		if t.ca == "" {
			continue
		}
		if !t.on {
			bad(t.flag, "is set but TLS is off: set --%s too", strings.TrimSuffix(t.flag, "-ca-file"))
		}
		if _, err := tlsConfig(true, t.ca); err != nil {
			bad(t.flag, "%v", err)
		}
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
	if c.GlobalLimit < 0 {
		bad("global-limit", "must not be negative (0 means no app-wide limit), got %d", c.GlobalLimit)
	}
	if c.GlobalLimit > 0 && c.Margin == 0 {
		bad("margin", "must be greater than 0 with --global-limit: a call's seller slot and app-wide slot are taken a round trip apart, and the margin covers it")
	}
	if c.GlobalLimit > 0 && c.GlobalWindow <= 0 {
		bad("global-window", "must be greater than 0 when --global-limit is set, got %s", c.GlobalWindow)
	}
	if c.SessionTimeout <= 0 {
		bad("session-timeout", "must be greater than 0, got %s", c.SessionTimeout)
	}
	errs = append(errs, ValidatePolicy(c.Policy, c.Burst, c.Limit, c.Window, c.Margin))
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
	// With MasterName set go-redis asks the sentinels for the master and
	// follows failovers (a failover client); otherwise one address is a
	// single node and several are a Cluster.
	o := &redis.UniversalOptions{
		Addrs:         c.RedisAddrs,
		MasterName:    c.RedisSentinelMaster,
		Username:      c.RedisUsername,
		Password:      c.RedisPassword,
		DialTimeout:   time.Second,
		DialerRetries: 1,
		MaxRetries:    -1,
		ReadTimeout:   2 * time.Second,
		WriteTimeout:  2 * time.Second,
	}
	o.TLSConfig, _ = tlsConfig(c.RedisTLS, c.RedisTLSCA)
	return redis.NewUniversalClient(o)
}

// tlsConfig is the client TLS of one connection kind: nil when off; the
// system's CAs, or those of caFile. A CA file that cannot be read (Validate
// reports it first) leaves an empty pool, so every handshake fails: the
// connection is never made unverified.
func tlsConfig(on bool, caFile string) (*tls.Config, error) {
	if !on {
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return t, nil
	}
	t.RootCAs = x509.NewCertPool()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return t, fmt.Errorf("read the CA file: %w", err)
	}
	if !t.RootCAs.AppendCertsFromPEM(pem) {
		return t, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return t, nil
}

// kafkaSASL builds the configured SASL mechanism; nil when none is set.
func (c Config) kafkaSASL() (sasl.Mechanism, error) {
	switch strings.ToLower(c.KafkaSASLMechanism) {
	case "":
		return nil, nil
	case "plain":
		return plain.Mechanism{Username: c.KafkaUsername, Password: c.KafkaPassword}, nil
	case "scram-sha-256":
		return scram.Mechanism(scram.SHA256, c.KafkaUsername, c.KafkaPassword)
	case "scram-sha-512":
		return scram.Mechanism(scram.SHA512, c.KafkaUsername, c.KafkaPassword)
	}
	return nil, fmt.Errorf("want plain, scram-sha-256 or scram-sha-512, got %q", c.KafkaSASLMechanism)
}

func (c Config) kafkaTLS() *tls.Config {
	t, _ := tlsConfig(c.KafkaTLS, c.KafkaTLSCA)
	return t
}

// KafkaDialer is the dialer of consumer groups and readers with the
// configured SASL and TLS; nil (kafka-go's default) when neither is set.
// Call it after Validate.
func (c Config) KafkaDialer() *kafka.Dialer {
	m, _ := c.kafkaSASL()
	if m == nil && !c.KafkaTLS {
		return nil
	}
	return &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, SASLMechanism: m, TLS: c.kafkaTLS()}
}

// KafkaTransport is the transport of writers with the configured SASL and
// TLS; nil (kafka-go's default) when neither is set. Call it after Validate.
func (c Config) KafkaTransport() kafka.RoundTripper {
	m, _ := c.kafkaSASL()
	if m == nil && !c.KafkaTLS {
		return nil
	}
	return &kafka.Transport{SASL: m, TLS: c.kafkaTLS()}
}

// Redacted is a URL as messages and logs show it: the password of its user
// information and every query value hidden (https://user:xxxxx@host/?token=xxxxx),
// its fragment dropped. A malformed URL that holds an "@" is cut to what
// follows the last one: url.Parse reads "http//user:secret@host",
// "http:/user:secret@host" or "user:secret@host" without error as a path or
// an opaque part, where url.URL.Redacted finds no password to hide. See
// package internal/redact.
func Redacted(raw string) string { return redact.URL(raw) }

// ValidHTTPURL checks a URL setting that must be an absolute http or https
// URL with a host; the error never holds the URL's password. The scheme
// may be in any case (url.Parse lower-cases it).
func ValidHTTPURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("want an absolute http:// or https:// URL with a host, such as https://api.example.com, got %q", Redacted(raw))
	}
	return nil
}

// Bytes binds a size setting: a whole number of bytes, or one with a unit,
// KiB, MiB or GiB (powers of 1024) or kB, MB or GB (powers of 1000):
// "268435456", "256MiB", "300MB".
func (b *Binder) Bytes(p *int64, name, usage string) {
	if v, ok := b.env(name); ok {
		n, err := ParseBytes(v)
		if err != nil {
			b.errs = append(b.errs, fmt.Errorf("environment variable %s=%q: %w", EnvName(name), v, err))
		} else {
			*p = n
		}
	}
	b.fs.Var(bytesValue{p}, name, b.usage(name, usage))
}

// byteUnits are the units ParseBytes reads, longest first so "MiB" is not
// read as "B".
var byteUnits = []struct {
	suffix string
	n      int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1},
}

// ParseBytes reads a size as Binder.Bytes takes it.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size such as 268435456, 256MiB or 300MB", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is larger than a size can be", s)
	}
	return n * mult, nil
}

// FormatBytes writes n as ParseBytes reads it, in the largest binary unit
// that holds it whole ("256MiB"; "1000" when none does).
func FormatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.n == 0 {
			return strconv.FormatInt(n/u.n, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

type bytesValue struct{ p *int64 }

func (v bytesValue) String() string {
	if v.p == nil {
		return ""
	}
	return FormatBytes(*v.p)
}

func (v bytesValue) Set(s string) error {
	n, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}
