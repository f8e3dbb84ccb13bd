package circuit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

// fast are settings shrunk for tests: the same shape as the defaults.
func fast() Settings {
	return Settings{
		Window:           2 * time.Second,
		Buckets:          10,
		MinCalls:         20,
		FailureRatio:     0.5,
		MinFailedRows:    5,
		MinFailedSellers: 2,
		ProbeMin:         100 * time.Millisecond,
		ProbeMax:         400 * time.Millisecond,
		ProbeMultiplier:  2,
		ProbeLease:       300 * time.Millisecond,
	}
}

func newBreaker(t *testing.T, rdb redis.UniversalClient, s Settings) *Breaker {
	t.Helper()
	b, err := New(rdb, s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// call makes one call through b: Allow, then Report the outcome if allowed.
func call(t *testing.T, b *Breaker, seller, row string, o Outcome) (Decision, Status) {
	t.Helper()
	ctx := context.Background()
	d, err := b.Allow(ctx)
	if err != nil {
		t.Fatalf("Allow: %v", err)
	}
	if !d.Allowed {
		return d, Status{State: d.State}
	}
	st, err := b.Report(ctx, d, Call{Seller: seller, Row: row, Outcome: o})
	if err != nil {
		t.Fatalf("Report: %v", err)
	}
	return d, st
}

func peek(t *testing.T, b *Breaker) Status {
	t.Helper()
	st, err := b.Peek(context.Background())
	if err != nil {
		t.Fatalf("Peek: %v", err)
	}
	return st
}

// trip opens the circuit with failures of 10 rows of 4 sellers.
func trip(t *testing.T, b *Breaker) {
	t.Helper()
	for i := range b.s.MinCalls {
		call(t, b, fmt.Sprintf("s%d", i%4), fmt.Sprintf("u:%d", i%10), Failure)
	}
	if st := peek(t, b); st.State != Open {
		t.Fatalf("after %d failures of 10 rows of 4 sellers the circuit is %s, want open", b.s.MinCalls, st.State)
	}
}

func TestSettingsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Settings
		want string // "" = valid
	}{
		{"zero is the defaults", Settings{}, ""},
		{"defaults", DefaultSettings(), ""},
		{"shrunk", fast(), ""},
		{"negative window", Settings{Window: -time.Second}, "Settings.Window must not be negative"},
		{"ratio above 1", Settings{FailureRatio: 1.5}, "Settings.FailureRatio must be a fraction"},
		{"ratio NaN", Settings{FailureRatio: math.NaN()}, "Settings.FailureRatio"},
		{"multiplier below 1", Settings{ProbeMultiplier: 0.5}, "Settings.ProbeMultiplier must be at least 1"},
		{"negative rows", Settings{MinFailedRows: -1}, "Settings.MinFailedRows must not be negative"},
		{"max below min", Settings{ProbeMin: time.Minute, ProbeMax: time.Second}, "ProbeMax (1s) must not be below ProbeMin (1m0s)"},
		{"buckets too fine", Settings{Window: time.Millisecond, Buckets: 10}, "Window / Buckets must be at least 1ms"},
		{"name with a brace", Settings{Name: "a}b"}, "Settings.Name must not contain braces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if s := (Settings{ProbeMin: time.Minute}).withDefaults(); s.ProbeMax != time.Minute {
		t.Errorf("ProbeMin 1m alone: ProbeMax = %s, want raised to 1m", s.ProbeMax)
	}
}

// TestWhenItOpens feeds the window call by call and checks the rule: enough
// calls, a dominant failure ratio, enough distinct failed rows, and enough
// distinct failed sellers (two at least, whoever calls), spread beyond the
// seller that failed most.
func TestWhenItOpens(t *testing.T) {
	srv := testredis.Start(t)
	type c struct {
		seller, row string
		o           Outcome
	}
	// many returns n calls; row and seller are formatted with the call's index.
	many := func(n int, seller, row string, o Outcome) []c {
		f := func(pattern string, i int) string {
			if strings.Contains(pattern, "%") {
				return fmt.Sprintf(pattern, i)
			}
			return pattern
		}
		out := make([]c, n)
		for i := range n {
			out[i] = c{f(seller, i), f(row, i), o}
		}
		return out
	}
	cat := func(parts ...[]c) (out []c) {
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	// fourSellers returns n calls of sellers s0 to s3 in turn, each of a row
	// of its own.
	fourSellers := func(n int, row string, o Outcome) []c {
		out := make([]c, n)
		for i := range n {
			out[i] = c{fmt.Sprintf("s%d", i%4), fmt.Sprintf("%s:%d", row, i), o}
		}
		return out
	}
	// tick waits a bucket of the window: what comes after it is later, to
	// the circuit, than what came before.
	tick := []c{{}}
	var poison4 []c // 100 failures of 4 rows, each of its own seller
	for i := range 100 {
		poison4 = append(poison4, c{fmt.Sprintf("s%d", i%4), fmt.Sprintf("u:%d", i%4), Failure})
	}
	for _, tc := range []struct {
		name  string
		calls []c
		open  bool
	}{
		{"outage across sellers", many(20, "s%d", "u:%d", Failure), true},
		{"19 calls are too few", many(19, "s%d", "u:%d", Failure), false},
		{"one poison row, alone, 100 times", many(100, "s1", "u:7", Failure), false},
		{"four poison rows of four sellers", poison4, false},
		{"one seller's rows fail while another's succeed",
			cat(many(10, "b", "b:%d", Success), many(30, "a", "a:%d", Failure)), false},
		// One seller calling, its rows all failing, is not an outage.
		{"only one seller calls: never opens", many(100, "a", "a:%d", Failure), false},
		{"one seller's 100 failures and another's one", cat(many(100, "a", "a:%d", Failure), many(1, "b", "b:%d", Failure)), false},
		{"one seller's failures and another's rare ones",
			cat(many(30, "a", "a:%d", Failure), many(9, "b", "b:%d", Success), many(1, "b", "bf:%d", Failure), many(9, "b", "bb:%d", Success),
				many(1, "b", "bbf:%d", Failure), many(9, "b", "bbb:%d", Success), many(1, "b", "bbbf:%d", Failure)), false},
		{"a busy seller and a small one both failing: the API", cat(many(30, "a", "a:%d", Failure), many(2, "b", "b:%d", Failure)), true},
		{"failures below the ratio",
			cat(many(21, "t%d", "ok:%d", Success), many(20, "s%d", "u:%d", Failure)), false},
		// At the ratio exactly the spread rule decides: left out the seller
		// that failed most (one failure, its calls taken as one), the others
		// must still fail at the ratio: 20 of 40.
		{"failures at the ratio without the worst seller", cat(many(20, "t%d", "ok:%d", Success), many(21, "s%d", "u:%d", Failure)), true},
		{"failures at the ratio, not without the worst seller", cat(many(20, "t%d", "ok:%d", Success), many(20, "s%d", "u:%d", Failure)), false},
		{"refusals of rows are not failures", cat(many(40, "s%d", "u:%d", Answered), many(20, "s%d", "u:%d", Failure)), false},
		{"abandoned calls count for nothing", cat(many(20, "s%d", "u:%d", Abandoned), many(19, "s%d", "u:%d", Failure)), false},
		// Two sellers' calls all fail while a third's all succeed.
		// The healthy seller proves the API is up: the failures are
		// the two sellers' own. It takes 5 answered calls without a
		// failure (at the ratio 0.5, all 5 succeed by chance 3 % of
		// the time), answered after the failures began (a bucket
		// later: tick).
		{"two sellers fail, a third wholly healthy: not an outage",
			cat(many(1, "a", "a0:%d", Failure), tick, many(6, "c", "c:%d", Success), many(15, "a", "a:%d", Failure), many(15, "b", "b:%d", Failure)), false},
		{"two sellers fail, a third's rows refused for their content: the API answers",
			cat(many(1, "a", "a0:%d", Failure), tick, many(6, "c", "c:%d", Answered), many(15, "a", "a:%d", Failure), many(15, "b", "b:%d", Failure)), false},
		{"the healthy seller fails once: an outage after all",
			cat(many(1, "a", "a0:%d", Failure), tick, many(6, "c", "c:%d", Success), many(15, "a", "a:%d", Failure), many(15, "b", "b:%d", Failure), many(1, "c", "cf:%d", Failure)), true},
		// Answers from before the failures began prove nothing of the
		// API since: an outage may have begun right after them.
		{"a seller answered before two others began failing: an outage",
			cat(many(6, "c", "c:%d", Success), many(15, "a", "a:%d", Failure), many(2, "b", "b:%d", Failure)), true},
		// Sellers answered many times, then each fails twice in a row (a
		// runner holds its seller then): the answers from before do not
		// outweigh them, though failures are far below the ratio.
		{"several sellers fail twice after many answers: an outage", cat(fourSellers(40, "ok", Success), fourSellers(6, "f", Failure)), true},
		{"...unless another seller is answered two buckets after they began",
			cat(fourSellers(40, "ok", Success), fourSellers(4, "f", Failure), tick, tick, many(1, "h", "h:%d", Success), fourSellers(2, "g", Failure)), false},
		{"four successes are too few to prove the API up",
			cat(many(4, "c", "c:%d", Success), many(12, "a", "a:%d", Failure), many(4, "b", "b:%d", Failure)), true},
		{"a partial outage: every seller fails some calls",
			cat(many(3, "c", "c:%d", Success), many(3, "d", "d:%d", Success), many(2, "c", "cf:%d", Failure), many(2, "d", "df:%d", Failure),
				many(6, "a", "a:%d", Failure), many(4, "b", "b:%d", Failure)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fast()
			s.Name = tc.name // a circuit of its own on the shared server
			b := newBreaker(t, srv.Client(), s)
			calls := tc.calls
			opened := -1
			for i, cl := range calls {
				if cl.seller == "" {
					time.Sleep(s.Window / time.Duration(s.Buckets))
					continue
				}
				_, st := call(t, b, cl.seller, cl.row, cl.o)
				if st.State != Closed && opened < 0 {
					opened = i
				}
			}
			if got := opened >= 0; got != tc.open {
				t.Fatalf("opened = %v (at call %d of %d), want %v", got, opened, len(calls), tc.open)
			}
			if tc.open && opened != len(calls)-1 {
				t.Errorf("opened at call %d, want at the last call %d (the first that meets the rule)", opened, len(calls)-1)
			}
		})
	}
}

// TestSellersFailingBesideAHealthyOneStaySick: two sellers fail while a
// third is answered on every call, then the third has nothing left to call
// and its calls age out of the window. The two sellers' failures alone still
// do not open the circuit (they were seen failing while the API answered),
// until another seller fails with them, as in an outage; an answered call of
// a sick seller makes it count again.
func TestSellersFailingBesideAHealthyOneStaySick(t *testing.T) {
	srv := testredis.Start(t)
	s := fast()
	b := newBreaker(t, srv.Client(), s)
	failures := func(seller string, n int) {
		t.Helper()
		for i := range n {
			if _, st := call(t, b, seller, fmt.Sprintf("%s:%d", seller, i), Failure); st.State != Closed {
				t.Fatalf("the circuit opened on %s's failure %d: only sellers seen failing while the API answered fail", seller, i)
			}
		}
	}
	beginFailing(t, b, s, "a")
	for i := range 6 {
		call(t, b, "c", fmt.Sprintf("c:%d", i), Success)
	}
	failures("a", 15)
	failures("b", 15)
	time.Sleep(s.Window + s.Window/time.Duration(s.Buckets)) // c's calls leave the window
	failures("a", 30)
	failures("b", 30)
	if st := peek(t, b); st.State != Closed {
		t.Fatalf("after 60 failures of the two sick sellers the circuit is %s, want closed", st.State)
	}
	opened := false
	for i := range 10 {
		if _, st := call(t, b, "d", fmt.Sprintf("d:%d", i), Failure); st.State != Closed {
			opened = true
			break
		}
	}
	if !opened {
		t.Fatal("a seller not known sick failed 10 times beside the sick ones and the circuit stayed closed, want open: an outage")
	}

	// An answered call cures: the seller's failures count again.
	s.Name = "cured"
	b = newBreaker(t, srv.Client(), s)
	beginFailing(t, b, s, "a")
	for i := range 6 {
		call(t, b, "c", fmt.Sprintf("c:%d", i), Success)
	}
	failures("a", 15)
	failures("b", 15)
	time.Sleep(s.Window + s.Window/time.Duration(s.Buckets))
	call(t, b, "a", "a:ok", Success)
	call(t, b, "b", "b:ok", Success)
	for i := range 40 {
		seller := []string{"a", "b"}[i%2]
		if _, st := call(t, b, seller, fmt.Sprintf("%s:x%d", seller, i), Failure); st.State != Closed {
			return
		}
	}
	t.Fatal("two sellers answered once since they were sick, then failing 40 times, did not open the circuit, want open")
}

// TestAProbeOfAnotherSellerMakesTheFailingOnesSick: two sellers fail before
// anybody else calls, and the circuit opens (nothing tells them from an
// outage yet). The probe is a third seller's row and is answered: the API is
// up, and the two sellers' failures no longer reopen it. A probe of one of
// the failing sellers answered is a recovery instead.
func TestAProbeOfAnotherSellerMakesTheFailingOnesSick(t *testing.T) {
	srv := testredis.Start(t)
	for _, tc := range []struct {
		prober string
		reopen bool
	}{{"c", false}, {"a", true}} {
		t.Run("probe of "+tc.prober, func(t *testing.T) {
			s := fast()
			s.Name = tc.prober
			b := newBreaker(t, srv.Client(), s)
			for i := range 20 {
				seller := []string{"a", "b"}[i%2]
				call(t, b, seller, fmt.Sprintf("%s:%d", seller, i), Failure)
			}
			if st := peek(t, b); st.State != Open {
				t.Fatalf("after 20 failures of two sellers, alone, the circuit is %s, want open", st.State)
			}
			time.Sleep(s.ProbeMin)
			if d, st := call(t, b, tc.prober, tc.prober+":probe", Success); !d.Probe || st.State != Closed {
				t.Fatalf("the probe: %+v, then %s; want a probe that closes the circuit", d, st.State)
			}
			reopened := false
			for i := range 40 {
				seller := []string{"a", "b"}[i%2]
				if _, st := call(t, b, seller, fmt.Sprintf("%s:x%d", seller, i), Failure); st.State != Closed {
					reopened = true
					break
				}
			}
			if reopened != tc.reopen {
				t.Errorf("40 more failures of the two sellers reopened the circuit: %v, want %v", reopened, tc.reopen)
			}
		})
	}
}

// TestAFailedProbeOfASickSellerPassesOn: the circuit is open and the probe
// goes to a seller known sick (its calls failed while another seller's were
// answered). Its failure is the seller's own: the reply says so, the probe
// passes on at once and the interval is kept. A failed probe of a seller not
// known sick still backs off, as an outage's.
func TestAFailedProbeOfASickSellerPassesOn(t *testing.T) {
	srv := testredis.Start(t)
	s := fast()
	b := newBreaker(t, srv.Client(), s)
	ctx := context.Background()
	// a and b fail while c is answered: they are sick.
	beginFailing(t, b, s, "a")
	for i := range 6 {
		call(t, b, "c", fmt.Sprintf("c:%d", i), Success)
	}
	for i := range 20 {
		seller := []string{"a", "b"}[i%2]
		if _, st := call(t, b, seller, fmt.Sprintf("%s:%d", seller, i), Failure); st.State != Closed {
			t.Fatalf("the circuit opened on %s's failure beside a healthy seller", seller)
		}
	}
	testwait.For(t, 2*s.Window, "c's answered calls leave the window", func() bool {
		c, err := b.Seller(ctx, "c")
		return err == nil && c.Failures == 0 && c.Answered == 0
	})
	// An outage: sellers not known sick fail with them.
	for i := 0; peek(t, b).State == Closed; i++ {
		if i == 40 {
			t.Fatal("40 failures of sellers d and e did not open the circuit, want open")
		}
		seller := []string{"d", "e"}[i%2]
		call(t, b, seller, fmt.Sprintf("%s:%d", seller, i), Failure)
	}
	testwait.For(t, 2*s.ProbeMin, "the first probe is due", func() bool { return peek(t, b).Wait == 0 })
	probe := func(seller string) Status {
		t.Helper()
		d, err := b.Allow(ctx)
		if err != nil || !d.Probe {
			t.Fatalf("Allow for %s = %+v, %v; want the probe", seller, d, err)
		}
		st, err := b.Report(ctx, d, Call{Seller: seller, Row: seller + ":probe", Outcome: Failure})
		if err != nil || st.State != Open {
			t.Fatalf("%s's probe failed: Report = %+v, %v; want open", seller, st, err)
		}
		return st
	}
	if st := probe("a"); !st.Own || st.Wait > 5*time.Millisecond {
		t.Errorf("the failed probe of sick seller a: own %v, next probe in %s; want its own failure and the next probe at once", st.Own, st.Wait)
	}
	if st := probe("b"); !st.Own || st.Wait > 5*time.Millisecond {
		t.Errorf("the failed probe of sick seller b: own %v, next probe in %s; want its own failure and the next probe at once", st.Own, st.Wait)
	}
	// The interval was kept: d's failed probe doubles the first one.
	want := time.Duration(float64(s.ProbeMin) * s.ProbeMultiplier)
	if st := probe("d"); st.Own || st.Wait < want-5*time.Millisecond || st.Wait > want {
		t.Errorf("the failed probe of seller d: own %v, next probe in %s; want the API's failure and the next probe in %s", st.Own, st.Wait, want)
	}
	if d, err := b.Allow(ctx); err != nil || d.Allowed {
		t.Fatalf("right after d's probe failed: Allow = %+v, %v; want refused", d, err)
	}
}

// TestOldCallsAgeOut: failures older than the window no longer count.
func TestOldCallsAgeOut(t *testing.T) {
	srv := testredis.Start(t)
	s := fast()
	s.Window, s.Buckets = 500*time.Millisecond, 5
	b := newBreaker(t, srv.Client(), s)
	for i := range 15 {
		call(t, b, fmt.Sprintf("s%d", i%3), fmt.Sprintf("u:%d", i), Failure)
	}
	time.Sleep(700 * time.Millisecond)
	for i := range 10 {
		if _, st := call(t, b, fmt.Sprintf("s%d", i%3), fmt.Sprintf("v:%d", i), Failure); st.State != Closed {
			t.Fatalf("failure %d after the first 15 aged out opened the circuit: only 10 in the window", 16+i)
		}
	}
	// and failures within one window still add up
	for i := range 10 {
		call(t, b, fmt.Sprintf("s%d", i%3), fmt.Sprintf("w:%d", i), Failure)
	}
	if st := peek(t, b); st.State != Open {
		t.Errorf("20 failures inside the window: state %s, want open", st.State)
	}
}

// servers runs f against a single redis-server and a 3-master Cluster.
func servers(t *testing.T, f func(t *testing.T, clients func() redis.UniversalClient)) {
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		srv := testredis.Start(t)
		f(t, func() redis.UniversalClient { return srv.Client() })
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		c := testredis.StartCluster(t, 3)
		f(t, func() redis.UniversalClient { return c.Client() })
	})
}

// TestOutageAcrossConsumers: 8 consumers (a breaker and a client each), 4
// rows at once in each, call a dead API. The circuit opens once the window
// holds MinCalls failures; after that nobody calls but the probe, one at a
// time with a growing interval; the first answer closes it for everyone.
func TestOutageAcrossConsumers(t *testing.T) {
	servers(t, func(t *testing.T, clients func() redis.UniversalClient) {
		s := fast()
		var breakers []*Breaker
		for range 8 {
			breakers = append(breakers, newBreaker(t, clients(), s))
		}
		var (
			apiUp     atomic.Bool
			calls     atomic.Int64 // calls that reached the API
			probesOut atomic.Int64
			mostOut   atomic.Int64
			mu        sync.Mutex
			probeAt   []time.Time // when each probe was answered
			grantAt   []time.Time // when each probe was given
			openedAt  time.Time
			afterOpen int // non-probe calls allowed after the circuit opened
			closedAt  time.Time
		)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopAt := make(chan struct{})
		var wg sync.WaitGroup
		for ci, b := range breakers {
			for r := range 4 {
				wg.Go(func() {
					for n := 0; ; n++ {
						select {
						case <-stopAt:
							return
						default:
						}
						seller, row := fmt.Sprintf("s%d", (ci+r)%5), fmt.Sprintf("u%d-%d:%d", ci, r, n)
						if err := b.WaitReady(ctx); err != nil {
							return
						}
						d, err := b.Allow(ctx)
						if err != nil {
							return
						}
						if !d.Allowed {
							time.Sleep(min(d.Wait, 20*time.Millisecond))
							continue
						}
						calls.Add(1)
						mu.Lock()
						if !openedAt.IsZero() && closedAt.IsZero() && !d.Probe {
							afterOpen++
						}
						if d.Probe {
							grantAt = append(grantAt, time.Now())
						}
						mu.Unlock()
						if d.Probe {
							mostOut.Store(max(mostOut.Load(), probesOut.Add(1)))
							time.Sleep(30 * time.Millisecond) // the probe takes a while
							probesOut.Add(-1)
						} else {
							time.Sleep(2 * time.Millisecond)
						}
						o := Failure
						if apiUp.Load() {
							o = Success
						}
						st, err := b.Report(ctx, d, Call{Seller: seller, Row: row, Outcome: o})
						if err != nil {
							t.Errorf("Report: %v", err)
							return
						}
						mu.Lock()
						if d.Probe {
							probeAt = append(probeAt, time.Now())
						}
						if st.Changed && st.State == Open {
							openedAt = time.Now()
						}
						if st.Changed && st.State == Closed {
							closedAt = time.Now()
						}
						mu.Unlock()
					}
				})
			}
		}
		time.Sleep(2 * time.Second) // ~100 ms to open, then probes at 100, 200, 400, 400… ms
		apiUp.Store(true)
		deadline := time.Now().Add(2 * time.Second)
		for peek(t, breakers[0]).State != Closed && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		close(stopAt)
		wg.Wait()

		st := peek(t, breakers[0])
		t.Logf("%d calls; opened %d time(s); %d probes (fleet), %d local; %d non-probe calls allowed after opening; probes answered at %v",
			calls.Load(), st.Opens, st.Probes, sumProbes(breakers), afterOpen, gaps(openedAt, probeAt))
		if st.State != Closed {
			t.Fatalf("the API answered again but the circuit is %s", st.State)
		}
		if st.Opens != 1 {
			t.Errorf("the circuit opened %d times, want once", st.Opens)
		}
		if mostOut.Load() != 1 {
			t.Errorf("at most %d probes were out at once, want exactly 1", mostOut.Load())
		}
		if st.Probes != sumProbes(breakers) || int64(len(grantAt)) != st.Probes {
			t.Errorf("Redis counted %d probes, the breakers %d, the callers %d", st.Probes, sumProbes(breakers), len(grantAt))
		}
		// Calls allowed after opening were already past Allow: at most one per row in flight.
		if afterOpen > 8*4 {
			t.Errorf("%d non-probe calls were allowed after the circuit opened, want at most the 32 rows in flight", afterOpen)
		}
		// Probes in 2 s with intervals 100, 200, 400, 400, … ms and 30 ms each: about 5.
		if st.Probes < 3 || st.Probes > 8 {
			t.Errorf("%d probes during ~1.9 s open, want 3..8 (intervals 100, 200, 400, 400… ms)", st.Probes)
		}
		// Each probe after a failed one waits its interval from that failure.
		want := s.ProbeMin
		for i := 1; i < len(grantAt) && i < len(probeAt); i++ {
			want = min(time.Duration(float64(want)*s.ProbeMultiplier), s.ProbeMax)
			if gap := grantAt[i].Sub(probeAt[i-1]); gap < want-15*time.Millisecond {
				t.Errorf("probe %d was given %s after probe %d failed, want at least the interval %s", i+1, gap, i, want)
			}
		}
		// After closing, everyone calls again.
		for i, b := range breakers {
			if d, err := b.Allow(ctx); err != nil || !d.Allowed || d.State != Closed {
				t.Errorf("consumer %d after closing: Allow = %+v, %v; want allowed, closed", i, d, err)
			}
		}
	})
}

func sumProbes(bs []*Breaker) (n int64) {
	for _, b := range bs {
		n += b.Probes()
	}
	return n
}

func gaps(from time.Time, ts []time.Time) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Sub(from).Round(time.Millisecond).String())
	}
	return out
}

func TestFirstProbeAnswerClosesIt(t *testing.T) {
	srv := testredis.Start(t)
	for _, o := range []Outcome{Success, Answered} {
		t.Run(o.String(), func(t *testing.T) {
			s := fast()
			s.Name = o.String()
			a, b := newBreaker(t, srv.Client(), s), newBreaker(t, srv.Client(), s)
			trip(t, a)
			ctx := context.Background()
			if d, err := b.Allow(ctx); err != nil || d.Allowed || d.State != Open || d.Wait <= 0 || d.Wait > s.ProbeMin {
				t.Fatalf("right after opening: Allow = %+v, %v; want refused, open, wait ≤ %s", d, err, s.ProbeMin)
			}
			time.Sleep(s.ProbeMin)
			d, err := a.Allow(ctx)
			if err != nil || !d.Allowed || !d.Probe || d.State != HalfOpen {
				t.Fatalf("after ProbeMin: Allow = %+v, %v; want the probe", d, err)
			}
			if d2, err := b.Allow(ctx); err != nil || d2.Allowed || d2.State != HalfOpen {
				t.Fatalf("while the probe is out: Allow = %+v, %v; want refused, half-open", d2, err)
			}
			st, err := a.Report(ctx, d, Call{Seller: "s1", Row: "u:1", Outcome: o})
			if err != nil || st.State != Closed || !st.Changed {
				t.Fatalf("the probe's %s: Report = %+v, %v; want closed, changed", o, st, err)
			}
			// b refused above until its retry; WaitReady still sees the close at once when b asks Redis.
			if d, err := b.Allow(ctx); err != nil {
				t.Fatal(err)
			} else if !d.Allowed {
				time.Sleep(d.Wait)
				if d, err = b.Allow(ctx); err != nil || !d.Allowed {
					t.Fatalf("after closing, b's Allow = %+v, %v; want allowed", d, err)
				}
			}
			// The window was cleared: one new failure does not reopen it.
			if _, st := call(t, b, "s1", "u:2", Failure); st.State != Closed {
				t.Errorf("one failure after closing: %s, want closed", st.State)
			}
		})
	}
}

func TestAFailedProbeBacksOff(t *testing.T) {
	srv := testredis.Start(t)
	s := fast()
	b := newBreaker(t, srv.Client(), s)
	trip(t, b)
	ctx := context.Background()
	want := s.ProbeMin
	for i := range 4 {
		time.Sleep(want)
		d, err := b.Allow(ctx)
		if err != nil || !d.Probe {
			t.Fatalf("probe %d: Allow = %+v, %v; want the probe after %s", i+1, d, err, want)
		}
		st, err := b.Report(ctx, d, Call{Seller: "s", Row: "u:1", Outcome: Failure})
		if err != nil || st.State != Open {
			t.Fatalf("probe %d failed: Report = %+v, %v; want open", i+1, st, err)
		}
		want = min(time.Duration(float64(want)*s.ProbeMultiplier), s.ProbeMax)
		if st.Wait < want-5*time.Millisecond || st.Wait > want {
			t.Errorf("probe %d failed: next probe in %s, want %s", i+1, st.Wait, want)
		}
		if d, err := b.Allow(ctx); err != nil || d.Allowed {
			t.Fatalf("right after probe %d failed: Allow = %+v, %v; want refused", i+1, d, err)
		}
	}
	if st := peek(t, b); st.OpenFor < 4*s.ProbeMin || st.Probes != 4 {
		t.Errorf("Peek = %+v; want open for at least %s and 4 probes", st, 4*s.ProbeMin)
	}
}

// TestACrashedProbersLeaseExpires: a prober that never reports holds the
// circuit for ProbeLease, not forever; the next caller then probes.
func TestACrashedProbersLeaseExpires(t *testing.T) {
	srv := testredis.Start(t)
	s := fast()
	crashed, other := newBreaker(t, srv.Client(), s), newBreaker(t, srv.Client(), s)
	trip(t, crashed)
	time.Sleep(s.ProbeMin)
	ctx := context.Background()
	d, err := crashed.Allow(ctx)
	if err != nil || !d.Probe {
		t.Fatalf("Allow = %+v, %v; want the probe", d, err)
	}
	granted := time.Now()
	// the prober crashes here and never reports
	var taken time.Time
	for time.Since(granted) < 2*s.ProbeLease {
		d2, err := other.Allow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d2.Probe {
			taken = time.Now()
			break
		}
		if d2.Wait > s.ProbeMin {
			t.Fatalf("a refused caller was told to wait %s, want at most ProbeMin %s", d2.Wait, s.ProbeMin)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if taken.IsZero() {
		t.Fatalf("nobody got the probe within twice the lease (%s) after its holder crashed", 2*s.ProbeLease)
	}
	if held := taken.Sub(granted); held < s.ProbeLease-15*time.Millisecond || held > s.ProbeLease+100*time.Millisecond {
		t.Errorf("the crashed prober's probe was taken over after %s, want about the lease %s", held, s.ProbeLease)
	}
	if st := peek(t, other); st.Lapsed != 1 || st.Probes != 2 {
		t.Errorf("Peek = %+v; want 1 lapsed lease and 2 probes", st)
	}
	// The crashed prober's late failure does not decide: the new probe does.
	if st, err := crashed.Report(ctx, d, Call{Seller: "s", Row: "u", Outcome: Failure}); err != nil || st.State != HalfOpen {
		t.Errorf("the lapsed prober's late failure: %+v, %v; want still half-open", st, err)
	}
}

func TestAnAbandonedProbeGoesToTheNextCaller(t *testing.T) {
	srv := testredis.Start(t)
	s := fast()
	a, b := newBreaker(t, srv.Client(), s), newBreaker(t, srv.Client(), s)
	trip(t, a)
	time.Sleep(s.ProbeMin)
	ctx := context.Background()
	d, err := a.Allow(ctx)
	if err != nil || !d.Probe {
		t.Fatalf("Allow = %+v, %v", d, err)
	}
	if _, err := a.Report(ctx, d, Call{Outcome: Abandoned}); err != nil {
		t.Fatal(err)
	}
	if d, err := b.Allow(ctx); err != nil || !d.Probe {
		t.Errorf("after the probe was abandoned: Allow = %+v, %v; want the probe at once", d, err)
	}
}

// TestCallsInFlightDoNotDecide: failures of calls allowed before the
// circuit opened say "outage" (State open) and do not move it.
func TestCallsInFlightDoNotDecide(t *testing.T) {
	srv := testredis.Start(t)
	b := newBreaker(t, srv.Client(), fast())
	ctx := context.Background()
	d, err := b.Allow(ctx)
	if err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	trip(t, b)
	for _, o := range []Outcome{Failure, Success} {
		st, err := b.Report(ctx, d, Call{Seller: "s", Row: "late", Outcome: o})
		if err != nil || st.State != Open || st.Changed {
			t.Errorf("a late %s of a call allowed before opening: %+v, %v; want open, unchanged", o, st, err)
		}
	}
}

func TestReportRefusesBadInput(t *testing.T) {
	b := newBreaker(t, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), fast())
	ctx := context.Background()
	for _, c := range []Call{
		{Seller: "", Row: "u:1", Outcome: Failure},
		{Seller: "a\nb", Row: "u:1", Outcome: Failure},
		{Seller: "a", Row: "", Outcome: Success},
		{Seller: "a", Row: "u:1", Outcome: 0},
	} {
		if _, err := b.Report(ctx, Decision{}, c); err == nil || errors.Is(err, ErrUnavailable) {
			t.Errorf("Report(%+v) = %v, want an error about the input", c, err)
		}
	}
}

func TestRedisDownFailsClosed(t *testing.T) {
	srv := testredis.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, MaxRetries: -1,
		DialerRetries: 1, DialerRetryTimeout: 10 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	b := newBreaker(t, rdb, fast())
	ctx := context.Background()
	if d, _ := call(t, b, "s", "u:1", Success); !d.Allowed {
		t.Fatal("before the outage: refused")
	}
	srv.Stop()
	// The breaker knew the circuit closed a moment ago: it allows from that
	// view for TrustClosed (TestTrustClosed), then asks Redis again.
	time.Sleep(b.s.TrustClosed)
	var wg sync.WaitGroup
	var allowed, unavailable atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 5 {
				d, err := b.Allow(ctx)
				if d.Allowed || err == nil {
					allowed.Add(1)
				} else if errors.Is(err, ErrUnavailable) {
					unavailable.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 0 || unavailable.Load() != 40 {
		t.Errorf("40 Allow calls with Redis down: %d allowed, %d failed with ErrUnavailable; want 0 and 40", allowed.Load(), unavailable.Load())
	}
	if _, err := b.Report(ctx, Decision{}, Call{Seller: "s", Row: "u:1", Outcome: Failure}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Report with Redis down = %v, want ErrUnavailable", err)
	}
	if _, err := b.Peek(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Peek with Redis down = %v, want ErrUnavailable", err)
	}
	if err := b.WaitReady(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("WaitReady with Redis down = %v, want ErrUnavailable", err)
	}
	if _, err := b.Allow(ctx); err == nil || !strings.Contains(err.Error(), "Redis could not answer, so no call is allowed") {
		t.Errorf("the error reads %q; want it to say no call is allowed", err)
	}

	srv.Restart() // empty, the script cache too: a restarted Redis is a closed circuit
	var d Decision
	testwait.For(t, 5*time.Second, "Allow answered by the restarted Redis", func() bool {
		var err error
		d, err = b.Allow(ctx)
		return err == nil
	})
	if !d.Allowed || d.State != Closed {
		t.Fatalf("after the restart: %+v, want allowed", d)
	}
}

func TestWaitReady(t *testing.T) {
	srv := testredis.Start(t)
	s := fast()
	s.ProbeMin = 300 * time.Millisecond
	s.ProbeMax = 300 * time.Millisecond
	a, b := newBreaker(t, srv.Client(), s), newBreaker(t, srv.Client(), s)
	ctx := context.Background()
	start := time.Now()
	if err := b.WaitReady(ctx); err != nil || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("closed: WaitReady = %v after %s; want nil at once", err, time.Since(start))
	}
	trip(t, a)
	opened := time.Now()
	// b's knowledge that the circuit is closed holds for ProbeMin at most.
	start = time.Now()
	if err := b.WaitReady(ctx); err != nil || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("closed a moment ago: WaitReady = %v after %s; want nil at once", err, time.Since(start))
	}
	time.Sleep(s.ProbeMin / 2)
	b = newBreaker(t, srv.Client(), s) // a process that knows nothing yet
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(opened); waited < s.ProbeMin-20*time.Millisecond {
		t.Fatalf("open: WaitReady returned after %s, want when the probe is due (%s)", waited, s.ProbeMin)
	}
	d, err := a.Allow(ctx)
	if err == nil && !d.Probe && d.Wait < 50*time.Millisecond {
		// WaitReady judges "due" on this machine's clock, Allow on Redis's:
		// the two may differ by a few milliseconds.
		time.Sleep(d.Wait)
		d, err = a.Allow(ctx)
	}
	if err != nil || !d.Probe {
		t.Fatalf("Allow = %+v, %v; want the probe", d, err)
	}
	// b learns the probe is out when its own row asks (its view said "due"),
	// then waits and returns once the probe closes the circuit (within
	// ProbeMin, b's poll interval, since b learns it from Redis).
	if d, err := b.Allow(ctx); err != nil || d.Allowed || d.State != HalfOpen {
		t.Fatalf("b while the probe is out: Allow = %+v, %v; want refused", d, err)
	}
	done := make(chan time.Time)
	go func() {
		if err := b.WaitReady(ctx); err != nil {
			t.Error(err)
		}
		done <- time.Now()
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("WaitReady returned while the probe was out")
	default:
	}
	closed := time.Now()
	// The probe is a row of a seller that failed: the API recovered. (A
	// seller that never failed, answered, would leave the failing ones known
	// sick, and the trip below would not open it: circuit_report.lua.)
	if _, err := a.Report(ctx, d, Call{Seller: "s0", Row: "u", Outcome: Success}); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-done:
		if at.Sub(closed) > s.ProbeMin+50*time.Millisecond {
			t.Errorf("WaitReady returned %s after the circuit closed, want within %s", at.Sub(closed), s.ProbeMin)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("WaitReady did not return after the circuit closed")
	}
	// In the prober's own process the close is seen at once.
	trip(t, a)
	time.Sleep(s.ProbeMin)
	d, err = a.Allow(ctx)
	if err != nil || !d.Probe {
		t.Fatalf("Allow = %+v, %v; want the probe", d, err)
	}
	go func() {
		if err := a.WaitReady(ctx); err != nil {
			t.Error(err)
		}
		done <- time.Now()
	}()
	time.Sleep(50 * time.Millisecond)
	closed = time.Now()
	if _, err := a.Report(ctx, d, Call{Seller: "s0", Row: "u", Outcome: Success}); err != nil {
		t.Fatal(err)
	}
	if at := <-done; at.Sub(closed) > 50*time.Millisecond {
		t.Errorf("the prober's own WaitReady returned %s after its report closed the circuit, want at once", at.Sub(closed))
	}
}

// metricValue gathers reg and returns the value of the first series of the
// gauge or counter name.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.Gauge != nil {
				return m.Gauge.GetValue()
			}
			return m.Counter.GetValue()
		}
	}
	t.Fatalf("%s not exported", name)
	return 0
}

func TestCollector(t *testing.T) {
	srv := testredis.Start(t)
	s := fast()
	b := newBreaker(t, srv.Client(), s)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(b.Collector()); err != nil {
		t.Fatal(err)
	}
	gauge := func(name string) float64 { return metricValue(t, reg, name) }
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 7 {
		t.Fatalf("gathered %d metric families (%v), want 7", len(mfs), err)
	}
	if gauge(MetricState) != 0 || gauge(MetricOpenSeconds) != 0 {
		t.Errorf("closed: state %v, open seconds %v; want 0, 0", gauge(MetricState), gauge(MetricOpenSeconds))
	}
	trip(t, b)
	ctx := context.Background()
	for range 3 {
		if d, _ := b.Allow(ctx); d.Allowed {
			t.Fatal("allowed right after opening")
		}
	}
	time.Sleep(s.ProbeMin)
	d, err := b.Allow(ctx)
	if err != nil || !d.Probe {
		t.Fatal(d, err)
	}
	if got := gauge(MetricState); got != float64(HalfOpen) {
		t.Errorf("half-open: state %v, want 2", got)
	}
	if got := gauge(MetricOpenSeconds); got < s.ProbeMin.Seconds() || got > 1 {
		t.Errorf("open seconds %v, want between %v and 1", got, s.ProbeMin.Seconds())
	}
	if got := gauge(MetricRefused); got != 3 {
		t.Errorf("refused %v, want 3", got)
	}
	if got := gauge(MetricProbes); got != 1 {
		t.Errorf("probes %v, want 1", got)
	}
	if _, err := b.Report(ctx, d, Call{Seller: "s", Row: "u", Outcome: Failure}); err != nil {
		t.Fatal(err)
	}
	if got := gauge(MetricState); got != float64(Open) {
		t.Errorf("after a failed probe: state %v, want 1", got)
	}
	// Redis gone: the last known state, not a false "closed".
	srv.Stop()
	if got := gauge(MetricState); got != float64(Open) {
		t.Errorf("Redis down: state %v, want the last known 1", got)
	}
}

// Answers of concurrent requests arrive in any order. A report the script
// answered just before the circuit opened, arriving after the answer that
// opened it, must not make this process believe the circuit closed again
// (its rows would take slots and its readers read while the API is down).
func TestAnOlderAnswerDoesNotReplaceTheView(t *testing.T) {
	b := newBreaker(t, testredis.Start(t).Client(), fast())
	t0 := time.Now()
	b.learn(t0.Add(time.Millisecond), Open, time.Second, false, 0)
	b.learn(t0, Closed, 0, true, 0)
	if st, _, _ := b.Local(); st != Open {
		t.Fatalf("after an open answer and an older closed one the view is %s, want open", st)
	}
	if d, ok := b.refuseLocally(); !ok || d.Allowed {
		t.Errorf("Allow would not refuse locally after the older answer: %+v, %v", d, ok)
	}
	b.learn(t0.Add(2*time.Millisecond), Closed, 0, true, 0)
	if st, _, _ := b.Local(); st != Closed {
		t.Errorf("a newer closed answer left the view %s, want closed", st)
	}
	// After Redis failed the view is forgotten; any answer is news then.
	b.forget()
	b.learn(t0, Open, time.Second, false, 0)
	if st, _, known := b.Local(); !known || st != Open {
		t.Errorf("after forgetting, an answer left the view %s (known %v), want open", st, known)
	}
}

// TestTrustClosed: after an answer that the circuit is closed, Allow answers
// from this process's view for TrustClosed, without a round trip; then it
// asks Redis again. A circuit another process opened meanwhile is learned
// from the next answer (here the Report of a call allowed locally), and no
// call is allowed locally after that.
func TestTrustClosed(t *testing.T) {
	srv := testredis.Start(t)
	s := fast()
	// Long enough that a busy machine's calls fit in half of it: the
	// counts below hold only while no renewal (TrustClosed/2) runs.
	s.TrustClosed = time.Second
	a, other := newBreaker(t, srv.Client(), s), newBreaker(t, srv.Client(), s)
	ctx := context.Background()
	scripts := func() int64 {
		t.Helper()
		info, err := srv.Client().Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		return evalCalls(t, info)
	}

	call(t, a, "s1", "u:1", Success) // learns closed
	before, began := scripts(), time.Now()
	for range 20 {
		if d, err := a.Allow(ctx); err != nil || !d.Allowed || d.State != Closed {
			t.Fatalf("Allow within TrustClosed = %+v, %v; want allowed, closed", d, err)
		}
	}
	if time.Since(began) < s.TrustClosed/2 { // then a renewal reads the state (TestABusyProcessRenewsItsClosedView)
		if n := scripts() - before; n != 0 {
			t.Errorf("20 Allows within TrustClosed of a closed answer ran %d scripts in Redis, want 0", n)
		}
	}
	if got := a.allowedLocally.Load(); got != 20 {
		t.Errorf("allowed locally: %d, want 20", got)
	}

	time.Sleep(s.TrustClosed)
	testwait.For(t, s.TrustClosed, "a renewal in flight ends", func() bool { return !a.renewing.Load() })
	before = scripts()
	if d, err := a.Allow(ctx); err != nil || !d.Allowed {
		t.Fatalf("Allow after TrustClosed = %+v, %v; want allowed", d, err)
	}
	if n := scripts() - before; n != 1 {
		t.Errorf("Allow once TrustClosed had passed ran %d scripts, want 1 (it asks Redis)", n)
	}

	// The fleet opens the circuit while a's view is still fresh. a's
	// answered calls are counted in its unsent batch, answered from its
	// view, until the batch is half a TrustClosed old: the report that
	// then sends it answers open.
	fresh := time.Now()
	call(t, a, "s1", "u:2", Success) // asks Redis (the trust ran out above): fresh again
	before = scripts()
	d, st := call(t, a, "s2", "u:3", Success)
	if n := scripts() - before; (n != 0 && time.Since(fresh) < s.TrustClosed/2) || !d.Allowed || st.State != Closed {
		t.Errorf("an answered call within TrustClosed of a closed answer: allowed %v, answered %s, %d scripts; want allowed, closed, 0 (counted in the batch)", d.Allowed, st.State, n)
	}
	time.Sleep(s.TrustClosed / 2)
	trip(t, other)
	d, st = call(t, a, "s2", "u:4", Success)
	if !d.Allowed || st.State != Open {
		t.Fatalf("the report once the batch was TrustClosed/2 old: allowed %v, answered %s; want allowed, open", d.Allowed, st.State)
	}
	if d, err := a.Allow(ctx); err != nil || d.Allowed {
		t.Errorf("Allow after a Report answered open = %+v, %v; want refused", d, err)
	}

	s.TrustClosed, s.Name = -1, "never" // a circuit of its own, closed
	never := newBreaker(t, srv.Client(), s)
	if _, err := never.Report(ctx, Decision{}, Call{Seller: "s1", Row: "u:9", Outcome: Answered}); err != nil {
		t.Fatal(err)
	}
	before = scripts()
	never.Allow(ctx)
	never.Allow(ctx)
	if n := scripts() - before; n != 2 || never.allowedLocally.Load() != 0 {
		t.Errorf("with TrustClosed negative, 2 Allows ran %d scripts and %d were local; want 2 and 0", n, never.allowedLocally.Load())
	}
}

// TestAnsweredCallsAreSentInBatches: while a process trusts that the
// circuit is closed, its answered calls are counted locally and sent with
// its next report that goes to Redis (a failure, or the first answered call
// once the batch is TrustClosed/2 old): the window counts every call, and
// the sellers the batch saw, as if each had been reported.
func TestAnsweredCallsAreSentInBatches(t *testing.T) {
	srv := testredis.Start(t)
	s := fast()
	s.TrustClosed = time.Second
	s.MinFailedSellers = 3 // a batch names up to this many distinct sellers: a and b, with room to spare
	b := newBreaker(t, srv.Client(), s)
	ctx := context.Background()
	countedIn := func(b *Breaker) (calls int, sellers map[string]bool) {
		t.Helper()
		_, window := b.Keys()
		m, err := srv.Client().HGetAll(ctx, window).Result()
		if err != nil {
			t.Fatal(err)
		}
		sellers = map[string]bool{}
		for k, v := range m {
			switch {
			case strings.HasSuffix(k, ":n"):
				n, _ := strconv.Atoi(v)
				calls += n
			case strings.HasSuffix(k, ":ok"), strings.HasSuffix(k, ":fc"):
				// "seller\tcount" lines: the sellers answered, and failing
				for line := range strings.SplitSeq(v, "\n") {
					if x, _, _ := strings.Cut(line, "\t"); x != "" {
						sellers[x] = true
					}
				}
			}
		}
		return calls, sellers
	}
	counted := func() (int, map[string]bool) { return countedIn(b) }

	call(t, b, "a", "a:0", Success) // its Allow learned that the circuit is closed: counted in the batch
	for i := range 30 {
		o := Success
		if i%3 == 0 {
			o = Answered
		}
		call(t, b, "b", fmt.Sprintf("b:%d", i), o)
	}
	if n, _ := counted(); n != 0 {
		t.Fatalf("the window counts %d calls after 31 answered within TrustClosed/2, want 0 (they wait in the batch)", n)
	}
	if got := b.batched.Load(); got != 31 {
		t.Errorf("%d calls counted in the batch, want 31", got)
	}
	call(t, b, "c", "c:0", Failure)
	n, sellers := counted()
	if n != 32 {
		t.Errorf("after a failure the window counts %d calls, want 32 (the batch of 31 + the failure)", n)
	}
	if !sellers["a"] || !sellers["b"] || !sellers["c"] {
		t.Errorf("sellers in the window %v, want a, b and c (a's and b's calls came in the batch)", sellers)
	}

	// With no failure, the batch goes with the first answered call once it
	// is TrustClosed/2 old.
	call(t, b, "d", "d:0", Success)
	time.Sleep(s.TrustClosed / 2)
	call(t, b, "d", "d:1", Success)
	if n, _ := counted(); n != 34 {
		t.Errorf("the window counts %d calls once the batch was TrustClosed/2 old, want 34", n)
	}

	// A report that fails (Redis down) keeps its batch for the next one:
	// on a circuit of its own whose batch neither goes by age nor leaves
	// the window while Redis restarts (seconds on a loaded machine).
	kept := s
	kept.Name, kept.Window, kept.TrustClosed = "kept", time.Minute, 30*time.Second
	k := newBreaker(t, srv.Client(), kept)
	for i := range 5 {
		call(t, k, "f", fmt.Sprintf("f:%d", i), Success)
	}
	if n, _ := countedIn(k); n != 0 {
		t.Fatalf("the window counts %d calls of a batch not yet sent, want 0", n)
	}
	srv.Stop()
	if _, err := k.Report(ctx, Decision{State: Closed, Allowed: true}, Call{Seller: "f", Row: "f:x", Outcome: Failure}); err == nil {
		t.Fatal("a report with Redis stopped answered no error")
	}
	srv.Restart() // empty: the window starts again
	call(t, k, "f", "f:9", Failure)
	if n, _ := countedIn(k); n != 6 {
		t.Errorf("after a failed report and Redis's restart the window counts %d calls, want 6 (the kept batch of 5 + the failure)", n)
	}

	// A probe's answer is never batched: it closes the circuit for everyone.
	s.Name = "probe" // a circuit of its own, with an empty window
	p := newBreaker(t, srv.Client(), s)
	trip(t, p)
	time.Sleep(s.ProbeMin)
	d, st := call(t, p, "e", "e:0", Success)
	if !d.Probe || st.State != Closed {
		t.Fatalf("the probe: %+v, answered %s; want a probe whose report closes the circuit", d, st.State)
	}
	if got := peek(t, p); got.State != Closed {
		t.Errorf("after the probe succeeded Redis holds %s, want closed", got.State)
	}
}

// TestABusyProcessRenewsItsClosedView: a process that keeps allowing calls
// renews its closed view in the background before it runs out, so no call
// waits for a round trip of its own; and a crowd of callers that find the
// view run out (an idle process) costs one request, not one each.
func TestABusyProcessRenewsItsClosedView(t *testing.T) {
	srv := testredis.Start(t)
	s := fast()
	// A renewal starts at half the trust and has the other half to come
	// back: 200 ms on a machine busy with the rest of the suite.
	s.TrustClosed = 400 * time.Millisecond
	b := newBreaker(t, srv.Client(), s)
	ctx := context.Background()
	call(t, b, "s1", "u:1", Success) // learns closed

	// Busy: an Allow every 10 ms for five times TrustClosed. Without the
	// renewal the view runs out after TrustClosed and an Allow asks Redis.
	local := b.allowedLocally.Load()
	n := 0
	for end := time.Now().Add(5 * s.TrustClosed); time.Now().Before(end); n++ {
		if d, err := b.Allow(ctx); err != nil || !d.Allowed {
			t.Fatalf("Allow %d: %+v, %v; want allowed", n, d, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := b.allowedLocally.Load() - local; got != int64(n) {
		t.Errorf("%d of %d Allows over %v were answered from the view, want all: the view ran out while the process was busy", got, n, 5*s.TrustClosed)
	}

	// Idle until the view has run out (and no renewal started by the
	// busy loop is still on its way), then a crowd: one request, the
	// others read its answer.
	testwait.For(t, 5*time.Second, "the closed view run out", func() bool {
		b.mu.Lock()
		learned := b.view.learned
		b.mu.Unlock()
		return !b.renewing.Load() && time.Since(learned) >= s.TrustClosed
	})
	before := srv.Client().Info(ctx, "commandstats").Val()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if d, err := b.Allow(ctx); err != nil || !d.Allowed {
				t.Errorf("Allow in the crowd: %+v, %v; want allowed", d, err)
			}
		})
	}
	wg.Wait()
	if got := evalCalls(t, srv.Client().Info(ctx, "commandstats").Val()) - evalCalls(t, before); got != 1 {
		t.Errorf("20 Allows on a view that had run out ran %d scripts, want 1", got)
	}
}

// evalCalls is how many scripts (EVAL and EVALSHA) an INFO commandstats
// counts.
func evalCalls(t *testing.T, info string) int64 {
	t.Helper()
	var n int64
	for line := range strings.SplitSeq(info, "\r\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:") {
			var calls int64
			if _, err := fmt.Sscanf(line[strings.Index(line, ":")+1:], "calls=%d", &calls); err != nil {
				t.Fatalf("reading %q: %v", line, err)
			}
			n += calls
		}
	}
	return n
}

// TestARefusalOfBulkregHoldsTheCircuit: one answer that refuses bulkreg
// itself (a 401 after the credential was rotated, a 404 off the route) opens
// the circuit at once, with no window to fill, as misconfigured; refused
// probes keep it open with the growing interval; the reason and the gauge
// say so; a probe that gets an answer closes it and clears the reason. A
// transient outage keeps its own reason.
func TestARefusalOfBulkregHoldsTheCircuit(t *testing.T) {
	srv := testredis.Start(t)
	s := fast()
	b := newBreaker(t, srv.Client(), s)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(b.Collector()); err != nil {
		t.Fatal(err)
	}
	misconfigured := func() float64 { return metricValue(t, reg, MetricMisconfigured) }
	ctx := context.Background()
	if got := misconfigured(); got != 0 {
		t.Errorf("closed: %s = %v, want 0", MetricMisconfigured, got)
	}
	for i := range 3 {
		call(t, b, "a", fmt.Sprintf("a:%d", i), Success)
	}
	_, st := call(t, b, "a", "a:9", Refused)
	if st.State != Open || !st.Changed || st.Reason != Misconfigured {
		t.Fatalf("after one refusal: %+v; want open at once (changed), misconfigured", st)
	}
	if p := peek(t, b); p.State != Open || p.Reason != Misconfigured || p.Opens != 1 {
		t.Errorf("Peek = %+v; want open, misconfigured, opened once", p)
	}
	if got := misconfigured(); got != 1 {
		t.Errorf("open for a refusal: %s = %v, want 1", MetricMisconfigured, got)
	}
	// Calls refused meanwhile (they started before it opened) change nothing.
	if _, err := b.Report(ctx, Decision{State: Closed, Allowed: true}, Call{Seller: "b", Row: "b:1", Outcome: Refused}); err != nil {
		t.Fatal(err)
	}
	want := s.ProbeMin
	for i := range 3 {
		time.Sleep(want)
		d, err := b.Allow(ctx)
		if err != nil || !d.Probe {
			t.Fatalf("probe %d: Allow = %+v, %v; want the probe after %s", i+1, d, err, want)
		}
		st, err := b.Report(ctx, d, Call{Seller: "a", Row: "a:9", Outcome: Refused})
		if err != nil || st.State != Open || st.Reason != Misconfigured || st.Wait < want {
			t.Fatalf("refused probe %d: %+v, %v; want open, misconfigured, the next probe after more than %s", i+1, st, err, want)
		}
		want = min(time.Duration(float64(want)*s.ProbeMultiplier), s.ProbeMax)
	}
	time.Sleep(want)
	d, err := b.Allow(ctx)
	if err != nil || !d.Probe {
		t.Fatalf("Allow = %+v, %v; want the probe", d, err)
	}
	if st, err := b.Report(ctx, d, Call{Seller: "a", Row: "a:9", Outcome: Success}); err != nil || st.State != Closed || st.Reason != "" {
		t.Fatalf("the probe registered: %+v, %v; want closed, no reason", st, err)
	}
	if got := misconfigured(); got != 0 {
		t.Errorf("closed again: %s = %v, want 0", MetricMisconfigured, got)
	}
	// An outage is "unavailable", and a refusal met during it marks it misconfigured.
	trip(t, b)
	if p := peek(t, b); p.Reason != Unavailable {
		t.Errorf("open for transient failures: reason %q, want %q", p.Reason, Unavailable)
	}
	if got := misconfigured(); got != 0 {
		t.Errorf("an outage: %s = %v, want 0", MetricMisconfigured, got)
	}
	if _, err := b.Report(ctx, Decision{State: Closed, Allowed: true}, Call{Seller: "b", Row: "b:2", Outcome: Refused}); err != nil {
		t.Fatal(err)
	}
	if p := peek(t, b); p.State == Closed || p.Reason != Misconfigured {
		t.Errorf("a refusal during an outage: %+v; want still open, misconfigured", p)
	}
}

// TestWhoseRefusal: a refusal of bulkreg opens the circuit unless it is one
// seller's: another seller was answered in the window and no other seller
// was refused. The probe that closes the circuit counts as an answer in the
// fresh window, so one seller's refusals do not reopen it over and over.
func TestWhoseRefusal(t *testing.T) {
	srv := testredis.Start(t)
	type c struct {
		seller string
		o      Outcome
		open   bool // the circuit is not closed after this call
	}
	for _, tc := range []struct {
		name  string
		calls []c
	}{
		{"a lone seller refused: bulkreg's", []c{{"a", Refused, true}}},
		{"refused after its own answers: bulkreg's", []c{{"a", Success, false}, {"a", Answered, false}, {"a", Refused, true}}},
		{"refused while another seller is answered: its own", []c{{"b", Success, false}, {"a", Refused, false}, {"a", Refused, false}, {"b", Success, false}}},
		{"a second seller refused too: bulkreg's", []c{{"b", Success, false}, {"a", Refused, false}, {"c", Refused, true}}},
		{"another seller's answer was a refusal of its row: still an answer", []c{{"b", Answered, false}, {"a", Refused, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fast()
			s.Name = tc.name
			b := newBreaker(t, srv.Client(), s)
			for i, cl := range tc.calls {
				_, st := call(t, b, cl.seller, fmt.Sprintf("%s:%d", cl.seller, i), cl.o)
				if open := st.State != Closed; open != cl.open {
					t.Fatalf("call %d (%s, %s): circuit %s (%+v), want open %v", i+1, cl.seller, cl.o, st.State, st, cl.open)
				}
				if cl.open && st.Reason != Misconfigured {
					t.Errorf("call %d: reason %q, want %q", i+1, st.Reason, Misconfigured)
				}
			}
		})
	}

	t.Run("the closing probe is an answer", func(t *testing.T) {
		s := fast()
		s.Name = "closing probe"
		b := newBreaker(t, srv.Client(), s)
		if _, st := call(t, b, "a", "a:1", Refused); st.State != Open {
			t.Fatalf("a lone refusal: %s, want open", st.State)
		}
		time.Sleep(s.ProbeMin)
		d, st := call(t, b, "b", "b:1", Success)
		if !d.Probe || st.State != Closed {
			t.Fatalf("b's probe: %+v, %+v; want the probe, closed", d, st)
		}
		if _, st := call(t, b, "a", "a:2", Refused); st.State != Closed {
			t.Errorf("a refused right after b's probe closed the circuit: %s, want closed (a's own)", st.State)
		}
		if p := peek(t, b); p.Opens != 1 {
			t.Errorf("opened %d times, want once", p.Opens)
		}
	})
}

// beginFailing reports one failure of seller and waits a bucket of the
// window, so the answers that follow prove the API up while seller fails
// (answers from before a failure do not: an outage may have begun since).
func beginFailing(t *testing.T, b *Breaker, s Settings, seller string) {
	t.Helper()
	if _, st := call(t, b, seller, seller+":first", Failure); st.State != Closed {
		t.Fatalf("%s's first failure opened the circuit", seller)
	}
	time.Sleep(s.Window / time.Duration(s.Buckets))
}
