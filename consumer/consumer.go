package consumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/compliance"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// Throttle is the throttle as the consumer uses it (*throttle.Throttle).
type Throttle interface {
	// Reserve takes the seller's next slot in one Redis round trip without
	// sleeping; when the answer is not Admitted, At says when to ask again.
	// The consumer sleeps itself so it knows when the slot fell due on its
	// own clock, and so how late a call would be.
	Reserve(ctx context.Context, seller string) (throttle.Reservation, error)
	Release(ctx context.Context, r throttle.Reservation) error
	Block(ctx context.Context, seller string, retryAfter time.Duration) error
}

// Registry is the registration API (*registryclient.Client).
type Registry interface {
	Register(ctx context.Context, sellerID, idempotencyKey string, p bulkreg.Product) registryclient.Result
}

// StatusRecorder keeps the upload's per-row results (*uploadstatus.Store).
type StatusRecorder interface {
	RecordRow(ctx context.Context, uploadID string, r uploadstatus.RowResult) error
}

// CallRecorder keeps the compliance history (*compliance.Recorder).
type CallRecorder interface {
	Record(ctx context.Context, seller string, c compliance.Call) error
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
	// PingRedis tells whether Redis answers (redis.UniversalClient.Ping).
	PingRedis func(context.Context) error
	// DeadLetters receives rows that will not be registered; nil writes them
	// to bulkreg.DLQTopic(Config.Topic) on Config.Brokers.
	DeadLetters DeadLetterWriter
	// Registerer receives the metrics; nil means a private registry.
	Registerer prometheus.Registerer
}

// Consumer registers the rows of the rows topic.
type Consumer struct {
	cfg   Config
	deps  Deps
	log   *slog.Logger
	m     *metrics
	group *group
	lanes *lanes
	redis *redisGate
	dlq   DeadLetterWriter
	close func() error
	calls chan struct{} // one token per registry call in progress

	running atomic.Bool
}

// New checks cfg and deps and builds a consumer; Run starts it.
func New(cfg Config, deps Deps) (*Consumer, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("consumer settings: %w", err)
	}
	if deps.Throttle == nil || deps.Registry == nil || deps.Status == nil || deps.Calls == nil || deps.Retry == nil || deps.PingRedis == nil {
		return nil, errors.New("consumer: the throttle, registry, status recorder, call recorder, retry policy and Redis ping are all required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	reg := deps.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	c := &Consumer{cfg: cfg, deps: deps, log: log, dlq: deps.DeadLetters, close: func() error { return nil }, calls: make(chan struct{}, cfg.MaxConcurrentCalls)}
	c.m = newMetrics(reg, func() float64 {
		if t := c.group.oldestUnfinished(); !t.IsZero() {
			return time.Since(t).Seconds()
		}
		return 0
	})
	if c.dlq == nil {
		w := newKafkaDLQ(cfg.Brokers, bulkreg.DLQTopic(cfg.Topic))
		c.dlq, c.close = w, w.Close
	}
	c.group = newGroup(cfg, log, c.m)
	c.group.handle = c.dispatch
	c.group.revoked = func(p *partition) {
		for _, r := range c.lanes.purge(func(r *row) bool { return r.part == p }) {
			r.giveBack()
		}
	}
	c.lanes = newLanes(cfg.SellerConcurrency, c.process,
		func(d int) { c.m.waiting.Add(float64(d)) }, func(d int) { c.m.activeSellers.Add(float64(d)) })
	c.redis = newRedisGate(deps.PingRedis, cfg.RedisProbeInterval, log, c.m.redisDown.Inc)
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
	go c.redis.run(probeCtx)
	err := c.group.run(ctx)
	if cerr := c.close(); cerr != nil && err == nil {
		err = fmt.Errorf("close the dead-letter writer: %w", cerr)
	}
	return err
}

// Health is nil while Run runs; it names what is wrong otherwise.
func (c *Consumer) Health() error {
	if !c.running.Load() {
		return errors.New("the consumer is not running")
	}
	return nil
}

// RedisHealthy reports whether Redis answered the last probe or call.
func (c *Consumer) RedisHealthy() bool { return c.redis.healthy() }

// dispatch is step one for every message read: decode it and hand it to its
// seller's lane; a message that cannot be decoded goes to the dead-letter
// topic at once.
func (c *Consumer) dispatch(r *row) {
	m, err := bulkreg.DecodeMessage(r.msg.Value)
	if err != nil {
		c.log.Error("undecodable message: sending it to the dead-letter topic",
			"partition", r.msg.Partition, "offset", r.msg.Offset, "err", err)
		go c.deadLetter(r, DeadLetter{Original: r.msg, Class: ClassBadMessage, Message: err.Error(), FirstFailure: time.Now()}, c.log)
		return
	}
	r.m = m
	c.lanes.add(m.SellerID, r)
}

// process is the life of one decoded row: take a slot → call → classify →
// record → finished. It runs in the seller's lane.
func (c *Consumer) process(r *row) {
	m := r.m
	log := c.log.With("seller", m.SellerID, "upload", m.UploadID, "row", m.Row, "partition", r.msg.Partition, "offset", r.msg.Offset)
	if r.ctx().Err() != nil { // the partition was revoked while the row sat in its lane
		r.giveBack()
		return
	}
	retry := c.deps.Retry.NewBackOff()
	var missed backoff.BackOff
	var attempts, rateLimited int
	var firstFailure time.Time
	for {
		slot, ok := c.reserve(r, log)
		if !ok {
			r.giveBack()
			return
		}
		res, made := c.call(r, slot, log)
		if !made {
			// The slot went by before a call could start: more rows are due
			// now than this consumer can call. Back off (jittered, growing)
			// before taking a new slot so the rows spread out instead of
			// all coming back at once.
			if missed == nil {
				missed = c.missedBackOff()
			}
			if !sleep(r.ctx(), missed.NextBackOff()) {
				r.giveBack()
				return
			}
			continue
		}
		attempts++
		if !counted(res.Class) {
			c.release(slot)
		}
		switch res.Class {
		case registryclient.Registered, registryclient.Replayed:
			c.record(r, registered(res, attempts), res.Class.String(), log)
			return
		case registryclient.Permanent:
			log.Info("row refused by the registration API", "status", res.Status, "code", res.Code, "field", res.Field, "err", res.Err)
			c.record(r, refused(res, attempts), "failed", log)
			return
		case registryclient.RateLimited:
			c.m.rateLimited.Inc()
			rateLimited++
			if firstFailure.IsZero() {
				firstFailure = time.Now()
			}
			log.Warn("429 from the registration API: blocking the seller", "retry_after", res.RetryAfter, "attempt", attempts)
			if rateLimited > c.cfg.MaxRateLimited {
				c.deadLetter(r, deadLetterOf(r, res, attempts, firstFailure), log)
				return
			}
			c.block(r, res.RetryAfter, log)
			// No backoff of our own: the block moved the seller's next slot past Retry-After.
		default: // Transient
			if firstFailure.IsZero() {
				firstFailure = time.Now()
			}
			wait := retry.NextBackOff()
			if wait == backoff.Stop {
				log.Error("registration failed after the last attempt: sending the row to the dead-letter topic", "attempts", attempts, "err", res.Err)
				c.deadLetter(r, deadLetterOf(r, res, attempts, firstFailure), log)
				return
			}
			log.Warn("transient registration failure, retrying", "attempt", attempts, "in", wait, "status", res.Status, "err", res.Err)
			if !sleep(r.ctx(), wait) {
				r.giveBack()
				return
			}
		}
	}
}

// slot is a throttle reservation whose time has come.
type slot struct {
	throttle.Reservation
	// due is the slot's time on this machine's clock. Lateness is measured
	// from it, so a timer that fired late on a busy machine counts too.
	due time.Time
}

// redisNow is the time on the Redis clock, from the slot.
func (s slot) redisNow() time.Time { return s.At.Add(time.Since(s.due)) }

// reserve takes a throttle slot for the row and sleeps on a timer until it.
// While Redis does not answer it waits (no call without a slot) and tries
// again. It reports false when the row must be given back (rebalance,
// shutdown); a slot it held is given back then.
func (c *Consumer) reserve(r *row, log *slog.Logger) (slot, bool) {
	ctx := r.ctx()
	redisRetry := c.redisBackOff()
	c.m.waiting.Inc()
	defer c.m.waiting.Dec()
	start := time.Now()
	for {
		if !c.redis.wait(ctx) {
			return slot{}, false
		}
		res, err := c.deps.Throttle.Reserve(ctx, r.m.SellerID)
		if ctx.Err() != nil {
			if err == nil && res.Admitted { // the slot came just as the row was revoked
				c.release(slot{Reservation: res})
			}
			return slot{}, false
		}
		if err != nil {
			if unavailable(err) {
				c.redis.down(err)
			} else {
				log.Error("taking a throttle slot failed, retrying", "err", err)
			}
			if !sleep(ctx, redisRetry.NextBackOff()) {
				return slot{}, false
			}
			continue
		}
		// Redis computed Wait when it ran the script, somewhere between sent
		// and now. Under load nearly all of a round trip is the script
		// queueing in Redis before it runs; the answer comes back right after.
		// So the slot is due Wait after the answer arrived, not after sent:
		// measured with 100 sellers × 500 rows and 4 consumers on 2 cores
		// (bench, 100 ms margin), counting from sent brought 241 × 429 in
		// 50,000 calls, the midpoint of the round trip 77, counting from the
		// answer 0 (three runs). A late timer still counts as lateness.
		due := time.Now().Add(res.Wait)
		if !sleep(ctx, time.Until(due)) {
			if res.Admitted {
				c.release(slot{Reservation: res})
			}
			return slot{}, false
		}
		if !res.Admitted {
			// The next free slot was beyond the throttle's MaxWait: nothing
			// is held, ask again now that it is near.
			continue
		}
		c.m.throttleWait.Observe(time.Since(start).Seconds())
		if !c.redis.healthy() {
			// Redis went down while the row slept towards its slot: fail
			// closed. The slot is given back if Redis answers that.
			c.release(slot{Reservation: res})
			continue
		}
		return slot{Reservation: res, due: due}, true
	}
}

// call makes one registration call and writes it into the seller's
// compliance history. The call is not cancelled by a rebalance or shutdown
// (it finishes within the registry timeout), only when the drain times out.
//
// Calls run at most MaxConcurrentCalls at once. A call that cannot start
// within MaxLateness of its slot (it waited for a turn, or its timer fired
// late on a busy machine) is not made: the throttle's
// margin only covers a small delay between the slot and the API counting the
// call, and a late call would shrink the gap to the next window's calls. Its
// slot is given back and the row takes a new one (made is false).
func (c *Consumer) call(r *row, s slot, log *slog.Logger) (res registryclient.Result, made bool) {
	// Wait for a turn only as long as the lateness allows; waiting longer
	// would only queue behind rows that are late already.
	budget := time.NewTimer(max(0, c.cfg.MaxLateness-time.Since(s.due)))
	defer budget.Stop()
	select {
	case c.calls <- struct{}{}:
	case <-budget.C:
		c.m.late.Inc()
		c.release(s)
		return res, false
	case <-r.ctx().Done():
		c.release(s)
		return res, false
	}
	defer func() { <-c.calls }()
	if late := time.Since(s.due); late > c.cfg.MaxLateness {
		c.m.late.Inc()
		c.release(s)
		return res, false
	}
	if !c.redis.healthy() {
		// Redis went down while the row waited for a turn: fail closed, the
		// row takes a new slot once Redis answers again.
		c.release(s)
		return res, false
	}
	m := r.m
	at := s.redisNow()
	res = c.deps.Registry.Register(r.finishCtx(), m.SellerID, m.IdempotencyKey, m.Product)
	class := res.Class.String()
	c.m.calls.WithLabelValues(class).Inc()
	c.m.latency.WithLabelValues(class).Observe(res.Latency.Seconds())
	call := compliance.Call{At: at, Status: res.Status, Class: class, Key: m.IdempotencyKey}
	if err := c.untilRedis(r.finishCtx(), func(ctx context.Context) error { return c.deps.Calls.Record(ctx, m.SellerID, call) }); err != nil {
		log.Error("a registry call is missing from the compliance history: Redis did not answer before the drain timeout",
			"status", res.Status, "class", class, "err", err)
	}
	return res, true
}

// counted reports whether the API may have counted the call against the
// seller's limit. It counts only registrations (201); a replay, a refusal or
// a 429 does not, so their slots go back to the log for the rows behind. A
// 5xx or a timeout may have registered the row before failing, so their
// slots stay.
func counted(c registryclient.Class) bool {
	switch c {
	case registryclient.Replayed, registryclient.Permanent, registryclient.RateLimited:
		return false
	}
	return true
}

// release gives a used slot back to the throttle; best effort.
func (c *Consumer) release(s slot) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.deps.Throttle.Release(ctx, s.Reservation); err != nil {
		c.log.Debug("could not give a slot back to the throttle", "seller", s.Seller, "err", err)
	}
}

// block tells the throttle the API refused the seller until Retry-After.
func (c *Consumer) block(r *row, retryAfter time.Duration, log *slog.Logger) {
	if retryAfter <= 0 {
		retryAfter = time.Second
	}
	if err := c.untilRedis(r.ctx(), func(ctx context.Context) error { return c.deps.Throttle.Block(ctx, r.m.SellerID, retryAfter) }); err != nil {
		log.Warn("could not block the seller in the throttle", "err", err)
	}
}

// record writes the row's outcome into its upload's status, then marks the
// row finished. If Redis does not answer before the drain timeout the row is
// given back and registered again (a replay) by the partition's next owner.
func (c *Consumer) record(r *row, rr uploadstatus.RowResult, result string, log *slog.Logger) {
	rr.Row = r.m.Row
	err := c.untilRedis(r.finishCtx(), func(ctx context.Context) error { return c.deps.Status.RecordRow(ctx, r.m.UploadID, rr) })
	switch {
	case err != nil && unavailable(err):
		log.Error("could not record the row's result before the drain timeout; the row will be read again", "state", rr.State, "err", err)
		r.giveBack()
		return
	case err != nil:
		// Asking again would fail the same way, and so would a redelivery;
		// the registration itself is done, so the row is finished.
		log.Error("the upload status refused the row's result; the seller will not see it", "state", rr.State, "err", err)
	}
	c.m.rows.WithLabelValues(result).Inc()
	log.Debug("row done", "result", result, "product_id", rr.ProductID, "attempts", rr.Attempts)
	r.finish()
}

// deadLetter writes the row to the dead-letter topic and, once the broker
// acknowledged it, records the row as failed and marks it finished.
func (c *Consumer) deadLetter(r *row, d DeadLetter, log *slog.Logger) {
	retry := c.redisBackOff()
	for {
		err := c.dlq.WriteDeadLetter(r.finishCtx(), d)
		if err == nil {
			break
		}
		log.Error("dead-letter write failed, retrying", "err", err)
		if !sleep(r.finishCtx(), retry.NextBackOff()) {
			r.giveBack()
			return
		}
	}
	c.m.dlqWrites.WithLabelValues(d.Class).Inc()
	if d.Class == ClassBadMessage {
		c.m.rows.WithLabelValues("dead_lettered").Inc()
		r.finish()
		return
	}
	rr := uploadstatus.RowResult{Row: r.m.Row, State: uploadstatus.Failed, Code: d.Class, Attempts: d.Attempts, At: time.Now(),
		Reason: fmt.Sprintf("the registration API did not take the row after %d attempts (%s); it was set aside for an operator to retry", d.Attempts, d.Message)}
	c.record(r, rr, "dead_lettered", log)
}

func deadLetterOf(r *row, res registryclient.Result, attempts int, first time.Time) DeadLetter {
	msg := fmt.Sprintf("status %d", res.Status)
	if res.Err != nil {
		msg = res.Err.Error()
	}
	return DeadLetter{Original: r.msg, Class: res.Class.String(), Message: msg, Attempts: attempts, FirstFailure: first}
}

func registered(res registryclient.Result, attempts int) uploadstatus.RowResult {
	return uploadstatus.RowResult{State: uploadstatus.Registered, ProductID: res.ProductID, Attempts: attempts, At: time.Now()}
}

func refused(res registryclient.Result, attempts int) uploadstatus.RowResult {
	reason := res.Message
	if reason == "" && res.Err != nil {
		reason = res.Err.Error()
	}
	return uploadstatus.RowResult{State: uploadstatus.Failed, Code: res.Code, Field: res.Field, Reason: reason, Attempts: attempts, At: time.Now()}
}

// untilRedis runs op until it succeeds, fails for another reason than Redis
// not answering, or ctx ends; it backs off while Redis does not answer.
func (c *Consumer) untilRedis(ctx context.Context, op func(context.Context) error) error {
	retry := c.redisBackOff()
	for {
		err := op(ctx)
		if err == nil || ctx.Err() != nil || !unavailable(err) {
			return err
		}
		c.redis.down(err)
		if !sleep(ctx, retry.NextBackOff()) {
			return err
		}
	}
}

// unavailable tells an error of Redis not answering (worth waiting for) from
// one that will not go away by asking again.
func unavailable(err error) bool {
	var netErr net.Error
	switch {
	case errors.Is(err, throttle.ErrUnavailable), errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, redis.ErrClosed), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	// Cluster and server states that pass: failover, loading after a restart.
	msg := err.Error()
	for _, s := range []string{"LOADING", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "connection refused", "i/o timeout"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func (c *Consumer) missedBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = max(c.cfg.MaxLateness, 10*time.Millisecond)
	b.MaxInterval = c.cfg.MissedSlotBackoffMax
	b.RandomizationFactor = 0.9
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

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
