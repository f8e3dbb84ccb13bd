package main

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// countRedis counts what this consumer sends to Redis: commands (a script is
// one, a pipeline of n is n) and round trips (one write of a command or a
// pipeline and the read of its answers). Call it before the client's first
// command and after any hook that changes how commands are sent (an
// auto-pipelining hook): in go-redis the first hook added is the outermost,
// so the counting hook, added last, sees what reaches the connection — a
// command another hook sent as part of a pipeline is counted in that
// pipeline's one round trip, not as one of its own.
//
// A Cluster client splits a pipeline by node below its own hooks, and a
// redirected or fanned-out command is sent again to other nodes: there round
// trips are counted on each node's client (one per command or per pipeline a
// node receives) and commands once on the Cluster client, as the caller
// issued them.
//
// Connection setup (HELLO, CLIENT SETINFO) passes through the hooks too and is
// counted: it is traffic the consumer causes. The client makes no hidden
// retries (config.RedisClient sets MaxRetries −1), so one call through the
// hook is one attempt; an attempt that fails to connect still counts.
func countRedis(rdb redis.UniversalClient, commands, roundTrips prometheus.Counter) {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		cc.AddHook(countingHook{commands: commands})
		cc.OnNewNode(func(node *redis.Client) { node.AddHook(countingHook{roundTrips: roundTrips}) })
		return
	}
	rdb.AddHook(countingHook{commands: commands, roundTrips: roundTrips})
}

// countingHook adds to the counters it has; a nil one is not counted at
// this level (see countRedis).
type countingHook struct{ commands, roundTrips prometheus.Counter }

func (h countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(1)
		return next(ctx, cmd)
	}
}

func (h countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(len(cmds))
		return next(ctx, cmds)
	}
}

// count records one round trip carrying n commands. go-redis does not send
// an empty pipeline, and neither is one counted.
func (h countingHook) count(n int) {
	if n == 0 {
		return
	}
	if h.commands != nil {
		h.commands.Add(float64(n))
	}
	if h.roundTrips != nil {
		h.roundTrips.Inc()
	}
}
