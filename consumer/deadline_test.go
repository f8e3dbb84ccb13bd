package consumer

import (
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
