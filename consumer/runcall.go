// A row's start and end: decoded and queued on its seller's runner, called
// at its slot by a call worker, and what its call leaves behind.

package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/deadletter"
	"github.com/bulkreg/bulkreg/internal/kafkagroup"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// dispatch is step one for every message read: decode it and queue it on
// its seller's runner; a message that cannot be decoded goes to the
// dead-letter topic at once.
func (c *Consumer) dispatch(kr *kafkagroup.Row) {
	r := &row{Row: kr}
	m, err := bulkreg.DecodeRecord(r.Msg.Key, r.Msg.Value) // key and value must name one seller
	if err != nil {
		c.log.Error("undecodable message: sending it to the dead-letter topic",
			"partition", r.Msg.Partition, "offset", r.Msg.Offset, "err", err)
		go c.deadLetter(r, deadletter.Row{Original: r.Msg, Class: deadletter.ClassBadMessage, Message: err.Error(), FirstFailure: time.Now()}, nil, c.log)
		return
	}
	r.m = m
	c.runners.add(r)
}

// row is a message read from Kafka and its decoded value, from reading
// until it is finished or given back.
type row struct {
	*kafkagroup.Row
	m bulkreg.Message
}

// ctx ends when the row should stop waiting (rebalance, shutdown).
func (r *row) ctx() context.Context { return r.Partition().Ctx() }

// finishCtx ends when even a row whose call was made must stop recording.
func (r *row) finishCtx() context.Context { return r.Partition().FinishCtx() }

// tries is what one row's attempts have met so far.
type tries struct {
	// The retry budget starts at the first transient failure: time spent
	// waiting for slots, for Redis or behind a 429 is not a failure.
	retry                 backoff.BackOff
	attempts, rateLimited int
	firstFailure          time.Time
}

// callWorker makes the calls of the runners' batches, one at a time, until
// the pool is closed (Run ends). MaxConcurrentCalls workers run.
func (c *Consumer) callWorker(jobs <-chan *item) {
	for it := range jobs {
		pending := it.pending // the runner may go on once Done
		c.callOne(it)
		pending.Done()
	}
}

// callOne makes one row's call at its slot. Calls run at most
// MaxConcurrentCalls at once. The circuit is asked before the lateness is
// judged, so its round trip counts in the lateness; it is not cut short at
// the lateness: an answer lost to our own deadline could be a probe granted
// and never made, which holds the whole fleet for the probe's lease. The
// clock is read last, right before the request is written: a call later than
// its slot allows (waiting for a turn, a late timer, a process paused past
// its slot) is not made (it.missed), since the throttle's log holds its
// latest count on the assumption that it is sent by Reservation.SendBy; only
// a pause between the reading and the write can send it later. The call is
// not cancelled by a rebalance, only when the drain times out.
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
	if !c.redis.Healthy() { // fail closed: the row takes a new slot once Redis answers
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

// warmth remembers how many calls ran at once lately, so the pause between
// a seller's windows can keep that many connections open. A call that must
// connect first reaches the API later than its slot by the connect time (a
// lost SYN costs a second), which the lateness check cannot see; a server or
// proxy that closes connections idle for a minute (a common default) would
// close every one of them between two windows of 60 s.
type warmth struct {
	mu     sync.Mutex
	peak   int // most calls at once since the last tick
	recent int // most calls at once since rows were last all finished
}

// calling records that n calls are in progress, this one included.
func (w *warmth) calling(n int) {
	w.mu.Lock()
	w.peak = max(w.peak, n)
	w.mu.Unlock()
}

// tick ends one KeepWarm period and answers how many connections to warm:
// none when calls ran in the period (they kept their connections warm
// themselves) or when no row is waiting for a call (idle connections may go).
func (w *warmth) tick(rowsInFlight bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	peak := w.peak
	w.peak = 0
	if !rowsInFlight {
		w.recent = 0
		return 0
	}
	w.recent = max(w.recent, peak)
	if peak > 0 {
		return 0
	}
	return w.recent
}

// keepWarm warms connections every KeepWarm while calls pause, until ctx
// ends. The warming requests take free call tokens, never more: together
// with the calls they stay within MaxConcurrentCalls, so within the
// client's connections.
func (c *Consumer) keepWarm(ctx context.Context) {
	t := time.NewTicker(c.cfg.KeepWarm)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := c.warm.tick(c.group.RowsInFlight() > 0)
		taken := 0
	take:
		for taken < n {
			select {
			case c.calls <- struct{}{}:
				taken++
			default:
				break take
			}
		}
		if taken == 0 {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, c.cfg.KeepWarm)
		answered := c.deps.Registry.Warm(wctx, taken)
		cancel()
		for range taken {
			<-c.calls
		}
		c.log.Debug("kept connections to the registration API warm", "wanted", n, "answered", answered)
	}
}

// What a call leaves behind: the compliance history, the ledger, the upload's
// status and the dead-letter topic.

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

// unanswered reports whether a call's outcome is unknown: no HTTP answer
// came (a timeout, a connection error, the call cancelled), so the API may
// have counted it, or may still count it, after the failure was seen.
func unanswered(res registryclient.Result) bool {
	return res.Class == registryclient.Transient && res.Status == 0
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
		r.GiveBack()
		return
	}
	c.m.rows.WithLabelValues(result).Inc()
	log.Debug("row done", "result", result, "product_id", rr.ProductID, "attempts", rr.Attempts)
	r.Finish()
}

// deadLetter writes the row to the dead-letter topic and, once the broker
// acknowledged it, records the row as failed and marks it finished. For a
// row that may hold its SKU's claim (sku not nil), between the broker's
// acknowledgement and the row's result, the ledger records the row as set
// aside (skuClaim.setAside), so that a re-read of it does not register it.
func (c *Consumer) deadLetter(r *row, d deadletter.Row, sku *skuClaim, log *slog.Logger) {
	// A row whose claim lapsed (its process was paused past the lease) may
	// have been registered by another reading of it meanwhile: it claims
	// again first, which records a registration found (Done) or waits for a
	// row calling now, so a dead letter is written only for a row still
	// unregistered.
	if sku != nil && sku.held && !sku.claim() {
		return
	}
	retry := c.redisBackOff()
	for {
		err := c.dlq.WriteDeadLetter(r.finishCtx(), d)
		if err == nil {
			break
		}
		log.Error("dead-letter write failed, retrying", "err", err)
		if !sleep(r.finishCtx(), retry.NextBackOff()) {
			if sku != nil {
				sku.giveBack()
			} else {
				r.GiveBack()
			}
			return
		}
	}
	c.m.dlqWrites.WithLabelValues(d.Class).Inc()
	if sku != nil && !sku.setAside(d) {
		r.GiveBack()
		return
	}
	if d.Class == deadletter.ClassBadMessage {
		c.m.rows.WithLabelValues("dead_lettered").Inc()
		r.Finish()
		return
	}
	c.record(r, setAside(d.Class, d.Attempts, d.Detail), "dead_lettered", log)
}

// setAside is the result of a row dead-lettered with class after attempts,
// the last failure being detail, as its seller reads it; a re-read of the row (ledger.Aside) records
// it again from the note its dead letter left.
func setAside(class string, attempts int, detail string) uploadstatus.RowResult {
	return uploadstatus.RowResult{State: uploadstatus.Failed, Code: class, Attempts: attempts, At: time.Now(),
		Reason: fmt.Sprintf("the registration API did not take the row after %d attempts (%s); it was set aside for an operator to retry", attempts, detail)}
}

func deadLetterOf(r *row, res registryclient.Result, attempts int, first time.Time) deadletter.Row {
	msg := fmt.Sprintf("status %d", res.Status)
	if res.Err != nil {
		msg = res.Err.Error()
	}
	return deadletter.Row{Original: r.Msg, Class: res.Class.String(), Message: msg, Detail: res.SellerDetail(), Attempts: attempts, FirstFailure: first}
}
