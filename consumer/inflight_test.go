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
	f.land("s", a)
	select {
	case <-wait:
	default:
		t.Fatal("the wait did not end when the call landed")
	}
	if f.before("s", t0.Add(time.Hour)) != nil || len(f.bySeller) != 0 {
		t.Errorf("a landed call is still in flight: %v", f.bySeller)
	}
	f.land("s", nil) // a call that never started: nothing to do
}
