package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testbin"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

// The consumer refuses a Redis that evicts keys before joining the group,
// naming the setting and the fix, and starts on noeviction.
func TestStartupChecksRedisPolicy(t *testing.T) {
	brokers := testkafka.Start(t, 1, "product-registrations", "product-registrations.dlq")
	for _, tc := range []struct {
		policy string
		starts bool
	}{{"allkeys-lru", false}, {"noeviction", true}} {
		t.Run(tc.policy, func(t *testing.T) {
			rs := testredis.Start(t, "--maxmemory-policy", tc.policy)
			env := map[string]string{"BULKREG_KAFKA_BROKERS": strings.Join(brokers, ","), "BULKREG_REDIS_ADDRS": rs.Addr,
				"BULKREG_METRICS_ADDR": "127.0.0.1:0", "BULKREG_SESSION_TIMEOUT": "6s", "BULKREG_SHUTDOWN_TIMEOUT": "10s"}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out testbin.Output
			exited := make(chan int, 1)
			go func() { exited <- run(ctx, nil, func(k string) string { return env[k] }, &out, &out) }()
			if !tc.starts {
				select {
				case code := <-exited:
					if code != 1 || !strings.Contains(out.String(), "maxmemory-policy allkeys-lru") || !strings.Contains(out.String(), "CONFIG SET maxmemory-policy noeviction") {
						t.Errorf("consumer on %s: exit %d, output %s; want exit 1 naming the policy and the fix", tc.policy, code, out.String())
					}
				case <-time.After(15 * time.Second):
					t.Fatalf("consumer on %s still runs after 15s, want a refusal:\n%s", tc.policy, out.String())
				}
				return
			}
			testwait.For(t, 15*time.Second, "the consumer to start", func() bool { return strings.Contains(out.String(), "consumer starting") })
			cancel()
			if code := <-exited; code != 0 {
				t.Errorf("consumer on %s: exit %d, want 0:\n%s", tc.policy, code, out.String())
			}
			if strings.Contains(out.String(), "maxmemory") {
				t.Errorf("consumer on noeviction logged about maxmemory:\n%s", out.String())
			}
		})
	}
}
