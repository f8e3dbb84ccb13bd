package sandbox

import (
	"math"
	"slices"
	"time"
)

// The counting policies. Sliding is the contract; fixed and token-bucket
// exist to show what a client tuned for one API does against another: both
// admit more than the limit in some trailing window.
const (
	PolicySliding     = "sliding"      // at most Limit in any trailing Window
	PolicyFixed       = "fixed"        // at most Limit per Window aligned to the Unix epoch
	PolicyTokenBucket = "token-bucket" // capacity Limit, refilled continuously at Limit per Window
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
func (sl *seller) admit(policy string, limit int, window time.Duration, now time.Time) (ok bool, wait time.Duration) {
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
			sl.tokens, sl.bucketAt, sl.bucketOK = float64(limit), now, true
		}
		if elapsed := now.Sub(sl.bucketAt); elapsed > 0 {
			sl.tokens = math.Min(float64(limit), sl.tokens+elapsed.Seconds()/perToken)
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
