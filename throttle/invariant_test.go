package throttle

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

// TestADeadCallersLogIsAlreadySafe: a consumer reserves a window of calls
// and sends them to an API that, slowed down, counts them 1.5 s late (within
// the 2 s call timeout), and dies before any answer: no settle ever comes.
// The partition's next owner (another Throttle on the same Redis) calls at
// once, to an API that is fast again. Its calls must come a window after
// the dead calls' latest counts, judged by the API's own count (the
// sandbox's audit): a log that kept the dead calls at their slots would
// send the next calls W′ after those, while the late counts are still in
// the API's window, and the API would refuse them all.
func TestADeadCallersLogIsAlreadySafe(t *testing.T) {
	p := Policy{Limit: 3, Window: 2 * time.Second, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second, CallTimeout: 2 * time.Second}
	rdb := startRedis(t).Client()
	j := startJudge(t, sandbox.Options{Limit: p.Limit, Window: p.Window, Latency: 1500 * time.Millisecond})
	s := seller("dead")
	dead := newThrottle(t, rdb, p)
	var wg sync.WaitGroup
	for i := range p.Limit {
		r := reserve(t, dead, s)
		wg.Go(func() {
			time.Sleep(time.Until(r.At))
			if status, _ := j.register(t, s, fmt.Sprintf("dead-%d", i)); status != http.StatusCreated {
				t.Errorf("the dead consumer's call %d: status %d", i, status)
			}
			// the consumer is dead: its answer is never settled
		})
	}
	testwait.For(t, 5*time.Second, "the dead consumer's calls reach the API", func() bool { return j.arrived.Load() == int64(p.Limit) })
	if err := j.sb.SetFaults(0, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	next := newThrottle(t, rdb, p)
	callNext(t, next, j, s, p.Limit)
	wg.Wait()
	j.registered(t, s, 2*p.Limit)
}

// TestADeadCallersAppWideLogIsAlreadySafe: the app-wide log's version of
// TestADeadCallersLogIsAlreadySafe. A consumer takes the app-wide window's
// three slots for three sellers (each far from its own limit) and sends the
// calls to an API that, slowed down, counts them 1.5 s late; it dies before
// any answer. The next owner calls at once for three other sellers, whose
// own logs are empty: only the app-wide log can place them, and it must
// place them a window after the dead calls' latest counts, judged by the
// API's app-wide count. A log that kept the dead calls at their slots would
// send the next calls into the API's refusals for its app-wide limit.
func TestADeadCallersAppWideLogIsAlreadySafe(t *testing.T) {
	p := Policy{Limit: 10, Window: 2 * time.Second, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second, CallTimeout: 2 * time.Second,
		Global: Global{Limit: 3, Window: 2 * time.Second}}
	rdb := startRedis(t).Client()
	j := startJudge(t, sandbox.Options{Limit: p.Limit, Window: p.Window, GlobalLimit: p.Global.Limit, GlobalWindow: p.Global.Window,
		Latency: 1500 * time.Millisecond})
	dead := newThrottle(t, rdb, p)
	var wg sync.WaitGroup
	for i := range p.Global.Limit {
		r := reserve(t, dead, seller(fmt.Sprintf("dead%d", i)))
		wg.Go(func() {
			time.Sleep(time.Until(r.At))
			if status, _ := j.register(t, r.Seller, fmt.Sprintf("dead-%d", i)); status != http.StatusCreated {
				t.Errorf("the dead consumer's call %d: status %d", i, status)
			}
			// the consumer is dead: its answer is never settled
		})
	}
	testwait.For(t, 5*time.Second, "the dead consumer's calls reach the API", func() bool { return j.arrived.Load() == int64(p.Global.Limit) })
	if err := j.sb.SetFaults(0, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	next := newThrottle(t, rdb, p)
	var others []string
	for i := range p.Global.Limit {
		s := seller(fmt.Sprintf("next%d", i))
		others = append(others, s)
		wg.Go(func() { callAt(t, next, j, reserve(t, next, s), fmt.Sprintf("next-%d", i)) })
	}
	wg.Wait()
	app := j.sb.Audit().App
	if app == nil || app.RateLimited != 0 || app.Exceeded || app.Accepted != 2*p.Global.Limit {
		t.Errorf("the API's app-wide count: %+v; want %d accepted, no 429, never over its limit", app, 2*p.Global.Limit)
	}
	for _, s := range others {
		j.registered(t, s, 1)
	}
}

// TestALatestCountIsInTheLogBeforeTheCall: what a reservation writes is the
// call's latest possible count, SendWithin + CallTimeout after its slot, and
// SendBy tells its caller the last instant it may send; a consumer killed
// right after its reservation leaves exactly that in Redis.
func TestALatestCountIsInTheLogBeforeTheCall(t *testing.T) {
	p := Policy{Limit: 2, Window: time.Second, Margin: 100 * time.Millisecond, MaxWait: 5 * time.Second,
		SendWithin: 30 * time.Millisecond, CallTimeout: 700 * time.Millisecond}
	rdb := startRedis(t).Client()
	th := newThrottle(t, rdb, p)
	s := seller("latest")
	r := reserve(t, th, s)
	if want := r.At.Add(p.SendWithin); !r.SendBy.Equal(want) {
		t.Errorf("SendBy = %v, want the slot + SendWithin = %v", r.SendBy, want)
	}
	got := slotsOf(t, rdb, th.keys(s).log)[r.ID]
	if want := r.At.Add(p.SendWithin + p.CallTimeout); !got.Equal(want) {
		t.Errorf("the log holds %v for the call, want its latest count %v", got, want)
	}
	// The log's key outlives the latest count by the window: the count
	// still matters until then.
	ttl, err := rdb.PTTL(context.Background(), th.keys(s).log).Result()
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(got.Add(p.span())); ttl < left {
		t.Errorf("the log expires in %v, before the latest count leaves the window (%v)", ttl, left)
	}
}

// TestEveryPolicyCoversADeadCallersLatestCounts: each policy's version of
// the invariant, judged by an API that counts that way. A consumer sends its
// calls to an API that counts them late (within the call timeout) and dies
// before any answer; the next owner calls at once, to an API that is fast
// again. Under a fixed window the dead calls, slotted early in a window,
// are counted in the next one: they took a place in every window up to
// their latest counts, so the next calls go to the window after. Under a
// bucket of one token the dead call is counted 400 ms after its slot: tat
// covered its latest count, so the next call comes an interval after that.
// A log that knew only the slots would have the API refuse the next calls.
func TestEveryPolicyCoversADeadCallersLatestCounts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     Policy
		judge sandbox.Options
		calls int
		late  func(first Reservation) time.Duration // the API's latency for the dead calls
	}{
		{"fixed", Policy{Kind: Fixed, Limit: 2, Window: time.Second, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second, CallTimeout: time.Second},
			sandbox.Options{Policy: sandbox.PolicyFixed, Limit: 2, Window: time.Second}, 2,
			func(first Reservation) time.Duration {
				// 100 ms into the next aligned window
				w := time.Second.Microseconds()
				return time.Until(time.UnixMicro((first.At.UnixMicro()/w + 1) * w).Add(100 * time.Millisecond))
			}},
		{"token bucket", Policy{Kind: TokenBucket, Limit: 4, Window: 2 * time.Second, Burst: 1, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second, CallTimeout: time.Second},
			sandbox.Options{Policy: sandbox.PolicyTokenBucket, Limit: 4, Window: 2 * time.Second, Burst: 1}, 1,
			func(Reservation) time.Duration { return 400 * time.Millisecond }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb := startRedis(t).Client()
			j := startJudge(t, tc.judge)
			s := seller("dead-" + string(tc.p.Kind))
			dead := newThrottle(t, rdb, tc.p)
			if tc.p.Kind == Fixed {
				awaitWindowAhead(t, rdb, tc.p.Window, 800*time.Millisecond)
			}
			var first []Reservation
			for range tc.calls {
				first = append(first, reserve(t, dead, s))
			}
			if err := j.sb.SetFaults(0, 0, 0, tc.late(first[0]), 0); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for i, r := range first {
				wg.Go(func() {
					time.Sleep(time.Until(r.At))
					if status, _ := j.register(t, s, fmt.Sprintf("dead-%d", i)); status != http.StatusCreated {
						t.Errorf("the dead consumer's call %d: status %d", i, status)
					}
				})
			}
			testwait.For(t, 5*time.Second, "the dead consumer's calls reach the API", func() bool { return j.arrived.Load() == int64(tc.calls) })
			if err := j.sb.SetFaults(0, 0, 0, 0, 0); err != nil {
				t.Fatal(err)
			}
			callNext(t, newThrottle(t, rdb, tc.p), j, s, tc.calls)
			wg.Wait()
			j.registered(t, s, 2*tc.calls)
		})
	}
}

// TestASettleAfterTheWindowOfALostEntryIsANoOp: Redis lost the log (it
// restarted empty) while a call's answer waited to be written, and the
// write comes more than a window after the answer, when Redis is back. The
// call has left the API's window: the settle has nothing to block, and it
// must not fail (the consumer retries a failed write until its drain ends,
// and the rest of the batch, the call's compliance record, with it).
func TestASettleAfterTheWindowOfALostEntryIsANoOp(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t).Client()
	for _, p := range []Policy{
		{Limit: 2, Window: 100 * time.Millisecond, Margin: 10 * time.Millisecond, MaxWait: time.Second, CallTimeout: 200 * time.Millisecond},
		{Kind: Fixed, Limit: 2, Window: 100 * time.Millisecond, Margin: 10 * time.Millisecond, MaxWait: time.Second, CallTimeout: 200 * time.Millisecond},
		{Kind: TokenBucket, Limit: 2, Window: 100 * time.Millisecond, Margin: 10 * time.Millisecond, MaxWait: time.Second, CallTimeout: 200 * time.Millisecond},
	} {
		th := newThrottle(t, rdb, p)
		s := seller("old-" + string(th.Policy().Kind))
		r := reserve(t, th, s)
		if err := rdb.Del(ctx, th.keys(s).log).Err(); err != nil {
			t.Fatal(err)
		}
		answered := r.At.Add(5 * time.Millisecond)
		time.Sleep(time.Until(answered.Add(1500 * time.Millisecond))) // long gone from the window
		st, ok := settleStep(th, r, answered)
		if ok {
			if err := scriptbatch.New().Run(ctx, rdb, st); err != nil {
				t.Errorf("%s: the settle of a lost entry answered %v ago: %v", th.Policy().Kind, time.Since(answered).Round(time.Millisecond), err)
			}
		}
		if err := th.Settle(ctx, r, answered); err != nil {
			t.Errorf("%s: Settle of a lost entry answered %v ago: %v", th.Policy().Kind, time.Since(answered).Round(time.Millisecond), err)
		}
		if n := rdb.Exists(ctx, th.keys(s).block).Val(); n != 0 {
			t.Errorf("%s: the seller is blocked for a call that left the window", th.Policy().Kind)
		}
	}
}

// TestABatchsSettlesOfOneLogAreOneZADD: the settles of a seller's calls
// written in one batch (SettleStep) move every latest count earlier with one
// ZADD, and still block the log for a call whose entry the log no longer
// holds.
func TestABatchsSettlesOfOneLogAreOneZADD(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t).Client()
	p := Policy{Limit: 5, Window: 2 * time.Second, Margin: 100 * time.Millisecond, MaxWait: 10 * time.Second, CallTimeout: 2 * time.Second}
	th := newThrottle(t, rdb, p)
	s := seller("joined")
	var rs []Reservation
	for range 4 {
		rs = append(rs, reserve(t, th, s))
	}
	var calls []Settled
	for i, r := range rs[:3] {
		calls = append(calls, Settled{Res: r, Answer: r.At.Add(time.Duration(200*(i+1)) * time.Millisecond)})
	}
	calls = append(calls, Settled{Res: rs[3]}) // no answer: nothing to move
	steps := th.SettleStep(s, calls)
	if len(steps) != 1 || !calls[0].Done || !calls[2].Done || calls[3].Done {
		t.Fatalf("SettleStep of a sliding log: %d steps, done %v %v %v %v; want one step, done for the three answered calls", len(steps), calls[0].Done, calls[1].Done, calls[2].Done, calls[3].Done)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := scriptbatch.New().Run(ctx, rdb, steps...); err != nil {
		t.Fatal(err)
	}
	if n := commandCalls(t, rdb, "zadd"); n != 1 {
		t.Errorf("the batch's three settles ran %d ZADDs, want 1", n)
	}
	log := slotsOf(t, rdb, th.keys(s).log)
	for i, r := range rs[:3] {
		if want := r.At.Add(time.Duration(200*(i+1))*time.Millisecond - p.Margin); !log[r.ID].Equal(want) {
			t.Errorf("call %d's entry is at %v, want its answer less the margin, %v", i, log[r.ID], want)
		}
	}
	if want := rs[3].At.Add(th.Policy().reach()); !log[rs[3].ID].Equal(want) {
		t.Errorf("the unsettled call's entry is at %v, want its latest count %v", log[rs[3].ID], want)
	}

	// One of the batch's entries lost: the others move, the log is blocked
	// a window after the lost one's answer.
	lost := reserve(t, th, seller("joined-lost"))
	kept := reserve(t, th, lost.Seller)
	if err := rdb.ZRem(ctx, th.keys(lost.Seller).log, lost.ID).Err(); err != nil {
		t.Fatal(err)
	}
	a, b := lost.At.Add(300*time.Millisecond), kept.At.Add(300*time.Millisecond)
	if err := scriptbatch.New().Run(ctx, rdb, th.SettleStep(lost.Seller, []Settled{{Res: lost, Answer: a}, {Res: kept, Answer: b}})...); err != nil {
		t.Fatal(err)
	}
	if got, want := slotsOf(t, rdb, th.keys(kept.Seller).log)[kept.ID], b.Add(-p.Margin); !got.Equal(want) {
		t.Errorf("the kept entry is at %v, want %v", got, want)
	}
	blocked, err := rdb.Get(ctx, th.keys(lost.Seller).block).Int64()
	if want := a.Add(p.Window + time.Microsecond); err != nil || !time.UnixMicro(blocked).Equal(want) {
		t.Errorf("the log is blocked until %v (%v), want a window after the lost call's answer, %v", time.UnixMicro(blocked), err, want)
	}
}

// settleStep is SettleStep for one call.
func settleStep(th *Throttle, r Reservation, answer time.Time) (scriptbatch.Step, bool) {
	steps := th.SettleStep(r.Seller, []Settled{{Res: r, Answer: answer}})
	if len(steps) == 0 {
		return scriptbatch.Step{}, false
	}
	return steps[0], true
}

// commandCalls is how often Redis ran cmd since the last CONFIG RESETSTAT.
func commandCalls(t *testing.T, rdb *redis.Client, cmd string) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}
