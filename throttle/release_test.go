package throttle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/sandbox"
)

// TestReleasingAnySlotOfATokenBucketBooksNoTokenTwice: with a bucket of
// one token, four slots are taken and one of them (the first, a middle one,
// the last) is given back; two more are taken. A release that moved the
// bucket back one interval whatever slot was returned would put the next
// slot on the last one still booked (two calls on one token: a 429). Judged twice: every slot against the API's bucket less the margin
// (exact), and the calls themselves by the sandbox's token bucket.
func TestReleasingAnySlotOfATokenBucketBooksNoTokenTwice(t *testing.T) {
	p := Policy{Kind: TokenBucket, Limit: 4, Window: time.Second, Burst: 1, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second}
	for _, tc := range []struct {
		name string
		i    int
	}{{"first", 0}, {"middle", 1}, {"last", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			th := newThrottle(t, startRedis(t).Client(), p)
			j := startJudge(t, sandbox.Options{Policy: sandbox.PolicyTokenBucket, Limit: p.Limit, Window: p.Window, Burst: p.Burst})
			s := seller("tb")
			var held []Reservation
			for range 4 {
				held = append(held, reserve(t, th, s))
			}
			if err := th.Release(ctx, held[tc.i]); err != nil {
				t.Fatal(err)
			}
			held = append(held[:tc.i], held[tc.i+1:]...)
			for range 2 {
				held = append(held, reserve(t, th, s))
			}
			var at []time.Time
			for _, r := range held {
				at = append(at, r.At)
			}
			if err := conformsToBucket(at, p); err != nil {
				t.Errorf("slots %v: %v", at, err)
			}
			callEach(t, th, j, "tb", held)
			j.registered(t, s, len(held))
		})
	}
}

// conformsToBucket replays the slots, sorted, through the API's bucket (GCRA
// with interval W/L and tolerance (Burst − 1) × W/L) with each call counted
// anywhere in [slot, slot + margin]: the earliest count of each slot against
// the latest count of those before it. It answers the first slot the bucket
// would refuse.
func conformsToBucket(at []time.Time, p Policy) error {
	sorted := append([]time.Time(nil), at...)
	for i := range sorted {
		for k := i + 1; k < len(sorted); k++ {
			if sorted[k].Before(sorted[i]) {
				sorted[i], sorted[k] = sorted[k], sorted[i]
			}
		}
	}
	interval := p.Window / time.Duration(p.Limit)
	tau := time.Duration(p.Burst-1) * interval
	var tat time.Time
	for i, s := range sorted {
		// the latest this call is counted pushes the bucket; the earliest must conform
		if i > 0 && s.Before(tat.Add(-tau)) {
			return fmt.Errorf("slot %d at %v comes %v before the bucket has a token (tat %v)", i, s, tat.Add(-tau).Sub(s), tat)
		}
		late := s.Add(p.Margin)
		if late.After(tat) {
			tat = late
		}
		tat = tat.Add(interval)
	}
	return nil
}
