package throttle

import (
	"context"
	"math"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestPolicyValidateKinds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     Policy
		field string // "" = valid
	}{
		{"a bucket as large as the limit", Policy{Kind: TokenBucket, Limit: 10, Window: time.Second, Burst: 10}, ""},
		{"a bucket larger than the limit", Policy{Kind: TokenBucket, Limit: 10, Window: time.Second, Burst: 11}, "Burst"},
		{"a burst without a bucket", Policy{Kind: Fixed, Limit: 10, Window: time.Second, Burst: 5}, "Burst"},
		{"a fixed window no longer than its margin", Policy{Kind: Fixed, Limit: 10, Window: time.Second, Margin: time.Second}, "Margin"},
		{"a sliding window shorter than its margin", Policy{Kind: Sliding, Limit: 10, Window: time.Second, Margin: 2 * time.Second}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.field == "" && err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
			if tc.field != "" && (err == nil || !strings.Contains(err.Error(), "Policy."+tc.field)) {
				t.Fatalf("Validate() = %v, want an error naming Policy.%s", err, tc.field)
			}
		})
	}
}

// TestFixedAndTokenBucketShapes pins down what the two other policies give:
// a fixed window fills the API's window aligned on multiples of W, keeps its
// last margin free and starts over at the next multiple; a token bucket
// gives its burst less the margin's worth at once, then one slot every W/L.
func TestFixedAndTokenBucketShapes(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client()
	const window, margin = 10 * time.Second, 100 * time.Millisecond
	t.Run("fixed", func(t *testing.T) {
		th := newThrottle(t, rdb, Policy{Kind: Fixed, Limit: 2, Window: window, Margin: margin, MaxWait: 3 * window})
		s := seller("fixed")
		awaitWindowAhead(t, rdb, window, time.Second)
		a, b, c := reserve(t, th, s), reserve(t, th, s), reserve(t, th, s)
		next := a.At.Truncate(window).Add(window) // the window after the one holding now
		if a.Wait > 100*time.Millisecond || !b.At.Before(next) || !c.At.Equal(next) {
			t.Errorf("slots %s, %s, %s; want two now, in the current window, and the third at its end %s", a.At, b.At, c.At, next)
		}
	})
	t.Run("fixed, asked in a window's last margin", func(t *testing.T) {
		th := newThrottle(t, rdb, Policy{Kind: Fixed, Limit: 2, Window: window, Margin: margin, MaxWait: 3 * window})
		s := seller("edge")
		// A block that ends inside the last margin of a window: the slot
		// is the next window's start, where the API counts it.
		now, err := rdb.Time(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		edge := now.Truncate(window).Add(2*window - margin/2)
		if err := th.Block(context.Background(), s, edge.Sub(now)); err != nil {
			t.Fatal(err)
		}
		r := reserve(t, th, s)
		if want := now.Truncate(window).Add(2 * window); !r.At.Equal(want) {
			t.Errorf("blocked until %s (half a margin before a window ends): slot %s, want the next window's start %s", edge, r.At, want)
		}
	})
	t.Run("token-bucket", func(t *testing.T) {
		const limit, burst = 4, 3
		// Calls sent and counted within 1µs of their slots: the bucket's
		// shape alone (tat covers each call's latest count).
		th := newThrottle(t, rdb, Policy{Kind: TokenBucket, Limit: limit, Window: window, Margin: margin, Burst: burst, MaxWait: 3 * window,
			SendWithin: time.Microsecond})
		s := seller("bucket")
		var got []Reservation
		for range burst + 2 {
			got = append(got, reserve(t, th, s))
		}
		for i, r := range got[:burst] {
			if r.Wait > 100*time.Millisecond {
				t.Errorf("burst slot %d waits %s, want none", i, r.Wait)
			}
		}
		interval := window / limit
		for i := burst; i < len(got); i++ {
			// GCRA: slot i comes (i − burst + 1) intervals and the margin after the first
			want := got[0].At.Add(time.Duration(i-burst+1)*interval + margin)
			if d := got[i].At.Sub(want); d < -time.Millisecond || d > 100*time.Millisecond {
				t.Errorf("slot %d at %s, want about %s", i, got[i].At, want)
			}
		}
	})
}

// TestVariantsKeepTheAPIsCount reserves far ahead under the fixed and token
// bucket policies and lets each call reach the API up to the margin after
// its slot, the spread the margin stands for, in the ways that hurt most
// (every other call late, whole bursts late, at random). The API counts as
// its policy says: never more than the limit in one aligned window, never a
// call that finds its bucket empty.
func TestVariantsKeepTheAPIsCount(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client()
	const window, margin = time.Second, 100 * time.Millisecond
	rng := mrand.New(mrand.NewPCG(3, 4))
	delays := map[string]func(i int, slots []time.Time) time.Duration{
		"none":        func(int, []time.Time) time.Duration { return 0 },
		"all late":    func(int, []time.Time) time.Duration { return margin },
		"every other": func(i int, _ []time.Time) time.Duration { return time.Duration(i%2) * margin },
		// the calls of a burst arrive late, the first after it early
		"bursts late": func(i int, slots []time.Time) time.Duration {
			together := func(j int) bool { return j >= 0 && j < len(slots) && slots[j].Sub(slots[i]).Abs() < time.Millisecond }
			if together(i-1) || together(i+1) {
				return margin
			}
			return 0
		},
		"random": func(int, []time.Time) time.Duration { return time.Duration(rng.Int64N(int64(margin) + 1)) },
	}
	for _, tc := range []struct {
		name string
		p    Policy
	}{
		{"fixed", Policy{Kind: Fixed, Limit: 5, Window: window, Margin: margin}},
		{"token-bucket, burst = limit", Policy{Kind: TokenBucket, Limit: 5, Window: window, Margin: margin}},
		{"token-bucket, burst 3", Policy{Kind: TokenBucket, Limit: 5, Window: window, Margin: margin, Burst: 3}},
		{"token-bucket, burst 1", Policy{Kind: TokenBucket, Limit: 5, Window: window, Margin: margin, Burst: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.MaxWait = 20 * window
			th := newThrottle(t, rdb, p)
			s := seller("api")
			var slots []time.Time
			for range 4*p.Limit + 2 {
				slots = append(slots, reserve(t, th, s).At)
			}
			for name, delay := range delays {
				arrivals := make([]time.Time, len(slots))
				for i := range slots {
					arrivals[i] = slots[i].Add(delay(i, slots))
				}
				if p.Kind == Fixed {
					if n, at := maxInAlignedWindow(arrivals, window); n > p.Limit {
						t.Errorf("%s: %d calls reach the API in the window from %s, limit %d", name, n, at, p.Limit)
					}
					continue
				}
				burst := p.Burst
				if burst == 0 {
					burst = p.Limit
				}
				if i, ok := bucketAccepts(arrivals, window, p.Limit, burst); !ok {
					t.Errorf("%s: call %d reaches the API's bucket (capacity %d) empty; slots %v", name, i, burst, slots)
				}
			}
		})
	}
}

// maxInAlignedWindow is the most times inside one window [kW, (k+1)W)
// aligned on the Unix epoch, and the start of that window.
func maxInAlignedWindow(times []time.Time, w time.Duration) (int, time.Time) {
	count := map[int64]int{}
	best, at := 0, int64(0)
	for _, t := range times {
		k := t.UnixMicro() / w.Microseconds()
		if count[k]++; count[k] > best {
			best, at = count[k], k
		}
	}
	return best, time.UnixMicro(at * w.Microseconds())
}

// bucketAccepts replays the calls, in the order they arrive, against a
// bucket of burst tokens refilled at limit per window, full at first; it
// answers the first call that finds it empty.
func bucketAccepts(arrivals []time.Time, window time.Duration, limit, burst int) (int, bool) {
	sorted := slices.Clone(arrivals)
	slices.SortFunc(sorted, func(a, b time.Time) int { return a.Compare(b) })
	perToken := float64(window.Microseconds()) / float64(limit)
	tokens, last := float64(burst), sorted[0]
	for i, a := range sorted {
		tokens = math.Min(float64(burst), tokens+float64(a.Sub(last).Microseconds())/perToken)
		last = a
		if tokens < 1-1e-9 {
			return i, false
		}
		tokens--
	}
	return 0, true
}

// TestForecastIsTheSlotReserveGivesForEveryKind: under every policy, the
// forecast of the n-th next row is the slot Reserve then gives that row, to
// the microsecond, once the calls before it are answered (settled at their
// slots), for rows holding a slot and for rows yet to ask, with a block in
// force; and it writes nothing.
func TestForecastIsTheSlotReserveGivesForEveryKind(t *testing.T) {
	ctx := context.Background()
	srv := startRedis(t)
	rdb := srv.Client()
	for _, kind := range []Kind{Sliding, Fixed, TokenBucket} {
		t.Run(string(kind), func(t *testing.T) {
			th := newThrottle(t, rdb, Policy{Kind: kind, Limit: 3, Window: 400 * time.Millisecond, Margin: 100 * time.Millisecond, MaxWait: time.Minute})
			s := seller("forecast")
			if f, err := th.Forecast(ctx, s, 0); err != nil || f.Held != 0 || !f.Last.Equal(f.Now) {
				t.Fatalf("Forecast(0) of a new seller = %+v, %v; want nothing held and Last = Now", f, err)
			}
			var slots []time.Time
			var reserved []Reservation
			for range 5 {
				r := reserve(t, th, s)
				reserved, slots = append(reserved, r), append(slots, r.At)
			}
			f, err := th.Forecast(ctx, s, 1)
			if err != nil {
				t.Fatal(err)
			}
			var held []time.Time
			for _, at := range slots {
				if !at.Before(f.Now) {
					held = append(held, at)
				}
			}
			if f.Held != len(held) || len(held) == 0 || !f.Last.Equal(held[0]) {
				t.Errorf("Forecast(1) at %s = %d held, last %s; the slots are %v", f.Now.Format(time.StampMicro), f.Held, f.Last.Format(time.StampMicro), slots)
			}
			if err := th.Block(ctx, s, 1200*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			before, _ := rdb.ZRangeWithScores(ctx, th.keys(s).log, 0, -1).Result()
			f, err = th.Forecast(ctx, s, 8)
			if err != nil {
				t.Fatal(err)
			}
			if after, _ := rdb.ZRangeWithScores(ctx, th.keys(s).log, 0, -1).Result(); !slices.Equal(before, after) {
				t.Fatalf("Forecast wrote to the log: %v → %v", before, after)
			}
			for _, r := range reserved {
				settleAtSlot(t, th, r)
			}
			var last Reservation
			for range 8 - f.Held {
				last = reserve(t, th, s)
				settleAtSlot(t, th, last)
			}
			if !f.Last.Equal(last.At) {
				t.Errorf("Forecast(8) says the 8th waiting row starts at %s; Reserve gave it %s (%s apart)",
					f.Last.Format(time.StampMicro), last.At.Format(time.StampMicro), last.At.Sub(f.Last))
			}
		})
	}
}

// TestPolicyOfNewFillsOnlyItsKind: New fills the burst in for a token
// bucket only, so the policy it answers validates again as it is.
func TestPolicyOfNewFillsOnlyItsKind(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	for _, kind := range []Kind{Sliding, Fixed, TokenBucket} {
		p := newThrottle(t, rdb, Policy{Kind: kind, Limit: 7, Window: time.Second}).Policy()
		if err := p.Validate(); err != nil {
			t.Errorf("%s: the policy New answers does not validate: %v", kind, err)
		}
		if want := map[Kind]int{TokenBucket: 7}[kind]; p.Burst != want {
			t.Errorf("%s: burst %d, want %d", kind, p.Burst, want)
		}
	}
}
