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
	// lateLanded is, by seller, when a call that may have been counted
	// later than its margin allows last landed, its settle written, and
	// until when that matters (lateSince); swept is its size after the last
	// sweep of landings that no longer matter.
	lateLanded map[string]lateLanding
	swept      int
}

type lateLanding struct{ at, until time.Time }

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

// land ends fl: the calls waiting on it go on. matters, when above 0,
// says the API may have counted it later than the margin after its slot:
// its settle moved the seller's slots, and for that long slots confirmed
// before may no longer hold (lateSince).
func (f *flights) land(seller string, fl *flight, matters time.Duration) {
	if fl == nil {
		return
	}
	f.mu.Lock()
	if matters > 0 {
		now := time.Now()
		f.lateLanded[seller] = lateLanding{at: now, until: now.Add(matters)}
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

// lateSince is when the last call of seller that may have been counted late
// landed, while that still matters; zero otherwise. A token
// bucket spaces a seller's calls by its emission interval, so a call counted
// late by more than the margin can leave the next slot, confirmed before its
// settle, too close to it (sim seed 11012: a call counted 0.4 s after its
// slot, the next one 0.1 s after that count, 1 × 429 under 6 per 2 s with a
// burst of 1). The half-window wait above does not see it: the late call
// has landed by then, and the slot is only a third of a window later.
func (f *flights) lateSince(seller string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.lateLanded[seller]
	if ok && time.Now().After(l.until) {
		delete(f.lateLanded, seller)
		return time.Time{}
	}
	return l.at
}
