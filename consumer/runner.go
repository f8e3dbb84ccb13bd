package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/deadletter"
	"github.com/bulkreg/bulkreg/internal/kafkagroup"
	"github.com/bulkreg/bulkreg/internal/redisclock"
	"github.com/bulkreg/bulkreg/ledger"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// maxBatch bounds a batch: the throttle's reserve script takes at most this
// many slots at once.
const maxBatch = 256

// runners is the runner path's registry of runners with rows.
type runners struct {
	c *Consumer

	mu      sync.Mutex
	m       map[runnerKey]*runner
	sellers map[string]int // runners per seller
	empty   chan struct{}  // closed when the last runner ends (idle)
}

type runnerKey struct {
	p      *kafkagroup.Partition
	seller string
}

func newRunners(c *Consumer) *runners {
	return &runners{c: c, m: map[runnerKey]*runner{}, sellers: map[string]int{}}
}

// add queues a decoded row on its seller's runner, starting the runner when
// it is not running.
func (rs *runners) add(r *row) {
	k := runnerKey{r.Partition(), r.m.SellerID}
	it := &item{r: r, queued: time.Now()}
	rs.mu.Lock()
	rn := rs.m[k]
	if rn == nil {
		rn = &runner{c: rs.c, rs: rs, p: r.Partition(), seller: k.seller, wake: make(chan struct{}, 1), room: rs.c.deps.Throttle.Policy().Limit, dueNow: true, unanswered: map[*item]bool{}}
		rn.log = rs.c.log.With("seller", k.seller, "partition", r.Partition().ID())
		rs.m[k] = rn
		if rs.sellers[k.seller] == 0 {
			rs.c.m.activeSellers.Inc()
		}
		rs.sellers[k.seller]++
	}
	rn.queue = append(rn.queue, it)
	start := !rn.running
	rn.running = true
	rs.mu.Unlock()
	rs.c.m.waiting.Inc()
	if start {
		go rn.run()
		return
	}
	select {
	case rn.wake <- struct{}{}:
	default:
	}
}

// done removes rn when its queue is empty (under the lock, so a row added
// meanwhile keeps it running) and reports whether it did.
func (rs *runners) done(rn *runner) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rn.queue) > 0 {
		return false
	}
	rn.running = false
	k := runnerKey{rn.p, rn.seller}
	delete(rs.m, k)
	if rs.sellers[rn.seller]--; rs.sellers[rn.seller] == 0 {
		delete(rs.sellers, rn.seller)
		rs.c.m.activeSellers.Dec()
	}
	if len(rs.m) == 0 && rs.empty != nil {
		close(rs.empty)
		rs.empty = nil
	}
	return true
}

// count is the number of sellers with a runner.
func (rs *runners) count() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.sellers)
}

// idle is closed once no runner runs.
func (rs *runners) idle() <-chan struct{} {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.m) == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if rs.empty == nil {
		rs.empty = make(chan struct{})
	}
	return rs.empty
}

// rowsBySeller counts each seller's rows queued or in a batch.
func (rs *runners) rowsBySeller() map[string]int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := map[string]int{}
	for k, rn := range rs.m {
		out[k.seller] += len(rn.queue) + rn.inBatch
	}
	return out
}

// runner moves one seller's rows of one partition.
type runner struct {
	c      *Consumer
	rs     *runners
	p      *kafkagroup.Partition
	seller string
	log    *slog.Logger
	wake   chan struct{} // a row was queued

	// Under rs.mu.
	queue   []*item
	running bool
	inBatch int

	// The loop's own.
	room   int  // rows the next batch may take: the room the throttle last reported
	dueNow bool // the next batch's slots may be due now (they take starts)
	askAt  time.Time
	// rebooked: the last batch gave its slots back to be booked whole at
	// askAt (reserve).
	rebooked bool
	hold     sellerHold
	// unanswered are the rows whose calls failed since the seller's last
	// answered call (conclude); seq numbers the batches.
	unanswered map[*item]bool
	seq        uint64
	// rank is when the seller started asking for starts, kept while it
	// asks again within a window (ranked: when it last asked): the seller
	// that started first is served first (startBudget).
	rank, ranked time.Time
	timer        *time.Timer
}

// item is one row in its runner.
type item struct {
	r         *row
	queued    time.Time // when it joined its runner
	notBefore time.Time
	sku       *skuClaim // from its first batch on
	t         tries
	// suspect: a failure of the row was its own (conclude): it probes for
	// a held seller only when no other row can.
	suspect bool
	// convicted: the row failed while its seller was held and then the
	// API answered another row of the seller: every failure of it is its
	// own, and it never probes.
	convicted bool
	// batch is the runner's batch the row was last taken into (runner.seq):
	// a row is taken once per batch.
	batch uint64
	// admitted: the row's upload was found to exist (uploadDoor).
	admitted bool
	// retry: the row's slot went by unused; it asks for the next one
	// before the seller's next window is booked.
	retry bool
	// *call is the row's part in the batch it is in; nil while it waits
	// in the queue, so a waiting row costs a small item only.
	*call
}

// call is a row's part in its batch.
type call struct {
	cb rowCircuit
	// result, when set, is the row's result without a call (its claim
	// found the SKU registered before, or the row set aside), kind its
	// label in the rows metric.
	result  *uploadstatus.RowResult
	kind    string
	slot    *slot
	pending *sync.WaitGroup // counts the call, handed to the call pool, until it is answered
	start   bool            // holds one of the process's starts
	called  bool            // handed to the call pool
	made    bool
	missed  bool // the call could not start within its lateness
	// own: the call failed while its seller's calls sent with it or after
	// it were answered: the failure is its row's own (conclude).
	own bool
	res registryclient.Result
	mk  marked
}

// sellerHold is the runner's hold of a seller the API fails.
type sellerHold struct {
	since time.Time // zero: not held
	next  time.Duration
	probe time.Time             // when the next probe may go
	last  registryclient.Result // the last failure, for a dead letter
}

func (h *sellerHold) held() bool { return !h.since.IsZero() }

// run is the runner's loop: a batch after the other until the queue is
// empty or the partition is revoked.
func (rn *runner) run() {
	rn.timer = time.NewTimer(time.Hour)
	rn.timer.Stop()
	defer func() {
		if rn.hold.held() { // its hold ends with it; a new runner probes afresh
			rn.c.m.sellersHeld.Dec()
		}
	}()
	ctx := rn.p.Ctx()
	for {
		if ctx.Err() != nil {
			rn.giveBackQueue()
			if rn.rs.done(rn) {
				return
			}
			continue // a row came in meanwhile: give it back too
		}
		rn.seq++
		b, retrying, wait := rn.take(rn.c.cfg.SellerConcurrency)
		if b == nil {
			if wait < 0 {
				if rn.rs.done(rn) {
					return
				}
				continue
			}
			rn.sleep(ctx, wait, true)
			continue
		}
		rn.batch(ctx, b, retrying)
	}
}

// sleep waits d, or until ctx ends, or (woken) a row is queued.
func (rn *runner) sleep(ctx context.Context, d time.Duration, woken bool) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	rn.timer.Reset(d)
	defer rn.timer.Stop()
	var wake chan struct{}
	if woken {
		wake = rn.wake
	}
	select {
	case <-rn.timer.C:
		return true
	case <-wake:
		return true
	case <-ctx.Done():
		return false
	}
}

// giveBackQueue gives every queued row back (the partition was revoked).
func (rn *runner) giveBackQueue() {
	rn.rs.mu.Lock()
	q := rn.queue
	rn.queue = nil
	rn.rs.mu.Unlock()
	rn.c.m.waiting.Sub(float64(len(q)))
	rn.giveBack(q)
}

// take takes the next batch off the queue: the rows ready now, up to the
// room and most (what is left of SellerConcurrency in the batch); rows whose slots went by (item.retry) go first, in a batch of their
// own, due now. Without a batch it returns how long to wait (negative: the
// queue is empty).
func (rn *runner) take(most int) (b []*item, retrying bool, wait time.Duration) {
	rn.rs.mu.Lock()
	empty := len(rn.queue) == 0
	rn.rs.mu.Unlock()
	if empty {
		return nil, false, -1
	}
	now := time.Now()
	if w := rn.askAt.Sub(now); w > 0 {
		return nil, false, w
	}
	held := rn.hold.held()
	want := min(rn.room, most, maxBatch)
	if held {
		if w := rn.hold.probe.Sub(now); w > 0 {
			rn.expireHold(now)
			return nil, false, w
		}
		want = 1 // the probe
	}
	rn.rs.mu.Lock()
	defer rn.rs.mu.Unlock()
	q := rn.queue
	if len(q) == 0 {
		return nil, false, -1
	}
	for _, it := range q {
		if it.retry && !it.notBefore.After(now) {
			retrying = true
			break
		}
	}
	next := time.Duration(-1)
	kept := q[:0]
	ready := func(it *item) bool {
		return !it.notBefore.After(now) && (!retrying || it.retry) && it.batch != rn.seq
	}
	for _, it := range q {
		// A held seller's probe is a row whose failures were not its own.
		if len(b) < want && ready(it) && (!held || !it.suspect && !it.convicted) {
			b = append(b, it)
			continue
		}
		if w := it.notBefore.Sub(now); w > 0 && (next < 0 || w < next) {
			next = w
		}
		kept = append(kept, it)
	}
	clear(q[len(kept):])
	if len(b) == 0 && held {
		// Only rows whose failures were their own are ready: one of them
		// probes, a convicted one last.
		pick := -1
		for i, it := range kept {
			if ready(it) && (pick < 0 || kept[pick].convicted && !it.convicted) {
				pick = i
			}
		}
		if pick >= 0 {
			b = append(b, kept[pick])
			kept = slices.Delete(kept, pick, pick+1)
		}
	}
	rn.queue = kept
	if len(b) == 0 {
		return nil, false, max(next, time.Millisecond)
	}
	parts := make([]call, len(b)) // one allocation for the batch's rows
	for i, it := range b {
		it.retry, it.call, it.batch = false, &parts[i], rn.seq
	}
	rn.inBatch += len(b)
	rn.c.m.waiting.Sub(float64(len(b)))
	return b, retrying, 0
}

// requeue puts rows back in the queue, in their order, for a later batch:
// at its front, or at its end (last).
func (rn *runner) requeue(its []*item, last bool) {
	if len(its) == 0 {
		return
	}
	for _, it := range its {
		it.call = nil
	}
	rn.rs.mu.Lock()
	if last {
		rn.queue = append(rn.queue, its...)
	} else {
		rn.queue = append(slices.Clip(its), rn.queue...)
	}
	rn.inBatch = max(0, rn.inBatch-len(its))
	rn.rs.mu.Unlock()
	rn.c.m.waiting.Add(float64(len(its)))
}

// batch takes b through one round: claim and reserve, check, call, write,
// finish. Every row of b ends finished, given back or queued again.
func (rn *runner) batch(ctx context.Context, b []*item, retrying bool) {
	c := rn.c
	defer func() {
		rn.rs.mu.Lock()
		rn.inBatch = 0
		rn.rs.mu.Unlock()
	}()
	b = rn.admit(b)
	if len(b) == 0 {
		return
	}
	probe, ok, openFor := rn.fleetReady(ctx)
	if openFor > 0 {
		rn.expireCircuitWait(b, openFor)
		return
	}
	if !ok {
		rn.giveBack(b)
		return
	}
	if probe {
		// The fleet's probe: a row whose failures were not its own.
		defer func() { <-c.turn }()
		if i := slices.IndexFunc(b, func(it *item) bool { return !it.suspect && !it.convicted }); i > 0 {
			b[0], b[i] = b[i], b[0]
		}
		rn.requeue(b[1:], false)
		b = b[:1]
	}
	c.reserving.Add(1)
	defer c.reserving.Add(-1)
	begun := time.Now()
	// A window with room now is booked in parts, each as large as the
	// starts the process has free, and each as soon as they are: the
	// seller's window then goes out in one stretch, not interleaved with
	// other sellers' (whose rank is later) while its first part waits for
	// its answers. The next window is booked after the answers.
	var pending sync.WaitGroup // the batch's calls in flight: the last answer wakes the runner
	var all, calls []*item
	var freed []throttle.Reservation
	for part := 0; ; part++ {
		if part > 0 {
			if !rn.dueNow || retrying || probe || rn.hold.held() {
				break
			}
			left := c.cfg.SellerConcurrency - len(all)
			if left <= 0 {
				break
			}
			if b, _, _ = rn.take(left); len(b) == 0 {
				break
			}
			if b = rn.admit(b); len(b) == 0 {
				break
			}
		}
		starts := 0
		if rn.dueNow || retrying {
			now := time.Now()
			if p := c.deps.Throttle.Policy(); rn.rank.IsZero() || now.Sub(rn.ranked) > p.Window+p.Margin {
				rn.rank = now
			}
			rn.ranked = now
			starts = c.starts.take(ctx, rn.rank, len(b))
			if starts == 0 {
				rn.giveBack(b)
				break
			}
			if starts < len(b) {
				rn.requeue(b[starts:], false)
				b = b[:starts]
			}
		}
		got, fr, granted, ok := rn.reserve(ctx, b, starts)
		if !ok {
			break
		}
		all, calls, freed = append(all, b...), append(calls, got...), append(freed, fr...)
		// Every slot is placed: call at each, confirming them first.
		rn.hand(ctx, got, &freed, granted, &pending)
	}
	pending.Wait()
	c.m.throttleWait.Observe(time.Since(begun).Seconds())
	rn.conclude(all, calls, freed)
}

// admit lets through the rows whose upload exists (uploadDoor); the others
// are dead-lettered or given back there.
func (rn *runner) admit(b []*item) []*item {
	out := b[:0]
	for _, it := range b {
		it.cb = rowCircuit{c: rn.c, r: it.r, log: rn.log}
		if it.admitted {
			out = append(out, it)
			continue
		}
		if it.sku == nil {
			it.sku = rn.c.newSKUClaim(it.r, rn.log)
		}
		if !rn.c.admit(it.r, rn.log) {
			continue
		}
		it.admitted = true
		out = append(out, it)
	}
	return out
}

// giveBack leaves rows unfinished for the partition's next owner and then
// releases the SKU claims they still hold, keeping their keys, all at once
// (each bounded by releaseTimeout): another row with the SKU need not wait
// out the lease. Run waits for the runners within the drain's bound (the
// drain plus one heartbeat): a release Redis has not answered by then
// lapses with its lease instead.
func (rn *runner) giveBack(b []*item) {
	var wg sync.WaitGroup
	for _, it := range b {
		it.r.GiveBack()
		if it.sku != nil && it.sku.held {
			wg.Go(it.sku.settle)
		}
	}
	wg.Wait()
}

// fleetReady waits, holding no slot, while the fleet's circuit is open. probe
// reports that the circuit is not closed and this runner took the process's
// turn to probe (one row goes); ok is false when ctx ended. openFor, when
// not 0, is how long the circuit has been open, longer than
// Config.SellerHoldLimit: the circuit is the fleet's hold, and a hold ends
// in the dead-letter topic at the same limit as a seller's
// (expireCircuitWait), for every row it holds, also one read after it
// opened (it waited in Kafka meanwhile).
func (rn *runner) fleetReady(ctx context.Context) (probe, ok bool, openFor time.Duration) {
	c := rn.c
	br := c.deps.Circuit
	var retry backoff.BackOff // made on the first failure: most batches meet none
	for {
		if !c.redis.Wait(ctx) {
			return false, false, 0
		}
		news := br.Changed()
		st, open, known := br.Local()
		if !known || st == circuit.Closed {
			return false, true, 0
		}
		left := c.cfg.SellerHoldLimit - open
		if left <= 0 {
			return false, false, open
		}
		wctx, cancel := context.WithTimeout(ctx, left)
		err := br.WaitReady(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return false, false, 0
			}
			if wctx.Err() != nil {
				continue // the limit came: looked at again above
			}
			c.circuitDown(err)
			if retry == nil {
				retry = c.redisBackOff()
			}
			if !sleep(ctx, retry.NextBackOff()) {
				return false, false, 0
			}
			continue
		}
		if st, _, known := br.Local(); !known || st == circuit.Closed {
			return false, true, 0
		}
		select {
		case c.turn <- struct{}{}:
			return true, true, 0
		case <-news:
		case <-time.After(left):
		case <-ctx.Done():
			return false, false, 0
		}
	}
}

// expireCircuitWait dead-letters the rows of b: the fleet's circuit has
// held them longer than Config.SellerHoldLimit (fleetReady).
func (rn *runner) expireCircuitWait(b []*item, openFor time.Duration) {
	c := rn.c
	c.m.holdExpired.Inc()
	rn.log.Error("the fleet's circuit has been open longer than the hold limit (the registration API answers no probe): sending the rows it holds to the dead-letter topic for an operator",
		"open_for", openFor.Round(time.Second), "limit", c.cfg.SellerHoldLimit, "rows", len(b))
	rn.deadLetterAll(b, func(it *item) deadletter.Row {
		first := it.t.firstFailure
		if first.IsZero() {
			first = it.queued
		}
		return deadletter.Row{Original: it.r.Msg, Class: registryclient.Transient.String(), Attempts: it.t.attempts, FirstFailure: first,
			Message: fmt.Sprintf("the registration API answered none of the fleet's probes for %s, longer than --seller-hold-limit (%s)", openFor.Round(time.Second), c.cfg.SellerHoldLimit),
			Detail:  "the marketplace did not answer"}
	})
	rn.rs.mu.Lock()
	rn.inBatch = max(0, rn.inBatch-len(b))
	rn.rs.mu.Unlock()
}

// reserve claims the rows' SKUs and reserves their slots in one script, and
// sorts the rows: those that call (calls, in slot order; granted is when
// their slots were), those queued again, those with a result without a
// call (item.result, written with the batch's). freed are the slots of rows
// that make no call. ok is false when the batch ended here (every row dealt
// with).
func (rn *runner) reserve(ctx context.Context, b []*item, starts int) (calls []*item, freed []throttle.Reservation, granted time.Time, ok bool) {
	c := rn.c
	claims := make([]ledger.ClaimRequest, len(b))
	for i, it := range b {
		claims[i] = ledger.ClaimRequest{SKU: it.r.m.Product.SellerSKU, Row: it.sku.own, Hash: it.sku.hash, From: it.sku.from}
	}
	var (
		got  []ledger.ClaimResult
		rs   []throttle.Reservation
		sent time.Time
	)
	// No attempt starts once the partition is revoked, but one begun is
	// answered within the drain, like any work begun on a row: a script
	// Redis ran took claims and slots that the rows then give back, where
	// an answer dropped would leave the claims to lapse with their lease
	// and the partition's next owner waiting for them.
	finish := rn.p.FinishCtx()
	err := c.untilRedis(ctx, "claim the SKUs and reserve the slots of a batch", rn.log, c.gated(func(ctx context.Context) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		sent = time.Now()
		got, rs, err = c.claimReserve(finish, rn.seller, claims)
		return err
	}))
	if err != nil {
		c.starts.give(starts)
		rn.giveBack(b)
		return nil, nil, granted, false
	}
	arrived := time.Now()
	var later []*item // queued again: another row holds the SKU, or no slot within MaxWait
	for i, it := range b {
		r := rs[i]
		if !rn.claimed(it, got[i], &later) {
			if r.Admitted {
				freed = append(freed, r)
			}
			continue
		}
		if !r.Admitted {
			// At is when the slot comes within MaxWait; a little later it
			// surely has, whatever the clocks' error.
			later = append(later, it)
			rn.askAt = arrived.Add(r.Wait + c.cfg.MaxLateness)
			continue
		}
		if r.Lost {
			c.m.stateLost.Inc()
			rn.log.Warn("Redis had lost the throttle's state of this seller's hash slot (restarted empty, flushed, or a new server after a restart or failover): no seller there gets a slot before the hold ends",
				"held_until", r.HeldUntil, "hold", time.Until(r.HeldUntil).Round(time.Millisecond))
		}
		if got[i].At.Before(r.HeldUntil) {
			// The claim was taken before the hold after a loss of the
			// seller's hash slot ended: a claim the loss erased may have
			// let this row take it while another row's call was out. The
			// row claims again once the hold is over, when every call out
			// at the loss has been answered and marked.
			freed = append(freed, r)
			it.notBefore = arrived.Add(r.HeldUntil.Sub(r.At.Add(-r.Wait)) + c.cfg.MaxLateness)
			later = append(later, it)
			continue
		}
		s := &slot{Reservation: r}
		s.place(c.clock, sent, arrived, r.At.Add(-r.Wait))
		it.slot = s
		calls = append(calls, it)
	}
	// Part of the batch beyond MaxWait: when the slots taken all come after
	// the time to ask for the others, they go back, and the whole batch is
	// booked then, at once. Otherwise the runner, waiting for the first
	// part's slots, would ask for the rest only after them, a window late.
	// Once per batch (rebooked): a batch that still does not fit goes in
	// parts.
	byDue := func(a, b *item) int { return a.slot.due.Compare(b.slot.due) }
	rebook := len(calls) > 0 && rn.askAt.After(arrived) && !rn.rebooked && slices.MinFunc(calls, byDue).slot.due.After(rn.askAt)
	if rebook {
		for _, it := range calls {
			freed = append(freed, it.slot.Reservation)
			it.slot = nil
		}
		later, calls = append(calls, later...), nil
	}
	rn.rebooked = rebook
	// The room the throttle reported with the last slot it gave
	// (Reservation.Room). None left: the next batch books after this one's
	// answers (a full window, or a token bucket whose next slot waits for
	// them), up to the limit.
	rn.room, rn.dueNow = c.deps.Throttle.Policy().Limit, true
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Admitted {
			if rs[i].Room > 0 {
				rn.room = rs[i].Room
			} else {
				rn.dueNow = false
			}
			break
		}
	}
	// Starts are kept by the rows whose slots are due now, until their
	// calls start; the others go back at once.
	kept := 0
	horizon := time.Now().Add(2 * c.cfg.MaxLateness)
	for _, it := range calls {
		if kept < starts && it.slot.due.Before(horizon) {
			it.start = true
			kept++
		}
	}
	c.starts.give(starts - kept)
	slices.SortStableFunc(calls, byDue)
	rn.requeue(later, false)
	return calls, freed, arrived, true
}

// claimed acts on a row's claim: true when the row holds it and calls. A
// row registered before, or set aside, gets its result without a call
// (item.result); a row whose SKU another row is registering waits (later).
func (rn *runner) claimed(it *item, cl ledger.ClaimResult, later *[]*item) bool {
	s := it.sku
	if cl.Err != nil {
		if errors.Is(cl.Err, ledger.ErrInvalid) {
			rn.log.Error("the ledger cannot hold the row's SKU: sending it to the dead-letter topic", "sku", it.r.m.Product.SellerSKU, "err", cl.Err)
			rn.c.deadLetter(it.r, deadletter.Row{Original: it.r.Msg, Class: deadletter.ClassBadMessage, Message: cl.Err.Error(), FirstFailure: time.Now()}, nil, rn.log)
			return false
		}
		rn.log.Error("the ledger's entry of the row's SKU cannot be read; asking again later", "sku", it.r.m.Product.SellerSKU, "err", cl.Err)
		it.notBefore = time.Now().Add(rn.c.cfg.RedisRetryMax)
		*later = append(*later, it)
		return false
	}
	call, rr, kind := s.verdict(cl.Claim)
	switch {
	case call:
		return true
	case rr != nil:
		it.result, it.kind = rr, kind
	default:
		it.notBefore = time.Now().Add(min(max(cl.RetryIn, rn.c.cfg.RedisRetryMin), rn.c.cfg.RedisRetryMax) + time.Millisecond)
		*later = append(*later, it)
	}
	return false
}

// hand confirms a part's slots and hands each call to the call pool at its
// slot (pending counts them until answered). Slots that fail their check,
// and slots whose row is revoked before its call, are added to freed and
// their rows queued again or given back.
//
// A slot whose check time had passed when it was granted needs no check:
// the reservation itself vouches for its epoch.
func (rn *runner) hand(ctx context.Context, calls []*item, freed *[]throttle.Reservation, granted time.Time, pending *sync.WaitGroup) {
	c := rn.c
	// Once the partition is revoked, the rows not yet handed on all go
	// back together: their claims are released at once.
	for g := 0; g < len(calls); {
		// A group: the slots the same check covers (within two MaxLateness of it).
		at := c.checkAt(calls[g].slot.due)
		end := g + 1
		for end < len(calls) && calls[end].slot.due.Before(at.Add(2*c.cfg.MaxLateness)) {
			end++
		}
		group, rest := calls[g:end], calls[g:]
		g = end
		if at.After(granted) {
			if time.Until(at) > 0 {
				rn.giveStarts(group)
			}
			if !rn.sleep(ctx, time.Until(at), false) {
				rn.revoked(rest, freed)
				return
			}
			rn.check(ctx, group, freed)
		}
		for i, it := range group {
			if it.call == nil || it.slot == nil {
				continue // failed its check (queued again) or revoked
			}
			if !rn.sleep(ctx, time.Until(it.slot.due), false) {
				rn.revoked(rest[i:], freed)
				return
			}
			c.m.uncertainty.Observe(it.slot.due.Sub(it.slot.bound).Seconds())
			it.called = true // its start, if it holds one, goes back when the call starts (callOne)
			pending.Add(1)
			it.pending = pending
			c.pool <- it
		}
	}
}

// giveStarts gives back the starts the rows hold.
func (rn *runner) giveStarts(its []*item) {
	n := 0
	for _, it := range its {
		if it.start {
			it.start = false
			n++
		}
	}
	rn.c.starts.give(n)
}

// revoked gives back the slots and the rows of its whose partition was
// revoked before their calls: every row not queued again (after a failed
// check) nor handed on to the call pool.
func (rn *runner) revoked(its []*item, freed *[]throttle.Reservation) {
	var back []*item
	for _, it := range its {
		if it.call != nil && it.slot != nil && !it.called {
			*freed = append(*freed, it.slot.Reservation)
			it.slot = nil
			back = append(back, it)
		}
	}
	rn.giveStarts(back)
	rn.giveBack(back)
}

// check confirms a group's slots in one script (Throttle.CheckN): a slot a
// Redis lost since, or given back, is not used; its row is queued again.
func (rn *runner) check(ctx context.Context, group []*item, freed *[]throttle.Reservation) {
	c := rn.c
	rs := make([]throttle.Reservation, len(group))
	for i, it := range group {
		rs[i] = it.slot.Reservation
	}
	cctx, cancel := context.WithTimeout(ctx, max(time.Millisecond, time.Until(group[0].slot.bound.Add(c.cfg.MaxLateness))))
	defer cancel()
	sent := time.Now()
	chks, err := leaving(cctx, func(ctx context.Context) ([]throttle.SlotCheck, error) {
		return c.deps.Throttle.CheckN(ctx, rn.seller, rs)
	})
	arrived := time.Now()
	var again, back []*item
	for i, it := range group {
		s := it.slot
		switch {
		case err != nil:
			if i == 0 {
				if cctx.Err() == nil && unavailable(err) {
					c.redis.Down(err)
				}
				rn.log.Debug("could not confirm the batch's slots with the throttle; taking new ones", "slots", len(group), "err", err)
			}
		case !chks[i].Good && chks[i].Epoch == s.Epoch && (s.Global.ID == "" || chks[i].GlobalEpoch == s.Global.Epoch):
			c.m.held.Inc()
		case !chks[i].Good:
			c.m.stale.Inc()
			rn.log.Warn("the slot was granted by a Redis that has since lost the seller's throttle state; taking a new one", "slot", s.At, "epoch", s.Epoch, "current_epoch", chks[i].Epoch)
		default:
			s.place(c.clock, sent, arrived, chks[i].Now)
			continue
		}
		rn.giveStarts([]*item{it})
		*freed = append(*freed, s.Reservation)
		it.slot = nil
		if ctx.Err() != nil {
			back = append(back, it)
			continue
		}
		again = append(again, it)
	}
	rn.giveBack(back)
	rn.requeue(again, false)
}

// conclude writes what the batch's calls left, acts on their answers and
// finishes the rows, queueing again the rows that try again.
func (rn *runner) conclude(b, calls []*item, freed []throttle.Reservation) {
	c := rn.c
	finish := rn.p.FinishCtx()
	var ws []callWrite
	// Whose is a failure (5xx, timeout, a refusal the circuit judged the
	// seller's): the row's own when a call of its seller sent with it or
	// after it (within MaxLateness) was answered, or when the row was
	// convicted. Otherwise the row joins unanswered, and two fresh rows
	// there (or one while the seller is held) hold the seller; an answer
	// during a hold convicts the rows that failed in it.
	var lastAnswered time.Time
	answered := false
	for _, it := range calls {
		if it.call != nil && it.slot != nil && it.made && answeredClass(it.res.Class) {
			answered = true
			lastAnswered = maxTime(lastAnswered, it.slot.called)
		}
	}
	if answered {
		if rn.hold.held() {
			for it := range rn.unanswered {
				it.convicted = true
			}
		}
		clear(rn.unanswered)
	}
	var trailing []*item
	for _, it := range calls {
		if it.call == nil || it.slot == nil {
			continue // checked out or revoked: queued again, or given back
		}
		if !it.made {
			freed = append(freed, it.slot.Reservation)
			continue
		}
		s, res := it.slot, it.res
		w := callWrite{call: compliance.Call{At: s.called, Status: res.Status, Class: res.Class.String(), Key: it.r.m.IdempotencyKey},
			res: s.Reservation, counted: counted(res.Class), answered: s.answered}
		if unanswered(res) {
			w.answered = time.Time{}
		}
		w.mark, w.marks = it.sku.markRequest(it.res)
		ws = append(ws, w)
		failed := (res.Class == registryclient.Transient && !it.cb.outage) || (res.Class == registryclient.Misconfigured && it.cb.own)
		switch {
		case !failed:
		case it.convicted, answered && !s.called.After(lastAnswered.Add(c.cfg.MaxLateness)):
			it.own = true
		default:
			trailing = append(trailing, it)
			rn.unanswered[it] = true
		}
	}
	fresh := 0
	for it := range rn.unanswered {
		if !it.suspect && !it.convicted {
			fresh++
		}
	}
	held := fresh > 1 || (fresh > 0 && rn.hold.held())
	if !held {
		for _, it := range trailing {
			it.own = true
		}
	}
	rest, err := c.writeCalls(finish, rn.seller, ws, freed) // rest: the slots left to give back
	if err != nil {
		rn.log.Error("registry calls are missing from the compliance history: Redis did not take them before the drain ended", "calls", len(ws), "err", err)
	}
	var settles []callWrite
	wi := 0
	for _, it := range calls {
		if it.call == nil || it.slot == nil || !it.made {
			continue
		}
		w := ws[wi]
		wi++
		if w.marks {
			it.sku.marked(it.res, w.marked, err, &it.mk)
		}
		switch {
		case finish.Err() != nil:
			// No settle after the drain: the log keeps the call's latest count.
		case w.rest.ID == "" && w.rest.Global.ID == "":
			// The write settled or gave back the seller's slot, and there
			// is no app-wide one.
		case w.counted:
			settles = append(settles, w)
		default:
			rest = append(rest, w.rest)
		}
	}
	// The slots left go back, then the app-wide ones are settled, each write within slotWriteTimeout.
	if len(rest) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), slotWriteTimeout)
		if err := c.deps.Throttle.ReleaseN(ctx, rn.seller, rest); err != nil {
			rn.log.Debug("could not give slots back to the throttle", "slots", len(rest), "err", err)
		}
		cancel()
	}
	for _, w := range settles {
		ctx, cancel := context.WithTimeout(context.Background(), slotWriteTimeout)
		if err := c.deps.Throttle.Settle(ctx, w.rest, w.answered); err != nil {
			rn.log.Debug("could not settle a slot at its answer", "err", err)
		}
		cancel()
	}
	rn.judge(answered, held, calls)

	// Each row's outcome.
	results := map[string][]*item{}     // by upload: the rows whose results are written
	var blocks [2]registryclient.Result // the seller's 429 with the longest Retry-After, and the application's
	var again, back []*item
	for _, it := range b {
		if it.call == nil {
			continue // queued again already
		}
		if it.result != nil {
			results[it.r.m.UploadID] = append(results[it.r.m.UploadID], it)
			continue
		}
		if it.slot == nil && !it.made {
			continue // not in calls, or checked out or revoked: queued again or given back already
		}
		it.slot = nil
		if !it.made {
			if it.r.ctx().Err() != nil {
				back = append(back, it)
				continue
			}
			if it.missed {
				// Its slot went by before a call could start: it takes the
				// next slot at once, in a batch of its own (take), so the
				// seller's next window is not booked past it. The batch
				// takes starts like any batch due now (startBudget): an
				// overloaded process spreads its calls out there.
				it.missed, it.retry = false, true
			}
			again = append(again, it)
			continue
		}
		it.made = false
		switch rn.outcome(it, held) {
		case outcomeDone:
			delete(rn.unanswered, it) // a finished row no longer tells whose failures they are
			results[it.r.m.UploadID] = append(results[it.r.m.UploadID], it)
		case outcomeRateLimited:
			b := &blocks[0]
			if it.res.Scope == registryclient.ScopeApp {
				b = &blocks[1]
			}
			if it.res.RetryAfter > b.RetryAfter || b.Status == 0 {
				*b = it.res
			}
			again = append(again, it)
		case outcomeAgain:
			again = append(again, it)
		case outcomeGone:
			delete(rn.unanswered, it)
		}
	}
	for _, b := range blocks {
		if b.Status != 0 {
			rn.block(b)
		}
	}
	// While the seller is held the rows go behind the others: the next
	// probe is another row, so a row that fails on its own does not keep
	// its seller held.
	rn.giveBack(back)
	rn.requeue(again, held)
	rn.finish(results)
}

// judge updates the seller's hold from the batch: held (conclude), calls
// failed after the seller's last answered call, or with none answered: the
// seller is held, or its hold goes on; else answered, the API answered one
// of its calls: the hold ends.
func (rn *runner) judge(answered, held bool, calls []*item) {
	c, h := rn.c, &rn.hold
	now := time.Now()
	switch {
	case held:
		for _, it := range calls {
			if it.call != nil && it.made && (it.res.Class == registryclient.Transient || it.res.Class == registryclient.Misconfigured) {
				h.last = it.res
			}
		}
		if !h.held() {
			h.since, h.next = now, c.cfg.SellerProbeMin
			c.m.sellersHeld.Inc()
			rn.log.Warn("the registration API fails this seller's calls and answers none after them: the seller is held, its rows spend no attempt, one is tried per growing interval",
				"status", h.last.Status, "err", h.last.Err, "first_probe_in", h.next, "dead_letter_after", c.cfg.SellerHoldLimit)
		} else {
			h.next = min(2*h.next, c.cfg.SellerProbeMax)
		}
		h.probe = now.Add(h.next)
	case answered && h.held():
		rn.log.Info("the registration API answers this seller again: its rows go on", "held_for", now.Sub(h.since).Round(time.Millisecond))
		*h = sellerHold{}
		c.m.sellersHeld.Dec()
	}
}

// expireHold dead-letters the queued rows that have been held longer than
// Config.SellerHoldLimit: each row is held at most that long (a row queued
// during the hold counts from its arrival), so an operator gets the rows of a
// seller the API keeps failing, and a row that arrives late still gets its
// own probes.
func (rn *runner) expireHold(now time.Time) {
	c, h := rn.c, &rn.hold
	if now.Sub(h.since) <= c.cfg.SellerHoldLimit {
		return
	}
	rn.rs.mu.Lock()
	var expired []*item
	kept := rn.queue[:0]
	for _, it := range rn.queue {
		if now.Sub(maxTime(it.queued, h.since)) > c.cfg.SellerHoldLimit {
			expired = append(expired, it)
		} else {
			kept = append(kept, it)
		}
	}
	clear(rn.queue[len(kept):])
	rn.queue = kept
	rn.rs.mu.Unlock()
	if len(expired) == 0 {
		return
	}
	c.m.waiting.Sub(float64(len(expired)))
	c.m.holdExpired.Inc()
	rn.log.Error("the registration API has failed this seller's calls for longer than the hold limit: sending its rows held that long to the dead-letter topic for an operator",
		"held_for", now.Sub(h.since).Round(time.Second), "limit", c.cfg.SellerHoldLimit, "rows", len(expired), "status", h.last.Status, "err", h.last.Err)
	rn.deadLetterAll(expired, func(it *item) deadletter.Row {
		d := deadLetterOf(it.r, h.last, it.t.attempts, maxTime(it.queued, h.since))
		d.Message = fmt.Sprintf("the registration API failed every call of seller %s for %s, longer than --seller-hold-limit (%s); last: %s",
			rn.seller, now.Sub(h.since).Round(time.Second), c.cfg.SellerHoldLimit, d.Message)
		return d
	})
}

// deadLetterAll dead-letters rows that may hold their SKU's claim (a row
// never claimed gets its claim's keys first), each with its own letter.
func (rn *runner) deadLetterAll(its []*item, letter func(*item) deadletter.Row) {
	for _, it := range its {
		delete(rn.unanswered, it)
		if it.sku == nil {
			it.sku = rn.c.newSKUClaim(it.r, rn.log)
		}
		rn.c.deadLetter(it.r, letter(it), it.sku, rn.log)
	}
}

// The ends of one call's row (outcome).
type outcome int

const (
	outcomeDone        outcome = iota // the row's result is to be written, then the row finished
	outcomeAgain                      // queued again for a later batch
	outcomeRateLimited                // queued again; the seller is blocked first
	outcomeGone                       // dead-lettered or given back already
)

// outcome acts on the answer to a row's call. held: the seller is held
// (a failure after its last answered call is not its row's). A row's attempts count its calls (but a
// refusal of bulkreg itself); its retry budget is spent only by failures
// that are its own.
func (rn *runner) outcome(it *item, held bool) outcome {
	c, res, t := rn.c, &it.res, &it.t
	if res.Class != registryclient.Misconfigured {
		t.attempts++
	}
	switch res.Class {
	case registryclient.Registered, registryclient.Replayed:
		return outcomeDone
	case registryclient.Permanent:
		rn.log.Info("row refused by the registration API", "row", it.r.m.Row, "status", res.Status, "code", res.Code, "field", res.Field, "err", res.Err)
		return outcomeDone
	case registryclient.RateLimited:
		c.m.rateLimited.Inc()
		t.rateLimited++
		if t.firstFailure.IsZero() {
			t.firstFailure = time.Now()
		}
		rn.log.Warn("429 from the registration API: blocking the limit it names", "row", it.r.m.Row, "scope", res.Scope, "retry_after", res.RetryAfter, "attempt", t.attempts)
		if t.rateLimited > c.cfg.MaxRateLimited {
			c.deadLetter(it.r, deadLetterOf(it.r, *res, t.attempts, t.firstFailure), it.sku, rn.log)
			return outcomeGone
		}
		return outcomeRateLimited
	case registryclient.Misconfigured:
		// The API refused bulkreg itself. While the circuit holds every row
		// it is nobody's attempt; when the circuit judged it this seller's
		// own, it is a failure of the seller like a 5xx.
		if !it.cb.own {
			return outcomeAgain
		}
		t.attempts++
	}
	// Transient, or a refusal of bulkreg the circuit judged this seller's.
	if it.cb.outage || (held && !it.own) {
		return outcomeAgain // the outage's or the seller's, not the row's
	}
	it.suspect = true
	if t.firstFailure.IsZero() {
		t.firstFailure = time.Now()
	}
	if t.retry == nil {
		t.retry = c.deps.Retry.NewBackOff()
	}
	wait := t.retry.NextBackOff()
	if wait == backoff.Stop {
		rn.log.Error("registration failed after the last attempt: sending the row to the dead-letter topic", "row", it.r.m.Row, "attempts", t.attempts, "err", res.Err)
		c.deadLetter(it.r, deadLetterOf(it.r, *res, t.attempts, t.firstFailure), it.sku, rn.log)
		return outcomeGone
	}
	rn.log.Warn("transient registration failure of the row's own (its seller's calls sent with it or after it were answered, or it failed alone), retrying", "row", it.r.m.Row, "attempt", t.attempts, "in", wait, "status", res.Status, "err", res.Err)
	it.notBefore = time.Now().Add(wait)
	return outcomeAgain
}

// block tells the throttle the API refused the seller (or, for an app-wide
// 429, the application) until Retry-After.
func (rn *runner) block(res registryclient.Result) {
	retryAfter := res.RetryAfter
	if retryAfter <= 0 {
		retryAfter = time.Second
	}
	c := rn.c
	what, block := "the seller", func(ctx context.Context) error { return c.deps.Throttle.Block(ctx, rn.seller, retryAfter) }
	if res.Scope == registryclient.ScopeApp {
		what, block = "the app-wide limit", func(ctx context.Context) error { return c.deps.Throttle.BlockGlobal(ctx, retryAfter) }
	}
	if err := c.untilRedis(rn.p.Ctx(), "block "+what+" in the throttle", rn.log, block); err != nil {
		rn.log.Warn("could not block "+what+" in the throttle", "err", err)
	}
}

// finish writes the results of rows, one write per upload, and finishes
// each row once its result is written (a row whose result Redis did not
// take before the drain ended is given back).
func (rn *runner) finish(byUpload map[string][]*item) {
	c := rn.c
	for upload, its := range byUpload {
		rrs := make([]uploadstatus.RowResult, 0, len(its))
		kinds := make([]string, 0, len(its))
		var ok []*item
		for _, it := range its {
			rr, kind, good := rn.result(it)
			if !good {
				it.r.GiveBack()
				continue
			}
			rr.Row = it.r.m.Row
			rrs, kinds, ok = append(rrs, rr), append(kinds, kind), append(ok, it)
		}
		if len(ok) == 0 {
			continue
		}
		if err := c.recordRows(rn.p.FinishCtx(), upload, rrs); err != nil {
			rn.log.Error("could not record the rows' results before the drain ended; the rows will be read again", "upload_id", upload, "rows", len(ok), "err", err)
			for _, it := range ok {
				it.r.GiveBack()
			}
			continue
		}
		n := 0 // rows of one kind in a row: one metric update for them
		for i, it := range ok {
			if n++; i == len(ok)-1 || kinds[i+1] != kinds[i] {
				c.m.rows.WithLabelValues(kinds[i]).Add(float64(n))
				n = 0
			}
			it.r.Finish()
		}
	}
}

// result is a finished row's result and its kind (the rows metric's
// label); good is false when the row must be given back (its registration
// did not reach the ledger before the drain ended).
func (rn *runner) result(it *item) (rr uploadstatus.RowResult, kind string, good bool) {
	s, res := it.sku, it.res
	switch {
	case it.result != nil:
		return *it.result, it.kind, true
	case res.Class == registryclient.Permanent:
		return s.refused(res, it.t.attempts), "failed", true // releases the SKU's claim
	}
	// Registered, or replayed: first in the ledger (the batch's write marked
	// it), then the status.
	e := it.mk.e
	if !it.mk.done {
		rn.log.Error("could not record the registration in the ledger before the drain ended; the row will be read again", "row", it.r.m.Row, "product_id", res.ProductID)
		return rr, "", false
	}
	s.held = false
	if e.Row != s.own && e.ProductID != res.ProductID {
		rn.log.Error("the API registered a SKU the ledger holds as another product: the seller now has it twice",
			"row", it.r.m.Row, "product_id", res.ProductID, "first_product_id", e.ProductID, "first_row", e.Row)
		return s.registeredTwice(res, e, it.t.attempts), res.Class.String(), true
	}
	kind = res.Class.String()
	if e.Row != s.own {
		kind = uploadstatus.AlreadyRegistered
	}
	return s.registeredAs(e, it.t.attempts), kind, true
}

// answeredClass reports whether the API answered a call of this class
// itself: a registration, a replay, a refusal of the row or a 429.
func answeredClass(c registryclient.Class) bool {
	switch c {
	case registryclient.Registered, registryclient.Replayed, registryclient.Permanent, registryclient.RateLimited:
		return true
	}
	return false
}

// startBudget is how many calls this process lets fall due at once: what
// it can start within MaxLateness (Config.MaxDueNow). A runner whose next
// slots may be due now takes one per row before it reserves, and gives each
// back when the row's call starts or its slot turns out later. When many
// sellers' first windows are free at once, each would otherwise book its
// whole window at the same instant, and most slots would go by before a
// call could start (each one lost to its seller: its next window is placed
// after it). Runners are served by rank, the time their seller started
// asking (runner.rank), so the seller that started first gets its whole
// window first, and its later windows repeat the same spacing; served in
// the order they asked, every seller's window would spread over everyone's.
type startBudget struct {
	total int

	mu      sync.Mutex
	free    int
	waiting []*budgetWait
}

type budgetWait struct {
	rank      time.Time
	want, got int
	ready     chan struct{}
}

func newStartBudget(n int) *startBudget { return &startBudget{total: n, free: n} }

// take waits until the runner's turn (by rank) and returns how many starts
// it got: at least one, at most want. A runner waits for half the budget (or
// want, when less) so that a seller's window is not cut into many small
// batches. It returns 0 when ctx ended first.
func (b *startBudget) take(ctx context.Context, rank time.Time, want int) int {
	want = max(1, want)
	b.mu.Lock()
	if (len(b.waiting) == 0 || rank.Before(b.waiting[0].rank)) && b.free >= b.enough(want) {
		got := min(want, b.free)
		b.free -= got
		b.mu.Unlock()
		return got
	}
	w := &budgetWait{rank: rank, want: want, ready: make(chan struct{})}
	i, _ := slices.BinarySearchFunc(b.waiting, rank, func(w *budgetWait, r time.Time) int {
		if w.rank.After(r) {
			return 1
		}
		return -1 // after the waiters of the same rank
	})
	b.waiting = slices.Insert(b.waiting, i, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return w.got
	case <-ctx.Done():
	}
	b.mu.Lock()
	if i := slices.Index(b.waiting, w); i >= 0 {
		b.waiting = slices.Delete(b.waiting, i, i+1)
	}
	got := w.got // granted as ctx ended, else 0
	b.mu.Unlock()
	b.give(got) // the next waiter may fit now
	return 0
}

// enough is what a runner that wants want waits for.
func (b *startBudget) enough(want int) int { return max(1, min(want, b.total/2)) }

// give returns n starts and serves the runners waiting, in order.
func (b *startBudget) give(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += n
	for len(b.waiting) > 0 && b.free >= b.enough(b.waiting[0].want) {
		w := b.waiting[0]
		w.got = min(w.want, b.free)
		b.free -= w.got
		b.waiting[0] = nil
		b.waiting = b.waiting[1:]
		close(w.ready)
	}
}

// A row's throttle slot: asking for it, placing it on this machine's clock,
// confirming it, settling it and giving it back.

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
