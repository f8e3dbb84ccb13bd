package throttle

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestASettleAtTheNextWindowsFirstSlot: settle.lua visits the booked slots
// in (held + W′, at + W′], so it never looks at a slot exactly at held + W′,
// while reserve.lua books the next window's first slot 1 µs after that
// (s(n-L+1) + W′ + 1µs). Against real Redis, the slots come from Reserve and
// the settles from Settle, at answers placed to the microsecond around that
// boundary: the settled place + W′ just before, on and just after the next
// window's first slot, and a slot written exactly at held + W′ (a place only
// a slot given back and taken again, fits.lua, can leave). Judged by the
// exact model of the log (validLog: no closed window of W′ ending at a slot
// holds more than the limit, the strictness reserve.lua and fits.lua keep):
// after each settle the log, the moved call included, must be valid, and a
// slot is given back exactly when its window gained the call. A slot at
// held + W′ shares a closed window with held already, so the move adds the
// call to no window of it: it is never one to give back, and a valid log
// cannot hold it in a full window.
func TestASettleAtTheNextWindowsFirstSlot(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t).Client()
	for _, limit := range []int{1, 2, 3} {
		p := Policy{Limit: limit, Window: time.Second, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second}
		th := newThrottle(t, rdb, p)
		span := p.span().Microseconds()
		for _, tc := range []struct {
			name string
			// edge: write a slot at exactly held + W′ instead of taking the
			// next window's slots with Reserve (the window then holds the
			// call and this slot only)
			edge bool
			// the settled place (answer − margin) less the next window's
			// first slot − W′ (or the edge slot − W′), in µs
			d int64
			// the first window's slots reserved
			first int
		}{
			{"the move ends 1µs before the next window's first slot", false, -1, limit},
			{"the move ends on the next window's first slot", false, 0, limit},
			{"the move ends 1µs after the next window's first slot", false, 1, limit},
			{"the move ends on the next window's last slot", false, int64(limit), limit},
			{"the settled place is the next window's first slot", false, span, limit},
			{"the move ends on a slot at exactly held + W′", true, 0, max(1, limit-1)},
			{"the move ends 1µs after a slot at exactly held + W′", true, 1, max(1, limit-1)},
			{"the settled place is a slot at exactly held + W′", true, span, max(1, limit-1)},
		} {
			if tc.edge && limit == 1 {
				continue // a slot at held + W′ would share a closed window with held: not a valid log
			}
			t.Run(fmt.Sprintf("limit %d, %s", limit, tc.name), func(t *testing.T) {
				s := seller("edge")
				var first, next []Reservation
				for range tc.first {
					first = append(first, reserve(t, th, s))
				}
				held := first[0].At.UnixMicro()
				key := th.keys(s).log
				if tc.edge {
					if err := rdb.ZAdd(ctx, key, redis.Z{Score: float64(held + span), Member: "edge"}).Err(); err != nil {
						t.Fatal(err)
					}
				} else {
					for range limit {
						next = append(next, reserve(t, th, s))
					}
					if got := next[0].At.UnixMicro() - held; got != span+1 {
						t.Fatalf("the next window's first slot is %d µs after the first, want W′ + 1µs = %d", got, span+1)
					}
				}
				before := slotsIn(t, rdb, key)
				if !validLog(scoresOf(before), span, limit) {
					t.Fatalf("the log before the settle is over the limit: %v", before)
				}
				target := held + span + 1 // the next window's first slot
				if tc.edge {
					target = held + span
				}
				at := target - span + tc.d
				if err := th.Settle(ctx, first[0], time.UnixMicro(at).Add(p.Margin)); err != nil {
					t.Fatal(err)
				}
				after := slotsIn(t, rdb, key)
				if !validLog(scoresOf(after), span, limit) {
					t.Errorf("after the call moved from %d to %d µs the log holds more than %d in a window of W′ (%d µs): %v (before %v)",
						held, at, limit, span, after, before)
				}
				// The model's give-back: a slot booked after the call (never the
				// call itself: it was made) is given back when its closed window
				// holds the call now, did not before, and holds more than the
				// limit with it, in the order the script visits them (score, then
				// member), each count seeing those given back before it gone.
				kept := slices.Clone(before)
				for i := range kept {
					if kept[i].Member == first[0].ID {
						kept[i].Score = float64(at)
					}
				}
				sortSlots(kept)
				var gave []redis.Z
				for _, z := range slices.Clone(kept) {
					x := int64(z.Score)
					if z.Member == first[0].ID || x <= held {
						continue
					}
					had, has := held >= x-span && held <= x, at >= x-span && at <= x
					if has && !had && count(scoresOf(kept), x-span, x) > limit {
						gave = append(gave, z)
						kept = slices.DeleteFunc(kept, func(y redis.Z) bool { return y.Member == z.Member })
					}
				}
				if !slices.Equal(after, kept) {
					t.Errorf("after the call moved from %d to %d µs (W′ %d µs) the log is %v, the model's %v (given back %v)", held, at, span, after, kept, gave)
				}
			})
		}
	}
}

// slotsIn is a log's slots, in order (score, then member, as Redis keeps them).
func slotsIn(t *testing.T, rdb *redis.Client, key string) []redis.Z {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(context.Background(), key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return zs
}

func sortSlots(zs []redis.Z) {
	slices.SortFunc(zs, func(a, b redis.Z) int {
		return cmp.Or(cmp.Compare(a.Score, b.Score), strings.Compare(a.Member.(string), b.Member.(string)))
	})
}

func scoresOf(zs []redis.Z) []int64 {
	out := make([]int64, len(zs))
	for i, z := range zs {
		out[i] = int64(z.Score)
	}
	return out
}

// count is how many of the sorted slots lie in [lo, hi].
func count(slots []int64, lo, hi int64) int {
	n := 0
	for _, x := range slots {
		if x >= lo && x <= hi {
			n++
		}
	}
	return n
}
