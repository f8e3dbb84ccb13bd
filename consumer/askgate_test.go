package consumer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestAskGateLetsRowsAskAtOnceUntilARefusal(t *testing.T) {
	gs := newAskGates()
	ctx := context.Background()
	var leaves []func(time.Time)
	for range 5 {
		leave, ok := gs.enter(ctx, "s")
		if !ok {
			t.Fatal("enter refused before any refusal")
		}
		leaves = append(leaves, leave) // all five hold an ask at once
	}
	for _, l := range leaves {
		l(time.Time{})
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
	first(askAgain) // refused: ask again in 150 ms

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
			leave(time.Time{}) // admitted: the next goes at once
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
	holder(time.Time{})
}

func TestAskGateEnterEndsWithTheContext(t *testing.T) {
	gs := newAskGates()
	keep, _ := gs.enter(context.Background(), "s") // the gate lives while a row is in it
	defer keep(time.Time{})
	refused, _ := gs.enter(context.Background(), "s")
	refused(time.Now().Add(time.Hour))
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
