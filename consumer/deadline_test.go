package consumer

import (
	"context"
	"testing"
	"time"
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

// TestSleepDueReusesTimersWithoutStaleTicks: a timer stopped by a row whose
// context ended, or one that fired, is used again by the next row; neither
// may wake it before its own time.
func TestSleepDueReusesTimersWithoutStaleTicks(t *testing.T) {
	c := &Consumer{}
	ctx := context.Background()
	for i, d := range []time.Duration{5 * time.Millisecond, 30 * time.Millisecond} {
		start := time.Now()
		if !c.sleepDue(ctx, d) {
			t.Fatalf("sleep %d: ended early", i)
		}
		if got := time.Since(start); got < d {
			t.Fatalf("sleep %d of %v woke after %v", i, d, got)
		}
	}
	// Stopped before it fires, by the row's context; then used again.
	gone, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	if c.sleepDue(gone, 20*time.Millisecond) {
		t.Fatal("a sleep whose context ended reported its time came")
	}
	time.Sleep(30 * time.Millisecond) // past the stopped timer's time: a stale tick would be waiting now
	start := time.Now()
	if !c.sleepDue(ctx, 40*time.Millisecond) {
		t.Fatal("sleep after a stopped one ended early")
	}
	if got := time.Since(start); got < 40*time.Millisecond {
		t.Fatalf("a reused timer woke after %v, want 40ms: a stale tick", got)
	}
}
