package config

import (
	"context"
	"flag"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/throttle"
)

func parse(t *testing.T, env map[string]string, args ...string) (Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := Default()
	b := NewBinder(fs, func(k string) string { return env[k] })
	c.Bind(b)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if err := b.Err(); err != nil {
		return c, err
	}
	return c, c.Validate()
}

func TestDefaultsAreProductionValues(t *testing.T) {
	c, err := parse(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limit != 100 || c.Window != time.Minute || c.Margin != 250*time.Millisecond || c.SessionTimeout != 10*time.Second {
		t.Errorf("defaults %+v are not 100 per 60s, margin 250ms, session 10s", c)
	}
	if c.Topic != "product-registrations" || c.Group != "bulkreg-registrar" {
		t.Errorf("defaults %+v", c)
	}
	// The consumer's /metrics, /healthz and /debug/pprof, like the upload
	// service's admin listener, are on loopback unless a deployment says
	// otherwise.
	if c.MetricsAddr != "127.0.0.1:9464" {
		t.Errorf("metrics address %q by default, want 127.0.0.1:9464 (loopback)", c.MetricsAddr)
	}
}

func TestEnvThenFlagOverride(t *testing.T) {
	env := map[string]string{"BULKREG_LIMIT": "7", "BULKREG_WINDOW": "3s", "BULKREG_KAFKA_BROKERS": "a:1, b:2", "BULKREG_REDIS_ADDRS": "r1:1,r2:2,r3:3"}
	c, err := parse(t, env, "--window", "5s")
	if err != nil {
		t.Fatal(err)
	}
	if c.Limit != 7 || c.Window != 5*time.Second || len(c.KafkaBrokers) != 2 || c.KafkaBrokers[1] != "b:2" || len(c.RedisAddrs) != 3 {
		t.Errorf("got %+v", c)
	}
}

// The app-wide limit is off unless set; set, from the environment or a flag.
func TestGlobalLimit(t *testing.T) {
	c, err := parse(t, nil)
	if err != nil || c.GlobalLimit != 0 || c.GlobalWindow != time.Minute {
		t.Fatalf("defaults %d per %v (%v), want off (0) with a 1 m window", c.GlobalLimit, c.GlobalWindow, err)
	}
	c, err = parse(t, map[string]string{"BULKREG_GLOBAL_LIMIT": "200", "BULKREG_GLOBAL_WINDOW": "3s"}, "--global-limit", "300")
	if err != nil || c.GlobalLimit != 300 || c.GlobalWindow != 3*time.Second {
		t.Errorf("got %d per %v (%v), want 300 per 3s", c.GlobalLimit, c.GlobalWindow, err)
	}
	// a window without a limit is harmless: the limit is off
	if _, err := parse(t, nil, "--global-window", "0s"); err != nil {
		t.Errorf("a zero window with the limit off: %v", err)
	}
}

func TestBadSettingsNameTheFlag(t *testing.T) {
	cases := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--limit", "0"}, "--limit"},
		{nil, []string{"--window", "0s"}, "--window"},
		{nil, []string{"--margin", "-1s"}, "--margin"},
		{nil, []string{"--registry-url", "localhost:8081"}, "--registry-url"},
		{nil, []string{"--kafka-brokers", ""}, "--kafka-brokers"},
		{map[string]string{"BULKREG_LIMIT": "ten"}, nil, "BULKREG_LIMIT"},
		{map[string]string{"BULKREG_WINDOW": "60"}, nil, "BULKREG_WINDOW"},
		{nil, []string{"--policy", "leaky"}, `--policy (BULKREG_POLICY): must be sliding, fixed, token-bucket, got "leaky"`},
		{map[string]string{"BULKREG_POLICY": "fixed"}, []string{"--burst", "5"}, "--burst (BULKREG_BURST): is the bucket of --policy token-bucket"},
		{nil, []string{"--policy", "token-bucket", "--burst", "-1"}, "--burst"},
		{nil, []string{"--policy", "token-bucket", "--burst", "101"}, "--burst (BULKREG_BURST): must not exceed --limit (100)"},
		{nil, []string{"--policy", "fixed", "--window", "1s", "--margin", "1s"}, "--margin (BULKREG_MARGIN): must be shorter than --window"},
		{map[string]string{"BULKREG_BURST": "many"}, nil, "BULKREG_BURST"},
		{nil, []string{"--global-limit", "-1"}, "--global-limit (BULKREG_GLOBAL_LIMIT): must not be negative"},
		{nil, []string{"--global-limit", "200", "--global-window", "0s"}, "--global-window (BULKREG_GLOBAL_WINDOW): must be greater than 0 when --global-limit is set"},
		{map[string]string{"BULKREG_GLOBAL_LIMIT": "many"}, nil, "BULKREG_GLOBAL_LIMIT"},
		{nil, []string{"--global-limit", "200", "--global-window", "1m", "--margin", "0s"}, "--margin (BULKREG_MARGIN): must be greater than 0 with --global-limit"},
	}
	for _, c := range cases {
		_, err := parse(t, c.env, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("env %v args %v: err = %v, want it to name %s", c.env, c.args, err, c.want)
		}
	}
}

// A dead Redis is reported at once, not after go-redis's own retries.
func TestRedisClientFailsFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	rdb := Config{RedisAddrs: []string{addr}}.RedisClient()
	defer rdb.Close()
	if _, ok := rdb.(*redis.Client); !ok {
		t.Errorf("one address gave a %T, want *redis.Client", rdb)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	err = rdb.Ping(ctx).Err()
	took := time.Since(start)
	if err == nil {
		t.Fatal("PING to a closed port answered")
	}
	t.Logf("PING to a closed port failed after %v: %v", took, err)
	if took > 300*time.Millisecond {
		t.Errorf("PING to a closed port took %v to fail, want < 300 ms (no dial or command retries inside go-redis)", took)
	}
	cluster := Config{RedisAddrs: []string{addr, addr}}.RedisClient()
	defer cluster.Close()
	if _, ok := cluster.(*redis.ClusterClient); !ok {
		t.Errorf("two addresses gave a %T, want *redis.ClusterClient", cluster)
	}
}

func TestPolicyFromTheEnvironment(t *testing.T) {
	c, err := parse(t, map[string]string{"BULKREG_POLICY": "token-bucket", "BULKREG_BURST": "40"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy != "token-bucket" || c.Burst != 40 {
		t.Errorf("policy %q, burst %d; want token-bucket, 40", c.Policy, c.Burst)
	}
	if d := Default(); d.Policy != "sliding" || d.Burst != 0 {
		t.Errorf("default policy %q, burst %d; want sliding (the contract), 0", d.Policy, d.Burst)
	}
}

// The names an operator sets are the throttle's kinds and the sandbox's
// policies, which both binaries take as they are.
func TestPoliciesAreTheThrottlesAndTheSandboxs(t *testing.T) {
	kinds := []string{string(throttle.Sliding), string(throttle.Fixed), string(throttle.TokenBucket)}
	sandboxes := []string{sandbox.PolicySliding, sandbox.PolicyFixed, sandbox.PolicyTokenBucket}
	if !slices.Equal(Policies, kinds) || !slices.Equal(Policies, sandboxes) {
		t.Errorf("policies %v, the throttle's kinds %v, the sandbox's %v: want the same names", Policies, kinds, sandboxes)
	}
}
