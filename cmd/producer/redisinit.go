package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/redischeck"
	"github.com/bulkreg/bulkreg/throttle"
)

const redisInitDetails = `Run once on a new Redis (or Redis Cluster, or the primary behind Sentinel),
before the first consumer starts. It writes the throttle's marker of every hash
slot (16,384 small keys, no expiry), which tells a Redis that has lost its data
from one that never had any. Without it a new Redis looks lost: the first
reservation in each hash slot holds its sellers for one window (the safe side).

It never changes a marker that exists, and refuses a Redis that holds only some
of them (or a Cluster master with none while others have theirs): that Redis
lost data, and the consumers hold its sellers on their own. Do not run it on a
Redis that lost its data while consumers were calling: it would declare that
nothing was called in the last window.

exit status: 0 initialised, or initialised before; 1 the Redis is not new, or
cannot be reached; 2 bad flags.`

func cmdRedisInit(ctx context.Context, e *env, args []string) int {
	s := defaults()
	fs := e.flagSet("redis-init")
	check := s.bind(fs, e.getenv, gRedis)
	_, code, ok := e.parseArgs(fs, args, 0, "no arguments", check)
	if !ok {
		return code
	}
	rdb := s.redis()
	defer rdb.Close()
	if err := checkRedis(ctx, rdb, slog.New(slog.NewTextHandler(e.stderr, nil))); err != nil {
		return e.errorf("%v", err)
	}
	res, err := throttle.Initialize(ctx, rdb)
	switch {
	case errors.Is(err, throttle.ErrNotNew):
		return e.errorf("%v; this Redis lost data: leave it to the consumers, which hold the sellers of the lost hash slots one window", err)
	case err != nil:
		return e.errorf("%v", err)
	case res.Created == 0:
		fmt.Fprintf(e.stdout, "already initialised: all %d hash-slot markers are there; nothing changed\n", res.Present)
	default:
		fmt.Fprintf(e.stdout, "initialised: %d hash-slot markers created\n", res.Created)
	}
	return exitOK
}

// checkRedis refuses a Redis that would evict keys or cannot run the
// scripts (internal/redischeck), within a bound of its own.
func checkRedis(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return redischeck.Check(ctx, rdb, log)
}
