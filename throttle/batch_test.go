package throttle

import (
	"context"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/scriptbatch"
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
