package sandbox

import (
	"math"
	"slices"
	"time"
)

// The counting policies, as an API may count its limit; each is one of
// the throttle's (throttle.Kind). Sliding is the contract; fixed and
// token-bucket stand for APIs that count that way, and show what a client
// tuned for one API does against another: both admit more than the limit
// in some trailing window.
const (
	PolicySliding     = "sliding"      // at most Limit in any trailing Window
	PolicyFixed       = "fixed"        // at most Limit per Window aligned to the Unix epoch
	PolicyTokenBucket = "token-bucket" // capacity Burst (default Limit), refilled continuously at Limit per Window, full at first
)

// seller is everything the API knows about one seller. Every field is
// guarded by Server.mu.
type seller struct {
	keys     map[string]registration // Idempotency-Key → the registration it made
	skus     map[string]struct{}     // distinct seller_sku values registered
	accepted []time.Time             // every 201, ascending

	// fixed window: the start of the current window (Unix ns) and its count.
	fixedStart int64
	fixedCount int

	// token bucket: tokens left at bucketAt. A float is exact enough here:
	// the error is far below the whole-second resolution of Retry-After.
	tokens   float64
	bucketAt time.Time
	bucketOK bool // the bucket has been filled once

	rateLimited, replays, conflicts, invalid, failed int
	injected                                         int // answers injected by Chaos
	appRateLimited                                   int // of rateLimited, those for the app-wide limit
}

// registration is what one Idempotency-Key registered, kept to answer replays
// byte for byte and to spot a reused key with another product.
type registration struct {
	canonical []byte // the product, re-marshalled
	answer    []byte // the body of the 201
}

func newSeller() *seller {
	return &seller{keys: map[string]registration{}, skus: map[string]struct{}{}}
}

// admit decides whether a registration at now fits the policy and, if it
// does, counts it. When it does not, wait is how long until one would fit.
func (sl *seller) admit(policy string, limit, burst int, window time.Duration, now time.Time) (ok bool, wait time.Duration) {
	switch policy {
	case PolicyFixed:
		w := window.Nanoseconds()
		start := floorDiv(now.UnixNano(), w) * w
		if start != sl.fixedStart {
			sl.fixedStart, sl.fixedCount = start, 0
		}
		if sl.fixedCount >= limit {
			return false, time.Duration(start + w - now.UnixNano())
		}
		sl.fixedCount++
	case PolicyTokenBucket:
		perToken := window.Seconds() / float64(limit)
		if !sl.bucketOK {
			sl.tokens, sl.bucketAt, sl.bucketOK = float64(burst), now, true
		}
		if elapsed := now.Sub(sl.bucketAt); elapsed > 0 {
			sl.tokens = math.Min(float64(burst), sl.tokens+elapsed.Seconds()/perToken)
			sl.bucketAt = now
		}
		// The epsilon keeps a token that is whole but for float rounding
		// from being refused with a Retry-After of one second.
		if sl.tokens < 1-1e-9 {
			return false, time.Duration((1 - sl.tokens) * perToken * float64(time.Second))
		}
		sl.tokens--
	default: // PolicySliding
		lo, hi := sl.inWindow(now, window)
		if n := hi - lo; n >= limit {
			// The count falls below the limit once the (n-limit+1)-th
			// oldest acceptance in the window leaves it. With a clock that
			// only moves forward n == limit and that is the oldest.
			return false, sl.accepted[lo+n-limit].Add(window).Sub(now)
		}
	}
	sl.record(now)
	return true, 0
}

// room reports whether a registration at now fits the app-wide limit (a
// sliding window, like the seller's), and if not how long until one would.
// It counts nothing: the caller records the registration once the seller's
// limit admitted it too.
func (a *appLimit) room(now time.Time) (ok bool, wait time.Duration) {
	if a.limit <= 0 {
		return true, 0
	}
	lo, hi := a.accepted.inWindow(now, a.window)
	if n := hi - lo; n >= a.limit {
		return false, a.accepted.accepted[lo+n-a.limit].Add(a.window).Sub(now)
	}
	return true, 0
}

// inWindow returns the range of accepted times in the trailing window
// (now-window, now]: two registrations exactly a window apart are not in the
// same window, the way the contract counts.
func (sl *seller) inWindow(now time.Time, window time.Duration) (lo, hi int) {
	from := now.Add(-window)
	lo, _ = slices.BinarySearchFunc(sl.accepted, from, func(t, target time.Time) int {
		if t.After(target) {
			return 1
		}
		return -1
	})
	hi, _ = slices.BinarySearchFunc(sl.accepted, now, func(t, target time.Time) int {
		if t.After(target) {
			return 1
		}
		return -1
	})
	return lo, hi
}

// record keeps an acceptance time in order. With the real clock read under
// the server's lock it is always an append; a test clock may step back.
func (sl *seller) record(now time.Time) {
	if n := len(sl.accepted); n == 0 || !now.Before(sl.accepted[n-1]) {
		sl.accepted = append(sl.accepted, now)
		return
	}
	i, _ := slices.BinarySearchFunc(sl.accepted, now, func(t, target time.Time) int {
		if t.After(target) {
			return 1
		}
		return -1
	})
	sl.accepted = slices.Insert(sl.accepted, i, now)
}

// maxInWindow is the most times in any trailing window (t-window, t], found
// with two pointers over the sorted times: exact, whatever the policy was.
func maxInWindow(times []time.Time, window time.Duration) int {
	best, lo := 0, 0
	for hi, t := range times {
		for !times[lo].After(t.Add(-window)) {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// maxInAlignedWindow is the most times in one window [kW, (k+1)W) aligned
// to the Unix epoch, as a fixed-window API counts.
func maxInAlignedWindow(times []time.Time, window time.Duration) int {
	best, n := 0, 0
	w := window.Nanoseconds()
	for i, t := range times {
		if i > 0 && floorDiv(t.UnixNano(), w) == floorDiv(times[i-1].UnixNano(), w) {
			n++
		} else {
			n = 1
		}
		best = max(best, n)
	}
	return best
}

// maxTokens is the most tokens a bucket refilled at limit per window had
// taken at once over the sorted times, this call's included: the smallest
// bucket that accepts every one. It replays the times as GCRA, the bucket's
// other form: each call moves the theoretical arrival time a token's worth
// past max(itself, the call), and the tokens taken are how far it is ahead.
func maxTokens(times []time.Time, window time.Duration, limit int) int {
	if len(times) == 0 {
		return 0
	}
	perToken := window.Seconds() / float64(limit)
	best, tat := 0, 0.0
	for _, t := range times {
		at := t.Sub(times[0]).Seconds()
		tat = math.Max(tat, at) + perToken
		// The epsilon forgives float rounding, as admit does.
		best = max(best, int(math.Ceil((tat-at)/perToken-1e-9)))
	}
	return best
}

// retryAfterSeconds turns a wait into the whole seconds of a Retry-After
// header, rounded up so a client that honours it is never early, and at
// least 1 because 0 would invite an immediate retry that is refused again.
func retryAfterSeconds(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
