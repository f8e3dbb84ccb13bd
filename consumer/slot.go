// A row's throttle slot: asking for it, placing it on this machine's clock,
// confirming it, settling it and giving it back.

package consumer

import (
	"context"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/bulkreg/bulkreg/throttle"
)

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

// countedWithin is how long after it is sent the API may count a call whose
// answer never came: the client's timeout, then one more, which the API may
// take to get to it without seeing the client leave (an API can count a
// call a fraction of a second after the client's timeout). How long an API
// goes on with a call its client left is not knowable from here; bulkreg
// allows it one more call timeout (a call slower than twice the timeout is
// an outage's, not a spike's). The throttle's log holds every call's latest
// count that far after its send from the reservation on
// (throttle.Policy.CallTimeout, set by Config.ThrottlePolicy), so a call
// that gets no answer needs no settle of its own.
func countedWithin(timeout time.Duration) time.Duration { return 2 * timeout }

// sendWithin is how long after the slot the call may still be sent: the
// consumer's own MaxLateness, or less when the throttle's log assumed less
// (Reservation.SendBy). Measured from bound, the earliest the slot can be
// on this clock, so a lateness under it is under it on the Redis clock too.
func (s *slot) sendWithin(maxLateness time.Duration) time.Duration {
	if s.SendBy.IsZero() {
		return maxLateness
	}
	return min(maxLateness, s.SendBy.Sub(s.At.Add(-s.Spread)))
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
// after an outage) would all take slots due at once, far more than the
// machine could call within MaxLateness; most would go by unused (each one
// a slot lost to the seller, since the next window's slots are already
// placed after it) and the rows would take new ones, over and over. The
// tokens go to the seller that started asking first (duenow.go).
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
		leave(time.Time{}, res.Room)
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
	// and now. Under load nearly all of a round trip is the script queueing
	// in Redis before it runs; the answer comes back right after. So the
	// slot is due Wait after the answer arrived, not after sent: with 100
	// sellers × 500 rows and 4 consumers on 2 cores (bench, 100 ms margin),
	// counting from sent brings hundreds of 429s in 50,000 calls, the
	// midpoint of the round trip dozens, counting from the answer none. But
	// an answer can also be late for reasons that are not queueing (a
	// retransmit, a stalled host, up to the read timeout): then arrival +
	// Wait is after the slot, and a call judged from it could be late
	// unseen. So lateness is judged from sent + Wait (slot.bound), which is
	// never after the slot.
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

// checkAt is when a row whose slot is due at due asks the throttle to
// confirm it: one and a half to two MaxLateness before, so the check's
// round trip falls before the slot instead of delaying the call, at the
// start of the half-MaxLateness step of the clock it falls in. The rows of
// a seller whose slots are that close then ask at the same instant and
// share one check script (Throttle.Check). A seller's slots are spread over
// the few milliseconds its reservations took; with a lead at random its
// rows would ask nearly one by one (2.6 rows per check script in the
// bench), and a random lead would only spread scripts that sharing saves
// altogether.
func (c *Consumer) checkAt(due time.Time) time.Time {
	lead := c.cfg.MaxLateness + c.cfg.MaxLateness/2
	return due.Add(-lead).Truncate(max(c.cfg.MaxLateness/2, time.Millisecond))
}

// current asks the throttle whether the slot may still be used: the epoch
// it was granted in is current and the slot is still in the log (a slot
// outlives no Redis). The answer carries the Redis clock, which places the
// slot on this machine's clock again, usually closer than the reservation
// did: its round trip was often long, queued behind a burst of reservations.
// It waits at most until the call would be late anyway.
func (c *Consumer) current(ctx context.Context, s *slot, log *slog.Logger) bool {
	return c.confirm(ctx, s, c.deps.Throttle.Check, log)
}

// checkSlot is the check shortly before the slot (stepCheck): current.
// Asked here rather than only at the call (attempt.go), its round trip is
// off the call's path: on a starved machine (a core kept busy) a round trip
// at the slot would make calls late and their slots go by. A slot once
// granted needs no other check: the throttle wrote its call's latest count
// when it granted it (package throttle).
func (c *Consumer) checkSlot(ctx context.Context, s *slot, log *slog.Logger) bool {
	return c.current(ctx, s, log)
}

func (c *Consumer) confirm(ctx context.Context, s *slot, check func(context.Context, throttle.Reservation) (throttle.SlotCheck, error), log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(ctx, max(time.Millisecond, time.Until(s.bound.Add(c.cfg.MaxLateness))))
	defer cancel()
	sent := time.Now()
	chk, err := check(ctx, s.Reservation)
	switch {
	case err != nil:
		if ctx.Err() == nil && unavailable(err) { // not our own deadline
			c.redis.down(err)
		}
		log.Debug("could not confirm the slot with the throttle; taking a new one", "err", err)
		return false
	case !chk.Good && chk.Epoch == s.Epoch && (s.Global.ID == "" || chk.GlobalEpoch == s.Global.Epoch):
		// The state is Redis's own: the slot was given back.
		c.m.held.Inc()
		log.Debug("the slot is no longer the seller's to use (given back); taking a new one", "slot", s.At)
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

// slotWriteTimeout bounds a slot's settle or release; both are best effort.
const slotWriteTimeout = time.Second

// settle tells the throttle when a counted call was answered
// (Throttle.Settle); best effort: a call not settled keeps its latest count
// in the log, which is safe, only later than it needs to be.
func (c *Consumer) settle(r throttle.Reservation, answered time.Time) {
	if r.ID == "" && r.Global.ID == "" {
		// The call's script settled the seller's slot and there is no
		// app-wide one: nothing is left, and no timer is made for it on
		// every registered row.
		return
	}
	if err := c.deps.Throttle.Settle(c.slotWrites.get(), r, answered); err != nil {
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
	if err := c.deps.Throttle.Release(c.slotWrites.get(), s.Reservation); err != nil {
		c.log.Debug("could not give a slot back to the throttle", "seller", s.Seller, "err", err)
		return false
	}
	return true
}
