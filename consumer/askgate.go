package consumer

import (
	"context"
	"slices"
	"sync"
	"time"
)

// askGates keeps a seller's rows in this consumer from asking the throttle
// for slots it has just said are not to be had.
//
// A seller with more rows than one window holds up to SellerConcurrency of
// them in its lane, all wanting a slot. The throttle takes no slot beyond
// MaxWait and answers "ask again at t". Without a gate every waiting row
// gets that answer, sleeps to the same t, and asks again at once; one or a
// few get a slot and the rest are told a slightly later t: measured with one
// seller × 500 rows and 4 consumers, 3.8 reservation scripts per registered
// row. With the gate, once a refusal has been seen, none of the seller's
// rows asks before the time the last refusal named, and only as many ask at
// once as the last answer said there is room for: a refusal lets one row
// ask, a slot admitted with n places left in its window lets n rows ask
// together. That is about one script per row, and each ask still gets the
// freshest answer, so pacing is unchanged. Until a refusal is seen rows ask
// at once (a seller's first window comes without waiting).
//
// One row at a time would spread every window of a seller after its first
// over as many round trips as the window has slots: 100 sequential
// reservations, 0.1 s on an idle machine and seconds under load, where the
// first window takes 0.1 s. A sliding window keeps that spread for the rest
// of the upload: each slot is a window after the one it follows.
type askGates struct {
	mu sync.Mutex
	m  map[string]*askGate
	// spawn runs an admitted row's job on a goroutine (the consumer's
	// workers; the go statement by default).
	spawn func(func())
}

// askGate is one seller's; every field is guarded by askGates.mu.
type askGate struct {
	serial bool          // a refusal was seen: asks take places, at most width at once
	until  time.Time     // no ask before it
	users  int           // rows in enter..leave, queued ones included; the gate goes with the last
	asking int           // rows holding a place (serial mode)
	width  int           // places: how many rows may ask at once (serial mode)
	queue  []*gateWaiter // rows parked for a place, first come first served
	timer  *time.Timer   // hands places out when until passes, while rows are queued
}

// gateWaiter is a row parked at a gate: it holds no goroutine (a consumer
// parks hundreds there, one stack each cost megabytes), and row.admitted
// resumes it.
type gateWaiter struct {
	row  admittee
	stop func() bool // unregisters the ctx watch
}

// admittee is a row at an ask gate, told once whether it may ask. An
// interface rather than a func: a row's job passed as one is not a new
// closure on the heap at every gate it enters.
type admittee interface {
	admitted(leave func(askAgain time.Time, room int), ok bool)
}

// unknownRoom is the room a row reports when it leaves the gate without an
// answer that tells it (the ask failed, or the row left without asking). An
// admitted slot reports the room the throttle said it left
// (Reservation.Room), a refusal 0.
const unknownRoom = -1

func newAskGates() *askGates { return &askGates{m: map[string]*askGate{}, spawn: goStatement} }

// goStatement runs f on a goroutine of its own.
func goStatement(f func()) { go f() }

// enterOr lets the row ask the throttle for the seller's next slot at once
// (parked false), or parks it (true): row.admitted is then called once, on another
// goroutine, with the row's leave when it may ask, or with ok false when ctx
// ended first. leave must be called once the answer is known, with the time
// the answer said to ask again (zero when a slot was admitted or the ask
// failed) and the room it reported (unknownRoom when none).
func (gs *askGates) enterOr(ctx context.Context, seller string, row admittee) (leave func(askAgain time.Time, room int), parked bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.m[seller]
	if g == nil {
		g = &askGate{width: 1}
		gs.m[seller] = g
	}
	g.users++
	if !g.serial {
		return gs.leaveFunc(seller, g, false), false
	}
	if len(g.queue) == 0 && !time.Now().Before(g.until) && g.asking < g.width {
		g.asking++
		return gs.leaveFunc(seller, g, true), false
	}
	w := &gateWaiter{row: row}
	g.queue = append(g.queue, w)
	// Registered under the lock, so admitLocked (which holds it) never sees
	// a waiter without its stop.
	w.stop = context.AfterFunc(ctx, func() { gs.cancel(seller, g, w) })
	gs.admitLocked(seller, g) // sets the timer for until
	return nil, true
}

func (gs *askGates) leaveFunc(seller string, g *askGate, held bool) func(time.Time, int) {
	return func(askAgain time.Time, room int) { gs.leave(seller, g, askAgain, room, held) }
}

// cancel takes a parked row whose ctx ended out of the queue. One that
// admitLocked took already is told there.
func (gs *askGates) cancel(seller string, g *askGate, w *gateWaiter) {
	gs.mu.Lock()
	i := slices.Index(g.queue, w)
	if i < 0 {
		gs.mu.Unlock()
		return
	}
	g.queue = slices.Delete(g.queue, i, i+1)
	gs.mu.Unlock()
	gs.leave(seller, g, time.Time{}, unknownRoom, false)
	w.row.admitted(nil, false)
}

// admitLocked hands the places that are free to the rows queued first, or
// sets the timer for until. Under gs.mu; the admitted rows resume on
// goroutines of their own.
func (gs *askGates) admitLocked(seller string, g *askGate) {
	if len(g.queue) == 0 {
		return
	}
	if wait := time.Until(g.until); wait > 0 {
		if g.timer == nil {
			g.timer = time.AfterFunc(wait, func() {
				gs.mu.Lock()
				defer gs.mu.Unlock()
				g.timer = nil
				gs.admitLocked(seller, g)
			})
		}
		return
	}
	for len(g.queue) > 0 && g.asking < g.width {
		w := g.queue[0]
		g.queue[0] = nil // the row and its job are not kept reachable by the gate
		g.queue = g.queue[1:]
		if !w.stop() {
			// Its ctx ended and cancel, waiting for the lock, will not find
			// it in the queue: it leaves here.
			g.users--
			if g.users == 0 {
				delete(gs.m, seller)
			}
			gs.spawn(func() { w.row.admitted(nil, false) })
			continue
		}
		g.asking++
		leave := gs.leaveFunc(seller, g, true)
		gs.spawn(func() { w.row.admitted(leave, true) })
	}
}

// reopen lets the seller's waiting rows ask now: this consumer gave a slot
// of the seller back (a call that came too late to be made, a revoked row),
// so the window the last refusal spoke of has room again. Without it the
// row that gave the slot back would wait for the next window's time, up to
// a window later, while its own window had the place (with a 6 s window, a
// seller's first window would spread over seconds where the others take
// 0.1 s).
func (gs *askGates) reopen(seller string) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g := gs.m[seller]; g != nil {
		if time.Now().Before(g.until) {
			// The gate was shut by a refusal: one place came free, so one
			// row asks, and its answer tells the room. An open gate keeps
			// the width its last answer gave.
			g.width = 1
		}
		g.until = time.Time{}
		if g.timer != nil {
			g.timer.Stop()
			g.timer = nil
		}
		gs.admitLocked(seller, g)
	}
}

func (gs *askGates) leave(seller string, g *askGate, askAgain time.Time, room int, held bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	switch {
	case !askAgain.IsZero():
		g.serial = true
		if askAgain.After(g.until) {
			g.until = askAgain
		}
		g.width = 1
	case room != unknownRoom:
		g.width = max(1, room)
	}
	if held {
		g.asking--
	}
	g.users--
	if g.users == 0 {
		delete(gs.m, seller)
	}
	gs.admitLocked(seller, g) // a place came free, or the width grew
}
