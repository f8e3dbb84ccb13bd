package compliance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/throttle"
)

func TestMaxInWindow(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, base.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		times []time.Time
		want  int
	}{
		{"empty", nil, 0},
		{"one", at(0), 1},
		{"exactly a window apart are separate windows", at(0, 1000), 1},
		{"just inside one window", at(0, 999), 2},
		{"burst then spread", at(0, 1, 2, 500, 1001, 1002, 1003), 4},
		{"sliding catches the middle", at(0, 600, 700, 800, 1500), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MaxInWindow(tc.times, time.Second); got != tc.want {
				t.Fatalf("MaxInWindow = %d, want %d", got, tc.want)
			}
		})
	}
}

// newRecorder starts a redis-server with a recorder keeping retention of
// history, and answers Redis's clock now.
func newRecorder(t *testing.T, retention time.Duration) (*redis.Client, *Recorder, time.Time) {
	t.Helper()
	rdb := testredis.Start(t).Client()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return rdb, NewRecorder(rdb, retention), now
}

func TestRecordAndReport(t *testing.T) {
	ctx := context.Background()
	_, r, now := newRecorder(t, time.Hour)
	// seller a: 3 accepted inside 1 s, then a 429, a replay and a 503, then one
	// accepted 2 s later; with limit 2 per second it exceeded.
	start := now.Add(-10 * time.Second)
	calls := []Call{
		{At: start, Status: 201, Class: "registered", Key: "u:1"},
		{At: start.Add(100 * time.Millisecond), Status: 201, Class: "registered", Key: "u:2"},
		{At: start.Add(900 * time.Millisecond), Status: 201, Class: "registered", Key: "u:3"},
		{At: start.Add(950 * time.Millisecond), Status: 429, Class: "rate-limited", Key: "u:4"},
		{At: start.Add(960 * time.Millisecond), Status: 200, Class: "replayed", Key: "u:1"},
		{At: start.Add(970 * time.Millisecond), Status: 503, Class: "transient", Key: "u:4"},
		{At: start.Add(3 * time.Second), Status: 201, Class: "registered", Key: "u:4"},
	}
	for i, c := range calls {
		if err := r.Record(ctx, "a", c); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			// The same call recorded again, as after a lost answer: one call.
			if err := r.Record(ctx, "a", c); err != nil {
				t.Fatal(err)
			}
		}
	}
	// seller b: two accepted now (At zero = Redis clock at record time), the
	// same key twice (a redelivery) must be two calls.
	for range 2 {
		if err := r.Record(ctx, "b", Call{Status: 201, Class: "registered", Key: "v:1"}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := r.Report(ctx, throttle.Policy{Limit: 2, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sellers) != 2 {
		t.Fatalf("report has %d sellers, want 2: %+v", len(rep.Sellers), rep.Sellers)
	}
	a, b := rep.Sellers[0], rep.Sellers[1]
	wantA := SellerReport{Seller: "a", Calls: 7, Accepted: 4, MaxInWindow: 3, CurrentWindow: 0, RateLimited: 1, Exceeded: true}
	if a.Seller != wantA.Seller || a.Calls != wantA.Calls || a.Accepted != wantA.Accepted || a.MaxInWindow != wantA.MaxInWindow ||
		a.CurrentWindow != wantA.CurrentWindow || a.RateLimited != wantA.RateLimited || a.Exceeded != wantA.Exceeded {
		t.Errorf("seller a = %+v, want %+v", a, wantA)
	}
	if !a.First.Equal(start.Truncate(time.Microsecond)) {
		t.Errorf("seller a first call at %v, want %v (the At given)", a.First, start)
	}
	if b.Calls != 2 || b.Accepted != 2 || b.CurrentWindow != 2 || b.MaxInWindow != 2 || b.Exceeded {
		t.Errorf("seller b = %+v, want 2 calls both in the current window, not exceeded", b)
	}
	if d := b.Last.Sub(now); d < 0 || d > 5*time.Second {
		t.Errorf("seller b's call recorded at %v, Redis clock was %v before recording: the script did not use Redis TIME", b.Last, now)
	}
	if !rep.Exceeded {
		t.Error("report.Exceeded is false although seller a exceeded")
	}
}

func TestRetentionTrimsHistoryAndSellers(t *testing.T) {
	ctx := context.Background()
	rdb, r, now := newRecorder(t, 2*time.Second)
	for i := range 5 {
		if err := r.Record(ctx, "old", Call{At: now.Add(-time.Minute), Status: 201, Class: "registered", Key: fmt.Sprint("k:", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Record(ctx, "fresh", Call{Status: 201, Class: "registered", Key: "k:1"}); err != nil {
		t.Fatal(err)
	}
	if n := rdb.ZCard(ctx, CallsKey("old")).Val(); n != 0 {
		t.Errorf("seller old holds %d calls older than the retention, want 0", n)
	}
	if ttl := rdb.PTTL(ctx, CallsKey("fresh")).Val(); ttl <= 0 || ttl > 4*time.Second {
		t.Errorf("history TTL is %v, want about the retention (2 s) + 1 s", ttl)
	}
	rep, err := r.Report(ctx, throttle.Policy{Limit: 100, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sellers) != 1 || rep.Sellers[0].Seller != "fresh" {
		t.Fatalf("report sellers = %+v, want only fresh", rep.Sellers)
	}
	if ok := rdb.SIsMember(ctx, SellersKey, "old").Val(); ok {
		t.Error("seller old is still in the sellers set after its history expired")
	}
}

func TestRecordFailsWithRedisDown(t *testing.T) {
	ctx := context.Background()
	srv := testredis.Start(t)
	r := NewRecorder(srv.Client(), time.Hour)
	srv.Stop()
	ctx2, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := r.Record(ctx2, "a", Call{Status: 201, Class: "registered", Key: "k"}); err == nil {
		t.Fatal("Record succeeded with Redis stopped")
	}
}

func TestRecordAndReportOnCluster(t *testing.T) {
	ctx := context.Background()
	cl := testredis.StartCluster(t, 3)
	r := NewRecorder(cl.Client(), time.Hour)
	for i := range 20 {
		seller := fmt.Sprint("s", i%5)
		if err := r.Record(ctx, seller, Call{Status: 201, Class: "registered", Key: fmt.Sprint("u:", i)}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := r.Report(ctx, throttle.Policy{Limit: 100, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sellers) != 5 {
		t.Fatalf("report has %d sellers, want 5", len(rep.Sellers))
	}
	for _, s := range rep.Sellers {
		if s.Accepted != 4 || s.CurrentWindow != 4 {
			t.Errorf("seller %s: %+v, want 4 accepted in the current window", s.Seller, s)
		}
	}
}

// FuzzParseMember: any member parses without panicking, and every member
// Record writes parses back to what was recorded.
func FuzzParseMember(f *testing.F) {
	f.Add(201, "registered", "u:1", "201|registered|u:1|abc")
	f.Add(0, "trans|ient", "u|1", "||||")
	f.Fuzz(func(t *testing.T, status int, class, key, raw string) {
		parseMember(raw)
		c, ok := parseMember(fmt.Sprintf("%d|%s|%s|%s", status, sanitize(class), sanitize(key), nonce()))
		if !ok || c.Status != status || c.Class != sanitize(class) || c.Key != sanitize(key) {
			t.Errorf("round trip of (%d, %q, %q) gave %+v, ok=%v", status, class, key, c, ok)
		}
	})
}

// TestReportCountsAsThePolicy: the same calls, 2 at the end of one aligned
// second and 2 at the start of the next, judged against 2 per second as
// each policy counts: a sliding window sees 4, a fixed window 2, a bucket
// of 2 refilled at 2 a second runs dry and one of 4 does not.
func TestReportCountsAsThePolicy(t *testing.T) {
	ctx := context.Background()
	_, r, now := newRecorder(t, time.Hour)
	edge := time.Unix(now.Unix()-10, 0) // a whole second, a window boundary for every policy
	for i, ms := range []int{-100, -50, 0, 50} {
		c := Call{At: edge.Add(time.Duration(ms) * time.Millisecond), Status: 201, Class: "registered", Key: fmt.Sprint("u:", i)}
		if err := r.Record(ctx, "a", c); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		policy     throttle.Policy
		maxCounted int
		exceeded   bool
	}{
		{throttle.Policy{Limit: 2, Window: time.Second}, 4, true},
		{throttle.Policy{Kind: throttle.Fixed, Limit: 2, Window: time.Second}, 2, false},
		{throttle.Policy{Kind: throttle.TokenBucket, Limit: 2, Window: time.Second}, 4, true},
		{throttle.Policy{Kind: throttle.TokenBucket, Limit: 2, Window: time.Second, Burst: 4}, 4, false},
	} {
		rep, err := r.Report(ctx, tc.policy)
		if err != nil {
			t.Fatal(err)
		}
		a := rep.Sellers[0]
		if a.MaxInWindow != 4 || a.MaxCounted != tc.maxCounted || a.Exceeded != tc.exceeded || rep.Exceeded != tc.exceeded {
			t.Errorf("%s (burst %d): max in window %d, counted %d, exceeded %v; want 4, %d, %v",
				tc.policy.Kind, tc.policy.Burst, a.MaxInWindow, a.MaxCounted, a.Exceeded, tc.maxCounted, tc.exceeded)
		}
		if want := tc.policy.Kind; rep.Policy != want && !(want == "" && rep.Policy == throttle.Sliding) {
			t.Errorf("the report says it counted %q, want %q", rep.Policy, want)
		}
	}
}

// TestAppWideLine: with the app-wide limit configured the report judges all
// sellers' accepted calls together; each seller alone can be within its
// limit while the application is not.
func TestAppWideLine(t *testing.T) {
	ctx := context.Background()
	_, r, now := newRecorder(t, time.Hour)
	start := now.Add(-10 * time.Second)
	// Three sellers, 2 accepted each within 300 ms (their limit: 2 per
	// second), a 429 and a replay that do not count.
	for i, seller := range []string{"a", "b", "c"} {
		for j, c := range []Call{
			{Status: 201, Class: "registered"},
			{Status: 201, Class: "registered"},
			{Status: 429, Class: "rate_limited"},
			{Status: 200, Class: "replayed"},
		} {
			c.At = start.Add(time.Duration(100*i+10*j) * time.Millisecond)
			c.Key = fmt.Sprintf("u%d:%d", i, j)
			if err := r.Record(ctx, seller, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	rep, err := r.Report(ctx, throttle.Policy{Limit: 2, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Exceeded || rep.App != nil {
		t.Fatalf("without an app-wide limit: exceeded %v, app line %+v; want neither", rep.Exceeded, rep.App)
	}
	for _, tc := range []struct {
		limit    int
		exceeded bool
	}{{6, false}, {5, true}} {
		rep, err := r.SetGlobal(tc.limit, time.Second).Report(ctx, throttle.Policy{Limit: 2, Window: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		want := AppReport{Limit: tc.limit, Window: time.Second, Accepted: 6, MaxInWindow: 6, Exceeded: tc.exceeded}
		if rep.App == nil || *rep.App != want || rep.Exceeded != tc.exceeded {
			t.Errorf("app-wide limit %d: line %+v, report exceeded %v; want %+v", tc.limit, rep.App, rep.Exceeded, want)
		}
		for _, s := range rep.Sellers {
			if s.Exceeded {
				t.Errorf("seller %s exceeded its own limit: %+v", s.Seller, s)
			}
		}
	}
}

// TestCallsOfASellerRecordedAtOnce: calls of one seller recorded at once
// each run their own steps; and when one call's step fails, that call is the
// only one refused: the others are recorded.
func TestCallsOfASellerRecordedAtOnce(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	rec := NewRecorder(rdb, time.Hour)
	const seller, n = "record-at-once", 30
	log := "bulkreg:{s:" + seller + "}:log"
	bad := "bulkreg:{s:" + seller + "}:not-a-zset"
	if err := rdb.Set(ctx, bad, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Minute)
	// round records n calls at once, call i releasing slot i of round r;
	// the call poisoned (-1: none) releases from a key that is no log.
	round := func(r, poisoned int) []error {
		for i := range n {
			if err := rdb.ZAdd(ctx, log, redis.Z{Score: float64(i), Member: fmt.Sprintf("slot-%d-%d", r, i)}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				key := log
				if i == poisoned {
					key = bad // WRONGTYPE
				}
				step := scriptbatch.Step{Script: "release.lua", Keys: []string{key}, Args: []any{fmt.Sprintf("slot-%d-%d", r, i)}}
				at := base.Add(time.Duration(r*n+i) * time.Millisecond)
				<-start
				errs[i] = rec.RecordWith(ctx, seller, Call{At: at, Status: 201, Class: "registered", Key: fmt.Sprintf("k%d-%d", r, i)}, step)
			})
		}
		close(start)
		wg.Wait()
		return errs
	}

	for i, err := range round(1, -1) {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := rdb.ZCard(ctx, CallsKey(seller)).Val(); got != n {
		t.Errorf("%d calls in the history, want %d", got, n)
	}

	const poisoned = 7
	for i, err := range round(2, poisoned) {
		if (err != nil) != (i == poisoned) {
			t.Errorf("call %d: %v, want an error only for the call whose step fails (%d)", i, err, poisoned)
		}
	}
	// The refused call's record ran before its failing step, as it did
	// alone: it is in the history once (a retry rewrites the same member).
	if got := rdb.ZCard(ctx, CallsKey(seller)).Val(); got != 2*n {
		t.Errorf("%d calls in the history, want %d", got, 2*n)
	}
	if left := rdb.ZRange(ctx, log, 0, -1).Val(); len(left) != 1 || left[0] != fmt.Sprintf("slot-2-%d", poisoned) {
		t.Errorf("slots left in the log: %v, want only the refused call's", left)
	}
}

// TestRecordAll: a batch's calls go in the history in one script, its steps
// after them; a step that fails refuses the batch, with the calls recorded
// and the steps before it done (a retry rewrites the same members).
func TestRecordAll(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	rec := NewRecorder(rdb, time.Hour)
	const seller, n = "record-all", 5
	log := "bulkreg:{s:" + seller + "}:log"
	bad := "bulkreg:{s:" + seller + "}:not-a-zset"
	if err := rdb.Set(ctx, bad, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Minute)
	// batch records n calls of round r, each releasing its slot from log;
	// with poisoned, the last release is from a key that is no log.
	batch := func(r int, poisoned bool) error {
		calls := make([]Call, n)
		steps := make([]scriptbatch.Step, n)
		for i := range n {
			slot := fmt.Sprintf("slot-%d-%d", r, i)
			if err := rdb.ZAdd(ctx, log, redis.Z{Score: float64(i), Member: slot}).Err(); err != nil {
				t.Fatal(err)
			}
			calls[i] = Call{At: base.Add(time.Duration(r*n+i) * time.Millisecond), Status: 201, Class: "registered", Key: fmt.Sprintf("k%d-%d", r, i)}
			steps[i] = scriptbatch.Step{Script: "release.lua", Keys: []string{log}, Args: []any{slot}}
		}
		if poisoned {
			steps[n-1].Keys = []string{bad} // WRONGTYPE
		}
		return rec.RecordAll(ctx, seller, calls, steps...)
	}
	if err := batch(1, false); err != nil {
		t.Fatal(err)
	}
	if got := rdb.ZCard(ctx, CallsKey(seller)).Val(); got != n {
		t.Errorf("%d calls in the history, want %d", got, n)
	}
	if left := rdb.ZCard(ctx, log).Val(); left != 0 {
		t.Errorf("%d slots left in the log, want every step run", left)
	}
	if !rdb.SIsMember(ctx, SellersKey, seller).Val() {
		t.Errorf("seller %s not listed among the sellers with a history", seller)
	}

	if err := batch(2, true); err == nil {
		t.Fatal("a batch whose step fails: no error")
	}
	if got := rdb.ZCard(ctx, CallsKey(seller)).Val(); got != 2*n {
		t.Errorf("%d calls in the history, want %d", got, 2*n)
	}
	if left := rdb.ZRange(ctx, log, 0, -1).Val(); len(left) != 1 || left[0] != fmt.Sprintf("slot-2-%d", n-1) {
		t.Errorf("slots left in the log: %v, want only the failing step's", left)
	}
}
