package consumer

import (
	"sync"
	"time"
)

// flights are this process's calls from their start until what they leave
// in Redis is written (afterCall: the slot settled at the answer or given
// back), by seller. A seller's rows are on one partition (the producer keys
// them by seller), so one process makes all of a seller's calls outside a
// rebalance.
//
// Why: the throttle places a call at its slot, and a call the API counts
// later is moved there when its answer comes (Settle). A call still without
// an answer when its seller's next window starts may yet be counted inside
// that window, and the settle that would move the window's slots comes too
// late for the calls that started meanwhile (sim seeds 7013 and 7002: a
// latency spike about a window long, 1-3 × 429). So a call waits while an
// earlier call of its seller, one whose slot is more than half a window
// before its own, is in flight; then it takes a new slot, which sees the
// settled log. With answers in milliseconds no call ever waits: an earlier
// window's calls are answered long before.
type flights struct {
	mu       sync.Mutex
	bySeller map[string][]*flight
	// lateLanded is, by seller, the last landing of a call that may have
	// been counted later than its margin allows (lateSince); swept is its
	// size after the last sweep of landings that no longer matter.
	lateLanded map[string]lateLanding
	swept      int
}

// lateLanding is the landing of a call that may have been counted later
// than its margin allows: its settle, written by then, moved the seller's
// slots, but not the booked slots near now, whose calls may be under way
// (settle.lua's lead). The zero value is no landing.
type lateLanding struct {
	at    time.Time // when it landed, its settle written
	holds time.Time // slots asked for before at and due before holds go back (sends)
	until time.Time // when it stops mattering, holds or later
}

// sends reports whether the landing sends back the slot s: it was asked for
// before the settle was written, so it may have been placed without it, and
// it is due where the settled call may share its window. When the slot was
// last checked does not matter: settle.lua keeps such a slot in the log,
// and a check after the settle finds it there (sim seed 16004).
func (l lateLanding) sends(s *slot) bool {
	return l.at.After(s.asked) && s.due.Before(l.holds)
}

// flight is one call in flight: its slot, and a channel closed when it
// lands, made only when a call waits on it (every row starts a flight; few
// ever wait, so the common call costs no channel).
type flight struct {
	slot time.Time
	// answered is when its answer came (Redis time, latest estimate); zero
	// while it has none. Guarded by flights.mu.
	answered time.Time
	done     chan struct{} // guarded by flights.mu
}

func newFlights() *flights {
	return &flights{bySeller: map[string][]*flight{}, lateLanded: map[string]lateLanding{}}
}

// start notes a call of seller at its slot; land ends it.
func (f *flights) start(seller string, slot time.Time) *flight {
	fl := &flight{slot: slot}
	f.mu.Lock()
	f.bySeller[seller] = append(f.bySeller[seller], fl)
	f.mu.Unlock()
	return fl
}

// land ends fl: the calls waiting on it go on. late, when not zero, says
// the API may have counted it later than the margin after its slot
// (lateSince). Two late landings of a seller make one that sends back what
// either would.
func (f *flights) land(seller string, fl *flight, late lateLanding) {
	if fl == nil {
		return
	}
	f.mu.Lock()
	if !late.at.IsZero() {
		now := time.Now()
		if l, ok := f.lateLanded[seller]; ok && now.Before(l.until) {
			late.holds, late.until = maxTime(late.holds, l.holds), maxTime(late.until, l.until)
		}
		f.lateLanded[seller] = late
		if len(f.lateLanded) > 2*f.swept+64 {
			for s, l := range f.lateLanded {
				if now.After(l.until) {
					delete(f.lateLanded, s)
				}
			}
			f.swept = len(f.lateLanded)
		}
	}
	list := f.bySeller[seller]
	for i, x := range list {
		if x == fl {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(f.bySeller, seller)
	} else {
		f.bySeller[seller] = list
	}
	if fl.done != nil {
		close(fl.done)
	}
	f.mu.Unlock()
}

// answer notes when fl's answer came: from then until it lands its
// settle is being written (lateBefore).
func (f *flights) answer(fl *flight, at time.Time) {
	if fl == nil {
		return
	}
	f.mu.Lock()
	fl.answered = at
	f.mu.Unlock()
}

// lateBefore returns the done channel of a call of seller in flight whose
// slot is before t and which the API may count, or has counted, more than
// margin after its slot: it has no answer and now is past its slot and the
// margin, or its answer came after them and its settle is not written yet.
// nil when there is none. Where the late rule applies (attempt.go,
// lateRule) the next call must wait for such a call to land: under a token
// bucket (sim seed 14009: a call counted 1.6 s after its slot while Redis
// was frozen, so its settle, and with it lateSince, came after the next
// call, 0.9 s after that count, 1 × 429 under 3 per 3 s), and under a fixed
// window for a call of an earlier window (seed 15007).
func (f *flights) lateBefore(seller string, t, now time.Time, margin time.Duration) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.bySeller[seller] {
		if !fl.slot.Before(t) {
			continue
		}
		counted := fl.answered
		if counted.IsZero() {
			counted = now
		}
		if counted.Sub(fl.slot) > margin {
			if fl.done == nil {
				fl.done = make(chan struct{})
			}
			return fl.done
		}
	}
	return nil
}

// before returns the done channel of a call of seller in flight whose slot
// is before t, or nil when there is none.
func (f *flights) before(seller string, t time.Time) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.bySeller[seller] {
		if fl.slot.Before(t) {
			if fl.done == nil {
				fl.done = make(chan struct{})
			}
			return fl.done
		}
	}
	return nil
}

// lateSince is the last landing of a call of seller that may have been
// counted late, while it still matters; zero otherwise. The half-window
// wait above does not see what it moved: the late call has landed by then.
//   - A token bucket spaces a seller's calls by its emission interval, so a
//     call counted late by more than the margin can leave the next slot,
//     placed before its settle, too close to it (sim seed 11012: a call
//     counted 0.4 s after its slot, the next one 0.1 s after that count,
//     1 × 429 under 6 per 2 s with a burst of 1).
//   - Under the sliding log the next window's first slots are placed a
//     window and a margin after the call's slot; counted later, the call
//     shares their window (sim seed 16004: 3 calls timed out after 2 s and
//     were counted 1.9 – 2.0 s after their slots under 3 per 2 s, the next
//     call, placed 2.1 s after them, was sent 0.1 s after they landed:
//     1 × 429 for each of 3 sellers).
func (f *flights) lateSince(seller string) lateLanding {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.lateLanded[seller]
	if ok && time.Now().After(l.until) {
		delete(f.lateLanded, seller)
		return lateLanding{}
	}
	return l
}
