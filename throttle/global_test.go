package throttle

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestGlobalPolicyValidate(t *testing.T) {
	ok := Policy{Limit: 100, Window: time.Minute, Margin: 100 * time.Millisecond, Global: Global{Limit: 1000, Window: time.Minute}}
	for _, tc := range []struct {
		name  string
		edit  func(*Policy)
		field string // "" = valid
	}{
		{"valid", func(*Policy) {}, ""},
		{"off", func(p *Policy) { p.Global = Global{} }, ""},
		{"off with a window", func(p *Policy) { p.Global = Global{Window: time.Second} }, ""},
		{"negative limit", func(p *Policy) { p.Global.Limit = -1 }, "Global.Limit"},
		{"no window", func(p *Policy) { p.Global.Window = 0 }, "Global.Window"},
		{"negative window", func(p *Policy) { p.Global.Window = -time.Second }, "Global.Window"},
		{"tolerance above the margin", func(p *Policy) { p.Global.Tolerance = 200 * time.Millisecond }, "Global.Tolerance"},
		{"negative tolerance", func(p *Policy) { p.Global.Tolerance = -time.Millisecond }, "Global.Tolerance"},
		{"negative grace", func(p *Policy) { p.Global.Grace = -time.Millisecond }, "Global.Grace"},
		{"no margin", func(p *Policy) { p.Margin = 0 }, "Margin"},
		{"no margin but a send bound", func(p *Policy) { p.Margin, p.SendWithin = 0, time.Millisecond }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			tc.edit(&p)
			checkValidate(t, p, tc.field)
		})
	}
	th := newThrottle(t, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), ok)
	if g := th.Policy().Global; g.Tolerance != 25*time.Millisecond || g.Grace != (time.Minute+100*time.Millisecond)/10 {
		t.Errorf("defaults filled in: %+v, want a tolerance of a quarter of the margin and a grace of a tenth of W′", g)
	}
	if g := newThrottle(t, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Policy{Limit: 1, Window: time.Second}).Policy().Global; g != (Global{}) {
		t.Errorf("no app-wide limit, yet the policy has %+v", g)
	}
}

// globalLog reads the app-wide log under th's policy: member → slot. It
// holds latest counts, each a reach after its slot until it is settled.
func globalLog(t *testing.T, th *Throttle, rdb redis.UniversalClient) map[string]time.Time {
	t.Helper()
	out := slotsOf(t, rdb, GlobalLogKey)
	for id, at := range out {
		out[id] = at.Add(-th.p.reach())
	}
	return out
}

// sellerLog reads the seller's log under th's policy: member → slot. A
// sliding log holds latest counts, each a reach after its slot until it is
// settled.
func sellerLog(t *testing.T, th *Throttle, rdb redis.UniversalClient, s string) map[string]time.Time {
	t.Helper()
	out := slotsOf(t, rdb, th.keys(s).log)
	if th.p.Kind == Sliding {
		for id, at := range out {
			out[id] = at.Add(-th.p.reach())
		}
	}
	return out
}

func slotsOf(t *testing.T, rdb redis.UniversalClient, key string) map[string]time.Time {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(context.Background(), key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, z := range zs {
		out[z.Member.(string)] = time.UnixMicro(int64(z.Score))
	}
	return out
}

// TestAppWideLimitMovesTheSellerSlot: two sellers share an app-wide limit of
// 3 per window. The fourth call needs the app-wide log's next slot, a window
// after the first: the seller's own slot, free now, moves there, so both
// logs hold the call at one time, and the slot taken at first is given back.
func TestAppWideLimitMovesTheSellerSlot(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client()
	ctx := context.Background()
	const window = time.Second
	p := Policy{Limit: 10, Window: window, Margin: 40 * time.Millisecond, MaxWait: 5 * window, Global: Global{Limit: 3, Window: window}}
	th := newThrottle(t, rdb, p)
	a, b := seller("wide-a"), seller("wide-b")
	var got []Reservation
	for _, s := range []string{a, a, b, b} {
		got = append(got, reserve(t, th, s))
	}
	for i, r := range got {
		if !r.Admitted || r.Global.ID == "" || r.Global.Epoch == "" || r.Spread > th.Policy().SendWithin {
			t.Fatalf("reservation %d = %+v, want admitted with an app-wide slot equal to the seller's", i, r)
		}
		// Slots due now are taken one round trip apart (the seller's
		// first, or, matched again after a slow round trip, the app-wide
		// one); the call is at the later, At, late by the round trip
		// (Spread) for the earlier.
		if r.At.Before(r.Global.At) || r.At.Sub(r.Global.At) > r.Spread {
			t.Errorf("reservation %d at %v, its app-wide slot at %v, spread %v: want the call at the later slot, at most the spread after the app-wide one", i, r.At, r.Global.At, r.Spread)
		}
	}
	for i, r := range got[:3] {
		logged := sellerLog(t, th, rdb, r.Seller)[r.ID]
		if d := r.At.Sub(logged); d < 0 || d > 100*time.Millisecond {
			t.Errorf("reservation %d: seller slot %v, call at %v; want the call at most a round trip after", i, logged, r.At)
		}
	}
	span := window + p.Margin
	if want := got[0].Global.At.Add(th.p.reach() + span + time.Microsecond); !got[3].At.Equal(want) {
		t.Errorf("the 4th call (3 per window app-wide) at %v, want W′ + 1µs after the first's latest count: %v", got[3].At, want)
	}
	if got[3].Wait < span-200*time.Millisecond || got[3].Global.InWindow != 3 {
		t.Errorf("the 4th call waits %v with %d app-wide slots in its window, want about W′ and 3", got[3].Wait, got[3].Global.InWindow)
	}
	// b's log holds its two calls, the 4th at the app-wide slot: the seller
	// slot it took now at first was given back.
	logB := sellerLog(t, th, rdb, b)
	if _, ok := logB[got[2].ID]; len(logB) != 2 || !ok || !logB[got[3].ID].Equal(got[3].At) {
		t.Errorf("seller b's log = %v, want exactly its two slots %s and %s@%v", logB, got[2].ID, got[3].ID, got[3].At)
	}
	if g := globalLog(t, th, rdb); len(g) != 4 {
		t.Errorf("the app-wide log holds %d slots, want 4", len(g))
	}
	for i, r := range got {
		if c, err := th.Check(ctx, r); err != nil || !c.Good || c.GlobalEpoch != r.Global.Epoch {
			t.Errorf("Check(reservation %d) = %+v, %v, want good in both epochs", i, c, err)
		}
	}
	// Release gives back both halves: the next caller gets the app-wide slot.
	if err := th.Release(ctx, got[3]); err != nil {
		t.Fatal(err)
	}
	if _, ok := globalLog(t, th, rdb)[got[3].Global.ID]; ok {
		t.Errorf("the released app-wide slot is still in the app-wide log")
	}
	if _, ok := sellerLog(t, th, rdb, b)[got[3].ID]; ok {
		t.Errorf("the released seller slot is still in the seller's log")
	}
	if c, err := th.Check(ctx, got[3]); err != nil || c.Good {
		t.Errorf("Check of a released reservation = %+v, %v, want not good", c, err)
	}
	if r := reserve(t, th, a); !r.At.Equal(got[3].At) {
		t.Errorf("after the release the next slot is at %v, want the freed %v", r.At, got[3].At)
	}
}

// TestTheSellerLimitMovesTheAppWideSlot: a seller's own limit is the later
// one; the app-wide slot is taken at the seller's, not now.
func TestTheSellerLimitMovesTheAppWideSlot(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client()
	p := Policy{Limit: 1, Window: time.Second, Margin: 20 * time.Millisecond, MaxWait: 5 * time.Second, Global: Global{Limit: 100, Window: time.Second}}
	th := newThrottle(t, rdb, p)
	s := seller("own")
	first, second := reserve(t, th, s), reserve(t, th, s)
	// W′ + 1µs after the first call's latest count, which the seller's log holds
	if want := slotsOf(t, rdb, th.keys(s).log)[first.ID].Add(p.span() + time.Microsecond); !second.At.Equal(want) || !second.Global.At.Equal(want) {
		t.Errorf("second slot %v, app-wide %v; want both at the seller's next slot %v", second.At, second.Global.At, want)
	}
	if g := globalLog(t, th, rdb); len(g) != 2 || !g[second.Global.ID].Equal(second.At) {
		t.Errorf("the app-wide log = %v, want the two calls' slots", g)
	}
}

// TestAnAppWideSlotBeyondMaxWaitHoldsNothing: the app-wide log is full for
// longer than MaxWait; nothing is held in either log and the answer says
// when to ask again.
func TestAnAppWideSlotBeyondMaxWaitHoldsNothing(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client()
	const window = time.Second
	th := newThrottle(t, rdb, Policy{Limit: 10, Window: window, Margin: 20 * time.Millisecond, MaxWait: 300 * time.Millisecond, Global: Global{Limit: 1, Window: window}})
	a, b := seller("full-a"), seller("full-b")
	first := reserve(t, th, a)
	r := reserve(t, th, b)
	if r.Admitted || r.ID != "" || r.Global.ID != "" || r.Capped {
		t.Fatalf("a slot a window ahead with a 300 ms max wait: %+v, want nothing held and not capped", r)
	}
	// The next slot is W′ + reach + 1µs after the first (the log holds latest counts).
	if want := first.Global.At.Add(th.Policy().Global.Window + th.Policy().Margin + th.Policy().SendWithin + time.Microsecond - 300*time.Millisecond); !r.At.Equal(want) {
		t.Errorf("ask again at %v, want %v", r.At, want)
	}
	if n := len(sellerLog(t, th, rdb, b)); n != 0 {
		t.Errorf("seller b's log holds %d slots after a refusal, want 0: the seller slot taken first must be given back", n)
	}
	if g := globalLog(t, th, rdb); len(g) != 1 {
		t.Errorf("the app-wide log holds %v, want only the first call", g)
	}
	w, err := th.Wait(context.Background(), b)
	if err != nil || !w.Admitted || w.At.Before(first.At.Add(window)) {
		t.Errorf("Wait = %+v, %v; want the app-wide slot a window after the first", w, err)
	}
}

// TestBlockGlobalMovesEverySeller: an app-wide 429 blocks the app-wide log
// for every seller; a seller's own 429 blocks only that seller.
func TestBlockGlobalMovesEverySeller(t *testing.T) {
	srv := startRedis(t)
	ctx := context.Background()
	p := Policy{Limit: 100, Window: time.Second, Margin: 20 * time.Millisecond, MaxWait: 5 * time.Second, Global: Global{Limit: 1000, Window: time.Second}}
	th := newThrottle(t, srv.Client(), p)
	a, b := seller("gblock-a"), seller("gblock-b")
	// A block runs from the moment its script runs: a reservation after it
	// waits the block less what has passed since, which the test bounds by
	// its own clock from just before the block (a busy machine may take a
	// while between the two).
	blocked := time.Now()
	if err := th.Block(ctx, a, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if r := reserve(t, th, b); r.Wait > 100*time.Millisecond {
		t.Errorf("seller b waits %v after seller a's 429, want none", r.Wait)
	}
	if r := reserve(t, th, a); r.Wait < 2*time.Second-time.Since(blocked) || !r.Global.At.Equal(r.At) {
		t.Errorf("seller a after its own 429: %+v, want both slots at the block's end, 2 s after it", r)
	}
	blocked = time.Now()
	if err := th.BlockGlobal(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{b, seller("gblock-c")} {
		if r := reserve(t, th, s); r.Wait < time.Second-time.Since(blocked) || !r.At.Equal(r.Global.At) {
			t.Errorf("seller %s after an app-wide 429: %+v, want both slots at the block's end, 1 s after it", s, r)
		}
	}
	if err := th.BlockGlobal(ctx, 0); err == nil || !strings.Contains(err.Error(), "retryAfter") {
		t.Errorf("BlockGlobal(0) = %v, want an error naming retryAfter", err)
	}
	plain := newThrottle(t, srv.Client(), Policy{Limit: 1, Window: time.Second})
	if err := plain.BlockGlobal(ctx, time.Second); err == nil || !strings.Contains(err.Error(), "Global.Limit") {
		t.Errorf("BlockGlobal without an app-wide limit = %v, want an error saying there is none", err)
	}
}

// TestTheAppWideLogHasItsOwnLossProtection: the marker of {g}'s hash slot
// guards the app-wide log as a seller's marker guards its log. With only
// that marker gone (on Cluster: the node holding {g} lost its data), the
// next reservation finds the loss, no app-wide slot starts before the hold,
// and a slot granted before fails Check while its seller half is fine.
func TestTheAppWideLogHasItsOwnLossProtection(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client()
	ctx := context.Background()
	p := Policy{Limit: 10, Window: time.Second, Margin: 20 * time.Millisecond, MaxWait: 5 * time.Second, Global: Global{Limit: 5, Window: 2 * time.Second}}
	th := newThrottle(t, rdb, p)
	before := reserve(t, th, seller("gloss"))
	if before.Lost || before.Global.Lost {
		t.Fatalf("reservation on an initialised Redis = %+v, want nothing lost", before)
	}
	marker := th.global.marker
	if KeySlot(marker) != KeySlot(GlobalLogKey) || marker == th.keys(before.Seller).marker {
		t.Fatalf("the app-wide marker %s is not in the app-wide log's hash slot", marker)
	}
	if err := rdb.Del(ctx, marker, GlobalLogKey).Err(); err != nil {
		t.Fatal(err)
	}
	if c, err := th.Check(ctx, before); err != nil || c.Good || c.GlobalEpoch != "" || c.Epoch != before.Epoch {
		t.Errorf("Check after the app-wide state was lost = %+v, %v; want not good, no app-wide epoch, the seller's epoch unchanged", c, err)
	}
	after := reserve(t, th, seller("gloss"))
	hold := p.LossHold
	if hold == 0 {
		hold = p.Window + 2*p.Margin
	}
	globalHold := hold - p.Window + p.Global.Window
	if !after.Global.Lost || !after.Lost || after.Wait < globalHold-20*time.Millisecond || after.HeldUntil.IsZero() {
		t.Errorf("the reservation after the app-wide loss = %+v; want it Lost, held %v (the app-wide window's hold)", after, globalHold)
	}
	if after.Global.Epoch == before.Global.Epoch {
		t.Errorf("the app-wide epoch did not change after the loss: %s", after.Global.Epoch)
	}
	if c, err := th.Check(ctx, after); err != nil || !c.Good {
		t.Errorf("Check of the new reservation = %+v, %v; want good", c, err)
	}
}

// TestACappedSellerAsksTheAppWideLogFirst: two sellers share an app-wide
// limit of 2, so each may hold one app-wide slot ahead. Seller a's second
// slot ahead is refused (capped) and its seller slot given back; from then
// on a's requests ask the app-wide log first, so the next refusal is one
// script call that takes no seller slot at all.
func TestACappedSellerAsksTheAppWideLogFirst(t *testing.T) {
	srv := startRedis(t)
	hook := &scriptCalls{}
	rdb := srv.Client()
	rdb.AddHook(hook)
	// b counts as waiting for the whole test (the grace), however slow the
	// machine: with one seller waiting a's share would be the whole limit.
	th := newThrottle(t, rdb, Policy{Limit: 10, Window: time.Second, Margin: 20 * time.Millisecond, MaxWait: 5 * time.Second, Global: Global{Limit: 2, Window: time.Second, Grace: time.Minute}})
	a, b := seller("capped-a"), seller("capped-b")
	reserve(t, th, a)
	reserve(t, th, b) // the app-wide window is full now; two sellers wait
	ahead := reserve(t, th, a)
	if !ahead.Admitted || ahead.Wait < 800*time.Millisecond || ahead.Global.Share != 1 || ahead.Global.Waiting != 2 {
		t.Fatalf("a's slot ahead = %+v, want admitted a window ahead with a share of 1 of 2 waiting", ahead)
	}
	before := len(sellerLog(t, th, rdb, a))
	// Another consumer, which has not seen a's app-wide limit bind yet.
	th = newThrottle(t, rdb, th.Policy())
	hook.take()
	capped := reserve(t, th, a)
	if capped.Admitted || !capped.Capped || !capped.At.Equal(ahead.At) {
		t.Fatalf("a's next request = %+v, want capped and told to come back at its held slot %v", capped, ahead.At)
	}
	if got := hook.take(); len(got) != 3 {
		t.Errorf("the first capped request sent %v, want 3 scripts (seller slot, app-wide refusal, give-back)", got)
	}
	again := reserve(t, th, a)
	if again.Admitted || !again.Capped {
		t.Fatalf("a's request after a refusal = %+v, want capped", again)
	}
	if got := hook.take(); len(got) != 1 {
		t.Errorf("a capped request after a capped one sent %v, want 1 script (the app-wide log first)", got)
	}
	if n := len(sellerLog(t, th, rdb, a)); n != before {
		t.Errorf("a's log holds %d slots after two refusals, had %d: a refused request must leave none", n, before)
	}
}

// TestAFreePlaceNowIsNotLostToSlotsBookedAhead: two sellers booked their
// next window's app-wide slots (at their own, later slots) while the
// app-wide window still had room. The log then holds the limit's count of
// slots, but another seller asking now gets the room now, not a place
// behind the booked slots; once no place is left, slots go after them. No
// trailing W′ of the app-wide log ever holds more than the limit.
func TestAFreePlaceNowIsNotLostToSlotsBookedAhead(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client()
	const window = time.Second
	// A seller's next slot is W′ + reach + 1µs after its first, as the
	// app-wide log's is.
	p := Policy{Limit: 1, Window: window, Margin: 20 * time.Millisecond, MaxWait: 5 * window, Global: Global{Limit: 4, Window: window}}
	th := newThrottle(t, rdb, p)
	a, e, b, c := seller("ahead-a"), seller("ahead-e"), seller("ahead-b"), seller("ahead-c")
	a1, a2 := reserve(t, th, a), reserve(t, th, a)
	e1, e2 := reserve(t, th, e), reserve(t, th, e)
	// X1.At is the later of the first call's two slots, a round trip after its seller slot.
	for _, r := range [][2]Reservation{{a1, a2}, {e1, e2}} {
		if r[1].Global.At.Before(r[0].At.Add(p.span() - 100*time.Millisecond)) {
			t.Fatalf("a seller's second slot at %v, want it a window after its first (%v): its own limit is 1", r[1].Global.At, r[0].At)
		}
	}
	// Four slots in the app-wide log, two now and two a window ahead: one
	// more fits now (every trailing W′ then holds at most 4).
	rb := reserve(t, th, b)
	if !rb.Admitted || rb.At.Sub(e1.At) > 200*time.Millisecond {
		t.Errorf("seller b asked with app-wide room now and got %v (%v after the last slot due now), want it now", rb.At, rb.At.Sub(e1.At))
	}
	// Now the trailing W′ ending at a's booked slot would hold 5, unless
	// a first pair was matched again after a slow round trip: its second
	// slot is then booked that much later, which can leave room now.
	rc := reserve(t, th, c)
	rematched := !a1.At.Equal(a1.Global.At) || !e1.At.Equal(e1.Global.At)
	if want := e1.Global.At.Add(p.span()); !rc.Admitted || (rc.At.Before(want) && !rematched) {
		t.Errorf("seller c asked with no app-wide room before the booked slots and got %v, want at or after %v", rc.At, want)
	}
	var slots []time.Time
	for _, at := range globalLog(t, th, rdb) {
		slots = append(slots, at)
	}
	slices.SortFunc(slots, time.Time.Compare)
	if len(slots) != 6 {
		t.Fatalf("the app-wide log holds %d slots, want 6", len(slots))
	}
	for j, end := range slots {
		in := 0
		for _, at := range slots[:j+1] {
			if !at.Before(end.Add(-p.span())) {
				in++
			}
		}
		if in > p.Global.Limit {
			t.Errorf("the trailing W′ ending at slot %d (%v) holds %d app-wide slots, more than %d: %v", j, end, in, p.Global.Limit, slots)
		}
	}
}

// TestSettleMovesTheAppWideLatestCountEarlierOnly: the app-wide log holds
// each call's latest count from its reservation on, as a seller's does. A
// call answered before it moves both entries to the answer less the margin;
// one answered within the margin of its slot moves them to the slot; a call
// without an answer leaves them at the latest count; an answer after the
// latest count (an API slower than the call timeout) never moves them later,
// it blocks the app-wide log until a window after the answer.
func TestSettleMovesTheAppWideLatestCountEarlierOnly(t *testing.T) {
	ctx := context.Background()
	srv := startRedis(t)
	rdb := srv.Client()
	p := Policy{Limit: 10, Window: time.Second, Margin: 20 * time.Millisecond, MaxWait: 5 * time.Second, Global: Global{Limit: 100, Window: time.Second},
		CallTimeout: time.Second}
	th := newThrottle(t, rdb, p)
	reach := th.Policy().reach()
	entries := func() map[string]time.Time { return slotsOf(t, rdb, GlobalLogKey) }
	r := reserve(t, th, seller("settle-g"))
	if got, want := entries()[r.Global.ID], r.Global.At.Add(reach); !got.Equal(want) {
		t.Errorf("the app-wide reservation wrote %v, want its latest count, the slot + %v = %v", got, reach, want)
	}
	answered := r.At.Add(200 * time.Millisecond)
	if err := th.Settle(ctx, r, answered); err != nil {
		t.Fatal(err)
	}
	want := answered.Add(-p.Margin)
	if got := entries()[r.Global.ID]; !got.Equal(want) {
		t.Errorf("the app-wide latest count is at %v after the settle, want a margin before the answer, %v", got, want)
	}
	if got := slotsOf(t, rdb, th.keys(r.Seller).log)[r.ID]; !got.Equal(want) {
		t.Errorf("the seller's latest count is at %v after the settle, want the answer less the margin, %v", got, want)
	}

	quick := reserve(t, th, seller("settle-g-quick"))
	if err := th.Settle(ctx, quick, quick.At.Add(p.Margin/2)); err != nil {
		t.Fatal(err)
	}
	if got := entries()[quick.Global.ID]; !got.Equal(quick.Global.At) {
		t.Errorf("a call answered within the margin left its app-wide entry at %v, want its slot %v", got, quick.Global.At)
	}
	lost := reserve(t, th, seller("settle-g-none"))
	if err := th.Settle(ctx, lost, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got, want := entries()[lost.Global.ID], lost.Global.At.Add(reach); !got.Equal(want) {
		t.Errorf("a call without an answer moved its app-wide entry to %v, want it kept at its latest count %v", got, want)
	}
	slow := reserve(t, th, seller("settle-g-slow"))
	late := slow.At.Add(reach + 300*time.Millisecond)
	if err := th.Settle(ctx, slow, late); err != nil {
		t.Fatal(err)
	}
	if got, want := entries()[slow.Global.ID], slow.Global.At.Add(reach); !got.Equal(want) {
		t.Errorf("an answer after the latest count moved the app-wide entry to %v, want it kept at %v", got, want)
	}
	blocked, err := rdb.Get(ctx, globalKeyPrefix+"block").Int64()
	if want := late.Add(-p.Margin + p.Global.Window + p.Margin + time.Microsecond); err != nil || !time.UnixMicro(blocked).Equal(want) {
		t.Errorf("the app-wide log is blocked until %v (%v), want a window after the answer, %v", time.UnixMicro(blocked), err, want)
	}
}

// TestTheEarlierSlotBoundsTheSend: the seller's slot is due now and the
// app-wide slot is taken a while after it (a round trip, a paused
// consumer). The call is made at the later slot, but each log holds the
// call's latest count as its own slot + reach, so the call may be sent no
// later than SendWithin after the earlier slot: SendBy + CallTimeout is at
// most each log's entry for the call. A pair whose earlier slot began
// SendWithin or more before the later is not given; the slots are matched
// again.
func TestTheEarlierSlotBoundsTheSend(t *testing.T) {
	srv := startRedis(t)
	slow := &slowGlobal{}
	rdb := srv.Client()
	rdb.AddHook(slow)
	// SendWithin 100 ms (half the margin), Tolerance 50 ms (a quarter).
	p := Policy{Limit: 100, Window: time.Second, Margin: 200 * time.Millisecond, CallTimeout: 100 * time.Millisecond, MaxWait: 5 * time.Second,
		Global: Global{Limit: 100, Window: time.Second}}
	th := newThrottle(t, rdb, p)
	p = th.Policy()
	for _, tc := range []struct {
		name  string
		delay time.Duration
		// spread: the least Spread the reservation must say (the delay
		// when the first pair is used; the slots matched again: none).
		spread time.Duration
	}{
		{"at once", 0, 0},
		{"the app-wide slot taken 60 ms after the seller's", 60 * time.Millisecond, 60 * time.Millisecond},
		{"taken 150 ms after, more than SendWithin", 150 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slow.set(tc.delay)
			defer slow.set(0)
			r := reserve(t, th, seller("late"))
			if !r.Admitted {
				t.Fatalf("reservation %+v, want admitted", r)
			}
			if r.Spread < tc.spread || r.Spread > p.SendWithin || !r.SendBy.Equal(r.At.Add(p.SendWithin-r.Spread)) {
				t.Errorf("Spread %v, SendBy %v after At; want a spread of at least %v and at most SendWithin %v, SendBy SendWithin after the earlier slot",
					r.Spread, r.SendBy.Sub(r.At), tc.spread, p.SendWithin)
			}
			latest := r.SendBy.Add(p.CallTimeout)
			for _, e := range []struct{ key, id string }{{th.keys(r.Seller).log, r.ID}, {GlobalLogKey, r.Global.ID}} {
				score, err := rdb.ZScore(context.Background(), e.key, e.id).Result()
				if err != nil {
					t.Fatalf("%s holds no entry %s: %v", e.key, e.id, err)
				}
				if entry := time.UnixMicro(int64(score)); entry.Before(latest) {
					t.Errorf("%s's latest count for the call is %v before what SendBy allows (SendBy + CallTimeout)", e.key, latest.Sub(entry))
				}
			}
		})
	}
}

// slowGlobal delays every command that names the app-wide log, as a slow
// round trip or a paused consumer would between a reservation's two
// scripts.
type slowGlobal struct {
	mu    sync.Mutex
	delay time.Duration
}

func (h *slowGlobal) set(d time.Duration) { h.mu.Lock(); h.delay = d; h.mu.Unlock() }

func (h *slowGlobal) wait(cmds ...redis.Cmder) {
	h.mu.Lock()
	d := h.delay
	h.mu.Unlock()
	for _, c := range cmds {
		for _, a := range c.Args() {
			if a == GlobalLogKey {
				time.Sleep(d)
				return
			}
		}
	}
}

func (h *slowGlobal) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *slowGlobal) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.wait(cmd); return next(ctx, cmd) }
}
func (h *slowGlobal) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.wait(cmds...); return next(ctx, cmds) }
}
