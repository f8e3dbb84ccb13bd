package consumer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/ledger"
)

// gatedLedger is the real ledger behind a gate: a claim reaches it only when
// the test lets one through, so the test sees which rows ask, in what order
// and how many at once. While waitFor is set, that seller's claims are told
// another row holds the SKU.
type gatedLedger struct {
	*ledger.Ledger
	pass    chan struct{} // nil: no gate
	waitFor atomic.Pointer[string]
	waits   atomic.Int64 // Wait answers given

	mu           sync.Mutex
	asking, most int
	order        []string // sellers, in the order their claims reached the gate
}

func (l *gatedLedger) Claim(ctx context.Context, seller, sku, row, hash string) (ledger.Claim, error) {
	if w := l.waitFor.Load(); w != nil && *w == seller {
		l.waits.Add(1)
		return ledger.Claim{Verdict: ledger.Wait, RetryIn: 10 * time.Millisecond}, nil
	}
	l.mu.Lock()
	l.asking++
	l.most = max(l.most, l.asking)
	l.order = append(l.order, seller)
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.asking--
		l.mu.Unlock()
	}()
	if l.pass != nil {
		select {
		case <-l.pass:
		case <-ctx.Done():
			return ledger.Claim{}, ctx.Err()
		}
	}
	return l.Ledger.Claim(ctx, seller, sku, row, hash)
}

func (l *gatedLedger) seen() (asking, most int, order []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.asking, l.most, append([]string(nil), l.order...)
}

func (f *fixture) startWithLedger(l Ledger) {
	c, err := New(f.cfg, Deps{Throttle: f.throttle, Registry: f.registry, Status: f.status, Calls: f.calls, Ledger: l,
		Retry: registryclientRetry{fixedRetry{interval: 20 * time.Millisecond, attempts: 4}}, PingRedis: func(context.Context) error { return nil }})
	if err != nil {
		f.t.Fatal(err)
	}
	run(f.t, c)
}

// TestClaimsInFlightAreCappedAndGoSellerBySeller: a consumer asks the ledger
// for at most MaxDueNow claims at once, and once those are out, the seller
// that started first gets all its claims before the next seller gets any.
// Before, every row in a lane asked at once, and in an upload burst the first
// sellers' slots queued in Redis behind the later sellers' claims.
func TestClaimsInFlightAreCappedAndGoSellerBySeller(t *testing.T) {
	const rows = 6
	f := newFixture(t, 1, nil)
	f.cfg.MaxDueNow = 2
	l := &gatedLedger{Ledger: ledger.New(testredis.Start(t).Client(), ledger.Options{}), pass: make(chan struct{})}
	f.publish("ua", "a", rows)
	f.publish("ub", "b", rows)
	f.startWithLedger(l)

	testwait.For(t, 10*time.Second, "exactly MaxDueNow = 2 claims at the ledger", func() bool { asking, _, _ := l.seen(); return asking == 2 })
	for i := range 2 * rows {
		l.pass <- struct{}{}
		testwait.For(t, 10*time.Second, "the next claim at the ledger", func() bool {
			asking, _, order := l.seen()
			return len(order) == 2*rows || len(order) >= i+3 && asking == 2
		})
	}
	testwait.For(t, 10*time.Second, "every row registered", func() bool {
		return f.registeredCount("ua") == rows && f.registeredCount("ub") == rows
	})
	_, most, order := l.seen()
	if most != 2 {
		t.Errorf("at most %d claims at the ledger at once, want MaxDueNow = 2", most)
	}
	// The first two claims are whichever rows came first; after them the
	// seller that asked first keeps the tokens until its claims are done.
	changes := 0
	for i := 3; i < len(order); i++ {
		if order[i] != order[i-1] {
			changes++
		}
	}
	if len(order) != 2*rows || changes > 1 {
		t.Errorf("claims reached the ledger in the seller order %v, want the two sellers' claims after the first two one seller after the other", order)
	}
}

// TestARowWaitingForAnotherRowsClaimHoldsNoToken: a row told that another row
// is registering its SKU waits without a claim token, so a seller whose
// re-upload waits for its first upload does not stop other sellers' rows.
func TestARowWaitingForAnotherRowsClaimHoldsNoToken(t *testing.T) {
	f := newFixture(t, 1, nil)
	f.cfg.MaxDueNow = 2
	l := &gatedLedger{Ledger: ledger.New(testredis.Start(t).Client(), ledger.Options{})}
	waiting := "a"
	l.waitFor.Store(&waiting)
	f.publish("ua", "a", 4)
	f.publish("ub", "b", 3)
	f.startWithLedger(l)

	testwait.For(t, 10*time.Second, "seller b's 3 rows registered while seller a's 4 wait", func() bool { return f.registeredCount("ub") == 3 })
	if n := f.registeredCount("ua"); n != 0 || l.waits.Load() < 4 {
		t.Fatalf("seller a: %d rows registered and %d Wait answers while its SKUs were held; want 0 rows and at least 4 answers", n, l.waits.Load())
	}
	l.waitFor.Store(nil)
	testwait.For(t, 10*time.Second, "seller a's 4 rows registered once its SKUs are free", func() bool { return f.registeredCount("ua") == 4 })
}
