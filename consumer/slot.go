// A row's throttle slot: asking for it, placing it on this machine's clock,
// confirming it, settling it and giving it back.

package consumer

import (
	"time"

	"github.com/bulkreg/bulkreg/internal/redisclock"
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
// the Redis clock from every answer (internal/redisclock), usually much tighter.
func (s *slot) place(clock *redisclock.Clock, sent, arrived, redisNow time.Time) {
	left := s.At.Sub(redisNow)
	clock.Observe(sent, arrived, redisNow)
	s.narrow(arrived.Add(left), sent.Add(left))
	if earliest, latest, ok := clock.Place(s.At); ok {
		s.narrow(latest, earliest)
	}
}

// narrow keeps the earliest due and the latest bound (less the spread) seen.
func (s *slot) narrow(due, bound time.Time) {
	if s.due.IsZero() || due.Before(s.due) {
		s.due = due
	}
	if bound = bound.Add(-s.Spread); bound.After(s.bound) {
		s.bound = bound
	}
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

// checkAt is when a row whose slot is due at due asks the throttle to
// confirm it: one and a half to two MaxLateness before, so the check's
// round trip falls before the slot instead of delaying the call, at the
// start of the half-MaxLateness step of the clock it falls in, so the rows
// of a seller whose slots are that close share one check (runner.hand).
func (c *Consumer) checkAt(due time.Time) time.Time {
	lead := c.cfg.MaxLateness + c.cfg.MaxLateness/2
	return due.Add(-lead).Truncate(max(c.cfg.MaxLateness/2, time.Millisecond))
}

// slotWriteTimeout bounds a batch's settles and releases of slots left
// after its write; they are best effort: a call not settled keeps its
// latest count in the log, which is safe, only later than it needs to be,
// and a slot not given back is one its seller does not use.
const slotWriteTimeout = time.Second
