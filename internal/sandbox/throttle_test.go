package sandbox

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/throttle"
)

// TestThrottleCountsAsTheSandbox: the throttle's slots under each policy,
// sent to a sandbox counting the same way (its clock set to each call's
// arrival), get no 429 when every call arrives within the margin after its
// slot, in the ways that hurt most; a sandbox counting another way refuses
// some of them. Slots are taken far ahead, so nothing sleeps.
func TestThrottleCountsAsTheSandbox(t *testing.T) {
	rdb := testredis.Start(t).Client()
	ctx := context.Background()
	if _, err := throttle.Initialize(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	const limit, window, margin = 10, 10 * time.Second, 200 * time.Millisecond
	arrivals := map[string]func(slots []time.Time) []time.Time{
		"on time": func(slots []time.Time) []time.Time { return slots },
		"late":    func(slots []time.Time) []time.Time { return shift(slots, func(int) time.Duration { return margin }) },
		// a burst's calls (slots within a millisecond) late, the next ones on time
		"bursts late": func(slots []time.Time) []time.Time {
			together := func(i, j int) bool {
				return j >= 0 && j < len(slots) && slots[j].Sub(slots[i]).Abs() < time.Millisecond
			}
			return shift(slots, func(i int) time.Duration {
				if together(i, i-1) || together(i, i+1) {
					return margin
				}
				return 0
			})
		},
		"random": func(slots []time.Time) []time.Time {
			return shift(slots, func(int) time.Duration { return rand.N(margin + 1) })
		},
	}
	for _, tc := range []struct {
		throttle throttle.Kind
		burst    int
		api      string
		refused  bool // the API counts another way and must refuse some calls
	}{
		{throttle.Sliding, 0, PolicySliding, false},
		{throttle.Fixed, 0, PolicyFixed, false},
		{throttle.TokenBucket, 0, PolicyTokenBucket, false},
		{throttle.TokenBucket, 4, PolicyTokenBucket, false},
		// sliding keeps the other two ways of counting as well
		{throttle.Sliding, 0, PolicyFixed, false},
		{throttle.Sliding, 0, PolicyTokenBucket, false},
		{throttle.Fixed, 0, PolicySliding, true},
		{throttle.TokenBucket, 0, PolicySliding, true},
	} {
		t.Run(fmt.Sprintf("%s-%d against %s", tc.throttle, tc.burst, tc.api), func(t *testing.T) {
			th, err := throttle.New(rdb, throttle.Policy{Kind: tc.throttle, Limit: limit, Window: window, Margin: margin, Burst: tc.burst, MaxWait: 10 * window})
			if err != nil {
				t.Fatal(err)
			}
			seller := fmt.Sprint("s-", rand.Uint64()) // a log of its own on the shared Redis
			if tc.throttle == throttle.Fixed && tc.refused {
				// Reserved in an aligned window's last margin, the first
				// burst goes to the next window's start and every burst is
				// a whole window after the one before: a sliding API then
				// refuses nothing, and the case shows nothing. Begin away
				// from a boundary.
				awayFromABoundary(t, rdb, window)
			}
			var slots []time.Time
			for range 3*limit + 5 {
				r, err := th.Reserve(ctx, seller)
				if err != nil || !r.Admitted {
					t.Fatalf("Reserve = %+v, %v", r, err)
				}
				slots = append(slots, r.At)
			}
			apiBurst := 0
			if tc.api == PolicyTokenBucket {
				apiBurst = tc.burst
			}
			for name, arrive := range arrivals {
				at := slices.Clone(arrive(slots))
				slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
				clock := &fakeClock{}
				srv, ts := start(t, Options{Limit: limit, Window: window, Policy: tc.api, Burst: apiBurst, Now: clock.Now})
				c := ts.Client()
				for i, a := range at {
					clock.Set(a)
					key := fmt.Sprint(i)
					if r := mustCall(t, c, ts.URL, "s", key, productJSON(key)); r.status != 201 && r.status != 429 {
						t.Fatalf("status %d %s", r.status, r.body)
					}
				}
				a := srv.Audit().Sellers["s"]
				if tc.refused && a.RateLimited == 0 {
					t.Errorf("%s: the API counting %s refused none of %d calls; this test must show that it does", name, tc.api, len(at))
				}
				if !tc.refused && (a.RateLimited != 0 || a.Exceeded) {
					t.Errorf("%s: the API counting %s refused %d of %d calls (%d counted at most); slots %v", name, tc.api, a.RateLimited, len(at), a.MaxCounted, slots)
				}
			}
		})
	}
}

// awayFromABoundary waits until the Redis clock is in the second quarter
// of an aligned window of length w.
func awayFromABoundary(t *testing.T, rdb redis.UniversalClient, w time.Duration) {
	t.Helper()
	for {
		now, err := rdb.Time(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		in := time.Duration(now.UnixNano() % int64(w))
		if in >= w/4 && in < w/2 {
			return
		}
		time.Sleep((w/4 + w - in) % w)
	}
}

func shift(slots []time.Time, by func(i int) time.Duration) []time.Time {
	out := make([]time.Time, len(slots))
	for i, s := range slots {
		out[i] = s.Add(by(i))
	}
	return out
}

// TestAuditCountsAsThePolicy: the audit's count by policy, computed again
// from the acceptance times, sees what the policy would have refused.
func TestAuditCountsAsThePolicy(t *testing.T) {
	base := time.Unix(1_700_000_000, 0) // a multiple of 10 s since the epoch
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, base.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	const w = 10 * time.Second
	for _, tc := range []struct {
		name        string
		times       []time.Time
		fixed, toks int
	}{
		{"none", nil, 0, 0},
		{"3 in one window", at(0, 1, 9999), 3, 2},
		{"2 on either side of a boundary", at(9998, 9999, 10000, 10001), 2, 4},
		// one token a second (limit 10 per 10 s): the bucket has refilled one by 1 s
		{"spaced by a token", at(0, 1000, 2000, 3000), 4, 1},
		{"a little faster", at(0, 900, 1800, 2700), 4, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := maxInAlignedWindow(tc.times, w); got != tc.fixed {
				t.Errorf("maxInAlignedWindow = %d, want %d", got, tc.fixed)
			}
			if got := maxTokens(tc.times, w, 10); got != tc.toks {
				t.Errorf("maxTokens = %d, want %d", got, tc.toks)
			}
		})
	}
}
