package throttle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/redis/go-redis/v9"
)

// TestReserveNIsReservationsOneAfterTheOther: one ReserveN of L + 2 slots,
// with a step of another script before it in the same script, gives the
// slots L + 2 reservations one after the other would: the first L now, the
// next two W′ + 1µs after the first two's latest counts; each carries its
// SendBy and the room Reserve would report (the runner sizes its next batch
// by it). CheckN confirms them in one script, and ReleaseN gives them back
// (a given-back slot fails its check).
func TestReserveNIsReservationsOneAfterTheOther(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client()
	const limit, window, margin = 3, time.Second, 100 * time.Millisecond
	for _, kind := range []Kind{Sliding, Fixed, TokenBucket} {
		t.Run(string(kind), func(t *testing.T) {
			th := newThrottle(t, rdb, Policy{Kind: kind, Limit: limit, Window: window, Margin: margin, CallTimeout: 200 * time.Millisecond})
			s := seller("batch-" + string(kind))
			ctx := context.Background()
			ran := false
			before := scriptbatch.Step{Script: "block.lua", Keys: []string{"bulkreg:{s:" + s + "}:other"}, Args: []any{1},
				Reply: func(any) error { ran = true; return nil }}
			rs, err := th.ReserveN(ctx, s, limit+2, before)
			if err != nil {
				t.Fatal(err)
			}
			if !ran {
				t.Errorf("the step before the reservations did not run")
			}
			if len(rs) != limit+2 {
				t.Fatalf("%d reservations, want %d", len(rs), limit+2)
			}
			for i, r := range rs {
				if !r.Admitted || r.ID == "" || r.Seller != s || r.Epoch == "" {
					t.Fatalf("reservation %d = %+v, want admitted with an id and an epoch", i, r)
				}
				if want := r.At.Add(th.Policy().SendWithin - r.Spread); !r.SendBy.Equal(want) {
					t.Errorf("reservation %d: SendBy %v, want the slot + SendWithin %v", i, r.SendBy, want)
				}
				wantRoom := max(0, limit-r.InWindow) // the window's places left, as Reserve reports them
				if kind == TokenBucket {
					wantRoom = 0 // the next slot waits for this call's answer or its latest count
				}
				if r.Room != wantRoom {
					t.Errorf("reservation %d: Room %d with %d in its window, want %d as Reserve reports it", i, r.Room, r.InWindow, wantRoom)
				}
				if kind != TokenBucket && i < limit && r.Wait > 100*time.Millisecond { // a bucket keeps the margin off its burst
					t.Errorf("reservation %d waits %v, want a slot now (the window has room)", i, r.Wait)
				}
			}
			if kind == Sliding {
				span, reach := window+margin, th.Policy().reach()
				for i := limit; i < len(rs); i++ {
					if want := rs[i-limit].At.Add(reach + span + time.Microsecond); !rs[i].At.Equal(want) {
						t.Errorf("reservation %d at %s, want %s (W′ + 1µs after reservation %d's latest count)", i, rs[i].At, want, i-limit)
					}
				}
			} else if !rs[limit].At.After(rs[limit-1].At) {
				t.Errorf("reservation %d at %s, not after the window's %s", limit, rs[limit].At, rs[limit-1].At)
			}
			chks, err := th.CheckN(ctx, s, rs)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range chks {
				if !c.Good || c.Epoch != rs[i].Epoch {
					t.Errorf("check %d = %+v, want good in epoch %s", i, c, rs[i].Epoch)
				}
			}
			if err := th.ReleaseN(ctx, s, rs[:2]); err != nil {
				t.Fatal(err)
			}
			chks, err = th.CheckN(ctx, s, rs)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range chks {
				if c.Good != (i >= 2) {
					t.Errorf("check %d after releasing the first two: good %v, want %v", i, c.Good, i >= 2)
				}
			}
		})
	}
}

// TestReserveNBeyondMaxWait: once a slot is beyond MaxWait none after it is
// admitted, and each says when to ask again.
func TestReserveNBeyondMaxWait(t *testing.T) {
	srv := startRedis(t)
	th := newThrottle(t, srv.Client(), Policy{Limit: 2, Window: time.Second, Margin: 50 * time.Millisecond, MaxWait: 500 * time.Millisecond})
	rs, err := th.ReserveN(context.Background(), seller("maxwait"), 4)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Admitted != (i < 2) {
			t.Errorf("reservation %d admitted %v, want %v", i, r.Admitted, i < 2)
		}
		if i >= 2 && (r.ID != "" || r.Wait <= 500*time.Millisecond) {
			t.Errorf("reservation %d = %+v, want no slot and a wait beyond MaxWait", i, r)
		}
	}
}

// TestReserveNMatchesOneAtATime: a batch of slots placed in one script gets
// what the same ids asked for one script each get (the script counts on the
// log only growing between the slots it books: earliest's memo), on logs of
// every shape: a burst at one latest count, counts spread over several
// windows (slots that fit between them), slots booked ahead, a block, a
// retry's ids already held. The slots, their counts and the logs left behind
// must be the same.
func TestReserveNMatchesOneAtATime(t *testing.T) {
	rdb := startRedis(t).Client()
	ctx := context.Background()
	// The sliding policy's script and keys; the limit, reach and not-before
	// of each round are the script's arguments.
	th := newThrottle(t, rdb, PerMinute(100))
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	const win = int64(1_000_000)
	for round := range 400 {
		tm, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		// Every slot at or after nb: the answers do not depend on when each script runs.
		nb := tm.UnixMicro() + 2*win
		limit := []int{1, 2, 3, 5, 10, 20}[rng.IntN(6)]
		reach := []int64{0, 1000, 200_000}[rng.IntN(3)]
		var entries []redis.Z
		for i := range rng.IntN(3*limit + 1) {
			sc := nb + reach // a burst
			switch rng.IntN(3) {
			case 1:
				sc = nb - win + rng.Int64N(3*win)
			case 2:
				sc = nb + rng.Int64N(5)*win/3
			}
			entries = append(entries, redis.Z{Score: float64(sc), Member: fmt.Sprintf("e%d", i)})
		}
		ids := make([]string, 1+rng.IntN(2*limit+2))
		for i := range ids {
			ids[i] = fmt.Sprintf("id%d-%d", round, i)
		}
		if rng.IntN(8) == 0 { // a retry: the first ids hold slots already
			for i := range 1 + rng.IntN(len(ids)) {
				entries = append(entries, redis.Z{Score: float64(nb + reach + int64(i)), Member: ids[i]})
			}
		}
		var block int64
		if rng.IntN(6) == 0 {
			block = nb + rng.Int64N(2*win)
		}
		var got [2][]string
		var logs [2][]redis.Z
		for k := range 2 {
			sk := th.keys(seller(fmt.Sprintf("twin-%d-%d", round, k)))
			keys := []string{sk.log, sk.block, sk.marker}
			if len(entries) > 0 {
				if err := rdb.ZAdd(ctx, keys[0], entries...).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if block > 0 {
				if err := rdb.Set(ctx, keys[1], block, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			run := func(ids []string) []string {
				args := []any{limit, win, int64(1e12), ids[0], 0, reach, nb}
				for _, id := range ids[1:] {
					args = append(args, id)
				}
				v, err := th.reserve.Run(ctx, rdb, keys, args...).Text()
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				var lines []string
				for l := range strings.SplitSeq(v, "\n") {
					f := strings.Fields(l)
					f[2] = "now" // the Redis clock when the script ran
					lines = append(lines, strings.Join(f, " "))
				}
				return lines
			}
			if k == 0 {
				got[k] = run(ids)
			} else {
				for _, id := range ids {
					got[k] = append(got[k], run([]string{id})...)
				}
			}
			if logs[k], err = rdb.ZRangeWithScores(ctx, keys[0], 0, -1).Result(); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got[0], got[1]) || !slices.Equal(logs[0], logs[1]) {
			t.Fatalf("round %d (seed %d): limit %d, reach %d µs, %d entries, ids %v, block %d:\none script:\n%s\none each:\n%s\nlogs:\n%v\n%v",
				round, seed, limit, reach, len(entries), ids, block, strings.Join(got[0], "\n"), strings.Join(got[1], "\n"), logs[0], logs[1])
		}
	}
}
