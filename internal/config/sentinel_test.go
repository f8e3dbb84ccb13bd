package config

import (
	"context"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
)

// TestRedisClientFollowsSentinelFailover: with --redis-sentinel-master the
// one client every command uses asks the sentinels for the primary, and
// after the primary hangs (SIGSTOP) and a replica is promoted, commands reach the
// new primary without a restart.
func TestRedisClientFollowsSentinelFailover(t *testing.T) {
	ctx := t.Context()
	s := testredis.StartSentinel(t, 500*time.Millisecond)
	c := Default()
	c.RedisAddrs = s.SentinelAddrs()
	c.RedisSentinelMaster = s.MasterName
	rdb := c.RedisClient()
	defer rdb.Close()
	if err := rdb.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatalf("SET through the sentinels: %v", err)
	}
	// Replication is asynchronous: only a write the replica acknowledged
	// is sure to survive the primary's death.
	if n, err := rdb.Do(ctx, "WAIT", 1, 2000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d replicas, %v", n, err)
	}
	old := s.Primary.Addr
	// Hung, not killed: a killed primary's port can be taken by another
	// package's redis-server, which the sentinels would then see come back.
	s.Primary.Freeze()
	start := time.Now()
	var err error
	for time.Since(start) < 20*time.Second {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err = rdb.Set(cctx, "after", "1", 0).Err()
		cancel()
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("no write reached a new primary within 20 s of killing %s: %v", old, err)
	}
	now, err := s.MasterAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if now == old || now != s.Replicas[0].Addr {
		t.Fatalf("primary is %s after the failover, want the replica %s", now, s.Replicas[0].Addr)
	}
	t.Logf("writes resumed on %s %s after the primary was killed", now, time.Since(start).Round(10*time.Millisecond))
	if v, err := rdb.Get(ctx, "before").Result(); err != nil || v != "1" {
		t.Errorf("the replicated key is %q (%v) on the new primary", v, err)
	}
}
