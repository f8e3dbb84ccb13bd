package consumer

import (
	"fmt"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/throttle"
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
	f.land("s", a, lateLanding{})
	select {
	case <-wait:
	default:
		t.Fatal("the wait did not end when the call landed")
	}
	if f.before("s", t0.Add(time.Hour)) != nil || len(f.bySeller) != 0 {
		t.Errorf("a landed call is still in flight: %v", f.bySeller)
	}
	f.land("s", nil, lateLanding{}) // a call that never started: nothing to do
}

// TestALateCallLandingIsRemembered: a call that may have been counted late
// is remembered when it lands, for its seller only and for as long as it
// matters; one counted in time is not.
func TestALateCallLandingIsRemembered(t *testing.T) {
	f := newFlights()
	f.land("s", f.start("s", time.Now()), lateLanding{})
	if got := f.lateSince("s"); !got.at.IsZero() {
		t.Fatalf("a call counted in time left %v", got)
	}
	before := time.Now()
	f.land("s", f.start("s", time.Now()), lateFor(time.Minute))
	if got := f.lateSince("s").at; got.Before(before) {
		t.Errorf("a late call's landing read %v, want at or after %v", got, before)
	}
	if got := f.lateSince("other"); !got.at.IsZero() {
		t.Errorf("another seller read %v", got)
	}
	// A second late landing sends back what either would.
	f.land("s", f.start("s", time.Now()), lateFor(time.Nanosecond))
	if got := f.lateSince("s"); got.holds.Before(before.Add(time.Minute)) || got.until.Before(before.Add(time.Minute)) {
		t.Errorf("a short landing after a long one left %+v, want the long one's reach kept", got)
	}
	f = newFlights()
	f.land("s", f.start("s", time.Now()), lateFor(time.Nanosecond))
	testwait.For(t, time.Second, "the landing no longer mattering", func() bool { return f.lateSince("s").at.IsZero() })
	if len(f.lateLanded) != 0 {
		t.Errorf("a landing that no longer matters is kept: %v", f.lateLanded)
	}
	// Sellers whose landings no longer matter are swept as others land.
	for i := range 200 {
		f.land(fmt.Sprint("gone-", i), f.start("x", time.Now()), lateFor(time.Nanosecond))
	}
	time.Sleep(time.Millisecond) // every landing above is past its nanosecond
	for i := range 200 {
		f.land(fmt.Sprint("new-", i), f.start("x", time.Now()), lateFor(time.Hour))
	}
	if n := len(f.lateLanded); n > 200+64 {
		t.Errorf("%d landings kept after 200 stopped mattering and 200 more came, want the old ones swept", n)
	}
}

// TestACallThatMayBeCountedLateHoldsTheNext: under a token bucket the next
// call of a seller waits for an earlier call that the API may count, or
// counted, later than the margin, until it lands (sim seed 14009); a call
// answered in time, or whose margin has not run out, holds nothing.
func TestACallThatMayBeCountedLateHoldsTheNext(t *testing.T) {
	const margin = 100 * time.Millisecond
	t0 := time.Now()
	next := t0.Add(time.Second)
	for _, tc := range []struct {
		name     string
		answered time.Duration // after the slot; < 0: no answer yet
		now      time.Duration // after the slot
		held     bool
	}{
		{"no answer, within the margin", -1, 50 * time.Millisecond, false},
		{"no answer, past the margin", -1, 150 * time.Millisecond, true},
		{"answered in time, settle not written", 40 * time.Millisecond, 900 * time.Millisecond, false},
		{"answered late, settle not written", 600 * time.Millisecond, 900 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFlights()
			fl := f.start("s", t0)
			if tc.answered >= 0 {
				f.answer(fl, t0.Add(tc.answered))
			}
			wait := f.lateBefore("s", next, t0.Add(tc.now), margin)
			if (wait != nil) != tc.held {
				t.Fatalf("held %v, want %v", wait != nil, tc.held)
			}
			if f.lateBefore("other", next, t0.Add(time.Hour), margin) != nil {
				t.Error("another seller's call was held")
			}
			if f.lateBefore("s", t0, t0.Add(time.Hour), margin) != nil {
				t.Error("a call at the same slot was held by it")
			}
			if wait == nil {
				return
			}
			select {
			case <-wait:
				t.Fatal("the wait ended before the late call landed")
			default:
			}
			f.land("s", fl, lateFor(time.Minute))
			select {
			case <-wait:
			default:
				t.Fatal("the wait did not end when the late call landed")
			}
			if f.lateBefore("s", next, t0.Add(time.Hour), margin) != nil {
				t.Error("a landed call still holds the next")
			}
		})
	}
}

// TestTheLateRuleOfEachPolicy: under a token bucket, whatever its burst,
// every earlier call that may be counted late holds the next (sim seeds
// 14009 and 20014); under a fixed window only one of an earlier window does
// (a call counted late inside its own window takes nothing from the next);
// the sliding log, whose entries are latest counts already, has no late
// rule at all.
func TestTheLateRuleOfEachPolicy(t *testing.T) {
	const margin = 50 * time.Millisecond
	w := 2 * time.Second
	start := time.UnixMicro(1_800_000_000_000_000) // a window's start: a multiple of 2 s
	for _, tc := range []struct {
		name   string
		policy throttle.Policy
		slot   time.Duration // of the call in flight, after start; the next call is at start + 2.1 s
		held   bool
	}{
		{"sliding", throttle.Policy{Kind: throttle.Sliding, Limit: 7, Window: w}, 1500 * time.Millisecond, false},
		{"token bucket, burst 1", throttle.Policy{Kind: throttle.TokenBucket, Limit: 7, Window: w, Burst: 1}, 2000 * time.Millisecond, true},
		{"token bucket, burst 3", throttle.Policy{Kind: throttle.TokenBucket, Limit: 7, Window: w, Burst: 3}, 2000 * time.Millisecond, true},
		{"token bucket, the default burst", throttle.Policy{Kind: throttle.TokenBucket, Limit: 7, Window: w}, 2000 * time.Millisecond, true},
		{"fixed, same window", throttle.Policy{Kind: throttle.Fixed, Limit: 7, Window: w}, 2000 * time.Millisecond, false},
		{"fixed, the window before", throttle.Policy{Kind: throttle.Fixed, Limit: 7, Window: w}, 1900 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := newLateRule(tc.policy)
			next := start.Add(2100 * time.Millisecond)
			f := newFlights()
			f.start("s", start.Add(tc.slot)) // no answer, its margin long past
			held := rule.on && f.lateBefore("s", rule.holdsFrom(next), next.Add(time.Second), margin) != nil
			if held != tc.held {
				t.Errorf("the call at %v held the next call at %v: %v, want %v (rule %+v)", tc.slot, next.Sub(start), held, tc.held, rule)
			}
		})
	}
}

// lateFor is a late landing now that matters for d.
func lateFor(d time.Duration) lateLanding {
	now := time.Now()
	return lateLanding{at: now, holds: now.Add(d), until: now.Add(d)}
}

// TestALateLandingSendsBackTheSlotsPlacedWithoutIt: a call counted later
// than the margin sends back, when it lands, the seller's slots asked for
// before its settle was written and due where it may share their bucket,
// however recently they were checked; a slot asked for after the landing,
// one clear of the call's reach or a call counted within the margin sends
// back nothing, and under the sliding log (whose entries are latest counts
// already) no landing sends back anything.
func TestALateLandingSendsBackTheSlotsPlacedWithoutIt(t *testing.T) {
	const margin = 100 * time.Millisecond
	w := 2 * time.Second
	t0 := time.Now() // the late call's slot, on both clocks
	sliding := throttle.Policy{Kind: throttle.Sliding, Limit: 3, Window: w, Margin: margin}
	bucket := throttle.Policy{Kind: throttle.TokenBucket, Limit: 3, Window: w, Margin: margin, Burst: 1}
	for _, tc := range []struct {
		name    string
		policy  throttle.Policy
		counted time.Duration // after the late call's slot, the latest it may have been counted
		landed  time.Duration // after its slot, its settle written
		asked   time.Duration // the next slot's reservation, after t0
		due     time.Duration // the next slot
		sent    bool
	}{
		{"sliding: no late rule", sliding, 1950 * time.Millisecond, 2000 * time.Millisecond, 500 * time.Millisecond, 2100 * time.Millisecond, false},
		{"sliding: asked for after the landing", sliding, 1950 * time.Millisecond, 2000 * time.Millisecond, 2010 * time.Millisecond, 2100 * time.Millisecond, false},
		{"sliding: counted within the margin", sliding, 90 * time.Millisecond, 100 * time.Millisecond, 50 * time.Millisecond, 2100 * time.Millisecond, false},
		{"token bucket, burst 1: within its interval of the landing", bucket, 400 * time.Millisecond, 400 * time.Millisecond, 100 * time.Millisecond, 700 * time.Millisecond, true},
		{"token bucket, burst 1: beyond its interval", bucket, 400 * time.Millisecond, 400 * time.Millisecond, 100 * time.Millisecond, 1100 * time.Millisecond, false},
		{"token bucket, burst 3: within 3 intervals of the landing", throttle.Policy{Kind: throttle.TokenBucket, Limit: 3, Window: w, Margin: margin, Burst: 3}, 400 * time.Millisecond, 400 * time.Millisecond, 100 * time.Millisecond, 2300 * time.Millisecond, true},
		{"token bucket, burst 3: beyond them", throttle.Policy{Kind: throttle.TokenBucket, Limit: 3, Window: w, Margin: margin, Burst: 3}, 400 * time.Millisecond, 400 * time.Millisecond, 100 * time.Millisecond, 2500 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			late := &slot{Reservation: throttle.Reservation{At: t0}, due: t0}
			landing := newLateRule(tc.policy).landing(late, t0.Add(tc.counted), t0.Add(tc.landed), margin)
			next := &slot{Reservation: throttle.Reservation{At: t0.Add(tc.due)}, due: t0.Add(tc.due), asked: t0.Add(tc.asked)}
			if got := landing.sends(next); got != tc.sent {
				t.Errorf("the slot at +%v asked at +%v sent back: %v, want %v (landing %+v)", tc.due, tc.asked, got, tc.sent, landing)
			}
			if !landing.at.IsZero() && landing.until.Before(landing.holds) {
				t.Errorf("the landing stops mattering at %v, before the slots it sends back (%v)", landing.until, landing.holds)
			}
		})
	}
}
