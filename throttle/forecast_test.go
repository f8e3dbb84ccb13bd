package throttle

import (
	"context"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
)

// TestForecastIsTheSlotReserveGives: the forecast of the n-th next row is
// the slot Reserve then gives that row, to the microsecond, once the calls
// before it are answered (each entry settled back to its slot), both for
// rows that hold a slot already and for rows that have yet to ask, with a
// block in force; and it writes nothing.
func TestForecastIsTheSlotReserveGives(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	if _, err := Initialize(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	th := newThrottle(t, rdb, Policy{Limit: 3, Window: 400 * time.Millisecond, Margin: 100 * time.Millisecond, MaxWait: time.Minute})
	s := seller("forecast")

	if f, err := th.Forecast(ctx, s, 0); err != nil || f.Held != 0 || !f.Last.Equal(f.Now) {
		t.Fatalf("Forecast(0) of a new seller = %+v, %v; want nothing held and Last = Now", f, err)
	}
	var held []Reservation
	for range 5 {
		held = append(held, reserve(t, th, s))
	}
	// The first three slots began at once (the rows are being called); the
	// other two wait for the next window.
	f, err := th.Forecast(ctx, s, 2)
	if err != nil {
		t.Fatal(err)
	}
	if f.Held != 2 || !f.Last.Equal(held[4].At) {
		t.Errorf("Forecast(2) = held %d, last %s; want 2 held and the 5th slot %s", f.Held, f.Last.Format(time.StampMicro), held[4].At.Format(time.StampMicro))
	}
	if err := th.Block(ctx, s, 1200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	before, _ := rdb.ZCard(ctx, th.keys(s).log).Result()
	f, err = th.Forecast(ctx, s, 6)
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := rdb.ZCard(ctx, th.keys(s).log).Result(); after != before {
		t.Fatalf("Forecast wrote to the log: %d slots before, %d after", before, after)
	}
	for _, r := range held {
		settleAtSlot(t, th, r)
	}
	var last Reservation
	for range 4 {
		last = reserve(t, th, s)
		settleAtSlot(t, th, last)
	}
	if !f.Last.Equal(last.At) {
		t.Errorf("Forecast(6) says the 6th waiting row starts at %s; Reserve gave it %s (%s apart)",
			f.Last.Format(time.StampMicro), last.At.Format(time.StampMicro), last.At.Sub(f.Last))
	}
	if _, err := th.Forecast(ctx, s, -1); err == nil {
		t.Error("Forecast(-1) answered, want an error naming n")
	}
}

// settleAtSlot settles r as a call answered at its slot: its entry moves
// from its latest count back to the slot, as the forecast expects.
func settleAtSlot(t *testing.T, th *Throttle, r Reservation) {
	t.Helper()
	if err := th.Settle(context.Background(), r, r.At); err != nil {
		t.Fatal(err)
	}
}
