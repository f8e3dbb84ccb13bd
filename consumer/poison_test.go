package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

// TestTwoSellersFailuresWhileAThirdRegisters: every call of two sellers
// answers 503 while a third seller registers normally. Failures of two
// sellers look like an outage to the circuit's counts (many failed rows,
// two sellers, most calls failing), but the third seller, answered on every
// call, proves the API is up: the failures are the two sellers' own. The
// healthy seller's rows are done before the others', and the two sellers'
// failures, seen while the API answered, are still theirs alone. The circuit stays closed, each of their rows spends its retry
// budget (4 attempts) and is dead-lettered, and the healthy seller's rows
// are registered. Were the circuit to open, the failing rows would wait for
// it without spending attempts, and never be dead-lettered.
func TestTwoSellersFailuresWhileAThirdRegisters(t *testing.T) {
	// The sandbox's latency slows the healthy seller only (the failing
	// sellers are answered before it): about 10 calls a second against the
	// failing sellers' 25 or so, so most calls fail.
	// The lanes path's rule: the runner path holds a seller whose calls all fail (TestRunnerHoldsASellerTheAPIFails).
	s := newStack(t, stackOptions{rowPath: RowPathLanes, partitions: 1, limit: 20, window: time.Second, margin: 50 * time.Millisecond, latency: 200 * time.Millisecond})
	const attempts = 4
	fault, watch := s.startBehindSellerFault(attempts, []string{"poison-1", "poison-2"}, func(cfg *Config) { cfg.SellerConcurrency = 2 })

	const poisonRows, goodRows = 20, 30
	s.publish("up-good", "good", goodRows)
	s.waitProducts("good", 5, 10*time.Second)
	s.publish("up-poison-1", "poison-1", poisonRows)
	s.publish("up-poison-2", "poison-2", poisonRows)

	s.waitProducts("good", goodRows, 20*time.Second)
	goodDone := time.Now()
	testwait.For(t, 20*time.Second, "every poison row dead-lettered", func() bool { return dlqLen(t, s.brokers, s.topic) >= 2*poisonRows })
	t.Logf("the last dead letter came %v after the healthy seller's last registration", time.Since(goodDone).Round(10*time.Millisecond))
	if n := dlqLen(t, s.brokers, s.topic); n != 2*poisonRows {
		t.Errorf("%d dead letters, want the %d rows of the two failing sellers", n, 2*poisonRows)
	}
	fault.checkBudgetsSpent(t, 2*poisonRows, attempts)
	st, err := watch.Peek(context.Background())
	if err != nil || st.State != circuit.Closed || st.Opens != 0 {
		t.Errorf("the circuit is %v (%v), opened %d times; want closed, never opened: a seller answered on every call proves the API up", st.State, err, st.Opens)
	}
	s.checkCompliant("good", goodRows)
}
