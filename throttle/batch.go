// A seller's rows as one batch: reserve, check and release several slots in
// one script each, and the settles and releases of a batch's calls as steps
// of the script that writes them.

package throttle

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bulkreg/bulkreg/internal/scriptbatch"
)

// reserveScript is the sliding log's reserve script as scriptbatch names
// it: the marker check and the room check its body calls, then the body.
const reserveScript = "slot_guard.lua+fits.lua+reserve.lua"

// batchRunner runs a Throttle's script batches (scriptbatch keeps each set
// of scripts composed once); made on first use, one per Throttle.
type batchRunner struct {
	once sync.Once
	r    *scriptbatch.Runner
}

func (b *batchRunner) get() *scriptbatch.Runner {
	b.once.Do(func() { b.r = scriptbatch.New() })
	return b.r
}

// ReserveN takes the seller's next n slots, in order, running the steps
// before first in the same script: one round trip, one script on the
// seller's hash tag (the SKU ledger's claims of the same rows, say). Every
// step must touch the seller's hash tag only. The slots are those n
// reservations one after the other would get; once one is not admitted
// (beyond MaxWait), none after it is, and its At says when to ask again.
// An admitted one carries its SendBy.
//
// With a sliding log and no app-wide limit this is one script. Other
// policies take their slots one reservation after the other (their scripts
// take one slot each), after the steps have run as a script of their own.
//
// The ids are made here. When the answer is lost (an error that is not the
// caller's own cancellation), the slots it may have taken are given back
// before it returns, so a caller may simply ask again.
func (t *Throttle) ReserveN(ctx context.Context, seller string, n int, before ...scriptbatch.Step) ([]Reservation, error) {
	if seller == "" {
		return nil, errors.New("throttle: seller id must not be empty")
	}
	if n < 1 || n > maxReserveBatch {
		return nil, fmt.Errorf("throttle: reserve %d slots for seller %q: a batch takes 1 to %d", n, seller, maxReserveBatch)
	}
	if t.global != nil || t.p.Kind != Sliding {
		return t.reserveEach(ctx, seller, n, before)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = rand.Text()
	}
	c := t.reserveCall(seller, ids[0], time.Time{})
	args := c.args
	if n > 1 {
		args = append(args, 0) // ARGV[7], no app-wide bound, then the other ids
		for _, id := range ids[1:] {
			args = append(args, id)
		}
	}
	var rs []Reservation
	step := scriptbatch.Step{Script: reserveScript, Keys: c.keys, Args: args, Reply: func(v any) error {
		got, err := sellerReservations(v, seller, ids, "reserve a slot")
		if err != nil {
			return err
		}
		for i := range got {
			if r := &got[i]; r.Admitted {
				r.SendBy = r.At.Add(t.p.SendWithin)
				r.Room = max(0, t.p.Limit-r.InWindow) // a sliding log's places left, as Reserve reports them
			}
		}
		rs = got
		return nil
	}}
	if err := t.batch.get().Run(ctx, t.rdb, append(before, step)...); err != nil {
		if rs == nil && (ctx.Err() != nil || isTimeout(err)) {
			// The script may have run and taken the slots, its answer lost:
			// give them back (a no-op for ids that hold none).
			for _, id := range ids {
				t.releaseDetached(ctx, Reservation{Seller: seller, ID: id})
			}
		}
		return nil, t.fail(ctx, "reserve slots", seller, err)
	}
	return rs, nil
}

// reserveEach is ReserveN for the policies whose scripts take one slot each.
func (t *Throttle) reserveEach(ctx context.Context, seller string, n int, before []scriptbatch.Step) ([]Reservation, error) {
	if len(before) > 0 {
		if err := t.batch.get().Run(ctx, t.rdb, before...); err != nil {
			return nil, t.fail(ctx, "run the steps before the reservations", seller, err)
		}
	}
	rs := make([]Reservation, 0, n)
	for range n {
		r, err := t.Reserve(ctx, seller)
		if err != nil {
			for _, got := range rs {
				t.releaseDetached(ctx, got)
			}
			return nil, err
		}
		rs = append(rs, r)
		if !r.Admitted {
			break
		}
	}
	for len(rs) < n { // as one script answers: none admitted after the first refused
		rs = append(rs, Reservation{Seller: seller, At: rs[len(rs)-1].At, Wait: rs[len(rs)-1].Wait})
	}
	return rs, nil
}

// CheckN is Check for several slots of one seller (each admitted, with its
// epoch), in one script when none holds an app-wide slot.
func (t *Throttle) CheckN(ctx context.Context, seller string, rs []Reservation) ([]SlotCheck, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	items := make([]checkItem, 0, len(rs))
	for _, r := range rs {
		if !r.Admitted || r.ID == "" || r.Epoch == "" || r.Seller != seller {
			return nil, fmt.Errorf("throttle: check slots of seller %q: a reservation holds no slot of this seller (%q, admitted %v)", seller, r.Seller, r.Admitted)
		}
		if r.Global.ID != "" && t.global != nil {
			return t.checkEach(ctx, rs)
		}
		items = append(items, checkItem{id: r.ID, epoch: r.Epoch})
	}
	var out []SlotCheck
	for start := 0; start < len(items); start += maxCheckBatch {
		cs, err := t.writeChecks(ctx, seller, items[start:min(len(items), start+maxCheckBatch)])
		if err != nil {
			return nil, t.fail(ctx, "check slots", seller, err)
		}
		out = append(out, cs...)
	}
	return out, nil
}

func (t *Throttle) checkEach(ctx context.Context, rs []Reservation) ([]SlotCheck, error) {
	out := make([]SlotCheck, len(rs))
	for i, r := range rs {
		c, err := t.Check(ctx, r)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// ReleaseN gives back several slots of one seller in one script (and their
// app-wide slots, when they hold any, in one round trip each).
func (t *Throttle) ReleaseN(ctx context.Context, seller string, rs []Reservation) error {
	var steps []scriptbatch.Step
	for _, r := range rs {
		if st, ok := t.ReleaseStep(r); ok {
			steps = append(steps, st)
		}
	}
	if len(steps) > 0 {
		if err := t.batch.get().Run(ctx, t.rdb, steps...); err != nil {
			return t.fail(ctx, "release slots", seller, err)
		}
	}
	for _, r := range rs {
		if r.Global.ID != "" {
			if err := t.Release(ctx, r.AppWide()); err != nil {
				return err
			}
		}
	}
	return nil
}

// Settled is one answered call for SettleStep: its slot and when its answer
// came (zero: no answer came).
type Settled struct {
	Res    Reservation
	Answer time.Time
	// Done is set by SettleStep when a step takes care of the call's seller
	// slot: what is left, Res.AppWide() (the app-wide slot), is Settle's.
	Done bool
}

// SettleStep is Settle's part in the seller's own log for answered calls of
// one seller, as steps to run in one script with the calls' other writes on
// the seller's hash tag (internal/scriptbatch): under a sliding log one step,
// one ZADD moving every entry; a step per call under the other policies. A
// call without a step (Done false: no slot of this seller, or an answer that
// moves nothing) has nothing to do in the seller's log; Settle then does
// nothing there either. The steps point into calls (the client then boxes
// no value of each call): calls must not change until they have run.
func (t *Throttle) SettleStep(seller string, calls []Settled) []scriptbatch.Step {
	var steps []scriptbatch.Step
	var args []any
	var ats []int64 // the places, which args point to: the client boxes no value of each call
	for i := range calls {
		c := &calls[i]
		r := c.Res
		if r.ID == "" || r.Seller != seller || seller == "" || !t.sellerMoves(r, c.Answer) {
			continue
		}
		c.Done = true
		answer := t.answered(r, c.Answer)
		if t.p.Kind != Sliding {
			ks, a := t.sellerSettle(r, answer)
			steps = append(steps, scriptbatch.Step{Script: "settle.lua", Keys: ks, Args: a})
			continue
		}
		if ats == nil {
			ats = make([]int64, 0, len(calls)-i)
			args = make([]any, 0, (2+len(t.settleTail))*(len(calls)-i))
		}
		ats = append(ats, t.settledCount(r, answer).UnixMicro())
		args = append(args, &ats[len(ats)-1], &c.Res.ID)
		args = append(args, t.settleTail...)
	}
	if len(args) > 0 {
		steps = append(steps, scriptbatch.Step{Script: "settle.lua", Keys: t.settleKeys(seller), Args: args})
	}
	return steps
}

// ReleaseStep is Release's part in the seller's own log as a step (see
// SettleStep).
func (t *Throttle) ReleaseStep(r Reservation) (s scriptbatch.Step, ok bool) {
	if r.ID == "" || r.Seller == "" {
		return s, false
	}
	c := t.releaseCall(r.Seller, r.ID)
	return scriptbatch.Step{Script: "release.lua", Keys: c.keys, Args: c.args}, true
}
