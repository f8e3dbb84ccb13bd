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

// leaving runs op, and returns when it is done or, with ctx's error, as
// soon as ctx ends: a command already sent on a link that went dark is
// answered only at the Redis client's read timeout, and a drain must not
// wait for it (the partition's commit must go out while the group still
// counts this member in). op goes on with ctx, which has ended: its answer
// is dropped, and what it wrote is what a lost answer leaves (slots and
// claims lapse on their own). A goroutine per batch's Redis call.
func leaving[T any](ctx context.Context, op func(context.Context) (T, error)) (T, error) {
	type answer struct {
		v   T
		err error
	}
	done := make(chan answer, 1)
	go func() {
		v, err := op(ctx)
		done <- answer{v, err}
	}()
	select {
	case a := <-done:
		return a.v, a.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// claimReserve claims the SKUs of a batch's rows and reserves as many slots
// of the seller, in one script. An error wraps Redis's.
func (c *Consumer) claimReserve(ctx context.Context, seller string, claims []ledger.ClaimRequest) ([]ledger.ClaimResult, []throttle.Reservation, error) {
	got := make([]ledger.ClaimResult, len(claims)) // filled in by the script's step
	var steps []scriptbatch.Step
	if st, ok := c.deps.Ledger.ClaimStep(seller, claims, got); ok {
		steps = append(steps, st)
	}
	rs, err := leaving(ctx, func(ctx context.Context) ([]throttle.Reservation, error) {
		return c.deps.Throttle.ReserveN(ctx, seller, len(claims), steps...)
	})
	if err != nil {
		return nil, nil, err
	}
	return got, rs, nil
}

// callWrite is what one call of a batch leaves in Redis: its record in the
// compliance history, its slot settled (counted) or given back, and a
// registration's mark in the ledger (mark, filled into mk).
type callWrite struct {
	call     compliance.Call
	res      throttle.Reservation
	counted  bool
	answered time.Time // zero: no answer came
	// marks: the call registered a product; mark is its mark in the
	// ledger, marked its answer once the batch ran (or at once, for a mark
	// the ledger refuses).
	marks  bool
	mark   ledger.MarkRequest
	marked ledger.MarkResult
	// rest is what of the slot is left to settle or give back once the
	// batch ran (the app-wide slot, or all of it without steps).
	rest throttle.Reservation
}

// writeCalls writes a batch's calls and the slots of its rows that made
// none (freed: given back) in one script, and answers what of the freed
// slots is left to give back on its own. Its error says the compliance
// records (and the marks with them) did not reach Redis before the drain
// ended.
func (c *Consumer) writeCalls(ctx context.Context, seller string, ws []callWrite, freed []throttle.Reservation) ([]throttle.Reservation, error) {
	th := c.deps.Throttle
	var batch []scriptbatch.Step
	calls := make([]compliance.Call, len(ws))
	var settles []throttle.Settled
	var marks []ledger.MarkRequest
	for i := range ws {
		w := &ws[i]
		calls[i] = w.call
		w.rest = w.res
		switch {
		case w.counted:
			settles = append(settles, throttle.Settled{Res: w.res, Answer: w.answered})
		default:
			if st, ok := th.ReleaseStep(w.res); ok {
				batch = append(batch, st)
				w.rest = w.res.AppWide()
			}
		}
		if w.marks {
			marks = append(marks, w.mark)
		}
	}
	batch = append(batch, th.SettleStep(seller, settles)...)
	for i, j := 0, 0; i < len(ws) && j < len(settles); i++ {
		if ws[i].counted {
			if settles[j].Done {
				ws[i].rest = ws[i].res.AppWide()
			}
			j++
		}
	}
	marked := make([]ledger.MarkResult, len(marks))
	if st, ok := c.deps.Ledger.MarkStep(seller, marks, marked); ok {
		batch = append(batch, st)
	}
	// Each registration's answer: a mark the ledger refused has it at once;
	// the others once the write is done (a write left behind by the drain
	// may still fill them in, so they are read only after a write that
	// returned).
	answers := func(written bool) {
		for i, j := 0, 0; i < len(ws); i++ {
			if ws[i].marks {
				if written || errors.Is(marked[j].Err, ledger.ErrInvalid) {
					ws[i].marked = marked[j]
				}
				j++
			}
		}
	}
	answers(false)
	var left []throttle.Reservation // what of the freed slots is left to give back
	for _, r := range freed {
		if st, ok := th.ReleaseStep(r); ok {
			batch = append(batch, st)
			r = r.AppWide()
		}
		if r.ID != "" || r.Global.ID != "" {
			left = append(left, r)
		}
	}
	if len(calls) == 0 && len(batch) == 0 {
		return left, nil
	}
	err := c.untilRedis(ctx, "record the calls in the compliance history", c.log, func(ctx context.Context) error {
		_, err := leaving(ctx, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, c.deps.Calls.RecordAll(ctx, seller, calls, batch...)
		})
		return err
	})
	if err == nil {
		answers(true)
	} else {
		for i := range ws {
			ws[i].rest = ws[i].res // the steps did not run: try the slots on their own
		}
		left = freed
	}
	return left, err
}

// recordRows writes the results of one upload's rows in one script.
func (c *Consumer) recordRows(ctx context.Context, uploadID string, rs []uploadstatus.RowResult) error {
	return c.untilRedis(ctx, "record the rows' results", c.log, func(ctx context.Context) error {
		_, err := leaving(ctx, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, c.deps.Status.RecordRows(ctx, uploadID, rs)
		})
		return err
	})
}
