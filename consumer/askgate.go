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
// row. With the gate, once a refusal has been seen the seller's rows ask one
// at a time, none before the time the last refusal named: an admitted row
// hands the turn straight on (the next slot may be near too), a refused one
// sets the time. That is about one script per row, and each ask still gets
// the freshest answer, so pacing is unchanged. Until a refusal is seen rows
// ask at once (a seller's first window comes without waiting).
type askGates struct {
	mu sync.Mutex
	m  map[string]*askGate
}

type askGate struct {
	turn chan struct{} // holds the token when no row of the seller is asking, in serial mode
	// guarded by askGates.mu
	serial bool      // a refusal was seen: asks take the turn one at a time
	until  time.Time // no ask before it
	users  int       // rows in enter..leave; the gate goes with the last
}

func newAskGates() *askGates { return &askGates{m: map[string]*askGate{}} }

// enter waits until the row may ask the throttle for the seller's next slot.
// leave must be called once the answer is known, with the time the answer
// said to ask again (zero when a slot was admitted or the ask failed). ok is
// false when ctx ended first; leave is then nil.
func (gs *askGates) enter(ctx context.Context, seller string) (leave func(askAgain time.Time), ok bool) {
	gs.mu.Lock()
	g := gs.m[seller]
	if g == nil {
		g = &askGate{turn: make(chan struct{}, 1)}
		g.turn <- struct{}{}
		gs.m[seller] = g
	}
	g.users++
	serial := g.serial
	gs.mu.Unlock()

	if !serial {
		return func(askAgain time.Time) { gs.leave(seller, g, askAgain, false) }, true
	}
	select {
	case <-g.turn:
	case <-ctx.Done():
		gs.leave(seller, g, time.Time{}, false)
		return nil, false
	}
	for {
		gs.mu.Lock()
		until := g.until
		gs.mu.Unlock()
		d := time.Until(until)
		if d <= 0 {
			break
		}
		if !sleep(ctx, d) {
			gs.leave(seller, g, time.Time{}, true)
			return nil, false
		}
	}
	return func(askAgain time.Time) { gs.leave(seller, g, askAgain, true) }, true
}

func (gs *askGates) leave(seller string, g *askGate, askAgain time.Time, held bool) {
	gs.mu.Lock()
	if !askAgain.IsZero() {
		g.serial = true
		if askAgain.After(g.until) {
			g.until = askAgain
		}
	}
	g.users--
	if g.users == 0 {
		delete(gs.m, seller)
	}
	gs.mu.Unlock()
	if held {
		g.turn <- struct{}{}
	}
}
