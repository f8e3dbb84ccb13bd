package consumer

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testwait"
)

func TestAskGateLetsRowsAskAtOnceUntilARefusal(t *testing.T) {
	gs := newAskGates()
	ctx := context.Background()
	var leaves []func(time.Time, int)
	for range 5 {
		leave, ok := gs.enter(ctx, "s")
		if !ok {
			t.Fatal("enter refused before any refusal")
		}
		leaves = append(leaves, leave) // all five hold an ask at once
	}
	for _, l := range leaves {
		l(time.Time{}, unknownRoom)
	}
	if len(gs.m) != 0 {
		t.Errorf("%d gates left after every row left, want 0", len(gs.m))
	}
}

func TestAskGateAfterARefusalRowsAskOneAtATimeNotBeforeTheTime(t *testing.T) {
	gs := newAskGates()
	ctx := context.Background()
	holder, _ := gs.enter(ctx, "s") // keeps the gate alive
	first, _ := gs.enter(ctx, "s")
	askAgain := time.Now().Add(150 * time.Millisecond)
	first(askAgain, 0) // refused: ask again in 150 ms

	var asking, most atomic.Int32
	done := make(chan time.Time, 3)
	for range 3 {
		go func() {
			leave, ok := gs.enter(ctx, "s")
			if !ok {
				done <- time.Time{}
				return
			}
			at := time.Now()
			n := asking.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(10 * time.Millisecond) // the ask's round trip
			asking.Add(-1)
			leave(time.Time{}, unknownRoom) // admitted, room not known: the next goes at once
			done <- at
		}()
	}
	for range 3 {
		at := <-done
		if at.IsZero() {
			t.Fatal("a row was refused entry")
		}
		if at.Before(askAgain) {
			t.Errorf("a row asked %s before the refusal's time", askAgain.Sub(at))
		}
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d rows asked at once after a refusal, want 1", m)
	}
	holder(time.Time{}, unknownRoom)
}

func TestAskGateEnterEndsWithTheContext(t *testing.T) {
	gs := newAskGates()
	keep, _ := gs.enter(context.Background(), "s") // the gate lives while a row is in it
	defer keep(time.Time{}, unknownRoom)
	refused, _ := gs.enter(context.Background(), "s")
	refused(time.Now().Add(time.Hour), 0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, ok := gs.enter(ctx, "s"); ok {
		t.Fatal("enter went ahead although its context ended first")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("enter returned %s after its context ended", d)
	}
}

// After a refusal one row asks; a slot admitted with room for n more lets n
// rows ask together (a window's reservations take one round trip, not one
// each); the next refusal lets one ask again. Parked rows are counted as the
// gate admits them, so nothing here depends on timing.
func TestAskGateOpensAsWideAsTheWindowHasRoom(t *testing.T) {
	gs := newAskGates()
	ctx := context.Background()
	holder, _ := gs.enter(ctx, "s") // keeps the gate alive
	defer holder(time.Time{}, unknownRoom)
	refused, _ := gs.enter(ctx, "s")
	refused(time.Now(), 0) // refused: serial, one place

	var mu sync.Mutex
	var admitted []func(time.Time, int)
	admit := func(leave func(time.Time, int), ok bool) {
		if !ok {
			t.Error("a row was refused entry")
			return
		}
		mu.Lock()
		admitted = append(admitted, leave)
		mu.Unlock()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(admitted) }
	first, parked := gs.enterOr(ctx, "s", admitFunc(admit))
	if parked {
		t.Fatal("the one place after a refusal went to no row")
	}
	for range 12 {
		if _, parked := gs.enterOr(ctx, "s", admitFunc(admit)); !parked {
			t.Fatal("a second row asked while the first held the one place")
		}
	}
	gateState := func() (asking, queued int) {
		gs.mu.Lock()
		defer gs.mu.Unlock()
		return gs.m["s"].asking, len(gs.m["s"].queue)
	}
	first(time.Time{}, 10) // admitted with room for 10 more: 10 places
	// The gate hands places out under its lock before the rows resume:
	// its state says how many went in, whatever the goroutines did yet.
	if asking, queued := gateState(); asking != 10 || queued != 2 {
		t.Fatalf("%d rows asking and %d queued after an answer with room for 10, want 10 and 2", asking, queued)
	}
	testwait.For(t, 5*time.Second, "10 rows admitted", func() bool { return count() >= 10 })
	if n := count(); n != 10 {
		t.Fatalf("%d rows admitted after an answer with room for 10, want 10", n)
	}
	mu.Lock()
	leaves := admitted
	admitted = nil
	mu.Unlock()
	leaves[0](time.Now(), 0) // a refusal: one place again, and 9 still held
	for _, leave := range leaves[1:9] {
		leave(time.Time{}, unknownRoom)
	}
	if asking, queued := gateState(); asking != 1 || queued != 2 {
		t.Fatalf("%d rows asking and %d queued while the one place was held, want 1 and 2", asking, queued)
	}
	leaves[9](time.Time{}, unknownRoom) // the last place comes free: one row
	if asking, queued := gateState(); asking != 1 || queued != 1 {
		t.Fatalf("%d rows asking and %d queued after one place came free, want 1 and 1", asking, queued)
	}
	testwait.For(t, 5*time.Second, "one row admitted", func() bool { return count() >= 1 })
	if n := count(); n != 1 {
		t.Errorf("%d rows admitted after a refusal, want 1", n)
	}
	mu.Lock()
	rest := admitted
	mu.Unlock()
	rest[0](time.Time{}, unknownRoom)
	testwait.For(t, 5*time.Second, "the last parked row admitted", func() bool { return count() == 2 })
	mu.Lock()
	rest = admitted
	mu.Unlock()
	rest[1](time.Time{}, unknownRoom)
}

// A slot given back lifts the refusal's time: the place is free now, and a
// row waiting at the gate asks at once instead of at the next window.
func TestAskGateReopensWhenASlotIsGivenBack(t *testing.T) {
	gs := newAskGates()
	ctx := context.Background()
	holder, _ := gs.enter(ctx, "s")
	defer holder(time.Time{}, unknownRoom)
	refused, _ := gs.enter(ctx, "s")
	refused(time.Now().Add(time.Hour), 0)

	entered := make(chan func(time.Time, int), 1)
	if _, parked := gs.enterOr(ctx, "s", admitFunc(func(leave func(time.Time, int), ok bool) {
		if ok {
			entered <- leave
		}
	})); !parked {
		t.Fatal("a row asked after a refusal that said in an hour")
	}
	gs.reopen("s")
	select {
	case leave := <-entered:
		leave(time.Time{}, unknownRoom)
	case <-time.After(5 * time.Second):
		t.Fatal("the row did not ask within 5 s of a slot given back")
	}
}

// A slot given back while the gate is open (no refusal pending) does not
// narrow it: the width its last answer gave still stands.
func TestAskGateReopenKeepsAnOpenGatesWidth(t *testing.T) {
	gs := newAskGates()
	ctx := context.Background()
	holder, _ := gs.enter(ctx, "s")
	defer holder(time.Time{}, unknownRoom)
	refused, _ := gs.enter(ctx, "s")
	refused(time.Now(), 0) // serial, and the refusal's time has passed
	admitted, _ := gs.enter(ctx, "s")
	admitted(time.Time{}, 10) // room for 10
	gs.reopen("s")
	gs.mu.Lock()
	width := gs.m["s"].width
	gs.mu.Unlock()
	if width != 10 {
		t.Errorf("width %d after a slot given back to an open gate, want 10", width)
	}
	shut, _ := gs.enter(ctx, "s")
	shut(time.Now().Add(time.Hour), 0) // a refusal for an hour: one place
	gs.reopen("s")
	gs.mu.Lock()
	width, until := gs.m["s"].width, gs.m["s"].until
	gs.mu.Unlock()
	if width != 1 || !until.IsZero() {
		t.Errorf("width %d, until %v after a slot given back to a shut gate, want 1 and no wait", width, until)
	}
}

// enter is enterOr blocking until the row may ask, as the tests above use it.
func (gs *askGates) enter(ctx context.Context, seller string) (func(time.Time, int), bool) {
	type admitted struct {
		leave func(time.Time, int)
		ok    bool
	}
	ch := make(chan admitted, 1)
	leave, parked := gs.enterOr(ctx, seller, admitFunc(func(l func(time.Time, int), ok bool) { ch <- admitted{l, ok} }))
	if !parked {
		return leave, true
	}
	a := <-ch
	return a.leave, a.ok
}

// Rows parked at a gate hold no goroutine, and a context that ends tells
// each of them once.
func TestAskGateParkedRowsHoldNoGoroutine(t *testing.T) {
	gs := newAskGates()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder, _ := gs.enter(context.Background(), "s")
	refused, _ := gs.enter(context.Background(), "s")
	refused(time.Now().Add(time.Hour), 0)

	before := runtime.NumGoroutine()
	var told, refusedEntry atomic.Int32
	for range 200 {
		_, parked := gs.enterOr(ctx, "s", admitFunc(func(_ func(time.Time, int), ok bool) {
			told.Add(1)
			if !ok {
				refusedEntry.Add(1)
			}
		}))
		if !parked {
			t.Fatal("a row went ahead although the refusal said in an hour")
		}
	}
	if n := runtime.NumGoroutine() - before; n > 10 {
		t.Errorf("200 parked rows hold %d goroutines", n)
	}
	cancel()
	testwait.For(t, 5*time.Second, "every parked row told its context ended", func() bool { return told.Load() == 200 })
	if refusedEntry.Load() != 200 {
		t.Errorf("%d of 200 rows were let in after their context ended", 200-refusedEntry.Load())
	}
	holder(time.Time{}, unknownRoom)
	if len(gs.m) != 0 {
		t.Errorf("%d gates left after every row left", len(gs.m))
	}
}

// admitFunc is an admittee made of a function.
type admitFunc func(leave func(time.Time, int), ok bool)

func (f admitFunc) admitted(leave func(time.Time, int), ok bool) { f(leave, ok) }
