package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/deadletter"
	"github.com/bulkreg/bulkreg/internal/kafkagroup"
	"github.com/bulkreg/bulkreg/internal/redisclock"
	"github.com/bulkreg/bulkreg/internal/redisfail"
	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// Throttle is the throttle as the consumer uses it (*throttle.Throttle). A
// runner asks it for a batch of a seller's slots at a time, and a call's
// traces (its slot settled or given back) go into the batch's one write as
// steps of a script on the seller's hash tag (internal/scriptbatch).
type Throttle interface {
	// ReserveN takes up to n of the seller's next slots in one script, after
	// the steps before (the batch's SKU claims), without sleeping (the
	// runner sleeps, so it knows how late a call would be); an answer not
	// Admitted says when to ask again (At).
	ReserveN(ctx context.Context, seller string, n int, before ...scriptbatch.Step) ([]throttle.Reservation, error)
	// CheckN tells, shortly before the calls, whether the slots may still be
	// used: not when the Redis that granted them has since lost the seller's
	// state (its epoch), so others may hold the same places in the window.
	CheckN(ctx context.Context, seller string, rs []throttle.Reservation) ([]throttle.SlotCheck, error)
	ReleaseN(ctx context.Context, seller string, rs []throttle.Reservation) error
	// SettleStep and ReleaseStep settle and give back slots as steps of the
	// batch's write; a call without a part there (Settled.Done false; ok
	// false) is settled (Settle) or given back (ReleaseN) on its own.
	SettleStep(seller string, calls []throttle.Settled) []scriptbatch.Step
	ReleaseStep(r throttle.Reservation) (st scriptbatch.Step, ok bool)
	// Settle tells the throttle a counted call was answered (at: on the
	// Redis clock, never before the answer), which moves its latest count
	// in the log earlier (package throttle).
	Settle(ctx context.Context, r throttle.Reservation, at time.Time) error
	Block(ctx context.Context, seller string, retryAfter time.Duration) error
	// BlockGlobal is Block for the API's app-wide limit (a 429 whose scope
	// is the application): no seller's slot starts before Retry-After.
	BlockGlobal(ctx context.Context, retryAfter time.Duration) error
	// Policy is the throttle's policy: the consumer's defaults derive from
	// it (Config.WithDefaults).
	Policy() throttle.Policy
}

// Registry is the registration API (*registryclient.Client).
type Registry interface {
	Register(ctx context.Context, sellerID, idempotencyKey string, p bulkreg.Product) registryclient.Result
	// Warm makes about n connections to the API open and idle, with
	// requests that register nothing, and answers how many answered
	// (Config.KeepWarm).
	Warm(ctx context.Context, n int) int
}

// StatusRecorder keeps the upload's per-row results (*uploadstatus.Store):
// a batch's rows of one upload in one write, or a row finished on its own
// (dead-lettered, or found registered before).
type StatusRecorder interface {
	RecordRows(ctx context.Context, uploadID string, rs []uploadstatus.RowResult) error
	RecordRow(ctx context.Context, uploadID string, r uploadstatus.RowResult) error
}

// CallRecorder keeps the compliance history (*compliance.Recorder): a
// batch's calls of one seller in one script, and the steps after them (the
// calls' slots settled or given back, their SKUs marked in the ledger).
type CallRecorder interface {
	RecordAll(ctx context.Context, seller string, calls []compliance.Call, steps ...scriptbatch.Step) error
}

// DeadLetterWriter writes dead letters (*deadletter.KafkaWriter);
// WriteDeadLetter returns once the broker acknowledged the write.
type DeadLetterWriter interface {
	WriteDeadLetter(ctx context.Context, d deadletter.Row) error
}

// BackOffPolicy makes the backoff of one row's transient failures
// (registryclient.RetryPolicy).
type BackOffPolicy interface {
	NewBackOff() backoff.BackOff
}

// Deps are the consumer's outside parts.
type Deps struct {
	Throttle Throttle
	Registry Registry
	Status   StatusRecorder
	Calls    CallRecorder
	Retry    BackOffPolicy
	Ledger   Ledger
	// PingRedis tells whether Redis answers (redis.UniversalClient.Ping).
	PingRedis func(context.Context) error
	// RedisTime reads Redis's clock in a round trip of its own, not queued
	// behind other commands (redis.UniversalClient.Time, outside any
	// batching). See Config.ClockSync.
	RedisTime func(context.Context) (time.Time, error)
	// DeadLetters receives rows that will not be registered; nil writes them
	// to bulkreg.DLQTopic(Config.Topic) on Config.Brokers.
	DeadLetters DeadLetterWriter
	// Registerer receives the metrics; nil means a private registry.
	Registerer prometheus.Registerer
	Circuit    Breaker
	// Uploads is asked, once per upload a consumer meets, whether the
	// upload exists (consumer/runstore.go, uploadDoor); a row of one that never did is
	// dead-lettered as a bad message.
	Uploads Uploads
}

// Consumer registers the rows of the rows topic.
type Consumer struct {
	cfg   Config
	deps  Deps
	log   *slog.Logger
	m     *metrics
	group *kafkagroup.Member
	// runners are the sellers' runners (runner.go), pool the call workers'
	// queue and starts the process's starts of calls due now.
	runners *runners
	pool    chan *item
	starts  *startBudget
	redis   *redisfail.Gate
	dlq     DeadLetterWriter
	close   func() error
	calls   chan struct{} // one token per registry call in progress
	// reports bounds each call's report to the circuit breaker.
	reports *sharedDeadline
	warm    *warmth
	// turn holds a token while a runner goes for the circuit's probe: one
	// at a time, so a due probe costs one throttle slot per consumer, not
	// one per waiting row.
	turn  chan struct{}
	clock *redisclock.Clock
	door  *uploadDoor
	// reserving counts runners between asking for slots and their calls:
	// the clock is read on its own only while one needs it (redisclock.Clock.Sync).
	reserving atomic.Int64

	running atomic.Bool
}

// New checks cfg and deps and builds a consumer; Run starts it.
func New(cfg Config, deps Deps) (*Consumer, error) {
	if deps.Throttle == nil {
		return nil, errors.New("consumer: the throttle is required")
	}
	if err := cfg.validate(deps.Throttle.Policy()); err != nil {
		return nil, fmt.Errorf("consumer settings: %w", err)
	}
	cfg = cfg.WithDefaults(deps.Throttle.Policy())
	if deps.Registry == nil || deps.Status == nil || deps.Calls == nil || deps.Ledger == nil || deps.Circuit == nil || deps.Uploads == nil || deps.Retry == nil || deps.PingRedis == nil || deps.RedisTime == nil {
		return nil, errors.New("consumer: the registry, status recorder, call recorder, SKU ledger, circuit breaker, upload lookup, retry policy, Redis ping and Redis clock are all required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	reg := deps.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	c := &Consumer{cfg: cfg, deps: deps, log: log, dlq: deps.DeadLetters, close: func() error { return nil }, calls: make(chan struct{}, cfg.MaxConcurrentCalls),
		warm: &warmth{}, turn: make(chan struct{}, 1), clock: redisclock.New(), door: &uploadDoor{markers: throttle.NewMarkers(), known: map[uploadKey]struct{}{}}, reports: newSharedDeadline(reportTimeout),
		pool: make(chan *item, 4*cfg.MaxConcurrentCalls), starts: newStartBudget(cfg.MaxDueNow)}
	c.m = newMetrics(reg, func() float64 {
		if t := c.group.OldestUnfinished(); !t.IsZero() {
			return time.Since(t).Seconds()
		}
		return 0
	})
	if c.dlq == nil {
		w := deadletter.NewKafkaWriter(cfg.Brokers, bulkreg.DLQTopic(cfg.Topic), cfg.KafkaTransport)
		c.dlq, c.close = w, w.Close
	}
	c.group = kafkagroup.New(kafkagroup.Config{Brokers: cfg.Brokers, Topic: cfg.Topic, Group: cfg.Group, Dialer: cfg.KafkaDialer, Transport: cfg.KafkaTransport,
		SessionTimeout: cfg.SessionTimeout, HeartbeatInterval: cfg.HeartbeatInterval, RebalanceTimeout: cfg.RebalanceTimeout, DrainTimeout: cfg.DrainTimeout,
		CommitInterval: cfg.CommitInterval, MaxInFlight: cfg.MaxInFlight, MaxInFlightPerPartition: cfg.MaxInFlightPerPartition}, log,
		kafkagroup.Metrics{InFlight: c.m.inFlight, Abandoned: c.m.abandoned, Rebalances: c.m.rebalances, Commits: c.m.commits},
		kafkagroup.Hooks{Handle: c.dispatch, Ready: c.readyToRead})
	c.redis = redisfail.NewGate(deps.PingRedis, cfg.RedisProbeInterval, log, c.m.redisDown.Inc)
	c.runners = newRunners(c)
	if err := reg.Register(newBacklogCollector(c)); err != nil {
		return nil, fmt.Errorf("consumer: register the backlog metrics: %w", err)
	}
	if err := reg.Register(deps.Circuit.Collector()); err != nil {
		return nil, fmt.Errorf("consumer: register the circuit breaker's metrics: %w", err)
	}
	return c, nil
}

// Run consumes until ctx ends, then shuts down gracefully: it stops reading,
// gives back the slots of rows still waiting, lets calls in progress finish
// and be recorded (at most Config.DrainTimeout), commits and leaves the group.
func (c *Consumer) Run(ctx context.Context) error {
	c.running.Store(true)
	defer c.running.Store(false)
	probeCtx, stopProbe := context.WithCancel(context.Background())
	defer stopProbe()
	go c.redis.Run(probeCtx)
	if c.cfg.KeepWarm > 0 {
		go c.keepWarm(probeCtx)
	}
	if c.cfg.ClockSync > 0 {
		// Only while a runner needs slots placed.
		go c.clock.Sync(probeCtx, c.cfg.ClockSync, func() bool { return c.reserving.Load() > 0 }, c.deps.RedisTime)
	}
	for range c.cfg.MaxConcurrentCalls {
		go c.callWorker(c.pool)
	}
	var stopped atomic.Int64 // when ctx ended, in Unix ns
	defer context.AfterFunc(ctx, func() { stopped.Store(time.Now().UnixNano()) })()
	err := c.group.Run(ctx)
	// The rows settle within the shutdown's drain: its bound keeps the
	// process inside the session timeout (DrainTimeout + 2 × heartbeat).
	drainEnd := time.Now()
	if at := stopped.Load(); at != 0 {
		drainEnd = time.Unix(0, at).Add(c.cfg.DrainTimeout)
	}
	// Every row is finished or given back; the runners end once they have
	// written their last batch and released the claims of the rows they
	// gave back (runner.giveBack), and hand no call on after that. Those
	// writes are best effort and get what the drain's bound leaves (the
	// drain plus the heartbeat the session keeps after the final commit): a
	// dark Redis link must not keep the process past the session timeout. The
	// caller closes Redis after Run returns.
	if c.runnersEnd(time.Until(drainEnd) + c.cfg.HeartbeatInterval) {
		close(c.pool)
	} else {
		c.log.Error("runners still working after the drain; their call workers are left running, and the SKU claims they hold lapse with their lease")
	}
	if cerr := c.close(); cerr != nil && err == nil {
		err = fmt.Errorf("close the dead-letter writer: %w", cerr)
	}
	return err
}

// runnersEnd reports whether every runner has ended or ends within d; the
// runners having ended wins over a d already past.
func (c *Consumer) runnersEnd(d time.Duration) bool {
	idle := c.runners.idle()
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		select {
		case <-idle:
			return true
		default:
			return false
		}
	}
}

// Health is nil while Run runs; it names what is wrong otherwise.
func (c *Consumer) Health() error {
	if !c.running.Load() {
		return errors.New("the consumer is not running")
	}
	return nil
}

// InGroup is nil while the consumer is a member of its group's current
// generation: it holds its partitions (none, when the group has more
// members than the topic has partitions) and its heartbeats are answered.
// It names the group otherwise: before the first join, during a
// rebalance, and from the heartbeat that failed (the coordinator did not
// answer within kafka-go's 5 s timeout) until the member joins again.
func (c *Consumer) InGroup() error { return c.group.InGroup() }

// RedisHealthy reports whether Redis answered the last probe or call.
func (c *Consumer) RedisHealthy() bool { return c.redis.Healthy() }

// untilRedis runs op until it succeeds or ctx ends, backing off between
// attempts, and returns the last error when ctx ended first. Every error is
// worth another attempt: Redis not answering, and Redis refusing for a while
// (READONLY during a failover, OOM under noeviction, MISCONF, NOREPLICAS,
// BUSY, LOADING). A caller may not take an error for an answer: a write that
// failed is not done.
func (c *Consumer) untilRedis(ctx context.Context, what string, log *slog.Logger, op func(context.Context) error) error {
	var retry backoff.BackOff
	failed := 0 // attempts Redis refused (not unavailable)
	for {
		if err := ctx.Err(); err != nil {
			// The drain ended: no write starts after it (group.drain).
			return err
		}
		err := op(ctx)
		if err == nil && failed > 0 {
			log.Info("a Redis request succeeded after it failed", "op", what, "failed_attempts", failed)
		}
		if err == nil || ctx.Err() != nil {
			return err
		}
		if unavailable(err) {
			c.redis.Down(err) // the gate logs it once
		} else if failed++; failed == 1 { // a lasting refusal (OOM, READONLY) logs its start and its end
			log.Warn("a Redis request failed; trying it again until it succeeds or the wait ends", "op", what, "err", err)
		} else {
			log.Debug("a Redis request failed again", "op", what, "attempt", failed, "err", err)
		}
		if retry == nil {
			retry = c.redisBackOff()
		}
		if !sleep(ctx, retry.NextBackOff()) {
			return err
		}
	}
}

// gated is op run once Redis answers the gate: a reservation, a lookup or
// a claim waits for Redis to come back rather than trying against it.
func (c *Consumer) gated(op func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if !c.redis.Wait(ctx) {
			return ctx.Err()
		}
		return op(ctx)
	}
}

// unavailable tells an error of Redis not answering, which stops registry
// calls until the probe hears from Redis again (the gate), from any other.
// Every package that talks to Redis wraps that case in
// redisfail.ErrUnavailable. It decides nothing else: no error is taken for
// an answer.
func unavailable(err error) bool { return errors.Is(err, redisfail.ErrUnavailable) }

// redisBackOff is the backoff between attempts of a Redis operation. Each
// is made once per batch or per write, not per row.
func (c *Consumer) redisBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = c.cfg.RedisRetryMin
	b.MaxInterval = c.cfg.RedisRetryMax
	b.MaxElapsedTime = 0 // Redis coming back is the only way forward; the row's context ends the wait
	b.Reset()
	return b
}

// sleep waits d on a timer; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
