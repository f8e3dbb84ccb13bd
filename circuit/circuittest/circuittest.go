// Package circuittest opens a real circuit breaker the way consumers do, for
// the tests of packages that show its state (the upload status, the pages).
package circuittest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/circuit"
)

// Settings open the circuit after five failing rows of two sellers and
// probe within 100 ms.
func Settings() circuit.Settings {
	return circuit.Settings{Window: 2 * time.Second, MinCalls: 5, MinFailedRows: 5, ProbeMin: 50 * time.Millisecond, ProbeMax: 100 * time.Millisecond}
}

// Trip opens b (made with Settings) by reporting five failed calls of two sellers, and
// fails the test unless it is open then.
func Trip(t testing.TB, b *circuit.Breaker) {
	t.Helper()
	ctx := context.Background()
	for i := range 5 {
		d, err := b.Allow(ctx)
		if err != nil || !d.Allowed {
			t.Fatalf("Allow before the circuit opened: %+v, %v", d, err)
		}
		// Two sellers: one seller's failures never open the circuit.
		seller := []string{"s", "t"}[i%2]
		if _, err := b.Report(ctx, d, circuit.Call{Seller: seller, Row: fmt.Sprintf("u:%d", i), Outcome: circuit.Failure}); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := b.Peek(ctx); err != nil || st.State != circuit.Open {
		t.Fatalf("after five failing rows the circuit is %v (%v), want open", st.State, err)
	}
}
