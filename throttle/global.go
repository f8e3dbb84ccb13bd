package throttle

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/lua"
)

// Global is an app-wide limit: at most Limit calls of the whole application
// in any trailing Window + Policy.Margin, besides each seller's own limit. A
// call needs a slot under both.
//
// The app-wide log is a sliding log of latest counts like a seller's, under
// the same invariant (the package doc): each call's latest possible count is
// written by its reservation, before the call is sent, and a settle only
// moves it earlier. It lives under its own hash tag {g}: bulkreg:{g}:log,
// :block (after an app-wide 429), :waiting and :held:<seller> (the fair
// shares). On Redis Cluster it lives on another node than most sellers' keys, so no one script can take both
// slots: Reserve takes the seller's slot at a, then the app-wide slot at the
// first time ≥ a; when that is later than a by more than Tolerance it moves
// the seller's slot to ≥ it, and so on until the two agree (a few rounds at
// most; a slot that cannot be matched is given back). The call is made at
// the later of the two (Reservation.At) and counts as late by their
// difference (Reservation.Spread) in the earlier log. After a seller's
// app-wide limit bound, its requests ask the app-wide log first for a
// window: a refusal then takes no seller slot to give back.
//
// When the app-wide limit binds, sellers share it max-min fairly between
// those waiting (lua/reserve_global.lua): with n sellers asking, each may
// hold at most ceil(Limit / n) app-wide slots ahead, so a seller with 10
// rows is not queued behind one with 500; a capped seller is told when its
// share frees up (Reservation.Capped).
//
// The zero value is no app-wide limit.
type Global struct {
	// Limit is the most calls of all sellers together in any trailing
	// Window + Margin; 0 turns the app-wide limit off.
	Limit int
	// Window is the app-wide limit's trailing window; > 0 when Limit is.
	Window time.Duration
	// Tolerance is how far apart a call's seller slot and its app-wide slot
	// may be: the call is made at the later one, so the earlier log sees it
	// that much late, on top of the call's own lateness; both must fit in
	// the margin. 0 = Margin / 4; at most Margin. Without races the two
	// slots are equal.
	Tolerance time.Duration
	// Grace is how long after its last request (or after the time it was
	// told to ask again) a seller still counts as waiting for a fair share.
	// It must cover the time between a seller's consecutive requests while
	// it has rows waiting: too short and a waiting seller drops out of the
	// count between two asks (the others' share grows), too long and a
	// seller that is done still shrinks the others' share ahead (the slots
	// still go to whoever asks). 0 = (Window + Margin) / 10.
	Grace time.Duration
}

// On reports whether the app-wide limit is configured.
func (g Global) On() bool { return g.Limit > 0 }

func (g Global) validate(margin time.Duration) error {
	switch {
	case g.Limit < 0:
		return fmt.Errorf("throttle: Policy.Global.Limit (app-wide calls per window) must not be negative (0 means no app-wide limit), got %d", g.Limit)
	case g.Limit == 0:
		return nil
	case g.Window <= 0:
		return fmt.Errorf("throttle: Policy.Global.Window must be greater than 0 when Policy.Global.Limit is set, got %s", g.Window)
	case (g.Window+margin)/time.Microsecond < 1:
		return fmt.Errorf("throttle: Policy.Global.Window + Policy.Margin must be at least 1µs, got %s", g.Window+margin)
	case g.Tolerance < 0 || g.Tolerance > margin:
		return fmt.Errorf("throttle: Policy.Global.Tolerance must be between 0 (Margin / 4) and Policy.Margin (%s): a call made at the later of its two slots is that much late for the earlier, got %s", margin, g.Tolerance)
	case g.Grace < 0:
		return fmt.Errorf("throttle: Policy.Global.Grace must not be negative (0 means a tenth of Window + Margin), got %s", g.Grace)
	}
	return nil
}

func (g Global) withDefaults(margin time.Duration) Global {
	if !g.On() {
		return Global{}
	}
	if g.Tolerance == 0 {
		g.Tolerance = margin / 4
	}
	if g.Grace == 0 {
		g.Grace = (g.Window + margin) / 10
	}
	return g
}

// GlobalSlot is the app-wide half of a Reservation.
type GlobalSlot struct {
	ID       string    // the slot's member in the app-wide log; Release and Check need it
	At       time.Time // the app-wide slot (the Redis clock of the node holding the app-wide log)
	Epoch    string    // the epoch of the app-wide log's hash slot it was granted in
	InWindow int       // app-wide latest counts in [At − W′, At + reach], this call's included
	Lost     bool      // this reservation found that Redis lost the app-wide log's hash slot, and started its hold
	// Waiting is how many sellers were waiting for the app-wide limit, and
	// Share the most app-wide slots ahead each may hold (ceil(Limit /
	// Waiting)), when the app-wide log last answered.
	Waiting, Share int
}

// globalKeyPrefix is the app-wide keys' prefix: one hash tag of its own.
const globalKeyPrefix = "bulkreg:{g}:"

// GlobalLogKey is the app-wide sliding log (ZSET, µs): operators and
// tests read it to see the app-wide window.
const GlobalLogKey = globalKeyPrefix + "log"

type globalScripts struct {
	reserve, release, check, block *redis.Script
	marker                         string // the marker of {g}'s hash slot
	turns                          turns
}

// turns lets one caller at a time hold a key, waiting as long as its
// context allows. Keys no one holds or waits for take no memory. It also
// remembers, per key, until when the app-wide limit is the one that binds
// (see reserveBoth): bounded, forgetting only costs round trips.
type turns struct {
	mu    sync.Mutex
	held  map[string]*turn
	hints map[string]time.Time
}

// maxHints bounds the remembered hints; past it they are all forgotten.
const maxHints = 100_000

// appFirst reports whether the app-wide limit bound the key's last match
// recently, so its next match asks the app-wide log first.
func (ts *turns) appFirst(key string, now time.Time) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	until, ok := ts.hints[key]
	if ok && !now.Before(until) {
		delete(ts.hints, key)
		return false
	}
	return ok
}

// remember records that the app-wide limit binds the key until until; a
// zero until forgets it.
func (ts *turns) remember(key string, until time.Time) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if until.IsZero() {
		delete(ts.hints, key)
		return
	}
	if ts.hints == nil || len(ts.hints) >= maxHints {
		ts.hints = map[string]time.Time{}
	}
	ts.hints[key] = until
}

type turn struct {
	ch      chan struct{} // a token: whoever took it holds the key
	waiters int           // holders and waiters, under turns.mu
}

func (ts *turns) lock(ctx context.Context, key string) (unlock func(), err error) {
	ts.mu.Lock()
	if ts.held == nil {
		ts.held = map[string]*turn{}
	}
	tn := ts.held[key]
	if tn == nil {
		tn = &turn{ch: make(chan struct{}, 1)}
		ts.held[key] = tn
	}
	tn.waiters++
	ts.mu.Unlock()
	done := func() {
		ts.mu.Lock()
		if tn.waiters--; tn.waiters == 0 {
			delete(ts.held, key)
		}
		ts.mu.Unlock()
	}
	select {
	case tn.ch <- struct{}{}:
		return func() { <-tn.ch; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

func newGlobalScripts(m *Markers) *globalScripts {
	return &globalScripts{
		reserve: redis.NewScript(lua.Script("slot_guard.lua") + lua.Script("fits.lua") + lua.Script("reserve_global.lua")),
		release: redis.NewScript(lua.Script("release_global.lua")),
		check:   redis.NewScript(lua.Script("check.lua")),
		block:   redis.NewScript(lua.Script("block.lua")),
		marker:  m.For(GlobalLogKey),
	}
}

func globalHeldKey(seller string) string { return globalKeyPrefix + "held:" + seller }

func (g *globalScripts) releaseCall(seller, id string) scriptCall {
	return scriptCall{g.release, []string{GlobalLogKey, globalHeldKey(seller)}, []any{id}}
}

func (g *globalScripts) checkCall(s GlobalSlot) scriptCall {
	return scriptCall{g.check, []string{GlobalLogKey, g.marker}, []any{s.ID, s.Epoch}}
}

// globalHold is the app-wide log's hold after a loss: as far beyond its
// window as the seller's hold is beyond the seller's window.
func (t *Throttle) globalHold() time.Duration {
	return t.lossHold() - t.p.Window + t.p.Global.Window
}

// globalAnswer is reserve_global.lua's reply.
type globalAnswer struct {
	slot     GlobalSlot
	admitted bool
	capped   bool
	at, now  time.Time
	hold     time.Time
}

func (t *Throttle) reserveGlobal(ctx context.Context, seller, id string, notBefore time.Time, replace string) (globalAnswer, error) {
	g := t.p.Global
	v, err := t.global.reserve.Run(ctx, t.rdb,
		[]string{GlobalLogKey, globalKeyPrefix + "block", globalKeyPrefix + "waiting", globalHeldKey(seller), t.global.marker},
		g.Limit, (g.Window + t.p.Margin).Microseconds(), t.p.MaxWait.Microseconds(), id, t.globalHold().Microseconds(),
		notBefore.UnixMicro(), seller, g.Grace.Microseconds(), replace, t.p.reach().Microseconds()).Slice()
	if err != nil {
		if ctx.Err() != nil || isTimeout(err) {
			// The script may have run with its answer lost: give back what
			// the id (and the slot it replaced) may hold.
			t.releaseDetached(ctx, Reservation{Seller: seller, Global: GlobalSlot{ID: id}})
		}
		return globalAnswer{}, t.fail(ctx, "reserve an app-wide slot", seller, err)
	}
	a, err := parseGlobal(v)
	if err != nil {
		return globalAnswer{}, fmt.Errorf("throttle: reserve an app-wide slot for seller %q: %w: %w", seller, ErrUnavailable, err)
	}
	if a.admitted {
		a.slot.ID = id
	} else {
		a.slot.Epoch = ""
	}
	return a, nil
}

func parseGlobal(v []any) (globalAnswer, error) {
	if len(v) != 10 {
		return globalAnswer{}, fmt.Errorf("the app-wide reserve script answered %d values, want 10", len(v))
	}
	ints := make([]int64, 0, 6)
	for _, i := range []int{0, 3, 5, 7, 8, 9} {
		n, ok := v[i].(int64)
		if !ok {
			return globalAnswer{}, fmt.Errorf("the app-wide reserve script answered %v: value %d is not a number", v, i+1)
		}
		ints = append(ints, n)
	}
	at, err1 := micros(v[1])
	now, err2 := micros(v[2])
	hold, err3 := micros(v[6])
	epoch, ok := v[4].(string)
	if err1 != nil || err2 != nil || err3 != nil || !ok || (ints[0] == 1 && epoch == "") {
		return globalAnswer{}, fmt.Errorf("the app-wide reserve script answered %v, want {0|1, µs, µs, count, epoch, 0|1, µs, 0|1, count, count}", v)
	}
	a := globalAnswer{
		admitted: ints[0] == 1,
		capped:   ints[3] == 1,
		at:       time.UnixMicro(at),
		now:      time.UnixMicro(now),
		slot: GlobalSlot{At: time.UnixMicro(at), Epoch: epoch, InWindow: int(ints[1]), Lost: ints[2] == 1,
			Waiting: int(ints[4]), Share: int(ints[5])},
	}
	if hold > 0 {
		a.hold = time.UnixMicro(hold)
	}
	return a, nil
}

// matchRounds bounds how often Reserve moves one slot to meet the other
// before it gives both back and answers "ask again now": each move goes
// later, and only rows racing for the same seller's or the app-wide log's
// next slots make a move miss.
const matchRounds = 4

// reserveBoth takes a seller slot and an app-wide slot that agree within
// the tolerance (see Global). A slot taken under one limit that cannot be
// used under the other is given back before it returns.
func (t *Throttle) reserveBoth(ctx context.Context, seller, id string) (Reservation, error) {
	// One match at a time per seller in this process: two rows of a seller
	// matching at once can push each other's seller slot past the app-wide
	// slot just taken, and an app-wide slot given back behind the log's
	// frontier is a place no later reservation sees. Taking turns, a seller
	// slot moved to the app-wide slot lands on it exactly (its own give-back
	// makes the room). A seller's rows are on one partition, so one
	// consumer: races between consumers happen only around a rebalance.
	unlock, err := t.global.turns.lock(ctx, seller)
	if err != nil {
		return Reservation{}, fmt.Errorf("throttle: reserve a slot for seller %q: %w", seller, err)
	}
	defer unlock()
	// Which slot to take first: the seller's, unless the app-wide limit
	// bound this seller's last match within a window. Then the app-wide
	// slot comes first: a capped or refused request costs one round trip
	// instead of three (seller slot, app-wide refusal, give-back), and the
	// seller's slot lands on the app-wide one at once.
	span := t.p.Global.Window + t.p.Margin
	if t.global.turns.appFirst(seller, time.Now()) {
		return t.reserveAppFirst(ctx, seller, id, span)
	}
	r, err := t.reserveSeller(ctx, seller, id, time.Time{})
	if err != nil || !r.Admitted {
		return r, err
	}
	return t.match(ctx, seller, id, r, span)
}

// reserveAppFirst takes the app-wide slot first, then the seller's at or
// after it, and matches them as reserveBoth does.
func (t *Throttle) reserveAppFirst(ctx context.Context, seller, id string, span time.Duration) (Reservation, error) {
	g, err := t.reserveGlobal(ctx, seller, id+"-g0", time.Time{}, "")
	if err != nil {
		return Reservation{}, err
	}
	if !g.admitted {
		if g.capped {
			t.global.turns.remember(seller, time.Now().Add(span))
		}
		return Reservation{Seller: seller, At: g.at, Wait: g.at.Sub(g.now), Lost: g.slot.Lost, HeldUntil: g.hold,
			Global: GlobalSlot{Waiting: g.slot.Waiting, Share: g.slot.Share}, Capped: g.capped}, nil
	}
	r, err := t.reserveSeller(ctx, seller, id, g.at)
	if err != nil || !r.Admitted {
		t.releaseDetached(ctx, Reservation{Seller: seller, Global: g.slot})
		if err == nil {
			t.global.turns.remember(seller, time.Time{}) // the seller's own limit is the far one
		}
		return r, err
	}
	return t.matchWith(ctx, seller, id, r, g, span)
}

// match takes the app-wide slot at or after the seller's slot r and
// matches the two.
func (t *Throttle) match(ctx context.Context, seller, id string, r Reservation, span time.Duration) (Reservation, error) {
	g, err := t.reserveGlobal(ctx, seller, id+"-g0", r.At, "")
	if err != nil {
		t.releaseDetached(ctx, r)
		return Reservation{}, err
	}
	return t.matchWith(ctx, seller, id, r, g, span)
}

// matchWith moves the earlier of the seller's slot r and the app-wide
// slot g until they agree within the tolerance (see Global).
func (t *Throttle) matchWith(ctx context.Context, seller, id string, r Reservation, g globalAnswer, span time.Duration) (Reservation, error) {
	lost, held := r.Lost, r.HeldUntil
	note := func(l bool, h time.Time) {
		lost = lost || l
		if h.After(held) {
			held = h
		}
	}
	refused := func(at, now time.Time, g GlobalSlot, capped bool) Reservation {
		return Reservation{Seller: seller, At: at, Wait: at.Sub(now), Lost: lost, HeldUntil: held,
			Global: GlobalSlot{Waiting: g.Waiting, Share: g.Share}, Capped: capped}
	}
	giveBack := func(rs ...Reservation) {
		for _, x := range rs {
			t.releaseDetached(ctx, x)
		}
	}
	var err error
	for round := 1; ; round++ {
		if err != nil {
			giveBack(r)
			return Reservation{}, err
		}
		note(g.slot.Lost, g.hold)
		if !g.admitted {
			giveBack(r) // a seller slot without an app-wide one cannot be used
			if g.capped {
				t.global.turns.remember(seller, time.Now().Add(span))
			}
			return refused(g.at, g.now, g.slot, g.capped), nil
		}
		now := latest(r.At.Add(-r.Wait), g.now)
		// The call is made at the later slot and may be sent until
		// SendWithin after the earlier, begun or not: each log's latest
		// count for it is its own slot + reach. A pair whose earlier slot
		// had begun longer before the later one cannot be used.
		at, first := latest(r.At, g.at), earliest(r.At, g.at)
		if spreadOf(r.At, g.at, now) <= t.p.Global.Tolerance && at.Sub(first) <= t.p.SendWithin {
			r.Global, r.Spread, r.Lost, r.HeldUntil = g.slot, at.Sub(first), lost, held
			r.At = at
			r.Wait = r.At.Sub(now)
			return r, nil
		}
		if round > matchRounds {
			giveBack(r, Reservation{Seller: seller, Global: g.slot})
			return refused(now, now, g.slot, false), nil
		}
		if r.At.After(g.at) {
			// The seller's own limit is the later (or another consumer took
			// the seller's slots meanwhile): take the app-wide slot again
			// at ≥ the seller's, giving back the one held in the same
			// script, and ask the seller's log first next time.
			t.global.turns.remember(seller, time.Time{})
			old := g.slot
			if g, err = t.reserveGlobal(ctx, seller, id+"-g"+strconv.Itoa(round), r.At, old.ID); err != nil {
				giveBack(Reservation{Seller: seller, Global: old})
			}
			continue
		}
		// The app-wide slot is the later: move the seller's slot to ≥ it in
		// one round trip (give back, take again).
		t.global.turns.remember(seller, time.Now().Add(span))
		nid := id + "-s" + strconv.Itoa(round)
		moved, merr := t.moveSeller(ctx, seller, r.ID, nid, g.at)
		if merr != nil {
			giveBack(r, Reservation{Seller: seller, ID: nid, Global: g.slot})
			return Reservation{}, merr
		}
		note(moved.Lost, moved.HeldUntil)
		if !moved.Admitted {
			giveBack(Reservation{Seller: seller, Global: g.slot})
			return refused(moved.At, moved.At.Add(-moved.Wait), g.slot, false), nil
		}
		r = moved
	}
}

// moveSeller gives back the seller's slot old and takes id at ≥ notBefore,
// in one pipeline (both on the seller's node).
func (t *Throttle) moveSeller(ctx context.Context, seller, old, id string, notBefore time.Time) (Reservation, error) {
	cmds, err := t.runAll(ctx, t.releaseCall(seller, old), t.reserveCall(seller, id, notBefore))
	var v any
	if err == nil {
		v, err = cmds[1].Result()
	}
	if err != nil {
		return Reservation{}, t.fail(ctx, "move a slot to the app-wide slot", seller, err)
	}
	return sellerReservation(v, seller, id, "move a slot to the app-wide slot")
}

// spreadOf is how far the later of two slots is after the earlier, where a
// slot already begun (before now) counts as now: whether two slots agree
// (Global.Tolerance) asks how long the call would wait for the later one.
func spreadOf(a, b, now time.Time) time.Duration {
	lo, hi := a, b
	if hi.Before(lo) {
		lo, hi = hi, lo
	}
	if lo.Before(now) {
		lo = now
	}
	return max(0, hi.Sub(lo))
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// reserveCall takes the seller's slot id at or after notBefore.
func (t *Throttle) reserveCall(seller, id string, notBefore time.Time) scriptCall {
	k := t.keys(seller)
	args := append([]any{t.p.Limit, t.p.span().Microseconds(), t.p.MaxWait.Microseconds(), id, t.lossHold().Microseconds()}, t.kargs...)
	ks := []string{k.log, k.block}
	if t.p.Kind == TokenBucket {
		ks = append(ks, k.tat)
	}
	if !notBefore.IsZero() {
		args = append(args, notBefore.UnixMicro())
	}
	return scriptCall{t.reserve, append(ks, k.marker), args}
}

// BlockGlobal records an app-wide 429 from the API (its answer said the
// application's limit, not the seller's, was reached): no new app-wide slot
// starts before now + retryAfter (Redis clock), for every seller and every
// consumer at once. A later block wins. Without an app-wide limit it blocks
// nothing and says so.
func (t *Throttle) BlockGlobal(ctx context.Context, retryAfter time.Duration) error {
	if t.global == nil {
		return errors.New("throttle: block the app-wide limit: this throttle has none (Policy.Global.Limit is 0); the API refused for a limit bulkreg was not told about")
	}
	if retryAfter <= 0 {
		return fmt.Errorf("throttle: block the app-wide limit: retryAfter must be greater than 0, got %s", retryAfter)
	}
	if err := t.global.block.Run(ctx, t.rdb, []string{globalKeyPrefix + "block"}, retryAfter.Microseconds()).Err(); err != nil {
		return t.fail(ctx, "block the app-wide limit", "(all)", err)
	}
	return nil
}

// scriptCall is one script with its keys and arguments.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
}

// runAll runs the calls in one pipeline: one round trip on one Redis, one
// per node at once on Redis Cluster. A script Redis does not have cached
// (NOSCRIPT: a restart or a failover) sends them all again with their
// bodies, which is safe because every script here is idempotent per id.
// The error is the first call's that failed.
func (t *Throttle) runAll(ctx context.Context, calls ...scriptCall) ([]*redis.Cmd, error) {
	if len(calls) == 1 {
		c := calls[0]
		cmd := c.script.Run(ctx, t.rdb, c.keys, c.args...)
		return []*redis.Cmd{cmd}, cmd.Err()
	}
	exec := func(body bool) ([]*redis.Cmd, error) {
		pipe := t.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(calls))
		for i, c := range calls {
			if body {
				cmds[i] = c.script.Eval(ctx, pipe, c.keys, c.args...)
			} else {
				cmds[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
			}
		}
		_, err := pipe.Exec(ctx)
		return cmds, err
	}
	cmds, err := exec(false)
	for _, c := range cmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			cmds, err = exec(true)
			break
		}
	}
	return cmds, err
}
