package main

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/autopipe"
	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/throttle"
)

// The ways --redis-pipelining may send the single commands of many rows.
const (
	pipeAutopipe = "autopipe" // internal/autopipe's hook on the client
	pipeGoRedis  = "goredis"  // go-redis's own blocking AutoPipeliner
	// go-redis's, shaped as autopipe is: 2 batches in flight, 64 commands each.
	pipeGoRedisShaped = "goredis-2x64"
	pipeNone          = "none" // one round trip per command
)

// checkPipelining refuses a --redis-pipelining value that is none of the
// three, naming the flag and its variable.
func checkPipelining(mode string) error {
	switch mode {
	case pipeAutopipe, pipeGoRedis, pipeGoRedisShaped, pipeNone:
		return nil
	}
	return fmt.Errorf("--redis-pipelining (BULKREG_REDIS_PIPELINING) is %q: choose autopipe, goredis, goredis-2x64 or none", mode)
}

// pipelined returns the client every package of the consumer issues its
// commands through, and what closes it (before rdb). Call it before any
// other hook is added to rdb: autopipe's hook must be the outermost, so
// the command counter after it sees the pipelines it sends. go-redis's
// AutoPipeliner sends its batches through rdb's pipeline hooks, so they are
// counted the same way.
func pipelined(rdb redis.UniversalClient, mode string) (redis.UniversalClient, func(), error) {
	switch mode {
	case pipeAutopipe:
		// Two pipelines on the wire, not four: under bench many-sellers
		// they take about a third fewer Redis round trips per registered
		// row, with the same ratios and CPU; one pipeline takes fewer
		// still, but paces the sellers less evenly (bench/HISTORY.md has
		// the figures).
		autopipe.Install(rdb, autopipe.Options{MaxInFlight: 2, MaxBatch: 64})
		return rdb, func() {}, nil
	case pipeGoRedis:
		// Its blocking face with its own defaults (one ordered batch in
		// flight, up to 300 commands): a drop-in UniversalClient. Not the
		// default: it halves the round trips, for the same CPU, but does
		// not honour a command's deadline once it is queued, and the
		// consumer's waits on Redis are bounded by deadlines
		// (TestAQueuedCallerWhoseContextEnds; ARCHITECTURE.md, "What a row
		// costs", has the bench figures).
		ap, err := rdb.AutoPipeline()
		if err != nil {
			return nil, nil, fmt.Errorf("go-redis auto-pipeliner: %w", err)
		}
		return ap, func() { _ = ap.Close() }, nil
	case pipeGoRedisShaped:
		// Each caller waits for its own command, so the order between
		// callers' commands, which Unordered gives up, was never promised.
		ap, err := rdb.AutoPipelineWithOptions(&redis.AutoPipelineOptions{MaxBatchSize: 64, MaxConcurrentBatches: 2, Unordered: true})
		if err != nil {
			return nil, nil, fmt.Errorf("go-redis auto-pipeliner: %w", err)
		}
		return ap, func() { _ = ap.Close() }, nil
	case pipeNone:
		return rdb, func() {}, nil
	}
	return nil, nil, checkPipelining(mode)
}

// timedThrottle times each reservation of a batch's slots, from the call to
// its answer (the queue before the pipeline included): what a batch waits
// for its slots' answer is what a pipelining choice trades against round
// trips. The other methods are the throttle's own.
type timedThrottle struct {
	*throttle.Throttle
	reserve prometheus.Observer
}

// newReserveHistogram resolves a reservation's time from 0.25 ms to about
// 1.2 s in steps of 1.5× (a percentile read from it is within 25 %): under
// load an answer queued behind pipelines takes 1 to 50 ms.
func newReserveHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "bulkreg_consumer_reserve_seconds",
		Help:    "Time a batch's slot reservation took, from the call to the throttle's answer (waiting for a shared pipeline included).",
		Buckets: prometheus.ExponentialBuckets(0.00025, 1.5, 22),
	})
}

func (t timedThrottle) ReserveN(ctx context.Context, seller string, n int, before ...scriptbatch.Step) ([]throttle.Reservation, error) {
	start := time.Now()
	rs, err := t.Throttle.ReserveN(ctx, seller, n, before...)
	t.reserve.Observe(time.Since(start).Seconds())
	return rs, err
}
