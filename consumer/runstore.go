// What a runner asks of Redis: whether a row's upload exists, its SKU's
// claim and what the claim leaves, and the scripts of one batch of a
// seller's rows.

package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/deadletter"
	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/ledger"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// leaving runs op, and returns when it is done or, with ctx's error, as
// soon as ctx ends: a command already sent on a link that went dark is
// answered only at the Redis client's read timeout, and the drain's end
// must not wait for it (the partition's commit must go out while the group
// still counts this member in). op goes on with ctx, which has ended: its
// answer is dropped, and what it wrote is what a lost answer leaves (slots
// and claims lapse on their own). A goroutine per batch's Redis call.
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

// Uploads tells whether the upload a row names exists (*uploadstatus.Store).
type Uploads interface {
	Presence(ctx context.Context, q uploadstatus.PresenceQuery) (uploadstatus.Presence, error)
}

// maxKnownUploads bounds the uploads a consumer remembers as checked; past
// it the memory starts again, costing one round trip per upload met again.
// A consumer meets a few hundred uploads in a window at most.
const maxKnownUploads = 4096

// uploadDoor lets a row go on only if its upload exists: the producer
// creates every upload before it publishes a row, so a row of an upload
// Redis never held was not published by a producer (a hand-written or stray
// message) and is dead-lettered as a bad message, registering nothing. What
// counts as "never held" is uploadstatus.Presence's: an upload Redis may
// have lost, or whose record may have expired, lets its rows go on.
// An upload is looked up once per process (two lookups at once are rare and
// harmless); every later row finds it in known.
type uploadDoor struct {
	markers *throttle.Markers

	mu    sync.Mutex
	known map[uploadKey]struct{} // uploads whose rows go on
}

// uploadKey names an upload as a row does: a row of a known upload naming
// another seller is looked up again (and refused).
type uploadKey struct{ seller, upload string }

// has reports whether k's rows go on, and with remember true makes it so.
func (d *uploadDoor) has(k uploadKey, remember bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if remember {
		if len(d.known) >= maxKnownUploads {
			clear(d.known)
		}
		d.known[k] = struct{}{}
	}
	_, ok := d.known[k]
	return ok
}

// admit reports whether the row may go on. A row of an upload that does not
// exist is dead-lettered (finished); a row whose context ends while Redis
// does not answer is given back. Either way it reports false.
func (c *Consumer) admit(r *row, log *slog.Logger) bool {
	d := c.door
	k := uploadKey{seller: r.m.SellerID, upload: r.m.UploadID}
	if d.has(k, false) {
		return true
	}
	ctx := r.ctx()
	var p uploadstatus.Presence
	err := c.untilRedis(ctx, "look the row's upload up", log, c.gated(func(ctx context.Context) error {
		var err error
		p, err = c.deps.Uploads.Presence(ctx, uploadstatus.PresenceQuery{UploadID: r.m.UploadID, SellerID: r.m.SellerID, EnqueuedAt: r.m.EnqueuedAt,
			Marker: d.markers.For(uploadstatus.MetaKey(r.m.UploadID)), Slack: c.cfg.UploadPresenceSlack})
		return err
	}))
	switch {
	case err != nil || ctx.Err() != nil:
		r.GiveBack()
		return false
	case !p.Bad():
		if p != uploadstatus.UploadFound {
			log.Warn("the row's upload has no record in Redis, which may have lost it or let it expire; registering its rows, and the status will say it was partly lost", "presence", p.String())
		}
		return d.has(k, true)
	}
	msg := fmt.Sprintf("upload %s does not exist: no producer created it, so no producer published this row; nothing was registered", r.m.UploadID)
	if p == uploadstatus.UploadOtherSeller {
		msg = fmt.Sprintf("upload %s belongs to another seller than %s; nothing was registered", r.m.UploadID, r.m.SellerID)
	}
	log.Error("a row of an upload that does not exist: sending it to the dead-letter topic", "presence", p.String())
	c.deadLetter(r, deadletter.Row{Original: r.Msg, Class: deadletter.ClassBadMessage, Message: msg, FirstFailure: time.Now()}, nil, log)
	return false
}

// Ledger is the SKU ledger as the consumer uses it (*ledger.Ledger): a row
// claims its SKU before it takes a slot, marks it registered after the API
// registered it, and releases its claim when it gives up.
type Ledger interface {
	Claim(ctx context.Context, seller, sku, row, hash, from string) (ledger.Claim, error)
	// ClaimStep is Claim for a batch's rows, as a step of the throttle's
	// reservation script (into is filled once it ran; ok is false when no
	// request is left to send).
	ClaimStep(seller string, reqs []ledger.ClaimRequest, into []ledger.ClaimResult) (st scriptbatch.Step, ok bool)
	// MarkStep marks a batch's registrations as a step of the batch's
	// write (into is filled once it ran; at once for a mark the ledger
	// refuses; ok is false when no request is left to send).
	MarkStep(seller string, reqs []ledger.MarkRequest, into []ledger.MarkResult) (st scriptbatch.Step, ok bool)
	Release(ctx context.Context, seller, sku, row string, forget bool) (bool, error)
	SetAside(ctx context.Context, seller, sku, row, from string, note ledger.AsideNote) (bool, error)
}

// CodeRegisteredOtherContent is the failure code of a row whose SKU the
// seller registered before with other content.
const CodeRegisteredOtherContent = "already_registered_other_content"

// CodeRegisteredTwice is the code of a row the API registered while the
// ledger held its SKU as another product: a duplicate for the seller to
// delete.
const CodeRegisteredTwice = uploadstatus.RegisteredTwice

// skuClaim is one row's part in the SKU ledger, from its first claim to the
// outcome.
//
// Exactly one registration per SKU: a row calls only while it holds the
// claim, and every call for one SKU uses one Idempotency-Key (the first
// claimer's; the ledger hands it to whoever takes a lapsed claim over). Two
// rows that still both call (a lease that lapsed under a live row) call with
// the same key, so the API answers the second with a replay, not a product.
type skuClaim struct {
	c   *Consumer
	r   *row
	log *slog.Logger
	// own is the row's own Idempotency-Key. r.m.IdempotencyKey becomes the
	// key the API is called with, which may be an earlier claimer's.
	own  string
	hash string
	// from names the Kafka record the row was read from (ledger.Record):
	// a re-read of a row that was dead-lettered is told by it.
	from string
	held bool // the row holds a claim it has not settled yet
	// shared: when the row last claimed, another row had held the claim
	// with its call key (ledger.Entry.Shared), so a 409 under that key is
	// that row's other content.
	shared bool
}

func (c *Consumer) newSKUClaim(r *row, log *slog.Logger) *skuClaim {
	return &skuClaim{c: c, r: r, log: log, own: bulkreg.IdempotencyKey(r.m.UploadID, r.m.Row), hash: r.m.Product.ContentHash(),
		from: ledger.Record(r.Msg.Topic, r.Msg.Partition, r.Msg.Offset)}
}

// claim takes or renews the row's claim on its SKU on its own, outside a
// batch (deadLetter). It reports false when the row is done with:
// finished (registered before, by this row or another, or with other
// content) or given back (rebalance, shutdown); true when its dead letter
// is to go on (it holds the claim, or the ledger refuses its arguments).
// While another row holds the claim it waits; while Redis does not answer
// it waits (fail closed).
func (s *skuClaim) claim() bool {
	c, r := s.c, s.r
	ctx := r.ctx()
	busy := c.redisBackOff()
	for {
		var cl ledger.Claim
		var invalid error
		err := c.untilRedis(ctx, "claim the SKU in the ledger", s.log, c.gated(func(ctx context.Context) error {
			var err error
			if cl, err = c.deps.Ledger.Claim(ctx, r.m.SellerID, r.m.Product.SellerSKU, s.own, s.hash, s.from); errors.Is(err, ledger.ErrInvalid) {
				invalid, err = err, nil
			}
			return err
		}))
		if err != nil || ctx.Err() != nil {
			s.giveBack()
			return false
		}
		if invalid != nil {
			// Refused however often it asks (the row claimed with the same
			// arguments before, so the ledger changed): its dead letter goes on.
			s.log.Error("the ledger cannot hold the row's SKU", "sku", r.m.Product.SellerSKU, "err", invalid)
			return true
		}
		call, rr, kind := s.verdict(cl)
		switch {
		case call:
			return true
		case rr != nil:
			c.record(r, *rr, kind, s.log)
			return false
		}
		// Another row is registering this SKU: ask again soon, and at the
		// latest when its lease ends. No slot is held meanwhile.
		if !sleep(ctx, min(busy.NextBackOff(), cl.RetryIn+time.Millisecond)) {
			s.giveBack()
			return false
		}
	}
}

// verdict takes the ledger's answer to the row's claim: call, the row holds
// the claim and calls with the key it names; else rr is the row's result
// without a call (registered before, by this row or another; set aside; other
// content), kind its label in the rows metric; or, with neither, another row
// is registering the SKU and this one waits (Claim.RetryIn).
func (s *skuClaim) verdict(cl ledger.Claim) (call bool, rr *uploadstatus.RowResult, kind string) {
	s.held = false
	switch cl.Verdict {
	case ledger.Call:
		s.held, s.shared = true, cl.Entry.Shared
		s.r.m.IdempotencyKey = cl.CallKey
		return true, nil, ""
	case ledger.Wait:
		return false, nil, ""
	case ledger.Done:
		res, kind := s.registeredAs(cl.Entry, 0), "registered" // res on the heap only for a row that gets it
		if cl.Entry.Row != s.own {
			kind = uploadstatus.AlreadyRegistered
		}
		return false, &res, kind
	case ledger.Aside:
		// This record's row was dead-lettered, and its member died before
		// the offset was committed. It stays set aside: a call now could
		// register a row an operator may also send again.
		res := setAside(cl.Aside.Class, cl.Aside.Attempts, cl.Aside.Reason)
		return false, &res, "set_aside"
	}
	res := otherContent(s.r.m.Product.SellerSKU, cl.Entry) // ledger.Conflict
	return false, &res, "failed"
}

// otherContent is the result of a row whose SKU the ledger holds registered
// with other content (ledger.Conflict): the row fails, and no call is made.
func otherContent(sku string, e ledger.Entry) uploadstatus.RowResult {
	return uploadstatus.RowResult{State: uploadstatus.Failed, Code: CodeRegisteredOtherContent, Field: "seller_sku", At: time.Now(),
		Reason: fmt.Sprintf("seller_sku %q is already registered as %s; bulk registration does not change existing products", sku, e.ProductID),
		Details: []uploadstatus.Detail{{Code: CodeRegisteredOtherContent, Field: "seller_sku",
			Params: map[string]string{"field": "seller_sku", "value": strconv.Quote(sku), "product": e.ProductID}}}}
}

// marked is a registration's mark in the ledger, made by the batch's write:
// done (e is the ledger's entry), or not when the write did not reach Redis
// before the drain ended.
type marked struct {
	done bool
	e    ledger.Entry
}

// markRequest is the ledger's mark of a registration for the batch's write
// (conclude); ok is false when there is nothing to mark (no registration).
func (s *skuClaim) markRequest(res registryclient.Result) (q ledger.MarkRequest, ok bool) {
	if res.Class != registryclient.Registered && res.Class != registryclient.Replayed {
		return q, false
	}
	return ledger.MarkRequest{SKU: s.r.m.Product.SellerSKU, Row: s.by(res), Hash: s.hash, ProductID: res.ProductID}, true
}

// marked takes a mark's answer from the batch's write (err: the write's):
// the entry, or, when the ledger refused the mark or answered with an entry
// it cannot read, the registration as it happened (unmarkable: marking it
// again would answer the same).
func (s *skuClaim) marked(res registryclient.Result, got ledger.MarkResult, err error, mk *marked) {
	switch {
	case got.Err != nil && (err == nil || errors.Is(got.Err, ledger.ErrInvalid)):
		mk.done, mk.e = true, s.unmarkable(res, got.Err)
	case err != nil:
	default:
		mk.done, mk.e = true, got.Entry
	}
}

// by is the Idempotency-Key a registration is recorded under: a 201 is this
// row's registration; a 200 replays the first call made with the key,
// whoever's row that was.
func (s *skuClaim) by(res registryclient.Result) string {
	if res.Class == registryclient.Replayed {
		return s.r.m.IdempotencyKey
	}
	return s.own
}

// unmarkable is the entry of a registration the ledger refuses to hold (a
// product id with a tab): the registration happened, and the seller must see
// it. Asking again would not help.
func (s *skuClaim) unmarkable(res registryclient.Result, err error) ledger.Entry {
	s.log.Error("the ledger cannot hold this registration; a re-upload of this SKU would register it again", "product_id", res.ProductID, "err", err)
	return ledger.Entry{State: ledger.Registered, Row: s.by(res), ProductID: res.ProductID}
}

// refused releases the claim of a row the API refused permanently and
// returns the row's result. It asks the ledger to forget the entry only when
// the API refused the row's own content under the row's own key (400, 422),
// and the ledger forgets it only if no other row ever held the claim: a row
// that took the key over (a lapsed lease) may have registered its own
// content under it, and "call key == own key" cannot tell, since the key's
// own row takes it back when the other row's lease lapses. A 409, or a
// refusal under a key an earlier claimer called with, says nothing about
// whether that key registered something, so the key stays for the next
// claimer, whose call under it is a replay if it did. The seller reads the
// API's own message for the row (the contract's), else what SellerDetail
// says; never the client's error, which is for operators.
func (s *skuClaim) refused(res registryclient.Result, attempts int) uploadstatus.RowResult {
	rr := uploadstatus.RowResult{State: uploadstatus.Failed, Code: res.Code, Field: res.Field, Reason: cmp.Or(res.Message, res.SellerDetail()), Attempts: attempts, At: time.Now()}
	if !s.held {
		return rr
	}
	inherited := s.r.m.IdempotencyKey != s.own
	s.release(res.Status != http.StatusConflict && !inherited)
	if res.Status == http.StatusConflict && (inherited || s.shared) {
		rr.Code, rr.Field = CodeRegisteredOtherContent, "seller_sku"
		rr.Reason = fmt.Sprintf("seller_sku %q is already registered with other content (the registration API refused this content under the Idempotency-Key %s that registered it); bulk registration does not change existing products",
			s.r.m.Product.SellerSKU, s.r.m.IdempotencyKey)
		rr.Details = []uploadstatus.Detail{{Code: CodeRegisteredOtherContent, Field: "seller_sku",
			Params: map[string]string{"kind": "conflict", "field": "seller_sku", "value": strconv.Quote(s.r.m.Product.SellerSKU), "key": s.r.m.IdempotencyKey}}}
	}
	return rr
}

// setAside records in the ledger that the row was dead-lettered as d says,
// releasing its claim if it holds one (ledger.Ledger.SetAside). It runs once
// the dead letter is written and before the row's result is: from then on a
// re-read of the same Kafka record (its member died before the offset was
// committed) finishes without a call, with the same result. It reports
// false when Redis did not answer before the drain ended: the row is then
// read again, and may register while also dead-lettered.
func (s *skuClaim) setAside(d deadletter.Row) bool {
	c, r := s.c, s.r
	note := ledger.AsideNote{Class: d.Class, Attempts: d.Attempts, Reason: d.Detail} // what a re-read tells the seller
	err := c.untilRedis(r.finishCtx(), "set the row aside in the ledger", s.log, func(ctx context.Context) error {
		_, err := c.deps.Ledger.SetAside(ctx, r.m.SellerID, r.m.Product.SellerSKU, s.own, s.from, note)
		if errors.Is(err, ledger.ErrInvalid) {
			// Asking again cannot help; the claim is released at the end (settle).
			s.log.Error("the ledger cannot record that the row was set aside; a re-read of it before its offset is committed would call again", "sku", r.m.Product.SellerSKU, "err", err)
			return nil
		}
		if err == nil {
			s.held = false
		}
		return err
	})
	if err != nil {
		s.log.Error("could not set the dead-lettered row aside in the ledger before the drain ended; the row will be read again", "err", err)
		return false
	}
	return true
}

// giveBack leaves the row unfinished for the partition's next owner and
// releases the claim it holds, as runner.giveBack does for a batch's rows.
func (s *skuClaim) giveBack() {
	s.r.GiveBack()
	s.settle()
}

// settle runs when the row's processing ends: a claim still held (the row
// was dead-lettered or given back) is released keeping its key, so another
// row with this SKU need not wait for the lease, and calls with that key.
func (s *skuClaim) settle() {
	if s.held {
		s.release(false)
	}
}

// releaseTimeout bounds one release of a claim.
const releaseTimeout = time.Second

// release gives the claim back; best effort: if Redis does not answer the
// lease ends on its own.
func (s *skuClaim) release(forget bool) {
	s.held = false
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if _, err := s.c.deps.Ledger.Release(ctx, s.r.m.SellerID, s.r.m.Product.SellerSKU, s.own, forget); err != nil {
		s.log.Warn("could not release the SKU's claim in the ledger; it lapses with its lease", "sku", s.r.m.Product.SellerSKU, "err", err)
	}
}

// registeredAs is the row's result for a registration in the ledger: this
// row's own, or another row's (already registered).
func (s *skuClaim) registeredAs(e ledger.Entry, attempts int) uploadstatus.RowResult {
	rr := uploadstatus.RowResult{State: uploadstatus.Registered, ProductID: e.ProductID, Attempts: attempts, At: time.Now()}
	if e.Row != s.own {
		rr.State, rr.Reason = uploadstatus.AlreadyRegistered, e.AlreadyRegistered()
		rr.Details = []uploadstatus.Detail{{Code: "already_registered", Params: e.Facts()}}
	}
	return rr
}

// registeredTwice is the result of a row whose call the API answered with
// a product (201, or 200 for an earlier call under its key) other than the
// one the ledger holds for its SKU, registered by another row: the
// marketplace now holds the SKU twice, and the seller is told which two
// products and where the first came from. Rows that share a call key get
// the same product and are not this.
func (s *skuClaim) registeredTwice(res registryclient.Result, e ledger.Entry, attempts int) uploadstatus.RowResult {
	rr := uploadstatus.RowResult{State: uploadstatus.Registered, ProductID: res.ProductID, Attempts: attempts, At: time.Now()}
	rr.Code, rr.Field = CodeRegisteredTwice, "seller_sku"
	rr.Reason = fmt.Sprintf("registered as %s, but seller_sku %q was already %s: the marketplace now holds it twice; delete one of them in the seller center's product management",
		res.ProductID, s.r.m.Product.SellerSKU, e.Origin())
	f := e.Facts()
	f["other"], f["product"], f["field"], f["value"] = e.ProductID, res.ProductID, "seller_sku", strconv.Quote(s.r.m.Product.SellerSKU)
	rr.Details = []uploadstatus.Detail{{Code: CodeRegisteredTwice, Field: "seller_sku", Params: f}}
	return rr
}
