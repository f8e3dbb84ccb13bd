// The row's attempt: decode, claim its SKU, wait out an outage, call the API
// and act on the answer.

package consumer

import (
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/bulkreg/bulkreg"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/throttle"
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
		// probe, was judged its seller's own: with the budget started
		// afresh, a sick seller's rows probed for ever (sim seed 17003).
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
	if c.late.on {
		c.flights.land(r.m.SellerID, slot.flight, c.late.landing(slot, c.countedBy(slot, res), time.Now(), c.policy.Margin))
	}
	return c.conclude(r, t, &res, cb, sku, mk, log)
}

// holdUntilLanded gives s back and waits until an earlier call of the
// row's seller has landed (landed is closed) or the row is done; the row
// then takes a new slot, which sees where that call's settle put it.
func (c *Consumer) holdUntilLanded(r *row, s *slot, landed <-chan struct{}, log *slog.Logger, why string) {
	c.notNow(s)
	c.m.held.Inc()
	c.release(s)
	log.Debug(why, "slot", s.At)
	select {
	case <-landed:
	case <-r.ctx().Done():
	}
}

// lateRule says how a call that the API counts later than the margin after
// its slot can overtake the seller's next slots under a log of slots (Fixed
// and TokenBucket; the sliding log holds latest counts and needs none):
//   - a token bucket spaces its calls by its interval, far less than half a
//     window (sim seeds 11012 and 14009, a burst of 1); a burst lets calls
//     go back to back but each still takes a token, so a call counted late
//     lands among the next calls' tokens whatever the burst (sim seed
//     20014);
//   - a fixed window keeps a window's slots a margin before its end, so a
//     call counted later than that may be counted in the next window, whose
//     first calls start right after the edge (sim seed 15007).
//
// Under a token bucket a landing sends back the slots due within as many
// intervals of it as the burst holds: the bucket the late count emptied
// refills one token an interval. With a large burst that may send back slots
// the bucket would have held; they take new ones, placed after the settle.
type lateRule struct {
	// on: a late landing sends back the slots asked for before it and due
	// where the late call may share their window (lateLanding.sends), a
	// call waits while an earlier one of its seller half a window before it
	// has not landed (flights.before), and while an earlier one that may be
	// counted late has not landed (flights.lateBefore).
	on bool
	// reach: the slots due within reach of the landing are sent back.
	reach time.Duration
	// window: fixed windows, aligned to the Unix epoch on the Redis clock:
	// only calls of an earlier window hold a slot; 0 (a token bucket): every
	// earlier call does.
	window time.Duration
	// remember is how long a late landing matters at least (flights.lateSince).
	remember time.Duration
}

func newLateRule(p throttle.Policy) lateRule {
	switch {
	case p.Kind == throttle.TokenBucket:
		interval := p.Window / time.Duration(p.Limit)
		reach := time.Duration(p.BucketSize()) * interval
		return lateRule{on: true, reach: reach, remember: reach + p.Window}
	case p.Kind == throttle.Fixed:
		return lateRule{on: true, reach: p.Window, window: p.Window, remember: 2 * p.Window}
	}
	return lateRule{}
}

// holdsFrom is the slot before which a call in flight that may be counted
// late holds the call at slot at: at itself under a token bucket, the start
// of at's window under a fixed window.
func (l lateRule) holdsFrom(at time.Time) time.Time {
	if l.window <= 0 {
		return at
	}
	w := l.window.Microseconds()
	return time.UnixMicro(at.UnixMicro() / w * w)
}

// landing is what the landing, at now, of the call made at s, which the API
// counted by counted (Redis clock) at the latest, sends back: nothing (the
// zero value) when the rule is off or the call was counted within the
// margin of its slot.
func (l lateRule) landing(s *slot, counted, now time.Time, margin time.Duration) lateLanding {
	if !l.on || counted.Sub(s.At) <= margin {
		return lateLanding{}
	}
	late := lateLanding{at: now, holds: now.Add(l.reach)}
	late.until = maxTime(now.Add(l.remember), late.holds)
	return late
}

// countedBy is the latest instant (Redis clock) the API may have counted the
// call made at s, which its settle tells the throttle: its answer, or for a
// call that got no answer one more call timeout after the client gave up
// (countedWithin). Under the sliding log a call without an answer is not
// settled at all (afterCall): its latest count is in the log already.
func (c *Consumer) countedBy(s *slot, res registryclient.Result) time.Time {
	if !unanswered(res) {
		return s.answered
	}
	return s.answered.Add(c.cfg.CallTimeout)
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
	if c.late.on {
		// Under a log of slots (lateRule), an earlier call of the seller,
		// half a window or more before this slot, still without an answer
		// may be counted in this slot's window (inflight.go): the slot goes
		// back, and once that call has landed the row takes a new one, which
		// sees where the settle put it.
		if landed := c.flights.before(r.m.SellerID, s.At.Add(-c.policy.Window/2)); landed != nil {
			c.holdUntilLanded(r, s, landed, log, "an earlier call of the seller has no answer yet; the slot goes back until it lands")
			return res, false
		}
		// A call of the seller before this slot (under a fixed window:
		// before this slot's window) may be counted, or was, later than the
		// margin, and its settle is not written yet: the slot goes back, and
		// once that call has landed the row takes a new one, which sees
		// where the settle put the bucket or which window it counted in.
		if landed := c.flights.lateBefore(r.m.SellerID, c.late.holdsFrom(s.At), s.redisNow(), c.policy.Margin); landed != nil {
			c.holdUntilLanded(r, s, landed, log, "an earlier call of the seller may be counted late and has not landed; the slot goes back until it lands")
			return res, false
		}
	}
	// A call of the seller counted late may have landed after the slot's
	// check (checkSlot asks before): the slot goes back.
	if c.sentBackByLateLanding(r, s, log) {
		c.notNow(s)
		c.release(s)
		return res, false
	}
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
	if c.late.on {
		s.flight = c.flights.start(m.SellerID, s.At)
	}
	// The clock is read last, right before the request is written: a call
	// later than its slot allows (waiting for a turn, a late timer, a
	// process paused past its slot) is not made. The throttle's log holds
	// its latest count on the assumption that it is sent by then
	// (Reservation.SendBy); only a pause between here and the write (a
	// SIGSTOP in this instant) can send it later.
	late := time.Since(s.bound)
	c.m.lateness.Observe(late.Seconds())
	if late > s.sendWithin(c.cfg.MaxLateness) {
		c.flights.land(m.SellerID, s.flight, lateLanding{})
		s.flight = nil
		cb.abandon()
		c.m.late.Inc()
		c.release(s)
		return res, false
	}
	at := s.redisNow()
	res = c.deps.Registry.Register(r.finishCtx(), m.SellerID, m.IdempotencyKey, m.Product)
	s.answered = s.redisNowLatest()
	if c.late.on {
		c.flights.answer(s.flight, s.answered)
	}
	<-c.calls
	holding = false
	s.called = at
	cb.report(res, r.finishCtx().Err() != nil)
	class := res.Class.String()
	c.m.calls.WithLabelValues(class).Inc()
	c.m.latency.WithLabelValues(class).Observe(res.Latency.Seconds())
	return res, true
}
