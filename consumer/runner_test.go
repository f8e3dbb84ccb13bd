package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/deadletter"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/ledger"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// withLedger gives a consumer the SKU ledger, as the commands do.
func (s *stack) withLedger() func(*Config, *Deps) {
	return func(_ *Config, d *Deps) { d.Ledger = ledger.New(s.rdb, ledger.Options{}) }
}

// TestRunnerPacesManySellers: the runner path end to end (the SKU ledger,
// the throttle, the call records, the upload status, against redis-server,
// the embedded broker and the sandbox API): 12 sellers × 300 rows over 4
// partitions and 2 consumers, 100 per 3 s. Every row is registered once, the
// API answers no 429, no window holds more than the limit, every row's
// result is recorded, and the sellers keep pace: from its first registration
// to its last the median seller takes at most 1.10 × its lower bound
// ((⌈300/100⌉ − 1) × (window + margin)) and the slowest 1.25 ×. A window
// booked a window late makes 1.5 ×; the runner's target, 1.02 × for the
// slowest, is the bench's to measure (`go run ./bench -scenario
// many-sellers`): this test shares the machine with the rest of the suite,
// whose load delays calls, so its bounds leave room for that and stay well
// below 1.5 ×.
func TestRunnerPacesManySellers(t *testing.T) {
	const sellers, rows = 12, 300
	s := newStack(t, stackOptions{partitions: 4, limit: 100, window: 3 * time.Second, margin: 50 * time.Millisecond,
		latency: 5 * time.Millisecond, jitter: 2 * time.Millisecond})
	for range 2 {
		s.startConsumer(s.withLedger())
	}
	s.waitGroupStable("registrar", 2)
	for i := range sellers {
		s.publish(fmt.Sprintf("up-%d", i), fmt.Sprintf("seller-%d", i), rows)
	}
	for i := range sellers {
		s.waitProducts(fmt.Sprintf("seller-%d", i), rows, 60*time.Second)
	}
	bound := 2 * (s.window + s.margin)
	var ratios []float64
	for i := range sellers {
		seller := fmt.Sprintf("seller-%d", i)
		s.checkCompliant(seller, rows)
		a := s.audit(seller)
		ratios = append(ratios, float64(a.Last.Sub(a.First))/float64(bound))
		s.logWindows(seller)
	}
	slices.Sort(ratios)
	var missed float64
	for _, c := range s.started {
		missed += testutil.ToFloat64(c.m.late) + testutil.ToFloat64(c.m.stale)
	}
	t.Logf("sellers' first to last registration ÷ lower bound %v: min %.4f, median %.4f, max %.4f; slots missed %v",
		bound, ratios[0], ratios[len(ratios)/2], ratios[len(ratios)-1], missed)
	if median := ratios[len(ratios)/2]; median > 1.10 {
		t.Errorf("the median seller took %.4f × its lower bound, want ≤ 1.10", median)
	}
	if worst := ratios[len(ratios)-1]; worst > 1.25 {
		t.Errorf("the slowest seller took %.4f × its lower bound, want ≤ 1.25", worst)
	}
	if key, n := s.calls.maxPerKey(); n != 1 {
		t.Errorf("row %s was called %d times, want every row called once", key, n)
	}
	st := uploadstatus.New(s.rdb, time.Hour)
	testwait.For(t, 10*time.Second, "every row's result recorded", func() bool {
		for i := range sellers {
			u, err := st.Get(context.Background(), fmt.Sprintf("up-%d", i))
			if err != nil || u.Registered != rows {
				return false
			}
		}
		return true
	})
}

func (s *stack) logWindows(seller string) {
	ts := s.sandbox.AcceptedTimes(seller)
	if len(ts) == 0 {
		return
	}
	t0 := ts[0]
	var b []string
	for i := 0; i < len(ts); i += 25 {
		b = append(b, fmt.Sprintf("%d:%.3f", i, ts[i].Sub(t0).Seconds()))
	}
	b = append(b, fmt.Sprintf("%d:%.3f", len(ts)-1, ts[len(ts)-1].Sub(t0).Seconds()))
	s.t.Logf("%s %v", seller, b)
}

// TestRunnerHoldsASellerTheAPIFails: the runner path's one rule for a seller
// whose calls fail (5xx) while none is answered.
//
// A lone seller meets an outage: its 500 rows are being registered by four
// consumers (100 per second) when the API answers 503 to everything for 6 s.
// The seller is held by its runner: no row is dead-lettered (the retry
// budget, 3 attempts, is not spent while it is held), the dead API gets the
// batch that was out and one probe per growing interval (fewer than 300
// calls), and every row is registered once after it, with no 429.
//
// A poison seller (the API answers 503 to its calls alone) shares a
// partition with a healthy one: the healthy seller's 200 rows are registered
// at their pace meanwhile, the poison seller's rows are held, not
// dead-lettered, the fleet's circuit never opens, and once the API serves
// the poison seller again its rows are registered too.
func TestRunnerHoldsASellerTheAPIFails(t *testing.T) {
	short := registryclientRetry3()
	probes := func(c *Config, d *Deps) {
		c.SellerProbeMin, c.SellerProbeMax = 100*time.Millisecond, time.Second
		d.Retry = short
	}
	t.Run("a lone seller meets an outage", func(t *testing.T) {
		s := newStack(t, stackOptions{partitions: 4, limit: 100, window: time.Second, margin: 50 * time.Millisecond, latency: 3 * time.Millisecond})
		for range 4 {
			s.startConsumer(s.withLedger(), probes)
		}
		s.waitGroupStable("registrar", 4)
		s.publish("up-1", "seller-1", 500)
		s.waitProducts("seller-1", 100, 10*time.Second)
		s.sandbox.SetOutage(sandbox.Outage{All: true})
		time.Sleep(6 * time.Second)
		refused, before := s.sandbox.Outage().Refused, s.audit("seller-1").Products
		s.sandbox.SetOutage(sandbox.Outage{})
		s.waitProducts("seller-1", 500, 30*time.Second)
		s.checkCompliant("seller-1", 500)
		t.Logf("the dead API got %d calls in 6 s; the seller had %d products when it came back", refused, before)
		if refused >= 300 {
			t.Errorf("the dead API got %d calls, want fewer than 300 (the batch out, then one probe per interval)", refused)
		}
		if refused == 0 {
			t.Errorf("the dead API got no call: the outage did not meet the seller's rows")
		}
		if n := dlqLen(t, s.brokers, s.topic); n != 0 {
			t.Errorf("%d rows dead-lettered, want 0: a held seller spends no attempt", n)
		}
	})
	t.Run("a poison seller never holds another", func(t *testing.T) {
		s := newStack(t, stackOptions{partitions: 1, limit: 50, window: time.Second, margin: 50 * time.Millisecond, latency: 3 * time.Millisecond})
		if err := s.sandbox.SetChaos(sandbox.Chaos{Sellers: []string{"poison"}}); err != nil {
			t.Fatal(err)
		}
		c := s.startConsumer(s.withLedger(), probes)
		s.waitGroupStable("registrar", 1)
		s.publish("up-poison", "poison", 40)
		s.publish("up-good", "good", 200)
		published := time.Now()
		s.waitProducts("good", 200, 15*time.Second)
		took := time.Since(published)
		s.checkCompliant("good", 200)
		t.Logf("the healthy seller's 200 rows registered %v after they were published", took.Round(time.Millisecond))
		// 200 rows at 50 per 1.05 s: the first call of the fifth window comes
		// 4 windows after the first; a seller held behind the poison one
		// would wait out its probes.
		if bound := 4*(s.window+s.margin) + time.Second; took > bound {
			t.Errorf("the healthy seller took %v, want ≤ %v: the poison seller held it", took, bound)
		}
		if n := testutil.ToFloat64(c.m.sellersHeld); n != 1 {
			t.Errorf("%v sellers held, want the poison one", n)
		}
		calls := 0
		for _, call := range s.sandbox.Calls() {
			if call.Seller == "poison" {
				calls++
			}
		}
		if calls > 40+20 {
			t.Errorf("the poison seller made %d calls for 40 rows, want its first batch and a probe per interval", calls)
		}
		if st, err := s.breaker().Peek(context.Background()); err != nil || st.Opens != 0 {
			t.Errorf("the circuit opened %d times (%v), want never: one seller's failures are its own", st.Opens, err)
		}
		if n := dlqLen(t, s.brokers, s.topic); n != 0 {
			t.Errorf("%d rows dead-lettered, want 0: the poison seller is held, not failed", n)
		}
		if err := s.sandbox.SetChaos(sandbox.Chaos{}); err != nil {
			t.Fatal(err)
		}
		s.waitProducts("poison", 40, 10*time.Second)
		s.checkCompliant("poison", 40)
		testwait.For(t, 5*time.Second, "the hold ends", func() bool { return testutil.ToFloat64(c.m.sellersHeld) == 0 })
	})
	t.Run("rows held past the hold limit go to the dead-letter topic", func(t *testing.T) {
		s := newStack(t, stackOptions{partitions: 1, limit: 50, window: time.Second, margin: 50 * time.Millisecond, latency: 3 * time.Millisecond})
		if err := s.sandbox.SetChaos(sandbox.Chaos{Sellers: []string{"poison"}}); err != nil {
			t.Fatal(err)
		}
		c := s.startConsumer(s.withLedger(), probes, func(c *Config, _ *Deps) { c.SellerHoldLimit = time.Second })
		s.waitGroupStable("registrar", 1)
		s.publish("up-poison", "poison", 20)
		testwait.For(t, 10*time.Second, "the held rows dead-lettered", func() bool { return dlqLen(t, s.brokers, s.topic) >= 20 })
		dl := readDLQ(t, s.brokers, s.topic, 20)
		if got := header(dl[0], deadletter.HeaderErrorClass); got != "transient" || !strings.Contains(header(dl[0], deadletter.HeaderErrorMessage), "--seller-hold-limit") {
			t.Errorf("dead letter class %q, message %q; want transient, naming the hold limit", got, header(dl[0], deadletter.HeaderErrorMessage))
		}
		if n := testutil.ToFloat64(c.m.holdExpired); n < 1 {
			t.Errorf("bulkreg_consumer_seller_holds_expired_total = %v, want at least 1 (the alert's metric)", n)
		}
		if key, n := s.calls.maxPerKey(); n > 10 {
			t.Errorf("row %s was called %d times in its 1 s hold, want its batch's call and a few probes", key, n)
		}
	})
}

// registryclientRetry3 is a retry budget of 3 attempts, quickly spent.
func registryclientRetry3() registryclient.RetryPolicy {
	return registryclient.RetryPolicy{InitialInterval: 20 * time.Millisecond, MaxInterval: 50 * time.Millisecond, MaxElapsed: time.Second,
		Multiplier: 2, Jitter: 0.5, MaxAttempts: 3}
}

// shortHold makes a seller whose calls all fail dead-lettered soon on the
// runner path, as its retry budget does on the lanes path, for tests of
// what follows a dead letter.
func shortHold(c *Config) {
	c.SellerProbeMin, c.SellerProbeMax, c.SellerHoldLimit = 50*time.Millisecond, 100*time.Millisecond, 500*time.Millisecond
}

// TestAnOutageAmongCallsSentTogetherHoldsTheSeller: the API answers the
// first 10 calls of a lone seller's 50 rows, the first 30 sent together in
// one batch, and 503 to everything after them for a second. The failures
// among calls sent together are the rows' own (one attempt each), but the
// next batch, its rows failing with none answered, holds the seller: no row
// spends its budget (3 attempts) or is dead-lettered, and every row is
// registered once the API answers again. Were the rows of the next batch to
// spend their attempts, 40 would be dead-lettered within a tenth of a
// second.
func TestAnOutageAmongCallsSentTogetherHoldsTheSeller(t *testing.T) {
	var calls atomic.Int64
	var up atomic.Bool
	f := newFixture(t, 1, func(key string, n int) registryclient.Result {
		if calls.Add(1) > 10 && !up.Load() {
			return registryclient.Result{Class: registryclient.Transient, Status: 503, Err: errors.New("the registration API answered 503")}
		}
		return registryclient.Result{Class: registryclient.Registered, Status: 201}
	})
	f.retry = registryclientRetry{fixedRetry{interval: 20 * time.Millisecond, attempts: 3}}
	f.cfg.SellerProbeMin, f.cfg.SellerProbeMax = 50*time.Millisecond, 100*time.Millisecond
	f.cfg.SellerConcurrency = 30
	c := f.start()
	f.publish("u", "s", 50)
	testwait.For(t, 5*time.Second, "the seller held", func() bool { return testutil.ToFloat64(c.m.sellersHeld) == 1 })
	time.Sleep(time.Second)
	up.Store(true)
	testwait.For(t, 10*time.Second, "50 rows recorded", func() bool { return len(f.status.snapshot()) == 50 })
	if n := f.registeredCount("u"); n != 50 {
		t.Errorf("%d rows registered, want all 50: the outage is not the rows' failure", n)
	}
	if n := testutil.ToFloat64(c.m.dlqWrites.WithLabelValues("transient")); n != 0 {
		t.Errorf("%v rows dead-lettered, want 0", n)
	}
	if n := testutil.ToFloat64(c.m.sellersHeld); n != 0 {
		t.Errorf("%v sellers held after every row registered, want 0", n)
	}
	// The partition's reader waits for the next message holding its
	// tokens; that is no row.
	testwait.For(t, 5*time.Second, "no row in flight", func() bool { return gathered(t, f.reg, "bulkreg_consumer_rows_in_flight") == 0 })
}

// closedBreaker is a fleet circuit that never opens: every call is
// allowed, and no failure is judged the fleet's or a seller's (tests of a
// row's own retry budget).
type closedBreaker struct{}

func (closedBreaker) WaitReady(context.Context) error { return nil }
func (closedBreaker) Allow(context.Context) (circuit.Decision, error) {
	return circuit.Decision{State: circuit.Closed, Allowed: true}, nil
}
func (closedBreaker) Report(context.Context, circuit.Decision, circuit.Call) (circuit.Status, error) {
	return circuit.Status{State: circuit.Closed}, nil
}
func (closedBreaker) Local() (circuit.State, time.Duration, bool) { return circuit.Closed, 0, true }
func (closedBreaker) Changed() <-chan struct{}                    { return nil }
func (closedBreaker) Collector() prometheus.Collector             { return prometheus.NewRegistry() }

// openBreaker is a fleet circuit that stays open from since on: a probe is
// due every 50 ms, and every one is refused (another consumer's is out).
type openBreaker struct {
	changed chan struct{}
	since   time.Time
}

func (openBreaker) WaitReady(ctx context.Context) error {
	select {
	case <-time.After(50 * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (openBreaker) Allow(context.Context) (circuit.Decision, error) {
	return circuit.Decision{State: circuit.Open}, nil
}
func (openBreaker) Report(context.Context, circuit.Decision, circuit.Call) (circuit.Status, error) {
	return circuit.Status{State: circuit.Open}, nil
}
func (b openBreaker) Local() (circuit.State, time.Duration, bool) {
	return circuit.Open, time.Since(b.since), true
}
func (b openBreaker) Changed() <-chan struct{}      { return b.changed }
func (openBreaker) Collector() prometheus.Collector { return prometheus.NewRegistry() }

// TestTheCircuitHoldsARowNoLongerThanTheHoldLimit: the fleet's circuit
// opens and no probe is ever answered. The rows read wait without a call
// until the circuit has been open for --seller-hold-limit, and then go to
// the dead-letter topic for an operator, as the rows of a held seller do;
// the rows read after that (one at a time: a consumer holding rows reads no
// more while the circuit is open) go at once, having waited in Kafka as
// long. None is called. Without the limit they would wait for as long as
// the API stays down.
func TestTheCircuitHoldsARowNoLongerThanTheHoldLimit(t *testing.T) {
	const limit = 300 * time.Millisecond
	f := newFixture(t, 1, nil)
	opened := time.Now()
	f.cfg.SellerHoldLimit = limit
	f.reg = prometheus.NewRegistry()
	d := f.deps()
	d.Circuit, d.Registerer = openBreaker{changed: make(chan struct{}), since: opened}, f.reg
	c, err := New(f.cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	f.publish("u", "s", 3)
	letters := f.dlq(3)
	took := time.Since(opened)
	for _, l := range letters {
		if got := header(l, deadletter.HeaderErrorClass); got != registryclient.Transient.String() {
			t.Errorf("dead letter of class %q, want %q", got, registryclient.Transient)
		}
	}
	if took < limit {
		t.Errorf("3 rows dead-lettered %v after the circuit opened, before the hold limit %v", took.Round(time.Millisecond), limit)
	}
	if calls, _ := f.registry.count(); calls != 0 {
		t.Errorf("%d calls while the circuit was open, want 0", calls)
	}
	if n := testutil.ToFloat64(c.m.holdExpired); n < 1 {
		t.Errorf("bulkreg_consumer_seller_holds_expired_total = %v, want at least 1", n)
	}
}

// TestARevokeLeavesRowsNotWaitingAlone: when a partition is revoked during
// a batch, only the rows waiting for their slots give their slots, starts
// and claims back. A row queued again after a failed check holds no call
// any more, and a row handed on to the call pool gives its start back when
// its call starts: revoked passes over both.
func TestARevokeLeavesRowsNotWaitingAlone(t *testing.T) {
	const starts = 4
	rn := &runner{c: &Consumer{starts: newStartBudget(starts)}}
	rn.c.starts.free = starts - 1 // the handed row's start
	handed := &item{call: &call{slot: &slot{}, called: true, start: true}}
	queuedAgain := &item{} // requeue cleared its call
	var freed []throttle.Reservation
	rn.revoked([]*item{handed, queuedAgain}, &freed)
	if len(freed) != 0 {
		t.Errorf("%d slots freed, want 0: neither row waits for its slot", len(freed))
	}
	if handed.slot == nil || !handed.start {
		t.Error("the handed row lost its slot or its start, which its call still uses")
	}
	if rn.c.starts.free != starts-1 {
		t.Errorf("%d starts free, want %d: the handed row's start goes back when its call starts", rn.c.starts.free, starts-1)
	}
}
