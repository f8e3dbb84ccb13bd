package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testwait"
)

func TestSharedDeadline(t *testing.T) {
	// A sixteenth of d (100 ms) is the stall the first checks can bear on
	// a loaded machine.
	const d = 1600 * time.Millisecond
	s := newSharedDeadline(d)
	first := s.get()
	dl, ok := first.Deadline()
	if left := time.Until(dl); !ok || left > d || left < d-d/16 {
		t.Fatalf("first context ends in %v (ok %v), want within [%v, %v]", left, ok, d-d/16, d)
	}
	if s.get() != first {
		t.Error("a second caller right after got a context of its own, want the shared one")
	}
	// Past a sixteenth of d the next caller gets a fresh one, and the one
	// handed out before still runs to its own deadline.
	time.Sleep(d/16 + 5*time.Millisecond) // past the stretch, by the clock: never returns early
	second := s.get()
	if second == first {
		t.Fatal("a caller after d/16 got the old context, which leaves it less than 15/16 of d")
	}
	if dl2, _ := second.Deadline(); time.Until(dl2) < d-d/16 {
		t.Errorf("the fresh context ends in %v, want at least %v", time.Until(dl2), d-d/16)
	}
	if first.Err() != nil {
		t.Errorf("the first context ended early: %v", first.Err())
	}
	select {
	case <-first.Done():
	case <-time.After(2 * d):
		t.Fatal("the first context did not end at its deadline")
	}
}

// TestSleepDueReusesTimersWithoutStaleTicks: the timer of a row whose
// context ended just as it fired, its tick unread, is used by the next row;
// that row must still wait its own time, under GODEBUG=asynctimerchan=1
// (the timers before Go 1.23, whose stale tick would wake it at once) too.
func TestSleepDueReusesTimersWithoutStaleTicks(t *testing.T) {
	c := &Consumer{}
	ctx := context.Background()
	if !c.sleepDue(ctx, 5*time.Millisecond) {
		t.Fatal("a sleep ended early")
	}
	for i := range 20 {
		fired := time.NewTimer(time.Millisecond)
		if cap(fired.C) == 1 {
			// The older timers (asynctimerchan=1) buffer their tick: wait
			// until it is there, never read, as when ctx won the select.
			testwait.For(t, 5*time.Second, "the timer's tick buffered", func() bool { return len(fired.C) == 1 })
		} else {
			// Go 1.23's timers keep no tick to observe (nor to go stale).
			time.Sleep(5 * time.Millisecond)
		}
		c.dueTimers.Put(fired)
		got, _ := c.dueTimers.Get().(*time.Timer)
		if got != fired {
			continue // the pool dropped it (a GC ran between): nothing to reuse this time
		}
		c.dueTimers.Put(got)
		start := time.Now()
		if !c.sleepDue(ctx, 30*time.Millisecond) {
			t.Fatalf("round %d: a sleep ended early", i)
		}
		if took := time.Since(start); took < 30*time.Millisecond {
			t.Fatalf("round %d: a sleep of 30ms on a reused timer woke after %v: a stale tick", i, took)
		}
		return
	}
	t.Fatal("the pool never handed a timer back in 20 rounds")
}
