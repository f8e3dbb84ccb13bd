package consumer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/ledger"
)

// gatedLedger is the real ledger behind a gate: a claim reaches it only when
// the test lets one through, so the test sees which rows ask, in what order
// and how many at once (a claim waiting at the gate counts as asking). While
// waitFor is set, that seller's claims are told another row holds the SKU.
type gatedLedger struct {
	*ledger.Ledger
	waitFor atomic.Pointer[string]

	mu           sync.Mutex
	pass         chan struct{}   // the gate; nil: none
	waited       map[string]bool // rows told Wait
	asking, most int
	order        []string // sellers, in the order their claims reached the gate
}

func (l *gatedLedger) Claim(ctx context.Context, seller, sku, row, hash, from string) (ledger.Claim, error) {
	l.mu.Lock()
	if w := l.waitFor.Load(); w != nil && *w == seller {
		if l.waited == nil {
			l.waited = map[string]bool{}
		}
		l.waited[row] = true
		l.mu.Unlock()
		return ledger.Claim{Verdict: ledger.Wait, RetryIn: 10 * time.Millisecond}, nil
	}
	l.asking++
	l.most = max(l.most, l.asking)
	l.order = append(l.order, seller)
	pass := l.pass
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.asking--
		l.mu.Unlock()
	}()
	if pass != nil {
		select {
		case <-pass:
		case <-ctx.Done():
			return ledger.Claim{}, ctx.Err()
		}
	}
	return l.Ledger.Claim(ctx, seller, sku, row, hash, from)
}

// gate puts a new gate before the ledger and returns it: send on it to let
// one claim through, close it to let every claim through.
func (l *gatedLedger) gate() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pass = make(chan struct{})
	return l.pass
}

// passEach lets n claims through the gate one at a time. Before each it
// waits until the claim after the last one let through has come and want
// claims are at the ledger (or all n have come), so whatever can ask is
// asking when the next one goes.
func (l *gatedLedger) passEach(t *testing.T, pass chan struct{}, n, want int) {
	t.Helper()
	for i := range n {
		testwait.For(t, 10*time.Second, fmt.Sprintf("%d claims at the ledger before letting claim %d of %d through", want, i+1, n), func() bool {
			asking, _, order := l.seen()
			return len(order) >= n || len(order) >= i+want && asking == want
		})
		select {
		case pass <- struct{}{}:
		case <-time.After(10 * time.Second):
			t.Fatalf("no claim came to the gate to be let through (%d of %d let through)", i, n)
		}
	}
}

func (l *gatedLedger) seen() (asking, most int, order []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.asking, l.most, append([]string(nil), l.order...)
}

func (l *gatedLedger) rowsWaited() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waited)
}

// publishInterleaved publishes rows rows of each seller in one batch, the
// sellers' rows taking turns (a1 b1 a2 b2 ...), so they reach a consumer
// mixed and only the pool's ranking can put them in seller order.
func (f *fixture) publishInterleaved(rows int, sellers ...string) {
	var msgs []kafka.Message
	for i := 1; i <= rows; i++ {
		for _, s := range sellers {
			msgs = append(msgs, rowMessage("u"+s, s, i))
		}
	}
	produce(f.t, f.brokers, f.topic, msgs...)
}

func (f *fixture) startWithLedger(l Ledger) {
	runConsumer(f.t, f.cfg, f.ledgerDeps(l))
}

// ledgerDeps are the fixture's dependencies with the SKU ledger l.
func (f *fixture) ledgerDeps(l Ledger) Deps {
	return Deps{Throttle: f.throttle, Registry: f.registry, Status: f.status, Calls: f.calls, Ledger: l,
		Retry: registryclientRetry{fixedRetry{interval: 20 * time.Millisecond, attempts: 4}}, PingRedis: func(context.Context) error { return nil }}
}

// TestClaimsInFlightAreCappedAndGoSellerBySeller: a consumer asks the
// ledger for at most MaxDueNow claims at once, and once those are out, the
// seller that started first gets all its claims before the next seller gets
// any. Without the cap every row in a lane would ask at once, and in an
// upload burst the first sellers' slots would queue in Redis behind the
// later sellers' claims.
func TestClaimsInFlightAreCappedAndGoSellerBySeller(t *testing.T) {
	const rows = 6
	f := newFixture(t, 1, nil)
	// Claim tokens are the lanes path's: the runner claims a batch's SKUs with its slots.
	f.cfg.RowPath = RowPathLanes
	f.cfg.MaxDueNow = 2
	l := &gatedLedger{Ledger: ledger.New(testredis.Start(t).Client(), ledger.Options{})}
	pass := l.gate()
	f.publishInterleaved(rows, "a", "b")
	f.startWithLedger(l)

	l.passEach(t, pass, 2*rows, 2)
	// A row that missed its slot on a busy machine claims again: let any
	// such claim through rather than hang.
	close(pass)
	testwait.For(t, 10*time.Second, "every row registered", func() bool {
		return f.registeredCount("ua") == rows && f.registeredCount("ub") == rows
	})
	_, most, order := l.seen()
	if most != 2 {
		t.Errorf("at most %d claims at the ledger at once, want MaxDueNow = 2", most)
	}
	// The first two claims are whichever rows came first; after them the
	// seller that asked first keeps the tokens until its claims are done.
	// Served in the order they asked, the rows would take turns.
	changes := 0
	for i := 3; i < min(len(order), 2*rows); i++ {
		if order[i] != order[i-1] {
			changes++
		}
	}
	if len(order) < 2*rows || changes > 1 {
		t.Errorf("claims reached the ledger in the seller order %v, want the two sellers' claims after the first two one seller after the other", order)
	}
}

// TestARowWaitingForAnotherRowsClaimHoldsNoToken: a row told that another row
// is registering its SKU waits without a claim token, so a seller whose
// re-upload waits for its first upload does not stop other sellers' rows.
func TestARowWaitingForAnotherRowsClaimHoldsNoToken(t *testing.T) {
	f := newFixture(t, 1, nil)
	// Claim tokens are the lanes path's: the runner claims a batch's SKUs with its slots.
	f.cfg.RowPath = RowPathLanes
	f.cfg.MaxDueNow = 2
	l := &gatedLedger{Ledger: ledger.New(testredis.Start(t).Client(), ledger.Options{})}
	waiting := "a"
	l.waitFor.Store(&waiting)
	f.publish("ua", "a", 4)
	f.publish("ub", "b", 3)
	f.startWithLedger(l)

	testwait.For(t, 10*time.Second, "seller b's 3 rows registered while seller a's 4 wait", func() bool { return f.registeredCount("ub") == 3 })
	testwait.For(t, 10*time.Second, "each of seller a's 4 rows told to wait", func() bool { return l.rowsWaited() == 4 })
	if n := f.registeredCount("ua"); n != 0 {
		t.Fatalf("seller a: %d rows registered while its SKUs were held; want 0", n)
	}
	l.waitFor.Store(nil)
	testwait.For(t, 10*time.Second, "seller a's 4 rows registered once its SKUs are free", func() bool { return f.registeredCount("ua") == 4 })
}

// reset forgets the claims seen so far.
func (l *gatedLedger) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.most, l.order = l.asking, nil
}

// heldOpen is a circuit breaker the test opens and closes: while it is open
// no row gets past WaitReady (no probe either), and once it is closed every
// call is allowed.
type heldOpen struct {
	mu      sync.Mutex
	open    bool
	changed chan struct{}
}

func newHeldOpen() *heldOpen { return &heldOpen{changed: make(chan struct{})} }

func (b *heldOpen) set(open bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open = open
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *heldOpen) WaitReady(ctx context.Context) error {
	for {
		b.mu.Lock()
		open, changed := b.open, b.changed
		b.mu.Unlock()
		if !open {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
func (b *heldOpen) Allow(context.Context) (circuit.Decision, error) {
	return circuit.Decision{State: circuit.Closed, Allowed: true}, nil
}
func (b *heldOpen) Report(context.Context, circuit.Decision, circuit.Call) (circuit.Status, error) {
	return circuit.Status{}, nil
}
func (b *heldOpen) Local() (circuit.State, time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open {
		return circuit.Open, time.Second, true
	}
	return circuit.Closed, 0, true
}
func (b *heldOpen) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// TestRowsBackFromAnOutageClaimWithTokens: the rows that waited out an
// outage all claim their SKU again when the API comes back, and they take
// claim tokens for it like any claim: at most MaxDueNow at the ledger at
// once, not every waiting row together.
func TestRowsBackFromAnOutageClaimWithTokens(t *testing.T) {
	const rows = 8
	f := newFixture(t, 1, nil)
	// Claim tokens are the lanes path's: the runner claims a batch's SKUs with its slots.
	f.cfg.RowPath = RowPathLanes
	f.cfg.MaxDueNow = 2
	l := &gatedLedger{Ledger: ledger.New(testredis.Start(t).Client(), ledger.Options{})}
	pass := l.gate()
	b := newHeldOpen()
	f.publish("u1", "s1", rows)
	deps := f.ledgerDeps(l)
	deps.Circuit = b
	c, err := New(f.cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)

	// The rows are read and claiming when the API goes down (a consumer
	// reads no row while the circuit is open); they claim, then wait.
	testwait.For(t, 10*time.Second, "the rows read and two claims at the ledger", func() bool {
		asking, _, _ := l.seen()
		return asking == 2 && c.lanes.rowsBySeller()["s1"] == rows
	})
	b.set(true)
	close(pass)
	testwait.For(t, 10*time.Second, "every row claimed once", func() bool {
		asking, _, order := l.seen()
		return len(order) == rows && asking == 0
	})
	// Every row that waited claims again when the API is back. Held at the
	// gate, a claim asked beside another is counted with it, however fast
	// the ledger answers.
	l.reset()
	pass = l.gate()
	b.set(false)
	l.passEach(t, pass, rows, 2)
	close(pass)
	testwait.For(t, 10*time.Second, "every row registered after the outage", func() bool { return f.registeredCount("u1") == rows })
	_, most, order := l.seen()
	if most > 2 || len(order) < rows/2 {
		t.Errorf("after the outage: %d claims, at most %d at the ledger at once; want the waiting rows to claim again, at most MaxDueNow = 2 at once", len(order), most)
	}
}
