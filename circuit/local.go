// What this process knows of the circuit between requests to Redis: its view
// and the batch of answered calls not sent yet.

package circuit

import (
	"context"
	"slices"
	"time"
)

// batch is the answered calls (successes, refusals of a row) of a process
// while the circuit is closed, sent with the next report that goes to Redis.
// While the circuit is closed such a call changes nothing but the window's
// counts, and sending each one put every call of the fleet through one script
// on one Redis key (one Cluster node): one report per call was about a
// seventh of Redis's time per registered row (bench many-sellers).
type batch struct {
	calls int
	// distinct, at most Settings.MinFailedSellers (two at least): the window
	// keeps no more, and one seller named means the batch is all its calls
	// (circuit_report.lua counts them as that seller's answered calls)
	sellers []string
	since   time.Time
	// last is when the newest call was answered, lastAt the same instant
	// on the Redis clock as the view maps it: the report places the batch
	// in the window's bucket of that time (circuit_report.lua), not in the
	// one it reaches Redis in, which may be much later
	last, lastAt time.Time
}

// addSeller adds seller unless the batch has it or holds most sellers.
func (u *batch) addSeller(seller string, most int) {
	if len(u.sellers) < most && !slices.Contains(u.sellers, seller) {
		u.sellers = append(u.sellers, seller)
	}
}

// view is what this process last learned of the circuit, in local time.
type view struct {
	known   bool // false until the first answer, and after Redis failed
	state   State
	until   time.Time // local time until which the view holds (a refused caller's RetryAt)
	due     bool      // a call may be allowed now (closed, or a probe is due) as of the last answer
	openFor time.Duration
	learned time.Time // local time of the answer
	at      time.Time // Redis time of the answer: an older answer does not replace it
}

// countLocally counts an answered call that was not a probe in the unsent
// batch, and answers from the view, while this process trusts its view that
// the circuit is closed (Settings.TrustClosed) and the batch is younger than
// half of that: the report that sends it then renews the trust before it
// runs out, so busy callers keep being allowed without asking Redis. false:
// the call goes to Redis, with the batch.
func (b *Breaker) countLocally(seller string) (Status, bool) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.failed[seller]; ok {
		return Status{}, false // its first answer after a failure ends its streak at once
	}
	v := b.view
	if !v.known || v.state != Closed || b.s.TrustClosed <= 0 || now.Sub(v.learned) >= b.s.TrustClosed {
		return Status{}, false
	}
	u := &b.unsent
	if u.calls == 0 {
		u.since = now
	} else if now.Sub(u.since) >= b.s.TrustClosed/2 {
		return Status{}, false
	}
	at := v.at.Add(now.Sub(v.learned))
	u.calls++
	u.last, u.lastAt = now, at
	u.addSeller(seller, max(2, b.s.MinFailedSellers))
	b.batched.Add(1)
	return Status{State: Closed, RetryAt: at, Now: at}, true
}

// maxFailedSellers bounds the sellers a process remembers as failed last
// (Breaker.failed); past it a seller's answer may wait in a batch.
const maxFailedSellers = 4096

// sellerFailed notes that seller's last call reported was a transient failure.
func (b *Breaker) sellerFailed(seller string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed == nil {
		b.failed = map[string]struct{}{}
	}
	if len(b.failed) < maxFailedSellers {
		b.failed[seller] = struct{}{}
	}
}

// sellerAnswered notes that an answered call of seller reached Redis.
func (b *Breaker) sellerAnswered(seller string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.failed, seller)
}

// takeUnsent empties the unsent batch for the report that sends it. A batch
// whose newest answer is older than the window is dropped: its calls left
// the window meanwhile.
func (b *Breaker) takeUnsent() batch {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.unsent
	b.unsent = batch{}
	if u.calls > 0 && time.Since(u.last) > b.s.Window {
		return batch{}
	}
	return u
}

// putBack returns a batch whose report failed to the unsent one, for the
// next report (the script may have run with it: then its calls count twice,
// which only makes a failure ratio look lower for a window).
func (b *Breaker) putBack(u batch) {
	if u.calls == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := &b.unsent
	if cur.calls == 0 || u.since.Before(cur.since) {
		cur.since = u.since
	}
	cur.calls += u.calls
	if u.last.After(cur.last) {
		cur.last, cur.lastAt = u.last, u.lastAt
	}
	for _, s := range u.sellers {
		cur.addSeller(s, max(2, b.s.MinFailedSellers))
	}
}

// refuseLocally answers a refusal from the view when the view says the
// circuit is not closed and its retry time has not come.
func (b *Breaker) refuseLocally() (Decision, bool) {
	b.mu.Lock()
	v := b.view
	b.mu.Unlock()
	now := time.Now()
	if !v.known || v.state == Closed || v.due || !now.Before(v.until) {
		return Decision{}, false
	}
	b.refused.Add(1)
	return Decision{State: v.state, RetryAt: v.until, Wait: v.until.Sub(now), OpenFor: v.openFor + now.Sub(v.learned)}, true
}

// allowLocally allows a call without asking Redis while this process
// learned within TrustClosed that the circuit is closed. Once that answer is
// half a TrustClosed old it renews the view in the background.
func (b *Breaker) allowLocally() (Decision, bool) {
	b.mu.Lock()
	v := b.view
	b.mu.Unlock()
	if !v.known || v.state != Closed || b.s.TrustClosed <= 0 {
		return Decision{}, false
	}
	age := time.Since(v.learned)
	if age >= b.s.TrustClosed {
		return Decision{}, false
	}
	if age >= b.s.TrustClosed/2 {
		b.renew()
	}
	at := v.at.Add(age)
	b.allowedLocally.Add(1)
	return Decision{State: Closed, Allowed: true, RetryAt: at, at: at}, true
}

// renew reads the circuit's state (Peek) in the background, one read at a
// time, so that a busy process's closed view does not run out. A busy
// process's reports renew it too, but only every TrustClosed/2 and only once
// their answer is back, which under a burst can take longer than the rest
// of the trust: the view would run out and every call wait for a round trip
// of its own before it starts. Renewed ahead, a call waits for Redis only in
// a process that was idle for TrustClosed.
// A failed read forgets the view, as every failed request does.
func (b *Breaker) renew() {
	if !b.renewing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer b.renewing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), b.s.PeekTimeout)
		defer cancel()
		_, _ = b.Peek(ctx) // it learns the answer, or forgets the view
	}()
}

func (b *Breaker) closedView() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.view.known && b.view.state == Closed
}

// learn records an answer of Redis, given at the Redis time at, in the view.
// wait is how long until a call may be allowed; due says one may be now.
func (b *Breaker) learn(at time.Time, s State, wait time.Duration, due bool, openFor time.Duration) {
	now := time.Now()
	until := now.Add(wait)
	if due {
		// Until someone asks: a due probe is taken by the first asker, so
		// the view holds for a poll interval at most.
		until = now.Add(b.s.ProbeMin)
	}
	b.set(view{known: true, state: s, until: until, due: due, openFor: openFor, learned: now, at: at})
}

// forget drops the view after Redis failed: the next Allow asks Redis again.
func (b *Breaker) forget() { b.set(view{}) }

func (b *Breaker) set(v view) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v.known && b.view.known && v.at.Before(b.view.at) {
		// Answers of concurrent requests arrive in any order: one the
		// script gave before the view's (a report made just before the
		// circuit opened) must not turn an open view back to closed.
		return
	}
	b.view = v
	if v.known {
		b.last = v
	}
	close(b.changed)
	b.changed = make(chan struct{})
}
