package throttle

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

// TestASettledSlotHoldsItsLogUntilItLeavesTheWindow: the API counts a
// seller's three calls 1.9 s late, within the call timeout (2 s); each is
// settled at its answer, after the expiry a log keyed by its slots would
// have had (the newest slot + W′ + 1 s). The key lives until the latest
// counts it holds have left the window, and the next three calls, which the
// API counts at once, come a window after the answers. Both ways a call is
// settled (Settle, and SettleStep in a batch) are judged.
func TestASettledSlotHoldsItsLogUntilItLeavesTheWindow(t *testing.T) {
	p := Policy{Limit: 3, Window: 2 * time.Second, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second, CallTimeout: 2 * time.Second}
	const late = 1900 * time.Millisecond
	for _, via := range []string{"Settle", "SettleStep"} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := startRedis(t).Client()
			th := newThrottle(t, rdb, p)
			j := startJudge(t, sandbox.Options{Limit: p.Limit, Window: p.Window, Latency: late})
			s := seller("late")
			batch := scriptbatch.New()
			var first []Reservation
			for range p.Limit {
				first = append(first, reserve(t, th, s))
			}
			var wg sync.WaitGroup
			for i, r := range first {
				wg.Go(func() {
					status, answered := j.register(t, s, fmt.Sprintf("first-%d", i))
					if status != http.StatusCreated {
						t.Errorf("call %d before any lateness: status %d", i, status)
						return
					}
					if via == "Settle" {
						if err := th.Settle(ctx, r, answered); err != nil {
							t.Error(err)
						}
						return
					}
					st, ok := th.SettleStep(r, answered)
					if !ok {
						t.Errorf("SettleStep has nothing to do for a call answered %v after its slot", answered.Sub(r.At))
						return
					}
					if err := batch.Run(ctx, rdb, st); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			// The API counts the next calls at once, and the next rows ask
			// after the key's old expiry has passed.
			if err := j.sb.SetFaults(0, 0, 0, 0, 0); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Until(first[len(first)-1].At.Add(p.Window + p.Margin + time.Second + 200*time.Millisecond)))
			if n := rdb.Exists(ctx, th.keys(s).log).Val(); n != 1 {
				t.Errorf("the seller's log expired %v after its slots, while they were settled %v later", time.Since(first[0].At).Round(time.Millisecond), late)
			}
			callNext(t, th, j, s, p.Limit)
			j.registered(t, s, 2*p.Limit)
		})
	}
}

// TestALateCallHoldsItsSellerPastALoss: three calls are in flight, to an
// API that counts them 1.5 s late (within the 2 s call timeout), when Redis
// loses its data (FLUSHALL) and with it their latest counts. The next
// reservation finds the loss and holds the hash slot for LossHold plus the
// call timeout from then: the calls in flight are out of the window before
// the first slot after the loss, and the API refuses none of the next three
// calls.
func TestALateCallHoldsItsSellerPastALoss(t *testing.T) {
	ctx := context.Background()
	p := Policy{Limit: 3, Window: 2 * time.Second, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second, CallTimeout: 2 * time.Second}
	srv := startRedis(t)
	rdb := srv.Client()
	th := newThrottle(t, rdb, p)
	j := startJudge(t, sandbox.Options{Limit: p.Limit, Window: p.Window, Latency: 1500 * time.Millisecond})
	s := seller("lost")
	var wg, checked sync.WaitGroup
	for i := range p.Limit {
		r := reserve(t, th, s)
		checked.Add(1)
		wg.Go(func() {
			c, err := th.Check(ctx, r)
			checked.Done()
			if err != nil || !c.Good {
				t.Errorf("Check before the loss = %+v, %v", c, err)
				return
			}
			status, answered := j.register(t, s, fmt.Sprintf("before-%d", i))
			if status != http.StatusCreated {
				t.Errorf("call %d before the loss: status %d", i, status)
				return
			}
			if err := th.Settle(ctx, r, answered); err != nil {
				t.Error(err)
			}
		})
	}
	checked.Wait()
	// The calls have reached the API, which counts them 1.5 s later.
	testwait.For(t, 5*time.Second, "the calls made before the loss reach the API", func() bool { return j.arrived.Load() == int64(p.Limit) })
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := j.sb.SetFaults(0, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	after := make([]Reservation, p.Limit)
	for i := range after {
		after[i] = reserve(t, th, s)
	}
	if !after[0].Lost || after[0].HeldUntil.IsZero() {
		t.Fatalf("the first reservation after FLUSHALL = %+v, want it to find the loss and hold", after[0])
	}
	callEach(t, th, j, "after", after)
	wg.Wait() // the calls made before the loss
	j.registered(t, s, 2*p.Limit)
}

// TestALossHoldCoversTheLatenessThisProcessSaw: once this process has seen
// the API count a call 1.5 s after its slot, a loss of Redis's data holds the
// hash slot that much longer beyond the margin from the moment it is found:
// the calls in flight at the loss may be as late, and may belong to a
// consumer that will not live to settle them.
func TestALossHoldCoversTheLatenessThisProcessSaw(t *testing.T) {
	ctx := context.Background()
	p := Policy{Limit: 3, Window: 2 * time.Second, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second}
	rdb := startRedis(t).Client()
	th := newThrottle(t, rdb, p)
	s := seller("memory")
	r := reserve(t, th, s)
	if err := th.Settle(ctx, r, r.At.Add(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	lost := reserve(t, th, s)
	found := lost.At.Add(-lost.Wait)
	if want := found.Add(th.Policy().LossHold + 1500*time.Millisecond - p.Margin); !lost.Lost || !lost.HeldUntil.Equal(want) {
		t.Errorf("after a call counted 1.5 s late and a loss: %+v; want the hold until the loss was found + LossHold + 1.5 s − margin = %v", lost, want)
	}
}

// TestASettleKeepsEveryLogItMovesAlive: a call counted 2.5 s late is
// settled in the seller's log and in the app-wide log; each key must live
// until the settled slot has left its window (W′ after it), while both
// were set to expire W′ + 1 s after the slot when it was taken.
func TestASettleKeepsEveryLogItMovesAlive(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t).Client()
	p := Policy{Limit: 10, Window: time.Second, Margin: 100 * time.Millisecond, MaxWait: 5 * time.Second,
		Global: Global{Limit: 100, Window: 2 * time.Second}, CallTimeout: 3 * time.Second}
	th := newThrottle(t, rdb, p)
	r := reserve(t, th, seller("alive"))
	answered := r.At.Add(2500 * time.Millisecond)
	if err := th.Settle(ctx, r, answered); err != nil {
		t.Fatal(err)
	}
	settled := answered.Add(-p.Margin)
	for _, k := range []struct {
		key  string
		span time.Duration
	}{{th.keys(r.Seller).log, p.span()}, {GlobalLogKey, p.Global.Window + p.Margin}} {
		ttl, err := rdb.PTTL(ctx, k.key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if left := time.Until(settled.Add(k.span)); ttl < left {
			t.Errorf("%s expires in %v, before its settled slot leaves the window (%v)", k.key, ttl, left)
		}
	}
}

// TestASlotBookedAheadIsAWindowAfterTheLatestCount: with one call a window,
// the next window's slot is booked before the first call is answered: it is
// placed W′ after the first call's latest count (its slot + reach), not W′
// after its slot. The API then counts the first call 1 s late, within the
// call timeout: the booked slot stays good (nothing is taken back, nothing
// needs a check of its window) and is more than a window after the count.
func TestASlotBookedAheadIsAWindowAfterTheLatestCount(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t).Client()
	p := Policy{Limit: 1, Window: 2 * time.Second, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second, CallTimeout: 1500 * time.Millisecond}
	th := newThrottle(t, rdb, p)
	s := seller("spike")
	first, booked := reserve(t, th, s), reserve(t, th, s)
	if want := first.At.Add(th.Policy().reach() + p.span() + time.Microsecond); !booked.At.Equal(want) {
		t.Fatalf("the second slot of a full window is at %v, want W′ + 1µs after the first call's latest count (%v)", booked.At, want)
	}
	counted := first.At.Add(time.Second) // answered then: counted then at the latest
	if err := th.Settle(ctx, first, counted); err != nil {
		t.Fatal(err)
	}
	if c, err := th.Check(ctx, booked); err != nil || !c.Good {
		t.Errorf("Check of the slot booked ahead = %+v, %v; want it good", c, err)
	}
	if booked.At.Sub(counted) <= p.Window {
		t.Errorf("the booked slot is %v after the API counted the first call, want more than a window (%v)", booked.At.Sub(counted), p.Window)
	}
}

// TestAFixedWindowCountsALateCallInTheWindowItWasCountedIn: two calls
// slotted early in a fixed window are counted by the API in the next one
// (1 s windows, the API 0.9 s late). Each later window the call may have been
// counted in must then hold a place for it: before, the next two rows were
// given that next window at once and the API refused them (2 × 429).
func TestAFixedWindowCountsALateCallInTheWindowItWasCountedIn(t *testing.T) {
	rdb := startRedis(t).Client()
	p := Policy{Kind: Fixed, Limit: 2, Window: time.Second, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second}
	th := newThrottle(t, rdb, p)
	j := startJudge(t, sandbox.Options{Policy: sandbox.PolicyFixed, Limit: p.Limit, Window: p.Window})
	s := seller("fixed-late")
	awaitWindowAhead(t, rdb, p.Window, 800*time.Millisecond)
	var first []Reservation
	for range p.Limit {
		first = append(first, reserve(t, th, s))
	}
	// the API counts both calls 100 ms into the next window
	w := p.Window.Microseconds()
	next := time.UnixMicro((first[0].At.UnixMicro()/w + 1) * w)
	if err := j.sb.SetFaults(0, 0, 0, time.Until(next.Add(100*time.Millisecond)), 0); err != nil {
		t.Fatal(err)
	}
	callEach(t, th, j, "first", first)
	if err := j.sb.SetFaults(0, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	callNext(t, th, j, s, p.Limit)
	j.registered(t, s, 2*p.Limit)
}

// TestATokenBucketCountsALateCallWhereItWasCounted: with a bucket of one
// token, the API counts a call 300 ms after its slot; the next slot taken
// after its answer must be an interval after that count, not after the slot
// (before: 50 ms after the count, a 429).
func TestATokenBucketCountsALateCallWhereItWasCounted(t *testing.T) {
	rdb := startRedis(t).Client()
	p := Policy{Kind: TokenBucket, Limit: 4, Window: time.Second, Burst: 1, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second}
	th := newThrottle(t, rdb, p)
	j := startJudge(t, sandbox.Options{Policy: sandbox.PolicyTokenBucket, Limit: p.Limit, Window: p.Window, Burst: p.Burst, Latency: 300 * time.Millisecond})
	s := seller("tb-late")
	callAt(t, th, j, reserve(t, th, s), "first")
	if err := j.sb.SetFaults(0, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	callAt(t, th, j, reserve(t, th, s), "next")
	j.registered(t, s, 2)
}

// TestATokenBucketCoversTheLatestCounts: with a bucket of one token
// refilled every 500 ms and calls counted up to 600 ms after they are sent,
// three slots booked at once are each an interval after the one before's
// latest count, so whichever instant in its reach the API counts a call at
// (here the first one 500 ms late), the next conforms: nothing needs taking
// back. Once the calls are answered, their settles bring tat back to the
// answers: the next slot is an interval after the last answer, not after
// its latest count.
func TestATokenBucketCoversTheLatestCounts(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t).Client()
	p := Policy{Kind: TokenBucket, Limit: 4, Window: 2 * time.Second, Burst: 1, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second,
		CallTimeout: 600 * time.Millisecond}
	th := newThrottle(t, rdb, p)
	reach := th.Policy().reach()
	s := seller("tb-spike")
	first, second, third := reserve(t, th, s), reserve(t, th, s), reserve(t, th, s)
	if err := conformsToBucket([]time.Time{first.At.Add(reach), second.At, second.At.Add(reach), third.At}, p); err != nil {
		t.Errorf("slots booked at once, each call counted as late as it may be: %v", err)
	}
	answered := first.At.Add(500 * time.Millisecond)
	if err := th.Settle(ctx, first, answered); err != nil {
		t.Fatal(err)
	}
	for i, r := range []Reservation{second, third} {
		if c, err := th.Check(ctx, r); err != nil || !c.Good {
			t.Errorf("Check of slot %d after the late count = %+v, %v; want it good", i+2, c, err)
		}
	}
	for _, r := range []Reservation{second, third} {
		if err := th.Settle(ctx, r, r.At.Add(10*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	next := reserve(t, th, s)
	interval, _ := p.gcra()
	want := third.At.Add(10*time.Millisecond + time.Duration(interval)*time.Microsecond)
	if d := next.At.Sub(want); d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("after the answers the next slot is %v, want an interval after the last answer (%v)", next.At, want)
	}
}

// TestALossHoldCoversTheCallsOfAProcessThatDied: the calls made before Redis
// lost its data are counted 1.5 s late by the API, and the consumer that
// made them died before their answers (nothing settles them), so the process
// that finds the loss has seen no lateness: only the call timeout every
// consumer allows (Policy.CallTimeout) tells it how late a call in flight
// may still be counted. Before CallTimeout, the three calls after the hold
// were refused (3 × 429).
func TestALossHoldCoversTheCallsOfAProcessThatDied(t *testing.T) {
	ctx := context.Background()
	p := Policy{Limit: 3, Window: 2 * time.Second, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second, CallTimeout: 2 * time.Second}
	srv := startRedis(t)
	rdb := srv.Client()
	dead := newThrottle(t, rdb, p)
	j := startJudge(t, sandbox.Options{Limit: p.Limit, Window: p.Window, Latency: 1500 * time.Millisecond})
	s := seller("orphan")
	var wg, checked sync.WaitGroup
	for i := range p.Limit {
		r := reserve(t, dead, s)
		checked.Add(1)
		wg.Go(func() {
			c, err := dead.Check(ctx, r)
			checked.Done()
			if err != nil || !c.Good {
				t.Errorf("Check before the loss = %+v, %v", c, err)
				return
			}
			// The process dies with the call in flight: its answer is never settled.
			if status, _ := j.register(t, s, fmt.Sprintf("before-%d", i)); status != http.StatusCreated {
				t.Errorf("call %d before the loss: status %d", i, status)
			}
		})
	}
	checked.Wait()
	testwait.For(t, 5*time.Second, "the calls made before the loss reach the API", func() bool { return j.arrived.Load() == int64(p.Limit) })
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := j.sb.SetFaults(0, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	fresh := newThrottle(t, rdb, p)
	after := make([]Reservation, p.Limit)
	for i := range after {
		after[i] = reserve(t, fresh, s)
	}
	if !after[0].Lost || after[0].HeldUntil.IsZero() {
		t.Fatalf("the first reservation after FLUSHALL = %+v, want it to find the loss and hold", after[0])
	}
	if found, want := after[0].At.Add(-after[0].Wait), fresh.Policy().LossHold+p.CallTimeout; after[0].HeldUntil.Sub(found) != want {
		t.Errorf("held for %v after the loss was found, want LossHold + CallTimeout = %v", after[0].HeldUntil.Sub(found), want)
	}
	callEach(t, fresh, j, "after", after)
	wg.Wait() // the calls made before the loss
	j.registered(t, s, 2*p.Limit)
}

// TestAnAppWideGiveBackFreesItsSellersShare: a's call is counted late, so
// its settle gives back b's app-wide slot booked ahead, which now fills a
// window over the app-wide limit. That slot was b's whole share of the
// slots ahead (two sellers wait, a limit of 2): b's next ask must be
// admitted, not capped and sent back to a slot that no longer exists. Before
// settle.lua recorded its app-wide give-backs (bulkreg:{g}:given), b's held
// set kept the slot and b was capped until its time.
func TestAnAppWideGiveBackFreesItsSellersShare(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t).Client()
	p := Policy{Limit: 10, Window: time.Second, Margin: 20 * time.Millisecond, MaxWait: 5 * time.Second, Global: Global{Limit: 2, Window: time.Second}}
	th := newThrottle(t, rdb, p)
	a, b := seller("given-a"), seller("given-b")
	a1, _ := reserve(t, th, a), reserve(t, th, b)
	// b2 is booked a window after a1, a2 a window after b1.
	b2, a2 := reserve(t, th, b), reserve(t, th, a)
	if !a2.Admitted || !b2.Admitted || b2.Global.ID == "" {
		t.Fatalf("the slots a window ahead: a %+v, b %+v; want both admitted", a2, b2)
	}
	if err := th.Settle(ctx, a1, a1.At.Add(500*time.Millisecond+p.Margin)); err != nil {
		t.Fatal(err)
	}
	if _, ok := globalLog(t, rdb)[b2.Global.ID]; ok {
		t.Fatalf("b's app-wide slot ahead is still in the log after a's call was counted 0.5 s late: %v", globalLog(t, rdb))
	}
	next := reserve(t, th, b)
	if !next.Admitted || next.Capped {
		t.Errorf("b's ask after its slot ahead was given back = %+v, want admitted (its share is free)", next)
	}
	if err := rdb.ZScore(ctx, globalHeldKey(b), b2.Global.ID).Err(); err != redis.Nil {
		t.Errorf("b's held set still counts the slot given back (%v)", err)
	}
}
