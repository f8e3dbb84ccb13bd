package consumer

import (
	"testing"
	"time"
)

// TestFlights: a call waits on an earlier call of its seller only, the
// wait ends when that call lands, and a landed call is forgotten.
func TestFlights(t *testing.T) {
	f := newFlights()
	t0 := time.Now()
	a := f.start("s", t0)
	if f.before("s", t0) != nil || f.before("other", t0.Add(time.Hour)) != nil {
		t.Fatal("a call at or after t, or another seller's, held a call at t")
	}
	wait := f.before("s", t0.Add(time.Second))
	if wait == nil {
		t.Fatal("a call of the seller from before t did not hold a call at t")
	}
	select {
	case <-wait:
		t.Fatal("the wait ended before the call landed")
	default:
	}
	f.land("s", a, false)
	select {
	case <-wait:
	default:
		t.Fatal("the wait did not end when the call landed")
	}
	if f.before("s", t0.Add(time.Hour)) != nil || len(f.bySeller) != 0 {
		t.Errorf("a landed call is still in flight: %v", f.bySeller)
	}
	f.land("s", nil, false) // a call that never started: nothing to do
}

// TestALateCallLandingIsRemembered: a call that may have been counted late
// is remembered when it lands, for its seller only and for as long as
// asked; one counted in time is not.
func TestALateCallLandingIsRemembered(t *testing.T) {
	f := newFlights()
	f.land("s", f.start("s", time.Now()), false)
	if got := f.lateSince("s", time.Minute); !got.IsZero() {
		t.Fatalf("a call counted in time left %v", got)
	}
	before := time.Now()
	f.land("s", f.start("s", time.Now()), true)
	if got := f.lateSince("s", time.Minute); got.Before(before) {
		t.Errorf("a late call's landing read %v, want at or after %v", got, before)
	}
	if got := f.lateSince("other", time.Minute); !got.IsZero() {
		t.Errorf("another seller read %v", got)
	}
	time.Sleep(2 * time.Millisecond)
	if got := f.lateSince("s", time.Millisecond); !got.IsZero() || len(f.lateLanded) != 0 {
		t.Errorf("a landing older than asked read %v (%d kept), want none and forgotten", got, len(f.lateLanded))
	}
}
