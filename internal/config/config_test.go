package config

import (
	"context"
	"flag"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
	if c.Topic != "product-registrations" || c.Group != "bulkreg-registrar" || c.MetricsAddr != ":9464" {
		t.Errorf("defaults %+v", c)
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
