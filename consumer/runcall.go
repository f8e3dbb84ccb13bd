package consumer

import "time"

// callJob is one call a runner hands to the call pool at its slot.
type callJob struct {
	it    *item
	batch *callBatch
}

// callWorker makes the calls of the runners' batches, one at a time, until
// the pool is closed (Run ends). MaxConcurrentCalls workers run.
func (c *Consumer) callWorker(jobs <-chan callJob) {
	for j := range jobs {
		c.callOne(j.it)
		j.batch.answered()
	}
}

// callOne makes one row's call at its slot, as the other path's call does:
// the circuit is asked right before it, and the clock is read last, right
// before the request is written; a call later than its slot allows is not
// made (it.missed), since the throttle's log holds its latest count on the
// assumption that it is sent by Reservation.SendBy. The call is not
// cancelled by a rebalance, only when the drain times out.
func (c *Consumer) callOne(it *item) {
	r, s := it.r, it.slot
	c.calls <- struct{}{} // a turn: the keep-warm requests take them too
	holding := true
	defer func() {
		if holding {
			<-c.calls
		}
	}()
	c.warm.calling(len(c.calls))
	if it.start {
		// The call starts: its place among the calls due now goes to the
		// next runner (startBudget).
		it.start = false
		c.starts.give(1)
	}
	if !it.cb.allow(r.ctx()) {
		return // refused by the circuit: no attempt spent
	}
	if !c.redis.healthy() {
		it.cb.abandon()
		return
	}
	late := time.Since(s.bound)
	c.m.lateness.Observe(late.Seconds())
	if late > s.sendWithin(c.cfg.MaxLateness) {
		it.cb.abandon()
		c.m.late.Inc()
		it.missed = true
		return
	}
	at := s.redisNow()
	m := r.m
	res := c.deps.Registry.Register(r.finishCtx(), m.SellerID, m.IdempotencyKey, m.Product)
	s.answered = s.redisNowLatest()
	<-c.calls
	holding = false
	s.called = at
	it.cb.report(res, r.finishCtx().Err() != nil)
	if res.Class > 0 && int(res.Class) < len(c.m.callsBy) {
		c.m.callsBy[res.Class].Inc()
		c.m.latencyBy[res.Class].Observe(res.Latency.Seconds())
	} else {
		class := res.Class.String()
		c.m.calls.WithLabelValues(class).Inc()
		c.m.latency.WithLabelValues(class).Observe(res.Latency.Seconds())
	}
	it.res, it.made = res, true
}
