package consumer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// job is one row's way through the pipeline (take a slot → call → classify
// → record). Most of a row's life is waiting: for its slot to come near (up
// to the throttle's MaxWait), for a slot beyond MaxWait, for a token to
// claim its SKU, for a place at its seller's ask gate, for a due-now token,
// for a retry. A row that waits long parks: it holds a timer and this
// struct, not a goroutine. With a window's worth of slots booked per
// seller, a consumer holds thousands of waiting rows, and a goroutine stack
// each would be most of its memory (bench many-sellers: 2,500 sleeping rows
// per consumer, about 20 MB of stacks). Waits of at most twice MaxLateness
// (the last stretch to the slot) and rare ones (Redis down, the circuit
// open, a SKU another row is registering) still block the row's goroutine.
type job struct {
	c    *Consumer
	r    *row
	log  *slog.Logger
	t    tries
	sku  *skuClaim
	cb   *rowCircuit
	next step
	// done tells the row's lane that the row is finished or given back.
	done func()

	// While the row takes a slot (stepReserve to stepCall).
	slot       *slot
	leave      func(askAgain time.Time, room int) // the row's place at the seller's ask gate, while it holds one
	redisRetry backoff.BackOff
	start      time.Time
	reserving  bool
	waited     bool // stepClaim claims again after waiting out an outage, and does not wait again
	ended      bool // end ran: the row settled what it held

	// A park's two wake-ups (the timer, the row's context ending): the
	// first one to take the lock resumes the row, the other does nothing.
	mu      sync.Mutex
	woken   bool
	timer   *time.Timer
	stopCtx func() bool
}

// step is where a job goes on from.
type step uint8

const (
	stepClaim     step = iota // wait for a claim token, claim the SKU, wait while the circuit is open
	stepReserve               // wait for a place at the seller's ask gate
	stepToken                 // wait for a token for a slot due now
	stepAsk                   // ask the throttle for a slot
	stepCheck                 // confirm the slot shortly before it
	stepDue                   // wait out the last stretch to the slot
	stepCall                  // call the API with the slot and act on the answer
	stepUnreserve             // the row was revoked while it held a slot: give the slot back, then the row
	stepGiveBack              // the row was revoked while it waited: give it back
)

// process starts a decoded row in its seller's lane. It reports true when
// the row is finished or given back, false when it parked: done is called
// when it ends, from another goroutine.
func (c *Consumer) process(r *row, done func()) bool {
	if r.ctx().Err() != nil { // the partition was revoked while the row sat in its lane
		r.giveBack()
		return true
	}
	log := rowLogger(c.log, r)
	j := &job{c: c, r: r, log: log, done: done}
	c.jobs.Add(1) // done in end, after the row settled its claim
	// ── SKU ledger (consumer/ledger.go): claim before each slot, settle at the end.
	j.sku = c.newSKUClaim(r, log)
	// ── circuit breaker (consumer/circuit.go): wait while the API is down for everyone.
	j.cb = c.newRowCircuit(r, log)
	return j.run()
}

// run takes the row through its steps until it ends (true) or parks (false).
func (j *job) run() bool {
	c, r := j.c, j.r
	for {
		switch j.next {
		case stepClaim:
			if c.deps.Ledger != nil && !j.sku.token {
				if !c.claims.acquireOr(r.ctx(), r.m.SellerID, j) {
					j.log.Debug("the row waits for a token to claim its SKU")
					return false // parked until granted
				}
				j.sku.token = true
			}
			ok, again := c.claimAndWait(r, &j.t, j.sku, j.cb, j.waited)
			j.sku.giveToken() // the claim gave up before asking the ledger
			j.waited = again
			if !ok {
				return j.end()
			}
			if again {
				continue // claim again, after the outage, and go on (holding the probe's turn if it took it)
			}
			j.beginReserve()
			j.next = stepReserve

		case stepReserve:
			ctx := r.ctx()
			if !c.redis.wait(ctx) {
				return j.giveBack()
			}
			leave, parked := c.asks.enterOr(ctx, r.m.SellerID, j)
			if parked {
				j.log.Debug("the row waits at its seller's ask gate")
				return false // parked until admitted
			}
			j.leave = leave
			j.next = stepToken

		case stepToken:
			if !c.now.acquireOr(r.ctx(), r.m.SellerID, j) {
				j.log.Debug("the row waits for a token to ask for a slot due now")
				return false // parked until granted
			}
			j.next = stepAsk

		case stepAsk:
			leave := j.leave
			j.leave = nil
			s, wait, ok := c.ask(r.ctx(), r, leave, j.redisRetry, j.log)
			if !ok {
				return j.giveBack()
			}
			if s == nil {
				return j.park(wait, stepReserve, stepGiveBack)
			}
			j.slot = s
			// Shortly before the slot the throttle confirms it. A slot due
			// sooner than that was granted just now: the reservation itself
			// vouches for its epoch.
			if at := c.checkAt(s.due); time.Until(at) > 0 {
				c.notNow(s)
				return j.park(time.Until(at), stepCheck, stepUnreserve)
			}
			if j.reclaim() {
				continue
			}
			j.next = stepDue

		case stepCheck:
			if j.reclaim() {
				continue
			}
			if !c.checkSlot(r.ctx(), j.slot, j.log) {
				c.release(j.slot)
				j.slot = nil
				if r.ctx().Err() != nil {
					return j.giveBack()
				}
				j.next = stepReserve
				continue
			}
			j.next = stepDue

		case stepDue:
			s := j.slot
			if !c.sleepDue(r.ctx(), time.Until(s.due)) {
				c.notNow(s)
				j.next = stepUnreserve
				continue
			}
			c.m.throttleWait.Observe(time.Since(j.start).Seconds())
			c.m.uncertainty.Observe(s.due.Sub(s.bound).Seconds())
			if !c.redis.healthy() {
				// Redis went down while the row slept towards its slot: fail
				// closed. The slot is given back if Redis answers that.
				c.notNow(s)
				c.release(s)
				j.slot = nil
				j.next = stepReserve
				continue
			}
			j.endReserve()
			j.next = stepCall

		case stepCall:
			s := j.slot
			j.slot = nil
			wait, again := c.attempt(r, &j.t, s, j.cb, j.sku, j.log)
			if !again {
				return j.end()
			}
			if wait > 0 {
				return j.park(wait, stepClaim, stepGiveBack)
			}
			j.next = stepClaim

		case stepUnreserve:
			c.release(j.slot)
			j.slot = nil
			return j.giveBack()

		default: // stepGiveBack
			return j.giveBack()
		}
	}
}

// beginReserve starts the row's wait for a slot: it counts in the waiting
// gauge and keeps the Redis clock read (reserving) until it calls.
func (j *job) beginReserve() {
	j.c.m.waiting.Inc()
	j.c.reserving.Add(1)
	j.reserving = true
	j.start = time.Now()
	j.redisRetry = j.c.redisBackOff()
}

// reclaim gives the slot back and sends the row to claim its SKU again
// when its claim may be gone with a loss of Redis's data (skuClaim.stale).
// It runs at the slot's check, or at once for a slot due sooner: a
// slot after a loss starts at its hold's end at the earliest, so by then
// every call in flight at the loss has been answered and marked, and the
// claim asked again sees that mark.
func (j *job) reclaim() bool {
	s := j.slot
	if !j.sku.stale(s.Reservation) {
		return false
	}
	j.log.Debug("the row's claim on its SKU was taken before the hold after a loss of Redis's data ended; claiming it again before the call", "sku", j.r.m.Product.SellerSKU, "held_until", s.HeldUntil)
	j.c.notNow(s)
	j.c.release(s)
	j.slot = nil
	j.endReserve()
	j.next = stepClaim
	return true
}

func (j *job) endReserve() {
	if j.reserving {
		j.reserving = false
		j.c.m.waiting.Dec()
		j.c.reserving.Add(-1)
	}
}

// giveBack leaves the row unfinished (rebalance, shutdown) and ends the job.
func (j *job) giveBack() bool {
	j.r.giveBack()
	return j.end()
}

// end settles what the row holds (its SKU claim, its place at the circuit)
// and tells the lane.
func (j *job) end() bool {
	if j.ended {
		return true
	}
	j.ended = true
	j.sku.giveToken()
	j.endReserve()
	j.sku.settle()
	j.cb.done()
	j.c.jobs.Done()
	return true
}

// admitted resumes a job that parked at its seller's ask gate (enterOr).
func (j *job) admitted(leave func(askAgain time.Time, room int), ok bool) {
	if !ok {
		j.resume(stepGiveBack)
		return
	}
	j.leave = leave
	j.resume(stepToken)
}

// tokenGranted resumes a job that queued for a token of c.claims or c.now.
func (j *job) tokenGranted(from *dueNow, ok bool) {
	if from == j.c.claims {
		j.claimGranted(ok)
		return
	}
	j.granted(ok)
}

// claimGranted resumes a job that queued for a token of c.claims.
func (j *job) claimGranted(ok bool) {
	if !ok {
		j.resume(stepGiveBack)
		return
	}
	j.sku.token = true
	j.resume(stepClaim)
}

// granted resumes a job that queued for a token of c.now (acquireOr).
func (j *job) granted(ok bool) {
	if !ok {
		j.leave(time.Time{}, unknownRoom)
		j.leave = nil
		j.resume(stepGiveBack)
		return
	}
	j.resume(stepAsk)
}

// resume goes on with a parked job at next, on the calling goroutine, and
// tells the lane when the row ends.
func (j *job) resume(next step) {
	j.next = next
	if j.run() {
		j.done()
	}
}

// park waits d without a goroutine, then goes on at next, or at revoked when
// the row's context ends first. It returns false: the row did not end here.
func (j *job) park(d time.Duration, next, revoked step) bool {
	ctx := j.r.ctx()
	j.mu.Lock()
	j.woken = false
	j.timer = time.AfterFunc(d, func() { j.c.workers.Go(func() { j.wake(next, false) }) })
	j.stopCtx = context.AfterFunc(ctx, func() { j.wake(revoked, true) })
	j.mu.Unlock()
	return false
}

// wake resumes a parked job at next on the goroutine it is called on; only
// the first of a park's two wake-ups does.
func (j *job) wake(next step, byCtx bool) {
	j.mu.Lock()
	if j.woken {
		j.mu.Unlock()
		return
	}
	j.woken = true
	if byCtx {
		j.timer.Stop()
	} else {
		j.stopCtx()
	}
	j.timer, j.stopCtx = nil, nil
	j.mu.Unlock()
	j.resume(next)
}
