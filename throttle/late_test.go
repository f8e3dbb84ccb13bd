package throttle

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

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
					st, ok := settleStep(th, r, answered)
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
// counted in must then hold a place for it, or the next two rows would be
// given that next window at once and the API would refuse them (2 × 429).
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
// (50 ms after the count would be a 429).
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

// TestATokenBucketBooksAfterTheAnswers: with a bucket of one token refilled
// every 600 ms and calls counted up to 650 ms after their slots, a second
// slot asked for before the first call is answered would go after the
// first's latest count, more than an interval later than after its answer,
// and no settle would bring it earlier: it is not taken, and the answer says
// to ask again an interval after the first slot. Once the first call is
// answered (counted 500 ms late), the next slot is an interval after the
// answer. A call that never gets an answer holds the next slot until its
// latest count has passed, and the slot then is an interval after it.
func TestATokenBucketBooksAfterTheAnswers(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t).Client()
	p := Policy{Kind: TokenBucket, Limit: 4, Window: 2 * time.Second, Burst: 1, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second,
		CallTimeout: 600 * time.Millisecond}
	th := newThrottle(t, rdb, p)
	reach := th.Policy().reach()
	iv, _ := p.gcra()
	interval := time.Duration(iv) * time.Microsecond
	s := seller("tb-answers")
	first, second := reserve(t, th, s), reserve(t, th, s)
	if !first.Admitted || first.Room != 0 {
		t.Fatalf("the first slot of a full bucket = %+v, want it admitted with no room for another before its answer", first)
	}
	if second.Admitted || !second.At.Equal(first.At.Add(interval)) {
		t.Errorf("a slot asked for before the first call's answer = %+v, want it refused and told to ask again at %v", second, first.At.Add(interval))
	}
	if n := rdb.ZCard(ctx, th.keys(s).log).Val(); n != 1 {
		t.Errorf("the log holds %d entries after the refusal, want the first call's only", n)
	}
	answered := first.At.Add(500 * time.Millisecond)
	time.Sleep(time.Until(answered))
	if err := th.Settle(ctx, first, answered); err != nil {
		t.Fatal(err)
	}
	next := reserve(t, th, s)
	if want := answered.Add(interval); !next.Admitted || next.At.Sub(want).Abs() > time.Millisecond {
		t.Errorf("after the answer the next slot is %+v, want an interval after the answer (%v)", next, want)
	}
	if err := conformsToBucket([]time.Time{answered, next.At}, p); err != nil {
		t.Error(err)
	}

	u := seller("tb-unanswered")
	lone := reserve(t, th, u)
	after, err := th.Wait(ctx, u) // no answer ever comes for lone
	if err != nil {
		t.Fatal(err)
	}
	if want := lone.At.Add(reach + interval); after.At.Before(want) || after.At.After(want.Add(interval+100*time.Millisecond)) {
		t.Errorf("the slot after a call without an answer is %v, want an interval after its latest count (%v), at most an interval more", after.At, want)
	}
}

// TestALossHoldCoversTheCallsOfAProcessThatDied: the calls made before Redis
// lost its data are counted 1.5 s late by the API, and the consumer that
// made them died before their answers (nothing settles them), so the process
// that finds the loss has seen no lateness: only the call timeout every
// consumer allows (Policy.CallTimeout) tells it how late a call in flight
// may still be counted. Without CallTimeout, the three calls after the hold
// would be refused (3 × 429).
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

// TestATokenBucketKeepsADrainedBucketPastTheWindow: a stream of calls at a
// bucket's full rate, each answered at once and settled, for longer than
// W′. Its burst is spent by the first calls and never comes back while the
// stream goes on; the calls whose entries have left the log (older than
// W′) are what drained it. A settle's replay of the log must start from the
// bucket they left, not from a full one, or the call after the first one
// left the log would come a burst early, and the API's bucket (judged here
// with each call counted anywhere within the margin of its slot) would
// refuse it.
func TestATokenBucketKeepsADrainedBucketPastTheWindow(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t).Client()
	p := Policy{Kind: TokenBucket, Limit: 8, Window: 2 * time.Second, Burst: 2, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second,
		CallTimeout: time.Second}
	th := newThrottle(t, rdb, p)
	s := seller("tb-stream")
	var slots []time.Time
	end := time.Now().Add(p.span() + 1500*time.Millisecond)
	for time.Now().Before(end) {
		r, err := th.Wait(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		slots = append(slots, r.At)
		answered := r.At.Add(5 * time.Millisecond)
		time.Sleep(time.Until(answered))
		if err := th.Settle(ctx, r, answered); err != nil {
			t.Fatal(err)
		}
	}
	if len(slots) < 12 {
		t.Fatalf("%d calls in %v, want the bucket's rate (4 a second)", len(slots), p.span()+1500*time.Millisecond)
	}
	if err := conformsToBucket(slots, p); err != nil {
		t.Errorf("a stream at the full rate past W′: %v; slots %v", err, slots)
	}
}
