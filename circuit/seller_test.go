package circuit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

// TestSellerCalls: a seller's page asks how the marketplace answers that
// seller. One seller whose every call fails does not open the circuit (its
// failures are its own), so the circuit's state cannot tell its page; the
// window's counts for that seller can, and they age out with the window.
func TestSellerCalls(t *testing.T) {
	srv := testredis.Start(t)
	s := fast()
	b := newBreaker(t, srv.Client(), s)
	ctx := context.Background()
	read := func(seller string) SellerCalls {
		t.Helper()
		c, err := b.Seller(ctx, seller)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := read("a"); c != (SellerCalls{}) || c.Failing() {
		t.Fatalf("no calls yet: %+v (failing %v), want none", c, c.Failing())
	}
	for i := range 6 {
		call(t, b, "b", fmt.Sprintf("b:%d", i), Success)
	}
	for i := range 3 {
		if _, st := call(t, b, "a", fmt.Sprintf("a:%d", i), Failure); st.State != Closed {
			t.Fatalf("one seller's failures opened the circuit: %+v", st)
		}
	}
	if c := read("a"); c.Failures != 3 || c.Answered != 0 || !c.Failing() {
		t.Errorf("seller a after 3 failed calls: %+v (failing %v), want 3 failures, failing", c, c.Failing())
	}
	// b's answers may still sit in this process's batch (TrustClosed):
	// whatever reached Redis, b is not failing.
	if c := read("b"); c.Failures != 0 || c.Failing() {
		t.Errorf("seller b, answered 6 times: %+v (failing %v)", c, c.Failing())
	}
	// A seller answered as often as it failed is not failing: random errors.
	for i := range 6 {
		call(t, b, "c", fmt.Sprintf("c:%d", i), []Outcome{Failure, Answered}[i%2])
	}
	if c := read("c"); c.Failures != 3 || c.Failing() {
		t.Errorf("seller c, 3 failed and 3 answered: %+v (failing %v), want 3 failures, not failing", c, c.Failing())
	}
	// The counts age out with the window's buckets, within a window and a
	// bucket of the last call.
	last := time.Now()
	testwait.For(t, 2*s.Window, "seller a's calls age out", func() bool { return read("a") == (SellerCalls{}) })
	if took := time.Since(last); took > s.Window+2*s.Window/time.Duration(s.Buckets) {
		t.Errorf("seller a's calls aged out %v after its last, more than a window and a bucket (%v)", took, s.Window)
	}
}

// TestSellerCallsWithoutTheConsumersSettings: the producer reads a seller's
// calls with its own Settings (the defaults: it has no --circuit-window),
// while the consumers count them in a window of another width. The ring
// tells its reader its own shape. Before, every bucket read as stale with
// the other width, and the producer saw no failure at all: a seller's page
// never said the marketplace failed its rows.
func TestSellerCallsWithoutTheConsumersSettings(t *testing.T) {
	srv := testredis.Start(t)
	ctx := context.Background()
	for _, window := range []time.Duration{2 * time.Second, 50 * time.Second} {
		t.Run(window.String(), func(t *testing.T) {
			s := fast()
			s.Name, s.Window = "w"+window.String(), window
			consumer := newBreaker(t, srv.Client(), s)
			producer := newBreaker(t, srv.Client(), Settings{Name: s.Name})
			for i := range 4 {
				call(t, consumer, "a", fmt.Sprintf("a:%d", i), Failure)
			}
			c, err := producer.Seller(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if c.Failures != 4 || !c.Failing() {
				t.Errorf("the consumers count in a %v window; read with the default settings seller a has %+v (failing %v), want 4 failures, failing", window, c, c.Failing())
			}
		})
	}
}
