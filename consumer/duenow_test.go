package consumer

import (
	"context"
	"testing"
	"time"
)

// acquire waits for a token for a row of seller, as a row parked in
// acquireOr does; false when ctx ended first (then it holds none).
func (d *dueNow) acquire(ctx context.Context, seller string) bool {
	got := make(chan bool, 1)
	if d.acquireOr(ctx, seller, grantFunc(func(ok bool) { got <- ok })) {
		return true
	}
	return <-got
}

// grantFunc is a tokenWaiter made of a function.
type grantFunc func(ok bool)

func (f grantFunc) tokenGranted(_ *dueNow, ok bool) { f(ok) }

// acquireAsync starts acquire for seller and returns a channel that reports
// its result; it waits until the waiter is queued so the order is known.
func acquireAsync(t *testing.T, d *dueNow, ctx context.Context, seller string) <-chan bool {
	t.Helper()
	d.mu.Lock()
	before := d.queue.Len()
	d.mu.Unlock()
	got := make(chan bool, 1)
	go func() { got <- d.acquire(ctx, seller) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d.mu.Lock()
		n := d.queue.Len()
		d.mu.Unlock()
		if n > before {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("acquire for %s did not queue", seller)
		}
		time.Sleep(time.Millisecond)
	}
}

// granted waits for an acquire that must succeed (a busy machine may be slow).
func granted(ch <-chan bool) bool {
	select {
	case ok := <-ch:
		return ok
	case <-time.After(5 * time.Second):
		return false
	}
}

// stillWaiting tells that the acquire behind ch holds no token: it has not
// returned, and d has n rows queued and no token free. A queued row cannot
// return before release hands it the token (under d.mu), so nothing here
// waits on time.
func stillWaiting(d *dueNow, n int, ch ...<-chan bool) bool {
	d.mu.Lock()
	queued, free := d.queue.Len(), d.free
	d.mu.Unlock()
	for _, c := range ch {
		select {
		case <-c:
			return false
		default:
		}
	}
	return queued == n && free == 0
}

// TestDueNowServesTheSellerThatStartedFirst: a token freed goes to the
// seller that began asking first, even when another seller's row has
// waited longer; within a seller, rows are served in order.
func TestDueNowServesTheSellerThatStartedFirst(t *testing.T) {
	ctx := context.Background()
	d := newDueNow(1, time.Minute)
	if !d.acquire(ctx, "a") {
		t.Fatal("the first acquire did not get the free token")
	}
	b1 := acquireAsync(t, d, ctx, "b")
	a2 := acquireAsync(t, d, ctx, "a")
	a3 := acquireAsync(t, d, ctx, "a")
	d.release("a")
	if !granted(a2) {
		t.Fatal("the freed token did not go to seller a's next row (a started first)")
	}
	if !stillWaiting(d, 2, b1, a3) {
		t.Fatal("a freed token went to two rows")
	}
	d.release("a")
	if !granted(a3) {
		t.Fatal("the freed token did not go to seller a's third row")
	}
	d.release("a")
	if !granted(b1) {
		t.Fatal("seller b's row did not get the token once a had none waiting")
	}
	d.release("b")
	if d.free != 1 || d.queue.Len() != 0 {
		t.Errorf("after every row gave its token back: %d free, %d waiting; want 1 and 0", d.free, d.queue.Len())
	}
}

// TestDueNowKeepsARankForItsKeep: a seller whose rows all gave their
// tokens back keeps its rank for keep (its upload's later rows come in
// later fetches), then ranks behind the sellers going on.
func TestDueNowKeepsARankForItsKeep(t *testing.T) {
	ctx := context.Background()
	const keep = 100 * time.Millisecond
	for _, tc := range []struct {
		name    string
		pause   time.Duration
		aBefore bool
	}{{"within keep", keep, true}, {"after keep", keep + time.Millisecond, false}} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDueNow(1, keep)
			clock := time.Unix(1_700_000_000, 0)
			d.now = func() time.Time { return clock }
			if !d.acquire(ctx, "a") { // a starts first
				t.Fatal("no free token")
			}
			d.release("a") // a is idle
			if !d.acquire(ctx, "b") {
				t.Fatal("no free token")
			}
			clock = clock.Add(tc.pause) // before the rows below start: they read it in acquire
			b2 := acquireAsync(t, d, ctx, "b")
			a2 := acquireAsync(t, d, ctx, "a")
			d.release("b")
			first, second := a2, b2
			if !tc.aBefore {
				first, second = b2, a2
			}
			if !granted(first) {
				t.Fatalf("after a pause of %v the wrong seller got the token (want a first: %v)", tc.pause, tc.aBefore)
			}
			if !stillWaiting(d, 1, second) {
				t.Fatal("two rows hold the one token")
			}
		})
	}
}

// TestDueNowACancelledWaitHoldsNothing: a row revoked while it waits
// leaves the queue; the token it never got is not lost.
func TestDueNowACancelledWaitHoldsNothing(t *testing.T) {
	d := newDueNow(1, time.Minute)
	if !d.acquire(context.Background(), "a") {
		t.Fatal("no free token")
	}
	ctx, cancel := context.WithCancel(context.Background())
	waiting := acquireAsync(t, d, ctx, "b")
	cancel()
	if ok := <-waiting; ok {
		t.Fatal("a cancelled acquire reported a token")
	}
	d.release("a")
	if d.free != 1 || d.queue.Len() != 0 {
		t.Fatalf("%d free, %d waiting; want the one token free", d.free, d.queue.Len())
	}
	if !d.acquire(context.Background(), "c") {
		t.Fatal("the token was lost")
	}
}
