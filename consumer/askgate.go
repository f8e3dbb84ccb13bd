package consumer

import (
	"context"
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
// One row at a time was how the gate began, and it spread every window of
// a seller after its first over as many round trips as the window has
// slots: 100 sequential reservations, 0.1 s on an idle machine and up to
// 3 s under load (bench -times: the worst sellers' windows took 0.7–3.5 s
// where their first took 0.1 s). A sliding window keeps that spread for the
// rest of the upload: each slot is a window after the one it follows.
type askGates struct {
	mu sync.Mutex
	m  map[string]*askGate
}

// askGate is one seller's; every field is guarded by askGates.mu.
type askGate struct {
	serial  bool          // a refusal was seen: asks take places, at most width at once
	until   time.Time     // no ask before it
	users   int           // rows in enter..leave; the gate goes with the last
	asking  int           // rows holding a place (serial mode)
	width   int           // places: how many rows may ask at once (serial mode)
	waiting int           // rows waiting for a place or for until
	changed chan struct{} // closed when a place came free, the width grew, or until was lifted
}

// unknownRoom is the room a row reports when it leaves the gate without an
// answer that tells it (the ask failed, or the row left without asking). An
// admitted slot reports the places its window has left (limit − InWindow),
// a refusal 0.
const unknownRoom = -1

func newAskGates() *askGates { return &askGates{m: map[string]*askGate{}} }

// enter waits until the row may ask the throttle for the seller's next slot.
// leave must be called once the answer is known, with the time the answer
// said to ask again (zero when a slot was admitted or the ask failed) and
// the room it reported (unknownRoom when none). ok is false when ctx ended
// first; leave is then nil.
func (gs *askGates) enter(ctx context.Context, seller string) (leave func(askAgain time.Time, room int), ok bool) {
	gs.mu.Lock()
	g := gs.m[seller]
	if g == nil {
		g = &askGate{width: 1}
		gs.m[seller] = g
	}
	g.users++
	serial := g.serial
	gs.mu.Unlock()

	if !serial {
		return func(askAgain time.Time, room int) { gs.leave(seller, g, askAgain, room, false) }, true
	}
	gs.mu.Lock()
	for {
		wait := time.Until(g.until)
		if wait <= 0 && g.asking < g.width {
			break
		}
		if g.changed == nil {
			g.changed = make(chan struct{})
		}
		changed := g.changed
		g.waiting++
		gs.mu.Unlock()
		var timeout <-chan time.Time
		if wait > 0 {
			timer := time.NewTimer(wait)
			defer timer.Stop() // on return: a row waits out few untils
			timeout = timer.C
		}
		select {
		case <-changed:
		case <-timeout:
		case <-ctx.Done():
			gs.mu.Lock()
			g.waiting--
			gs.mu.Unlock()
			gs.leave(seller, g, time.Time{}, unknownRoom, false)
			return nil, false
		}
		gs.mu.Lock()
		g.waiting--
	}
	g.asking++
	gs.mu.Unlock()
	return func(askAgain time.Time, room int) { gs.leave(seller, g, askAgain, room, true) }, true
}

// reopen lets the seller's waiting rows ask now: this consumer gave a slot
// of the seller back (a call that came too late to be made, a revoked row),
// so the window the last refusal spoke of has room again. Without it the row
// that gave the slot back waited for the next window's time, up to a window
// later, while its own window had the place (bench, 6 s window: first
// windows spread over 3.5 s where the others took 0.1 s).
func (gs *askGates) reopen(seller string) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g := gs.m[seller]; g != nil {
		g.until = time.Time{}
		g.width = 1 // one place came free: one row asks, and its answer tells the room
		g.wake()
	}
}

// wake tells the rows waiting at g that a place or the time may have come.
// Under askGates.mu.
func (g *askGate) wake() {
	if g.changed != nil && g.waiting > 0 {
		close(g.changed)
		g.changed = nil
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
	g.wake() // a place came free, or the width grew
	g.users--
	if g.users == 0 {
		delete(gs.m, seller)
	}
}
