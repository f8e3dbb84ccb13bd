// What a runner asks of Redis, one batch of a seller's rows at a time.

package consumer

import (
	"context"
	"errors"
	"time"

	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/ledger"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// The batch forms of the consumer's Redis stores (*throttle.Throttle,
// *ledger.Ledger, *compliance.Recorder, *uploadstatus.Store). A store
// without its batch form is asked once per row, in order: the runner works
// the same, with a round trip per row.
type (
	batchThrottle interface {
		ReserveN(ctx context.Context, seller string, n int, before ...scriptbatch.Step) ([]throttle.Reservation, error)
		CheckN(ctx context.Context, seller string, rs []throttle.Reservation) ([]throttle.SlotCheck, error)
		ReleaseN(ctx context.Context, seller string, rs []throttle.Reservation) error
		slotSteps
	}
	batchLedger interface {
		ClaimStep(seller string, reqs []ledger.ClaimRequest, into []ledger.ClaimResult) (scriptbatch.Step, bool)
		ClaimN(ctx context.Context, seller string, reqs []ledger.ClaimRequest) ([]ledger.ClaimResult, error)
	}
	batchRecorder interface {
		RecordAll(ctx context.Context, seller string, calls []compliance.Call, steps ...scriptbatch.Step) error
	}
	batchStatus interface {
		RecordRows(ctx context.Context, uploadID string, rs []uploadstatus.RowResult) error
	}
)

// leaving runs op, and returns when it is done or, with ctx's error, as
// soon as ctx ends: a command already sent on a link that went dark is
// answered only at the Redis client's read timeout, and a drain must not
// wait for it (the partition's commit must go out while the group still
// counts this member in). op goes on with ctx, which has ended: its answer
// is dropped, and what it wrote is what a lost answer leaves (slots and
// claims lapse on their own). A goroutine per batch's Redis call.
func leaving(ctx context.Context, op func(context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- op(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// claimReserve claims the SKUs of a batch's rows (nil claims: no ledger)
// and reserves n slots of the seller, in one script when the stores have
// their batch forms. An error wraps Redis's.
func (c *Consumer) claimReserve(ctx context.Context, seller string, claims []ledger.ClaimRequest, n int) ([]ledger.ClaimResult, []throttle.Reservation, error) {
	var got []ledger.ClaimResult // set by op; read only when op is done
	var rs []throttle.Reservation
	err := leaving(ctx, func(ctx context.Context) error {
		var err error
		got, rs, err = c.claimReserveNow(ctx, seller, claims, n)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return got, rs, nil
}

func (c *Consumer) claimReserveNow(ctx context.Context, seller string, claims []ledger.ClaimRequest, n int) ([]ledger.ClaimResult, []throttle.Reservation, error) {
	var got []ledger.ClaimResult
	bt, batched := c.deps.Throttle.(batchThrottle)
	if claims != nil {
		got = make([]ledger.ClaimResult, len(claims))
		bl, ok := c.deps.Ledger.(batchLedger)
		switch {
		case ok && batched:
			st, any := bl.ClaimStep(seller, claims, got)
			var steps []scriptbatch.Step
			if any {
				steps = append(steps, st)
			}
			rs, err := bt.ReserveN(ctx, seller, n, steps...)
			return got, rs, err
		case ok:
			var err error
			if got, err = bl.ClaimN(ctx, seller, claims); err != nil {
				return nil, nil, err
			}
		default:
			for i, q := range claims {
				cl, err := c.deps.Ledger.Claim(ctx, seller, q.SKU, q.Row, q.Hash, q.From)
				if err != nil && !errors.Is(err, ledger.ErrInvalid) && !errors.Is(err, ledger.ErrUnreadable) {
					return nil, nil, err
				}
				got[i] = ledger.ClaimResult{Claim: cl, Err: err}
			}
		}
	}
	if batched {
		rs, err := bt.ReserveN(ctx, seller, n)
		return got, rs, err
	}
	rs := make([]throttle.Reservation, 0, n)
	for len(rs) < n {
		r, err := c.deps.Throttle.Reserve(ctx, seller)
		if err != nil {
			c.releaseAll(seller, rs)
			return nil, nil, err
		}
		rs = append(rs, r)
		if !r.Admitted {
			for len(rs) < n {
				rs = append(rs, throttle.Reservation{Seller: seller, At: r.At, Wait: r.Wait})
			}
		}
	}
	return got, rs, nil
}

// checkAll confirms a batch's slots (Throttle.Check), in one script when
// the throttle has its batch form.
func (c *Consumer) checkAll(ctx context.Context, seller string, rs []throttle.Reservation) ([]throttle.SlotCheck, error) {
	var out []throttle.SlotCheck // set by op; read only when op is done
	err := leaving(ctx, func(ctx context.Context) error {
		var err error
		out, err = c.checkNow(ctx, seller, rs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *Consumer) checkNow(ctx context.Context, seller string, rs []throttle.Reservation) ([]throttle.SlotCheck, error) {
	if bt, ok := c.deps.Throttle.(batchThrottle); ok {
		return bt.CheckN(ctx, seller, rs)
	}
	out := make([]throttle.SlotCheck, len(rs))
	for i, r := range rs {
		chk, err := c.deps.Throttle.Check(ctx, r)
		if err != nil {
			return nil, err
		}
		out[i] = chk
	}
	return out, nil
}

// releaseAll gives slots back, best effort (as release).
func (c *Consumer) releaseAll(seller string, rs []throttle.Reservation) {
	if len(rs) == 0 {
		return
	}
	ctx := c.slotWrites.get()
	if bt, ok := c.deps.Throttle.(batchThrottle); ok {
		if err := bt.ReleaseN(ctx, seller, rs); err != nil {
			c.log.Debug("could not give slots back to the throttle", "seller", seller, "slots", len(rs), "err", err)
		}
		return
	}
	for _, r := range rs {
		c.unreserve(&slot{Reservation: r})
	}
}

// callWrite is what one call of a batch leaves in Redis: its record in the
// compliance history, its slot settled (counted) or given back, and a
// registration's mark in the ledger (mark, filled into mk).
type callWrite struct {
	call     compliance.Call
	res      throttle.Reservation
	counted  bool
	answered time.Time // zero: no answer came
	mark     *scriptbatch.Step
	// rest is what of the slot is left to settle or give back once the
	// batch ran (the app-wide slot, or all of it without steps).
	rest throttle.Reservation
}

// writeCalls writes a batch's calls and the slots of its rows that made
// none (freed: given back) in one script when the stores have their batch
// forms, else one write per call (and no mark: each registration is marked
// on its own, mark set to nil). Its error says the compliance records (and
// the marks with them) did not reach Redis before the drain ended.
func (c *Consumer) writeCalls(ctx context.Context, seller string, ws []callWrite, freed []throttle.Reservation) error {
	th, steps := c.deps.Throttle.(batchThrottle)
	rec, all := c.deps.Calls.(batchRecorder)
	if !steps || !all {
		err := error(nil)
		for i := range ws {
			w := &ws[i]
			w.rest, w.mark = w.res, nil // the ledger's mark is the row's own (runner.result)
			if e := c.untilRedis(ctx, "record the call in the compliance history", c.log, func(ctx context.Context) error {
				return c.deps.Calls.Record(ctx, seller, w.call)
			}); e != nil && err == nil {
				err = e
			}
		}
		c.releaseAll(seller, freed)
		return err
	}
	var batch []scriptbatch.Step
	calls := make([]compliance.Call, len(ws))
	for i := range ws {
		w := &ws[i]
		calls[i] = w.call
		w.rest = w.res
		var st scriptbatch.Step
		ok := false
		if w.counted {
			st, ok = th.SettleStep(w.res, w.answered)
		} else {
			st, ok = th.ReleaseStep(w.res)
		}
		if ok {
			batch = append(batch, st)
			w.rest = w.res.AppWide()
		}
		if w.mark != nil {
			batch = append(batch, *w.mark)
		}
	}
	var appWide []throttle.Reservation
	for _, r := range freed {
		if st, ok := th.ReleaseStep(r); ok {
			batch = append(batch, st)
		}
		if r.Global.ID != "" {
			appWide = append(appWide, r.AppWide())
		}
	}
	if len(calls) == 0 && len(batch) == 0 {
		c.releaseAll(seller, appWide)
		return nil
	}
	err := c.untilRedis(ctx, "record the calls in the compliance history", c.log, func(ctx context.Context) error {
		return leaving(ctx, func(ctx context.Context) error { return rec.RecordAll(ctx, seller, calls, batch...) })
	})
	if err != nil {
		for i := range ws {
			ws[i].rest = ws[i].res // the steps did not run: try the slots on their own
		}
		appWide = freed
	}
	c.releaseAll(seller, appWide)
	return err
}

// recordRows writes the results of one upload's rows, in one script when
// the store has its batch form.
func (c *Consumer) recordRows(ctx context.Context, uploadID string, rs []uploadstatus.RowResult) error {
	if bs, ok := c.deps.Status.(batchStatus); ok {
		return c.untilRedis(ctx, "record the rows' results", c.log, func(ctx context.Context) error {
			return leaving(ctx, func(ctx context.Context) error { return bs.RecordRows(ctx, uploadID, rs) })
		})
	}
	for _, rr := range rs {
		if err := c.untilRedis(ctx, "record the row's result", c.log, func(ctx context.Context) error {
			return c.deps.Status.RecordRow(ctx, uploadID, rr)
		}); err != nil {
			return err
		}
	}
	return nil
}
