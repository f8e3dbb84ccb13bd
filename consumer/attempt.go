// The row's attempt: decode, claim its SKU, wait out an outage, call the API
// and act on the answer.

package consumer

import (
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/bulkreg/bulkreg"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
)

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
	if c.runners != nil {
		c.runners.add(r)
		return
	}
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
		// Its failures so far were the outage's, unless its last one, a
		// probe, was judged its seller's own: a budget started afresh then
		// would let a sick seller's rows be probed for ever.
		if !cb.sick {
			t.retry = nil
		}
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

// takeTurn takes one of the MaxConcurrentCalls turns for the row's call,
// waiting only as long as the lateness allows: waiting longer would only
// queue behind rows that are late already. A turn is usually free, and is
// then taken without the timer that bounds the wait (one per row).
func (c *Consumer) takeTurn(r *row, s *slot) bool {
	select {
	case c.calls <- struct{}{}:
		c.notNow(s)
		return true
	default:
	}
	budget := time.NewTimer(max(0, c.cfg.MaxLateness-time.Since(s.bound)))
	defer budget.Stop()
	select {
	case c.calls <- struct{}{}:
		c.notNow(s)
		return true
	case <-budget.C:
		c.notNow(s)
		c.m.lateness.Observe(time.Since(s.bound).Seconds())
		c.m.late.Inc()
		c.release(s)
	case <-r.ctx().Done():
		c.notNow(s)
		c.release(s)
	}
	return false
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
			c.deadLetterHeld(r, deadLetterOf(r, *res, t.attempts, t.firstFailure), sku, log)
			return 0, false
		}
		c.block(r, res.RetryAfter, res.Scope, log)
		// No backoff of our own: the block moved the seller's next slot past Retry-After.
		return 0, true
	case registryclient.Misconfigured:
		return c.refusedBulkreg(r, t, res, cb, sku, log)
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
			c.deadLetterHeld(r, deadLetterOf(r, *res, t.attempts, t.firstFailure), sku, log)
			return 0, false
		}
		log.Warn("transient registration failure, retrying", "attempt", t.attempts, "in", wait, "status", res.Status, "err", res.Err)
		return wait, true
	}
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
	if !c.takeTurn(r, s) {
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
	if !c.redis.healthy() {
		// Redis went down while the row waited for a turn: fail closed, the
		// row takes a new slot once Redis answers again.
		cb.abandon()
		c.release(s)
		return res, false
	}
	m := r.m
	// The clock is read last, right before the request is written: a call
	// later than its slot allows (waiting for a turn, a late timer, a
	// process paused past its slot) is not made. The throttle's log holds
	// its latest count on the assumption that it is sent by then
	// (Reservation.SendBy); only a pause between here and the write (a
	// SIGSTOP in this instant) can send it later.
	late := time.Since(s.bound)
	c.m.lateness.Observe(late.Seconds())
	if late > s.sendWithin(c.cfg.MaxLateness) {
		cb.abandon()
		c.m.late.Inc()
		c.release(s)
		return res, false
	}
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
