package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/internal/redisfail"
	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/ledger"
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
	// BlockGlobal is Block for the API's app-wide limit (a 429 whose scope
	// is the application): no seller's slot starts before Retry-After.
	BlockGlobal(ctx context.Context, retryAfter time.Duration) error
	// Check tells, shortly before the call, whether a slot may still be
	// used: not when the Redis that granted it has since lost the seller's
	// state (its epoch), so others may hold the same place in the window.
	Check(ctx context.Context, r throttle.Reservation) (throttle.SlotCheck, error)
	// Settle moves the slot of a call the API answered (at: on the Redis
	// clock, never before the answer) to a margin before the answer, when
	// later: the next window's slots are then placed a window after the
	// API's count, however late it counted.
	Settle(ctx context.Context, r throttle.Reservation, at time.Time) error
	// Policy is the throttle's policy: the consumer's defaults derive from
	// it (Config.WithDefaults).
	Policy() throttle.Policy
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
	// Ledger is the SKU ledger (consumer/ledger.go); nil registers every row
	// without it (tests of other steps). The commands always set it.
	Ledger Ledger
	// PingRedis tells whether Redis answers (redis.UniversalClient.Ping).
	PingRedis func(context.Context) error
	// RedisTime reads Redis's clock in a round trip of its own, not queued
	// behind other commands (redis.UniversalClient.Time, outside any
	// batching); nil: the clock is learned from the throttle's answers
	// only. See Config.ClockSync.
	RedisTime func(context.Context) (time.Time, error)
	// DeadLetters receives rows that will not be registered; nil writes them
	// to bulkreg.DLQTopic(Config.Topic) on Config.Brokers.
	DeadLetters DeadLetterWriter
	// Registerer receives the metrics; nil means a private registry.
	Registerer prometheus.Registerer
	// Circuit is the fleet-wide circuit breaker (consumer/circuit.go); nil
	// calls without one (tests of other steps). The commands always set it.
	Circuit Breaker
	// Uploads is asked, once per upload a consumer meets, whether the
	// upload exists (consumer/door.go); a row of one that never did is
	// dead-lettered as a bad message. nil lets every row in (tests that
	// publish rows without creating their upload). The commands always set it.
	Uploads Uploads
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
	// now is one token per row asking the throttle or holding a slot due
	// now (see ask).
	now *dueNow
	// claims hands out the tokens a row needs to ask the SKU ledger for its
	// claim (job.go), the seller that started first before the others, as
	// c.now does for slots. Without it every row that entered a lane asked
	// at once: when an upload burst starts many sellers' first windows, a
	// consumer sent some 2,500 claims together, and the first sellers'
	// slots and calls queued in Redis behind the later sellers' claims
	// (bench many-sellers, 100 sellers × 500 rows, 4 consumers, 2 cores:
	// Redis answered in 40 to 100 ms, and in 4 runs of 7 991 to 1,820
	// slots went by unused, one run also got 89 × 429; with the tokens at
	// most 207 in 13 runs). A row takes a token for the first ask of each
	// claim and gives it back with the ledger's answer: a row told that
	// another row holds its SKU asks again without one, so it holds none
	// while it waits.
	claims *dueNow
	warm   *warmth
	turn   *probeTurn // one row at a time goes for the circuit's probe
	asks   *askGates  // a seller's rows do not ask for slots the throttle just refused
	clock  *redisClock
	door   *uploadDoor // nil without Deps.Uploads
	// reserving counts rows between asking for a slot and calling: the
	// clock is read on its own only while some row needs it (syncClock).
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
	if deps.Registry == nil || deps.Status == nil || deps.Calls == nil || deps.Retry == nil || deps.PingRedis == nil {
		return nil, errors.New("consumer: the registry, status recorder, call recorder, retry policy and Redis ping are all required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	reg := deps.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	span := deps.Throttle.Policy().Window + deps.Throttle.Policy().Margin // how long a seller keeps its rank (duenow.go)
	c := &Consumer{cfg: cfg, deps: deps, log: log, dlq: deps.DeadLetters, close: func() error { return nil }, calls: make(chan struct{}, cfg.MaxConcurrentCalls), now: newDueNow(cfg.MaxDueNow, span), claims: newDueNow(cfg.MaxDueNow, span), warm: &warmth{}, turn: newProbeTurn(), asks: newAskGates(), clock: newRedisClock(), door: newUploadDoor(deps.Uploads)}
	c.m = newMetrics(reg, func() float64 {
		if t := c.group.oldestUnfinished(); !t.IsZero() {
			return time.Since(t).Seconds()
		}
		return 0
	})
	if c.dlq == nil {
		w := newKafkaDLQ(cfg.Brokers, bulkreg.DLQTopic(cfg.Topic), cfg.KafkaTransport)
		c.dlq, c.close = w, w.Close
	}
	c.group = newGroup(cfg, log, c.m)
	c.group.handle = c.dispatch
	c.group.ready = c.readyToRead
	c.group.revoked = func(p *partition) {
		for _, r := range c.lanes.purge(func(r *row) bool { return r.part == p }) {
			r.giveBack()
		}
	}
	c.lanes = newLanes(cfg.SellerConcurrency, c.process,
		func(d int) { c.m.waiting.Add(float64(d)) }, func(d int) { c.m.activeSellers.Add(float64(d)) })
	c.redis = newRedisGate(deps.PingRedis, cfg.RedisProbeInterval, log, c.m.redisDown.Inc)
	if err := reg.Register(newBacklogCollector(c)); err != nil {
		return nil, fmt.Errorf("consumer: register the backlog metrics: %w", err)
	}
	if err := registerCircuit(reg, deps.Circuit); err != nil {
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
	go c.redis.run(probeCtx)
	if w, ok := c.deps.Registry.(Warmer); ok && c.cfg.KeepWarm > 0 {
		go c.keepWarm(probeCtx, w)
	}
	if c.deps.RedisTime != nil && c.cfg.ClockSync > 0 {
		go c.syncClock(probeCtx)
	}
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
	m, err := bulkreg.DecodeRecord(r.msg.Key, r.msg.Value) // key and value must name one seller
	if err != nil {
		c.log.Error("undecodable message: sending it to the dead-letter topic",
			"partition", r.msg.Partition, "offset", r.msg.Offset, "err", err)
		go c.deadLetter(r, DeadLetter{Original: r.msg, Class: ClassBadMessage, Message: err.Error(), FirstFailure: time.Now()}, c.log)
		return
	}
	r.m = m
	c.lanes.add(m.SellerID, r)
}

// claimAndWait claims the row's SKU and, unless it just did (waited), waits
// while the API is down for everyone; ok is false when the row is done or
// given back. again is true when the row met an outage: the wait may have
// outlasted its SKU claim, so the row claims again (waited then true), with
// a token of c.claims like any claim (job.go), since every row that waited
// asks at once when the API comes back.
//
//go:noinline
func (c *Consumer) claimAndWait(r *row, t *tries, sku *skuClaim, cb *rowCircuit, waited bool) (ok, again bool) {
	if !sku.claim() {
		return false, false
	}
	// ── end SKU ledger
	if waited {
		return true, false
	}
	met, ok := cb.wait()
	if !ok {
		r.giveBack()
		return false, false
	}
	if met {
		// Its failures so far were the outage's.
		t.retry = nil
		return true, true
	}
	// ── end circuit breaker
	return true, false
}

// attempt calls the API with the slot and acts on the answer: the row is
// done (again false), or it tries again after wait.
//
//go:noinline
func (c *Consumer) attempt(r *row, t *tries, slot *slot, cb *rowCircuit, sku *skuClaim, log *slog.Logger) (wait time.Duration, again bool) {
	res, made := c.call(r, slot, cb, log)
	cb.done()
	if !made && cb.refused {
		return 0, true // the circuit refused the call: no attempt spent, back to waiting for it
	}
	if !made {
		// The slot went by before a call could start: more rows are due
		// now than this consumer can call. Back off (jittered, growing)
		// before taking a new slot so the rows spread out instead of
		// all coming back at once.
		if t.missed == nil {
			t.missed = c.missedBackOff()
		}
		return t.missed.NextBackOff(), true
	}
	t.attempts++
	mk := c.afterCall(r, slot, res, sku, log)
	return c.conclude(r, t, &res, cb, sku, mk, log)
}

// tries is what one row's attempts have met so far.
type tries struct {
	// The retry budget starts at the first transient failure: time spent
	// waiting for slots, for Redis or behind a 429 is not a failure.
	retry, missed         backoff.BackOff
	refused               backoff.BackOff // paces retries after a Misconfigured answer when no circuit holds the row
	attempts, rateLimited int
	firstFailure          time.Time
}

// conclude acts on the answer to a call that was made: the row is done
// (again false), or it tries again after wait.
func (c *Consumer) conclude(r *row, t *tries, res *registryclient.Result, cb *rowCircuit, sku *skuClaim, mk marked, log *slog.Logger) (wait time.Duration, again bool) {
	switch res.Class {
	case registryclient.Registered, registryclient.Replayed:
		sku.registered(*res, t.attempts, mk) // ledger, then the upload's status
		return 0, false
	case registryclient.Permanent:
		log.Info("row refused by the registration API", "status", res.Status, "code", res.Code, "field", res.Field, "err", res.Err)
		c.record(r, sku.refused(*res, t.attempts), "failed", log) // releases the SKU's claim
		return 0, false
	case registryclient.RateLimited:
		c.m.rateLimited.Inc()
		t.rateLimited++
		if t.firstFailure.IsZero() {
			t.firstFailure = time.Now()
		}
		log.Warn("429 from the registration API: blocking the limit it names", "scope", res.Scope, "retry_after", res.RetryAfter, "attempt", t.attempts)
		if t.rateLimited > c.cfg.MaxRateLimited {
			c.deadLetter(r, deadLetterOf(r, *res, t.attempts, t.firstFailure), log)
			return 0, false
		}
		c.block(r, res.RetryAfter, res.Scope, log)
		// No backoff of our own: the block moved the seller's next slot past Retry-After.
		return 0, true
	case registryclient.Misconfigured:
		return c.refusedBulkreg(r, t, res, cb, log)
	default: // Transient
		if t.firstFailure.IsZero() {
			t.firstFailure = time.Now()
		}
		if cb.outage {
			// The API is down for everyone: not the row's failure. No
			// backoff of its own either: the circuit decides when to call.
			log.Info("transient registration failure during an outage of the registration API; the row waits for the circuit to close", "attempt", t.attempts, "status", res.Status, "err", res.Err)
			t.retry = nil
			return 0, true
		}
		if t.retry == nil {
			t.retry = c.deps.Retry.NewBackOff()
		}
		wait := t.retry.NextBackOff()
		if wait == backoff.Stop {
			log.Error("registration failed after the last attempt: sending the row to the dead-letter topic", "attempts", t.attempts, "err", res.Err)
			c.deadLetter(r, deadLetterOf(r, *res, t.attempts, t.firstFailure), log)
			return 0, false
		}
		log.Warn("transient registration failure, retrying", "attempt", t.attempts, "in", wait, "status", res.Status, "err", res.Err)
		return wait, true
	}
}

// slot is a throttle reservation whose time has come.
//
// Where the slot falls on this machine's clock is known only within a round
// trip: Redis ran the script somewhere between the request's send and the
// answer's arrival. due and bound are the two ends, each narrowed by every
// answer that carries the Redis clock (the reservation, then the check).
type slot struct {
	throttle.Reservation
	// due is never before the slot: the answer's arrival + the time left to
	// the slot by the Redis clock. The row sleeps until it.
	due time.Time
	// bound is never after the slot: the request's send + the time left to
	// the slot by the Redis clock. Lateness is measured from it, an upper
	// bound: a slow answer (a retransmit, a stalled host) or a timer that
	// fired late on a busy machine counts in full. With an app-wide limit
	// it is the earlier of the seller's and the app-wide slot (At − Spread):
	// the call is made at the later, so the earlier log sees it late.
	bound time.Time
	// now: the row holds a token of Consumer.now until its call starts.
	now bool
	// called: when the call was sent, on the Redis clock, never after it.
	// answered: when its answer came, on the Redis clock, never before it
	// (a settle must not move the slot short of the API's count).
	called, answered time.Time
}

// place narrows due and bound with one round trip that read the Redis clock
// (redisNow) between sent and arrived, and with what clock has learned of
// the Redis clock from every answer (clock.go), usually much tighter.
func (s *slot) place(clock *redisClock, sent, arrived, redisNow time.Time) {
	left := s.At.Sub(redisNow)
	due, bound := arrived.Add(left), sent.Add(left)
	clock.observe(sent, arrived, redisNow)
	if earliest, latest, ok := clock.place(s.At); ok {
		due, bound = minTime(due, latest), maxTime(bound, earliest)
	}
	bound = bound.Add(-s.Spread)
	if s.due.IsZero() || due.Before(s.due) {
		s.due = due
	}
	if bound.After(s.bound) {
		s.bound = bound
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// redisNow is the time on the Redis clock, from the slot; never later than
// the true one (due is the latest place of the slot on this clock).
func (s *slot) redisNow() time.Time { return s.At.Add(time.Since(s.due)) }

// redisNowLatest is redisNow from the other end: never earlier than the
// true time (bound is the earliest place of the slot).
func (s *slot) redisNowLatest() time.Time { return s.At.Add(time.Since(s.bound)) }

// ask asks the throttle once for the row's slot, once the row may ask
// (askGates) and holds a token of c.now (job.go takes both): a slot placed
// on this machine's clock, or nil and how long to wait before asking again;
// ok is false when the row must be given back. leave ends the row's turn at
// the seller's ask gate.
//
// A row asks with a token of c.now and keeps it while its slot is due now,
// until its call starts: this consumer holds at most MaxDueNow slots it has
// yet to call. Without it, the first rows of many sellers (or every row
// after an outage) all took slots due at once, far more than the machine
// could call within MaxLateness; most went by unused (each one a slot lost
// to the seller, since the next window's slots are already placed after it)
// and the rows took new ones, over and over. The tokens go to the seller
// that started asking first (duenow.go).
//
// A function of its own, like conclude, so that a row sleeping the last
// stretch to its slot in job.run (stepDue) keeps a small stack.
//
//go:noinline
func (c *Consumer) ask(ctx context.Context, r *row, leave func(time.Time, int), redisRetry backoff.BackOff, log *slog.Logger) (s *slot, wait time.Duration, ok bool) {
	sent := time.Now()
	res, err := c.deps.Throttle.Reserve(ctx, r.m.SellerID)
	switch {
	case err != nil:
		leave(time.Time{}, unknownRoom)
	case !res.Admitted:
		leave(time.Now().Add(res.Wait), 0)
	default:
		leave(time.Time{}, c.deps.Throttle.Policy().Limit-res.InWindow)
	}
	if err != nil || !res.Admitted || ctx.Err() != nil {
		c.now.release(r.m.SellerID)
	}
	if ctx.Err() != nil {
		if err == nil && res.Admitted { // the slot came just as the row was revoked
			c.release(&slot{Reservation: res})
		}
		return nil, 0, false
	}
	if err != nil {
		if unavailable(err) {
			c.redis.down(err)
		} else {
			log.Error("taking a throttle slot failed, retrying", "err", err)
		}
		return nil, redisRetry.NextBackOff(), true
	}
	// Redis computed Wait when it ran the script, somewhere between sent
	// and now. Under load nearly all of a round trip is the script
	// queueing in Redis before it runs; the answer comes back right after.
	// So the slot is due Wait after the answer arrived, not after sent:
	// measured with 100 sellers × 500 rows and 4 consumers on 2 cores
	// (bench, 100 ms margin), counting from sent brought 241 × 429 in
	// 50,000 calls, the midpoint of the round trip 77, counting from the
	// answer 0 (three runs). But an answer can also be late for reasons
	// that are not queueing (a retransmit, a stalled host, up to the read
	// timeout): then arrival + Wait is after the slot, and a call judged
	// from it could be late unseen. So lateness is judged from sent +
	// Wait (slot.bound), which is never after the slot.
	arrived := time.Now()
	if res.Lost {
		c.m.stateLost.Inc()
		log.Warn("Redis had lost the throttle's state of this seller's hash slot (restarted empty, flushed, or a new server after a restart or failover): no seller there gets a slot before the hold ends",
			"held_until", res.HeldUntil, "hold", time.Until(res.HeldUntil).Round(time.Millisecond))
	}
	if !res.Admitted {
		// The next free slot was beyond the throttle's MaxWait: nothing
		// is held, ask again when it is near.
		return nil, time.Until(arrived.Add(res.Wait)), true
	}
	s = &slot{Reservation: res, now: true}
	s.place(c.clock, sent, arrived, res.At.Add(-res.Wait))
	return s, 0, true
}

// notNow gives back the row's token of c.now, if it holds one.
func (c *Consumer) notNow(s *slot) {
	if s.now {
		s.now = false
		c.now.release(s.Seller)
	}
}

// checkLead is how long before its slot a row asks the throttle to confirm
// it: between one and two MaxLateness, at random. The check's round trip
// then falls before the slot instead of delaying the call, and the rows of
// one window spread their checks instead of queueing them in Redis at once.
func (c *Consumer) checkLead() time.Duration {
	return c.cfg.MaxLateness + rand.N(max(c.cfg.MaxLateness, time.Millisecond))
}

// call makes one registration call and writes it into the seller's
// compliance history. The call is not cancelled by a rebalance or shutdown
// (it finishes within the registry timeout), only when the drain times out.
//
// Calls run at most MaxConcurrentCalls at once. A call that cannot start
// within MaxLateness of its slot (it waited for a turn, its timer fired late
// on a busy machine, or Redis's answer came late) is not made: the throttle's
// margin only covers a small delay between the slot and the API counting the
// call, and a late call would shrink the gap to the next window's calls. Its
// slot is given back and the row takes a new one (made is false).
func (c *Consumer) call(r *row, s *slot, cb *rowCircuit, log *slog.Logger) (res registryclient.Result, made bool) {
	// Wait for a turn only as long as the lateness allows; waiting longer
	// would only queue behind rows that are late already.
	budget := time.NewTimer(max(0, c.cfg.MaxLateness-time.Since(s.bound)))
	defer budget.Stop()
	select {
	case c.calls <- struct{}{}:
		c.notNow(s)
	case <-budget.C:
		c.notNow(s)
		c.m.lateness.Observe(time.Since(s.bound).Seconds())
		c.m.late.Inc()
		c.release(s)
		return res, false
	case <-r.ctx().Done():
		c.notNow(s)
		c.release(s)
		return res, false
	}
	// The token is held for the call only: recording it below may wait for
	// Redis, and must not keep rows with good slots from calling.
	holding := true
	defer func() {
		if holding {
			<-c.calls
		}
	}()
	c.warm.calling(len(c.calls))
	// The circuit is asked before the lateness is judged, so its round trip
	// counts in the lateness. It is not cut short at the lateness: an
	// answer lost to our own deadline could be a probe granted and never
	// made, which holds the whole fleet for the probe's lease.
	if !cb.allow(r.ctx()) {
		c.release(s)
		return res, false
	}
	late := time.Since(s.bound)
	c.m.lateness.Observe(late.Seconds())
	if late > c.cfg.MaxLateness {
		cb.abandon()
		c.m.late.Inc()
		c.release(s)
		return res, false
	}
	if !c.redis.healthy() {
		// Redis went down while the row waited for a turn: fail closed, the
		// row takes a new slot once Redis answers again.
		cb.abandon()
		c.release(s)
		return res, false
	}
	m := r.m
	at := s.redisNow()
	res = c.deps.Registry.Register(r.finishCtx(), m.SellerID, m.IdempotencyKey, m.Product)
	s.answered = s.redisNowLatest()
	<-c.calls
	holding = false
	s.called = at
	cb.report(res, r.finishCtx().Err() != nil)
	class := res.Class.String()
	c.m.calls.WithLabelValues(class).Inc()
	c.m.latency.WithLabelValues(class).Observe(res.Latency.Seconds())
	return res, true
}

// Redis stores that can write a call's traces as one script on the seller's
// hash tag (internal/scriptbatch): compliance.Recorder, throttle.Throttle,
// ledger.Ledger. A store without it (a test's fake) is written on its own.
type (
	stepRecorder interface {
		RecordWith(ctx context.Context, seller string, c compliance.Call, steps ...scriptbatch.Step) error
	}
	slotSteps interface {
		SettleStep(r throttle.Reservation, at time.Time) (scriptbatch.Step, bool)
		ReleaseStep(r throttle.Reservation) (scriptbatch.Step, bool)
	}
	markSteps interface {
		MarkStep(seller, sku, row, hash, productID string, into *ledger.Entry) (scriptbatch.Step, error)
	}
)

// afterCall writes what a call that was made leaves in Redis: the call in
// the seller's compliance history, its slot settled at the answer (the API
// counted it) or given back (it did not), and a registration's SKU in the
// ledger (marked). These are one script on the seller's hash tag, one
// command instead of three: per-script overhead was most of Redis's time per
// row. Only the app-wide slot, on another hash tag, is settled on its own.
// The history is written before the drain ends or the call is logged as
// missing from it; the slot is best effort, as everywhere.
func (c *Consumer) afterCall(r *row, s *slot, res registryclient.Result, sku *skuClaim, log *slog.Logger) (mk marked) {
	m := r.m
	class := res.Class.String()
	call := compliance.Call{At: s.called, Status: res.Status, Class: class, Key: m.IdempotencyKey}
	count := counted(res.Class)
	rest := s.Reservation // what Settle or Release still has to do
	rec, batch := c.deps.Calls.(stepRecorder)
	var steps []scriptbatch.Step
	marking := false // the ledger's mark is a step of the batch
	if batch {
		if th, ok := c.deps.Throttle.(slotSteps); ok {
			var st scriptbatch.Step
			if count {
				st, ok = th.SettleStep(s.Reservation, s.answered)
			} else {
				st, ok = th.ReleaseStep(s.Reservation)
			}
			if ok {
				steps = append(steps, st)
				rest = rest.AppWide()
			}
		}
		var st scriptbatch.Step
		if st, marking = sku.markStep(res, &mk); marking {
			steps = append(steps, st)
		}
	}
	err := c.untilRedis(r.finishCtx(), "record the call in the compliance history", log, func(ctx context.Context) error {
		if batch {
			return rec.RecordWith(ctx, m.SellerID, call, steps...)
		}
		return c.deps.Calls.Record(ctx, m.SellerID, call)
	})
	if err != nil {
		log.Error("a registry call is missing from the compliance history: Redis did not take it before the drain ended",
			"status", res.Status, "class", class, "err", err)
		rest = s.Reservation // the batch's steps did not run: try the slot on its own
	}
	if marking {
		mk.done, mk.failed = err == nil, err != nil
	}
	switch {
	case count:
		c.settle(rest, s.answered)
	case res.Class == registryclient.RateLimited:
		// The API refused for the seller's limit: the slot goes back, but
		// the seller's gate stays shut until the block that follows says
		// when to ask again.
		c.unreserve(&slot{Reservation: rest})
	default:
		c.release(&slot{Reservation: rest})
	}
	return mk
}

// current asks the throttle whether the slot may still be used: the epoch
// it was granted in is current and the slot is still in the log (a slot
// outlives no Redis). The answer carries the Redis clock, which places the
// slot on this machine's clock again, usually closer than the reservation
// did: its round trip was often long, queued behind a burst of reservations.
// It waits at most until the call would be late anyway.
func (c *Consumer) current(ctx context.Context, s *slot, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(ctx, max(time.Millisecond, time.Until(s.bound.Add(c.cfg.MaxLateness))))
	defer cancel()
	sent := time.Now()
	chk, err := c.deps.Throttle.Check(ctx, s.Reservation)
	switch {
	case err != nil:
		if ctx.Err() == nil && unavailable(err) { // not our own deadline
			c.redis.down(err)
		}
		log.Debug("could not confirm the slot with the throttle; taking a new one", "err", err)
		return false
	case !chk.Good:
		c.m.stale.Inc()
		log.Warn("the slot was granted by a Redis that has since lost the seller's throttle state; taking a new one",
			"slot", s.At, "epoch", s.Epoch, "current_epoch", chk.Epoch)
		return false
	}
	s.place(c.clock, sent, time.Now(), chk.Now)
	return true
}

// counted reports whether the API may have counted the call against the
// seller's limit. It counts only registrations (201); a replay, a refusal or
// a 429 does not, so their slots go back to the log for the rows behind. A
// 5xx or a timeout may have registered the row before failing, so their
// slots stay.
func counted(c registryclient.Class) bool {
	switch c {
	case registryclient.Replayed, registryclient.Permanent, registryclient.RateLimited, registryclient.Misconfigured:
		return false
	}
	return true
}

// settle moves a counted call's slot to a margin before its answer
// (Throttle.Settle), when that is later; best effort: a slot not settled
// keeps its place, as before settling existed.
func (c *Consumer) settle(r throttle.Reservation, answered time.Time) {
	if r.ID == "" && r.Global.ID == "" {
		// The call's script settled the seller's slot and there is no
		// app-wide one: nothing is left, and no timer is made for it on
		// every registered row.
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.deps.Throttle.Settle(ctx, r, answered); err != nil {
		c.log.Debug("could not settle a slot at its answer", "seller", r.Seller, "err", err)
	}
}

// release gives a used slot back to the throttle; best effort. Once it is
// back, the seller's rows waiting at its ask gate may ask at once: the
// place is free now.
func (c *Consumer) release(s *slot) {
	if c.unreserve(s) {
		c.asks.reopen(s.Seller)
	}
}

// unreserve gives the slot back to the throttle and reports whether it did.
func (c *Consumer) unreserve(s *slot) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.deps.Throttle.Release(ctx, s.Reservation); err != nil {
		c.log.Debug("could not give a slot back to the throttle", "seller", s.Seller, "err", err)
		return false
	}
	return true
}

// block tells the throttle the API refused the seller, or with an
// app-wide 429 the whole application, until Retry-After.
func (c *Consumer) block(r *row, retryAfter time.Duration, scope registryclient.Scope, log *slog.Logger) {
	if retryAfter <= 0 {
		retryAfter = time.Second
	}
	what, block := "the seller", func(ctx context.Context) error { return c.deps.Throttle.Block(ctx, r.m.SellerID, retryAfter) }
	if scope == registryclient.ScopeApp {
		what, block = "the app-wide limit", func(ctx context.Context) error { return c.deps.Throttle.BlockGlobal(ctx, retryAfter) }
	}
	if err := c.untilRedis(r.ctx(), "block "+what+" in the throttle", log, block); err != nil {
		log.Warn("could not block "+what+" in the throttle", "err", err)
	}
}

// record writes the row's outcome into its upload's status, then marks the
// row finished. A row is finished only once its outcome is recorded: while
// Redis does not answer or refuses the write (READONLY after a failover, OOM
// under noeviction, MISCONF, ...) the write is tried again until the drain
// ends, and then the row is given back unfinished; its next owner calls
// again (a replay, 200) and records it. The store's own refusals (an empty
// upload id, a row below 1) cannot happen to a decoded row, so every error
// here is Redis's.
func (c *Consumer) record(r *row, rr uploadstatus.RowResult, result string, log *slog.Logger) {
	rr.Row = r.m.Row
	err := c.untilRedis(r.finishCtx(), "record the row's result", log,
		func(ctx context.Context) error { return c.deps.Status.RecordRow(ctx, r.m.UploadID, rr) })
	if err != nil {
		log.Error("could not record the row's result before the drain ended; the row will be read again", "state", rr.State, "err", err)
		r.giveBack()
		return
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

// untilRedis runs op until it succeeds or ctx ends, backing off between
// attempts, and returns the last error when ctx ended first. Every error is
// worth another attempt: Redis not answering, and Redis refusing for a while
// (READONLY during a failover, OOM under noeviction, MISCONF, NOREPLICAS,
// BUSY, LOADING). A caller may not take an error for an answer: a write that
// failed is not done.
func (c *Consumer) untilRedis(ctx context.Context, what string, log *slog.Logger, op func(context.Context) error) error {
	retry := c.redisBackOff()
	for n := 1; ; n++ {
		err := op(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if unavailable(err) {
			c.redis.down(err) // the gate logs it once
		} else if n == 1 {
			log.Warn("Redis refused a write; trying again until it takes it or the drain ends", "op", what, "err", err)
		}
		if !sleep(ctx, retry.NextBackOff()) {
			return err
		}
	}
}

// unavailable tells an error of Redis not answering, which stops registry
// calls until the probe hears from Redis again (the gate), from any other.
// Every package that talks to Redis wraps that case in
// redisfail.ErrUnavailable. It decides nothing else: no error is taken for
// an answer.
func unavailable(err error) bool { return errors.Is(err, redisfail.ErrUnavailable) }

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
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}
