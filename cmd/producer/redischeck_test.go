package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/redisproc"
	"github.com/bulkreg/bulkreg/internal/testredis"
)

// serve and redis-init refuse a Redis that evicts keys before they touch
// it, naming the setting and the fix; on noeviction both start (TestServe,
// TestRedisInit).
func TestRefusesAnEvictingRedis(t *testing.T) {
	rs := testredis.Start(t, "--maxmemory-policy", "allkeys-lru")
	ports, err := redisproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"BULKREG_REDIS_ADDRS": rs.Addr, "BULKREG_JWT_SECRET": strings.Repeat("s", 40),
		"BULKREG_ADDR": "127.0.0.1:" + strconv.Itoa(ports[0]), "BULKREG_ADMIN_ADDR": "127.0.0.1:" + strconv.Itoa(ports[1]), "BULKREG_KAFKA_BROKERS": "127.0.0.1:1"}
	for _, cmd := range []string{"serve", "redis-init"} {
		// A serve that starts is stopped after a while and fails the test.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var out, errb bytes.Buffer
		code := run(ctx, []string{cmd}, func(k string) string { return env[k] }, &out, &errb)
		cancel()
		if code != exitFailed || !strings.Contains(errb.String(), "maxmemory-policy allkeys-lru") || !strings.Contains(errb.String(), "CONFIG SET maxmemory-policy noeviction") {
			t.Errorf("%s on an allkeys-lru Redis: exit %d, stderr %q; want exit 1 naming the policy and the fix", cmd, code, errb.String())
		}
	}
	if n, err := rs.Client().DBSize(t.Context()).Result(); err != nil || n != 0 {
		t.Errorf("the refused Redis holds %d keys (%v), want none: nothing is written before the check", n, err)
	}
}
