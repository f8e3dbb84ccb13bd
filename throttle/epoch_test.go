package throttle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

// TestASlotDoesNotOutliveItsRedis: every admitted reservation carries the
// epoch of its hash slot; Check accepts it while that state lives and
// refuses it once Redis lost the state (restarted empty on the same port),
// once the slot was given back, or once the slot alone was lost (an
// append-only file that missed its last second keeps the marker, not the slot).
func TestASlotDoesNotOutliveItsRedis(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []Kind{Sliding, Fixed, TokenBucket} {
		t.Run(string(kind), func(t *testing.T) {
			srv := startRedis(t)
			rdb := srv.Client()
			th := newThrottle(t, rdb, Policy{Kind: kind, Limit: 3, Window: 2 * time.Second})
			s := seller("epoch")
			first, second := reserve(t, th, s), reserve(t, th, s)
			if first.Epoch == "" || second.Epoch != first.Epoch || first.Lost || !first.HeldUntil.IsZero() {
				t.Fatalf("reservations %+v and %+v, want one non-empty epoch for both, nothing lost, no hold (the Redis was initialised)", first, second)
			}
			for _, r := range []Reservation{first, second} {
				if c, err := th.Check(ctx, r); err != nil || !c.Good {
					t.Fatalf("Check(%s) = %+v, %v before anything happened, want good", r.ID, c, err)
				}
			}
			if err := th.Release(ctx, second); err != nil {
				t.Fatal(err)
			}
			if c, err := th.Check(ctx, second); err != nil || c.Good {
				t.Errorf("Check of a released slot = %+v, %v, want not good", c, err)
			}
			lost := reserve(t, th, s)
			if err := rdb.ZRem(ctx, th.keys(s).log, lost.ID).Err(); err != nil {
				t.Fatal(err)
			}
			if c, err := th.Check(ctx, lost); err != nil || c.Good {
				t.Errorf("Check of a slot missing from the log = %+v, %v, want not good", c, err)
			}

			srv.Restart() // empty, same port: the client reconnects to a Redis that never granted first
			var c SlotCheck
			var err error
			testwait.For(t, 5*time.Second, "Check answered after the restart", func() bool { c, err = th.Check(ctx, first); return err == nil })
			if c.Good || c.Epoch != "" {
				t.Errorf("Check of a slot granted before the restart = %+v, want not good and no epoch (the state is gone)", c)
			}
			after := reserve(t, th, s)
			if after.Epoch == "" || after.Epoch == first.Epoch || !after.Lost {
				t.Errorf("the reservation after the restart = %+v, before it the epoch was %q: want a new epoch and Lost", after, first.Epoch)
			}
			if c, err := th.Check(ctx, after); err != nil || !c.Good || c.Epoch != after.Epoch {
				t.Errorf("Check of a slot of the new epoch = %+v, %v, want good in epoch %s", c, err, after.Epoch)
			}
			if c, err := th.Check(ctx, first); err != nil || c.Good || c.Epoch != after.Epoch {
				t.Errorf("Check of the old slot once a new epoch began = %+v, %v, want not good, epoch %s", c, err, after.Epoch)
			}
			// The check answers the Redis clock, so a caller can place its slot.
			sent := time.Now()
			c, err = th.Check(ctx, after)
			if err != nil || c.Now.Before(sent.Add(-10*time.Millisecond)) || c.Now.After(time.Now().Add(10*time.Millisecond)) {
				t.Errorf("Check answered the Redis clock %v, want within the round trip [%v, now] (same machine)", c.Now, sent)
			}
			srv.Stop()
			if _, err := th.Check(ctx, after); !errors.Is(err, ErrUnavailable) {
				t.Errorf("Check with Redis down = %v, want ErrUnavailable", err)
			}
		})
	}
}

// TestALossHoldsTheSlotOneWindow: the seller used its whole limit,
// then Redis restarted empty. Whoever asks first finds the loss; from then on
// no slot of the seller starts before LossHold has passed, and the limit
// applies again from there: calls made before the loss, unknown to the new
// Redis, are more than a window before any new slot. Without the hold the
// empty log would admit a whole window at once (100 × 429 at the defaults).
func TestALossHoldsTheSlotOneWindow(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []Kind{Sliding, Fixed, TokenBucket} {
		t.Run(string(kind), func(t *testing.T) {
			srv := startRedis(t)
			rdb := srv.Client()
			p := Policy{Kind: kind, Limit: 3, Window: 2 * time.Second, Margin: 50 * time.Millisecond, MaxWait: 10 * time.Second}
			th := newThrottle(t, rdb, p)
			if th.Policy().LossHold != p.Window+2*p.Margin {
				t.Fatalf("default LossHold %v, want Window + 2 × Margin = %v", th.Policy().LossHold, p.Window+2*p.Margin)
			}
			s := seller("hold")
			for range p.Limit {
				if r := reserve(t, th, s); r.Wait > 100*time.Millisecond {
					t.Fatalf("reservation before the loss waits %v, want now", r.Wait)
				}
			}
			srv.Restart()
			var first Reservation
			testwait.For(t, 5*time.Second, "Reserve answered after the restart", func() bool {
				var err error
				first, err = th.Reserve(ctx, s)
				return err == nil
			})
			if !first.Admitted || !first.Lost || first.HeldUntil.IsZero() {
				t.Fatalf("first reservation after the loss = %+v, want admitted, Lost, with a hold", first)
			}
			found := first.At.Add(-first.Wait) // the Redis clock when the loss was found
			if want := found.Add(th.Policy().LossHold); !first.HeldUntil.Equal(want) || first.At.Before(want) {
				t.Errorf("hold until %v and slot at %v; want both at the moment the loss was found + LossHold = %v", first.HeldUntil, first.At, want)
			}
			// The rest of the window is at the hold too, nobody reports the loss
			// again, and the limit holds from there.
			slots := []time.Time{first.At}
			for range p.Limit {
				r := reserve(t, th, s)
				if r.Lost || !r.HeldUntil.Equal(first.HeldUntil) || r.Epoch != first.Epoch {
					t.Errorf("later reservation %+v, want the same hold and epoch, not Lost again", r)
				}
				slots = append(slots, r.At)
			}
			for i, at := range slots[:p.Limit] {
				if at.Before(first.HeldUntil) {
					t.Errorf("slot %d at %v, before the hold ends (%v)", i, at, first.HeldUntil)
				}
			}
			if kind == Sliding {
				if gap := slots[p.Limit].Sub(slots[0]); gap <= p.Window+p.Margin {
					t.Errorf("slot %d is %v after slot 0, want more than W′ = %v", p.Limit, gap, p.Window+p.Margin)
				}
			}
			if st, err := th.Peek(ctx, s); err != nil || st.NextFree.Before(first.HeldUntil) {
				t.Errorf("Peek = %+v, %v, want the next free slot after the hold (%v)", st, err, first.HeldUntil)
			}
		})
	}
}

// TestAFailoverOrRestartFromDiskIsHeld: a Redis restarted from its
// append-only file keeps the markers but may miss the last second of writes.
// The markers name the redis-server process that wrote them, so the first
// reservation on the new process finds them foreign and holds the hash slot.
// A Sentinel failover to a replica is found the same way (consumer's
// TestSentinelFailover).
func TestAFailoverOrRestartFromDiskIsHeld(t *testing.T) {
	srv := testredis.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	rdb := srv.Client()
	ctx := context.Background()
	if _, err := Initialize(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	th := newThrottle(t, rdb, Policy{Limit: 2, Window: time.Second, Margin: 20 * time.Millisecond})
	s := seller("aof")
	before := reserve(t, th, s)
	srv.Restart() // the same data from the append-only file, a new process
	var after Reservation
	testwait.For(t, 5*time.Second, "Reserve answered after the restart", func() bool {
		var err error
		after, err = th.Reserve(ctx, s)
		return err == nil
	})
	if !after.Lost || after.Epoch == before.Epoch || after.Wait < th.Policy().LossHold-10*time.Millisecond {
		t.Errorf("the reservation after a restart from disk = %+v; want Lost, a new epoch and a wait of LossHold (%v)", after, th.Policy().LossHold)
	}
	mk, err := th.markers.Read(ctx, rdb, "bulkreg:{s:"+s+"}:log")
	if err != nil || len(mk) != 1 || mk[0].Cause != CauseNewServer || mk[0].Since.IsZero() {
		t.Errorf("marker after the restart = %+v, %v; want cause %q with its time", mk, err, CauseNewServer)
	}
	if c, err := th.Check(ctx, before); err != nil || c.Good {
		t.Errorf("Check of the slot granted by the old process = %+v, %v; want not good (its epoch is over)", c, err)
	}
}

// TestOfSellerHashesTheSellersTag: the marker of a seller's keys, hashed
// without building them, is the marker of the slot its keys live in, for
// seller ids a tag ends inside of too.
func TestOfSellerHashesTheSellersTag(t *testing.T) {
	m := NewMarkers()
	for _, seller := range []string{"s-1", "", "x", "seller_0042", "판매자", "a}b", "}", "a{b", "{", "a}}", strings.Repeat("z", 300)} {
		if got, want := m.OfSeller(seller), m.For(sellerPrefix(seller)+"log"); got != want {
			t.Errorf("OfSeller(%q) = %s, want %s (the slot of its log key)", seller, got, want)
		}
	}
}

// TestMarkersLiveInTheirHashSlot: each marker's tag hashes to its slot, by
// Redis's own rule (the CRC16 values below are Redis's), and the tags never
// change: a new tag would make every Redis in use look as if it lost its data.
func TestMarkersLiveInTheirHashSlot(t *testing.T) {
	for key, want := range map[string]int{"foo": 12182, "123456789": 12739, "{user1000}.following": 3443,
		"{user1000}.followers": 3443, "a{}b": KeySlot("a{}b"), "bulkreg:{s:x}:log": KeySlot("s:x")} {
		if got := KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
	m := NewMarkers()
	seen := map[string]bool{}
	for s := range HashSlots {
		k := m.OfSlot(s)
		if KeySlot(k) != s || seen[k] {
			t.Fatalf("marker %s of slot %d is in slot %d (or repeated)", k, s, KeySlot(k))
		}
		seen[k] = true
	}
	for s, want := range map[int]string{0: "bulkreg:{m2kg}:marker", 1: "bulkreg:{mdr}:marker", 16383: "bulkreg:{m6c4}:marker"} {
		if got := m.OfSlot(s); got != want {
			t.Errorf("marker of slot %d is %s, was %s: marker keys must never change", s, got, want)
		}
	}
}

// TestInitialize: a new Redis gets all its markers; initialising again
// changes nothing; a Redis that has only some of them lost data and is
// refused (its sellers must be held, not declared new).
func TestInitialize(t *testing.T) {
	ctx := context.Background()
	srv := testredis.Start(t)
	rdb := srv.Client()
	res, err := Initialize(ctx, rdb)
	if err != nil || res.Created != HashSlots || res.Present != 0 {
		t.Fatalf("Initialize on a new Redis = %+v, %v, want %d created", res, err, HashSlots)
	}
	m := NewMarkers()
	mk, err := m.Read(ctx, rdb, "bulkreg:{s:x}:log")
	if err != nil || !mk[0].Found || mk[0].Cause != CauseInit || !mk[0].HoldUntil.IsZero() || mk[0].Server == "" {
		t.Errorf("marker after Initialize = %+v, %v, want cause init, no hold, the server's run_id", mk, err)
	}
	if res, err := Initialize(ctx, rdb); err != nil || res.Created != 0 || res.Present != HashSlots {
		t.Errorf("Initialize again = %+v, %v, want nothing created", res, err)
	}
	if err := rdb.Del(ctx, m.OfSlot(42)).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = Initialize(ctx, rdb)
	if !errors.Is(err, ErrNotNew) || !strings.Contains(err.Error(), "16383 of its 16384") {
		t.Errorf("Initialize with one marker gone = %v, want ErrNotNew saying 16383 of 16384", err)
	}
	if n := rdb.Exists(ctx, m.OfSlot(42)).Val(); n != 0 {
		t.Errorf("the refused Initialize created the missing marker")
	}
}

// TestLossPerClusterNode: on Redis Cluster the markers live on the node that
// holds their slots, so a master that lost its data (FLUSHALL) holds its own
// sellers and no other, and Initialize refuses it rather than declaring it new.
func TestLossPerClusterNode(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	rdb := c.Client()
	ctx := context.Background()
	th := newThrottle(t, rdb, Policy{Limit: 5, Window: 2 * time.Second})
	sellers := map[string]string{} // seller → address of its master
	slots := map[int]bool{}
	for i := range 12 {
		s := seller("cluster" + string(rune('a'+i)))
		// A loss is reported once per hash slot, to the first reservation
		// that finds it: two sellers sharing a slot (1 run in 250) would
		// see one Lost between them.
		for slots[KeySlot(sellerPrefix(s))] {
			s = seller("cluster" + string(rune('a'+i)))
		}
		slots[KeySlot(sellerPrefix(s))] = true
		r := reserve(t, th, s)
		if chk, err := th.Check(ctx, r); err != nil || !chk.Good || r.Lost {
			t.Fatalf("seller %s: %+v, Check = %+v, %v, want good and nothing lost", s, r, chk, err)
		}
		k := th.keys(s)
		logSlot, err1 := rdb.ClusterKeySlot(ctx, k.log).Result()
		markerSlot, err2 := rdb.ClusterKeySlot(ctx, k.marker).Result()
		if err1 != nil || err2 != nil || logSlot != markerSlot {
			t.Errorf("seller %s: log in slot %d, marker in slot %d (%v, %v): want the same slot", s, logSlot, markerSlot, err1, err2)
		}
		node, err := rdb.MasterForKey(ctx, k.log)
		if err != nil {
			t.Fatal(err)
		}
		sellers[s] = node.Options().Addr
	}
	var flushed string
	for _, addr := range sellers {
		flushed = addr
		break
	}
	node := redis.NewClient(&redis.Options{Addr: flushed})
	defer node.Close()
	if err := node.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var held, free int
	for s, addr := range sellers {
		r := reserve(t, th, s)
		if addr == flushed && held == 0 {
			// Another seller of the same hash slot is held as long, under
			// the same new epoch, and is not told of the loss again.
			mate := seller("mate")
			for KeySlot(sellerPrefix(mate)) != KeySlot(sellerPrefix(s)) {
				mate = seller("mate")
			}
			if m := reserve(t, th, mate); m.Lost || !m.HeldUntil.Equal(r.HeldUntil) || m.Epoch != r.Epoch {
				t.Errorf("seller %s in the hash slot of %s: %+v, want the hold until %v and epoch %s, not Lost again", mate, s, m, r.HeldUntil, r.Epoch)
			}
		}
		switch {
		case addr == flushed && (!r.Lost || r.Wait < th.Policy().LossHold-50*time.Millisecond):
			t.Errorf("seller %s on the flushed master: %+v, want Lost and a wait of LossHold", s, r)
		case addr != flushed && (r.Lost || !r.HeldUntil.IsZero()):
			t.Errorf("seller %s on another master: %+v, want no loss and no hold", s, r)
		case addr == flushed:
			held++
		default:
			free++
		}
	}
	t.Logf("sellers held on the flushed master: %d, free on the others: %d", held, free)
	_, err := Initialize(ctx, rdb)
	if !errors.Is(err, ErrNotNew) || !strings.Contains(err.Error(), flushed) {
		t.Errorf("Initialize with a flushed master = %v, want ErrNotNew naming %s", err, flushed)
	}
}

// TestChecksOfASellerAtOnce: the slots of one seller checked at once (a
// window's rows come due together) each get their own answer: good while it
// holds its slot, not good once given back or granted in another epoch.
func TestChecksOfASellerAtOnce(t *testing.T) {
	ctx := context.Background()
	srv := startRedis(t)
	rdb := srv.Client()
	th := newThrottle(t, rdb, Policy{Limit: 40, Window: 5 * time.Second})
	s := seller("checks-at-once")
	rs := make([]Reservation, 40)
	for i := range rs {
		rs[i] = reserve(t, th, s)
	}
	gone := map[int]bool{3: true, 17: true, 38: true}
	for i := range gone {
		if err := th.Release(ctx, rs[i]); err != nil {
			t.Fatal(err)
		}
	}
	stale := rs[25]
	stale.Epoch = "an-epoch-that-ended"
	rs[25] = stale
	gone[25] = true

	got := make([]SlotCheck, len(rs))
	errs := make([]error, len(rs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range rs {
		wg.Go(func() {
			<-start
			got[i], errs[i] = th.Check(ctx, rs[i])
		})
	}
	close(start)
	wg.Wait()
	for i := range rs {
		if errs[i] != nil {
			t.Fatalf("Check %d: %v", i, errs[i])
		}
		if got[i].Good == gone[i] {
			t.Errorf("Check %d = %+v, want good %v", i, got[i], !gone[i])
		}
		if got[i].Epoch != rs[0].Epoch || got[i].Now.IsZero() {
			t.Errorf("Check %d = %+v, want the current epoch %s and the Redis clock", i, got[i], rs[0].Epoch)
		}
	}
}

// TestReservationsOfASellerAtOnce: rows of one seller asking at once get
// the slots one reservation after the other would: no window of W′ holds
// more than the limit, the first window's slots come at once, the next
// window's right after W′, and past MaxWait nothing is admitted (and nothing
// written).
func TestReservationsOfASellerAtOnce(t *testing.T) {
	ctx := context.Background()
	srv := startRedis(t)
	rdb := srv.Client()
	const limit, rows = 30, 100
	p := Policy{Limit: limit, Window: 2 * time.Second, Margin: 100 * time.Millisecond}
	th := newThrottle(t, rdb, Policy{Limit: limit, Window: p.Window, Margin: p.Margin, MaxWait: 2*p.span() + p.span()/2})
	s := seller("reserves-at-once")
	got := make([]Reservation, rows)
	errs := make([]error, rows)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range rows {
		wg.Go(func() {
			<-start
			got[i], errs[i] = th.Reserve(ctx, s)
		})
	}
	close(start)
	wg.Wait()
	var slots []time.Time
	ids := map[string]bool{}
	for i, r := range got {
		if errs[i] != nil {
			t.Fatalf("Reserve %d: %v", i, errs[i])
		}
		if r.Admitted {
			slots = append(slots, r.At)
			ids[r.ID] = true
		}
	}
	// Three windows fit within MaxWait (now, +W′, +2W′); the fourth does not.
	if len(slots) != 3*limit || len(ids) != len(slots) {
		t.Fatalf("%d slots admitted (%d ids) of %d rows, want %d", len(slots), len(ids), rows, 3*limit)
	}
	if n := rdb.ZCard(ctx, th.keys(s).log).Val(); n != int64(len(slots)) {
		t.Errorf("the log holds %d slots, %d were admitted", n, len(slots))
	}
	slices.SortFunc(slots, time.Time.Compare)
	for i := limit; i < len(slots); i++ {
		if gap := slots[i].Sub(slots[i-limit]); gap <= p.span() {
			t.Fatalf("slots %d and %d are %v apart, want more than W′ = %v", i-limit, i, gap, p.span())
		}
	}
	first := slots[0]
	for w := range 3 {
		lo, hi := slots[w*limit], slots[w*limit+limit-1]
		want := first.Add(time.Duration(w) * p.span())
		if hi.Sub(lo) > 200*time.Millisecond || lo.Sub(want) > 200*time.Millisecond {
			t.Errorf("window %d: slots %v … %v, want them together, right after %v", w, lo, hi, want)
		}
	}
}

// TestABatchOfReservationsReadsTheLogOnce: the ids of one reserve script
// take the slots one script each would have taken (same log, same order),
// and the script counts the log once, not once per id, and tries to fit a
// slot before the booked ones once: slots it adds never make room.
func TestABatchOfReservationsReadsTheLogOnce(t *testing.T) {
	ctx := context.Background()
	srv := startRedis(t)
	rdb := srv.Client()
	const limit, ids = 5, 12
	th := newThrottle(t, rdb, Policy{Limit: limit, Window: 2 * time.Second, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second})
	batch, single := seller("batch"), seller("single")
	// The same full window for both, with a hole: one slot given back.
	for _, s := range []string{batch, single} {
		var rs []Reservation
		for range limit {
			rs = append(rs, reserve(t, th, s))
		}
		if err := th.Release(ctx, rs[1]); err != nil {
			t.Fatal(err)
		}
	}
	names := make([]string, ids)
	for i := range names {
		names[i] = fmt.Sprintf("id-%02d", i)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := th.writeReserves(ctx, batch, names)
	if err != nil {
		t.Fatal(err)
	}
	calls := testredis.CommandCalls(t, rdb)
	var want []Reservation
	for _, id := range names {
		r, err := th.writeReserves(ctx, single, []string{id})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r[0])
	}
	zlog := func(s string) []redis.Z { return rdb.ZRangeWithScores(ctx, th.keys(s).log, 0, -1).Val() }
	gotLog, wantLog := zlog(batch), zlog(single)
	if len(gotLog) != len(wantLog) {
		t.Fatalf("the batch's log holds %d slots, one script per id leaves %d", len(gotLog), len(wantLog))
	}
	// The two sellers' slots lie a few ms apart: compare each slot's offset
	// from its log's first.
	for i := range gotLog {
		g := int64(gotLog[i].Score - gotLog[0].Score)
		w := int64(wantLog[i].Score - wantLog[0].Score)
		if d := g - w; d < -50_000 || d > 50_000 || (i >= limit && gotLog[i].Member != wantLog[i].Member) {
			t.Errorf("slot %d: %s at +%d µs in the batch, %s at +%d µs one by one", i, gotLog[i].Member, g, wantLog[i].Member, w)
		}
	}
	for i := range got {
		if got[i].Admitted != want[i].Admitted || got[i].InWindow != want[i].InWindow {
			t.Errorf("id %d: batch %+v, one by one %+v", i, got[i], want[i])
		}
	}
	if n := calls["zcard"]; n != 1 {
		t.Errorf("a script of %d ids counted the log %d times, want once", ids, n)
	}
	if n := calls["zcount"]; n > ids+1 {
		t.Errorf("a script of %d ids ran ZCOUNT %d times, want one per id (its window) and one fit", ids, n)
	}
}

// TestABurstCountsItsWindowOnce: the ids of one script whose slots share
// one instant (a burst's: the first window's slots are all "now", and each
// later window repeats them W′ + 1µs later) report the slots in their window
// without a ZCOUNT each: the count of the id before, plus one. The counts
// are the ones one script per id reports (TestABatchOfReservationsReadsTheLogOnce).
func TestABurstCountsItsWindowOnce(t *testing.T) {
	ctx := context.Background()
	srv := startRedis(t)
	rdb := srv.Client()
	const limit = 5
	th := newThrottle(t, rdb, Policy{Limit: limit, Window: 2 * time.Second, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second})
	s := seller("burst")
	for window := range 2 {
		names := make([]string, limit)
		for i := range names {
			names[i] = fmt.Sprintf("w%d-id%d", window, i)
		}
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := th.writeReserves(ctx, s, names)
		if err != nil {
			t.Fatal(err)
		}
		calls := testredis.CommandCalls(t, rdb)
		for i, r := range got {
			// Each window fills up: a slot W′ + 1µs after its twin does not
			// share a window with it.
			want := i + 1
			if !r.Admitted || r.InWindow != want || !r.At.Equal(got[0].At) {
				t.Errorf("window %d, id %d: %+v; want admitted at %s with %d in its window", window, i, r, got[0].At, want)
			}
		}
		// One count for the burst's window, and in the second window one
		// more for the fit that earliest tries before appending.
		if n := calls["zcount"]; n > 1+window {
			t.Errorf("window %d: a burst of %d slots at one instant ran ZCOUNT %d times, want at most %d", window, limit, n, 1+window)
		}
	}
}
