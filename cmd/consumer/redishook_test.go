package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/testredis"
)

// counted is a pair of counters and what they held at the last mark.
type counted struct {
	commands, roundTrips prometheus.Counter
	c0, r0               float64
}

func newCounted() *counted {
	return &counted{
		commands:   prometheus.NewCounter(prometheus.CounterOpts{Name: "c"}),
		roundTrips: prometheus.NewCounter(prometheus.CounterOpts{Name: "r"}),
	}
}

func (c *counted) mark() {
	c.c0, c.r0 = testutil.ToFloat64(c.commands), testutil.ToFloat64(c.roundTrips)
}

// expect checks the counts since the last mark, then marks.
func (c *counted) expect(t *testing.T, what string, commands, roundTrips float64) {
	t.Helper()
	gotC, gotR := testutil.ToFloat64(c.commands)-c.c0, testutil.ToFloat64(c.roundTrips)-c.r0
	if gotC != commands || gotR != roundTrips {
		t.Errorf("%s: counted %v commands in %v round trips, want %v in %v", what, gotC, gotR, commands, roundTrips)
	}
	c.mark()
}

func pipelineOf(ctx context.Context, t *testing.T, rdb redis.Cmdable, keys ...string) {
	t.Helper()
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Set(ctx, k, "v", 0)
		}
		return nil
	})
	if err != nil || len(cmds) != len(keys) {
		t.Fatalf("pipeline of %d SETs: %d answers, %v", len(keys), len(cmds), err)
	}
}

// warmUp opens a connection for single commands and one for pipelines (go-redis
// keeps them in two pools). Setting one up sends commands of its own (HELLO,
// CLIENT SETINFO, …): counted, as the traffic they are, but not what these
// tests are about.
func warmUp(ctx context.Context, t *testing.T, rdb redis.Cmdable) {
	t.Helper()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
}

func TestCountRedisSingleNode(t *testing.T) {
	ctx := context.Background()
	rs := testredis.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	n := newCounted()
	countRedis(rdb, n.commands, n.roundTrips)

	warmUp(ctx, t, rdb)
	n.mark()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	n.expect(t, "one SET", 1, 1)
	pipelineOf(ctx, t, rdb, "a", "b", "c", "d", "e")
	n.expect(t, "a pipeline of 5 SETs", 5, 1)
	if v, err := rdb.Get(ctx, "e").Result(); err != nil || v != "v" {
		t.Fatalf("GET e after the pipeline: %q, %v", v, err)
	}
	n.expect(t, "one GET", 1, 1)
}

// pipelineHook sends every single command as a pipeline of its own, as an
// auto-pipelining hook installed before the counting hook does with the
// commands it batches. The commands that set up the pipeline's connection
// (HELLO, CLIENT MAINT_NOTIFICATIONS) pass through the hooks again with the
// pipeline's context: they go straight on, or each would wait for a
// connection of its own, for ever.
type pipelineHook struct{ rdb *redis.Client }

type inPipelineHook struct{}

func (h pipelineHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h pipelineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if ctx.Value(inPipelineHook{}) != nil {
			return next(ctx, cmd)
		}
		ctx = context.WithValue(ctx, inPipelineHook{}, true)
		_, err := h.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Process(ctx, cmd) })
		return err
	}
}

func (h pipelineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestCountRedisBelowAPipeliningHook(t *testing.T) {
	ctx := context.Background()
	rs := testredis.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	n := newCounted()
	rdb.AddHook(pipelineHook{rdb})
	countRedis(rdb, n.commands, n.roundTrips)

	warmUp(ctx, t, rdb)
	n.mark()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	n.expect(t, "one SET sent as a pipeline by the outer hook", 1, 1)
	pipelineOf(ctx, t, rdb, "a", "b", "c", "d", "e")
	n.expect(t, "a pipeline of 5 SETs", 5, 1)
}

func TestCountRedisCluster(t *testing.T) {
	ctx := context.Background()
	cl := testredis.StartCluster(t, 3)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	n := newCounted()
	countRedis(rdb, n.commands, n.roundTrips)

	// Load the slot map and open connections to every master first; the
	// client's first command also asks once for the command table (COMMAND).
	if err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { warmUp(ctx, t, c); return nil }); err != nil {
		t.Fatal(err)
	}
	warmUp(ctx, t, rdb)
	// Two keys on each master.
	perMaster := map[string][]string{}
	for i := 0; len(perMaster) < 3 || anyShort(perMaster); i++ {
		key := fmt.Sprintf("{t%d}:k", i)
		m, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if addr := m.Options().Addr; len(perMaster[addr]) < 2 {
			perMaster[addr] = append(perMaster[addr], key)
		}
	}
	var keys []string
	for _, ks := range perMaster {
		keys = append(keys, ks...)
	}
	n.mark()
	pipelineOf(ctx, t, rdb, keys...)
	n.expect(t, "a pipeline of 6 SETs over 3 masters", 6, 3)
	if err := rdb.Set(ctx, keys[0], "w", 0).Err(); err != nil {
		t.Fatal(err)
	}
	n.expect(t, "one SET", 1, 1)
}

func anyShort(m map[string][]string) bool {
	for _, ks := range m {
		if len(ks) < 2 {
			return true
		}
	}
	return false
}
