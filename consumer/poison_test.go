package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

// TestTwoSellersFailuresWhileAThirdRegisters: every call of two sellers
// answers 503 while a third seller registers normally. Failures of two
// sellers look like an outage to the circuit's counts (many failed rows,
// two sellers, most calls failing), but the third seller, answered on every
// call, proves the API is up: the failures are the two sellers' own. The
// circuit stays closed and the healthy seller's rows are all registered;
// each failing seller is held by its runner, its rows spending no attempt
// (fewer calls reach the API than the failing sellers have rows: one probe
// per growing interval), until the hold limit sends them, every one, to the
// dead-letter topic for an operator. Were the circuit to open, the healthy
// seller would wait with them; were the held rows to spend their attempts,
// each would be called its whole budget.
func TestTwoSellersFailuresWhileAThirdRegisters(t *testing.T) {
	// The sandbox's latency slows the healthy seller only (the failing
	// sellers are answered before it).
	s := newStack(t, stackOptions{partitions: 1, limit: 20, window: time.Second, margin: 50 * time.Millisecond, latency: 200 * time.Millisecond})
	const attempts = 4
	const holdLimit = 3 * time.Second
	fault, watch, c := s.startBehindSellerFault(attempts, []string{"poison-1", "poison-2"}, func(cfg *Config) {
		cfg.SellerConcurrency = 2
		cfg.SellerProbeMin, cfg.SellerProbeMax, cfg.SellerHoldLimit = 100*time.Millisecond, 400*time.Millisecond, holdLimit
	})

	const poisonRows, goodRows = 20, 30
	s.publish("up-good", "good", goodRows)
	s.waitProducts("good", 5, 10*time.Second)
	published := time.Now()
	s.publish("up-poison-1", "poison-1", poisonRows)
	s.publish("up-poison-2", "poison-2", poisonRows)

	testwait.For(t, 10*time.Second, "both failing sellers held", func() bool { return testutil.ToFloat64(c.m.sellersHeld) == 2 })
	if n := dlqLen(t, s.brokers, s.topic); n != 0 {
		t.Errorf("%d dead letters while the failing sellers are held, want 0 before the hold limit", n)
	}
	s.waitProducts("good", goodRows, 20*time.Second)
	testwait.For(t, 20*time.Second, "every failing seller's row dead-lettered after the hold limit", func() bool { return dlqLen(t, s.brokers, s.topic) >= 2*poisonRows })
	if took := time.Since(published); took < holdLimit {
		t.Errorf("the failing sellers' rows were dead-lettered %v after they were published, before the hold limit %v", took.Round(time.Millisecond), holdLimit)
	}
	if n := dlqLen(t, s.brokers, s.topic); n != 2*poisonRows {
		t.Errorf("%d dead letters, want the %d rows of the two failing sellers", n, 2*poisonRows)
	}
	calls := 0
	for _, n := range fault.calls() {
		calls += n
	}
	if calls >= 2*poisonRows {
		t.Errorf("the failing sellers' rows were called %d times, want fewer than their %d rows: held rows spend no attempt, one probe goes per interval", calls, 2*poisonRows)
	}
	t.Logf("the failing sellers' %d rows made %d calls in the hold", 2*poisonRows, calls)
	st, err := watch.Peek(context.Background())
	if err != nil || st.State != circuit.Closed || st.Opens != 0 {
		t.Errorf("the circuit is %v (%v), opened %d times; want closed, never opened: a seller answered on every call proves the API up", st.State, err, st.Opens)
	}
	s.checkCompliant("good", goodRows)
}
