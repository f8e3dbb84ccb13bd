package consumer

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/ledger"
	"github.com/bulkreg/bulkreg/throttle"
)

// lossThrottle is the in-memory throttle with a loss of Redis's data the
// test brings about (lose): from then on a slot granted before it fails its
// check (another epoch), and every reservation reports the hold the loss
// began, as the real throttle's hash-slot marker does.
type lossThrottle struct {
	*memThrottle
	mu    sync.Mutex
	found time.Time // when the loss was found; zero: none
}

func (l *lossThrottle) lose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.found = time.Now()
}

func (l *lossThrottle) lost() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.found
}

func (l *lossThrottle) Reserve(ctx context.Context, seller string) (throttle.Reservation, error) {
	r, err := l.memThrottle.Reserve(ctx, seller)
	if found := l.lost(); err == nil && !found.IsZero() {
		r.Epoch = "2"
		r.HeldUntil = found.Add(l.Policy().HoldAfterLoss())
	}
	return r, err
}

func (l *lossThrottle) Check(ctx context.Context, r throttle.Reservation) (throttle.SlotCheck, error) {
	chk, err := l.memThrottle.Check(ctx, r)
	if !l.lost().IsZero() {
		chk.Epoch = "2"
		chk.Good = chk.Good && r.Epoch == "2"
	}
	return chk, err
}

// TestAClaimOlderThanALossIsTakenAgain: Redis loses the seller's data
// (the ledger's claims with the throttle's log: one hash slot) while a row
// of one upload holds its SKU's claim and waits for its slot; a row of
// another upload, with other content for the same SKU, then claims the SKU
// anew, with its own key. The first row's slot fails its check, and the
// reservation after it reports the loss's hold: its claim is older than the
// loss, so it claims again, waits for the other row, and fails as
// registered with other content. The SKU is registered once, where two rows
// that each held a claim in their own eyes would both have called with
// their own keys and registered it twice.
func TestAClaimOlderThanALossIsTakenAgain(t *testing.T) {
	rdb := testredis.Start(t).Client()
	l := &gatedLedger{Ledger: ledger.New(rdb, ledger.Options{})}
	pass := l.gate()
	f := newFixture(t, 1, nil)
	f.cfg.MaxLateness = 40 * time.Millisecond
	lt := &lossThrottle{memThrottle: f.throttle}
	// The first row's slot is a second away, so the loss comes while it
	// waits for it.
	if err := lt.Block(context.Background(), "s", time.Second); err != nil {
		t.Fatal(err)
	}
	deps := f.ledgerDeps(l)
	deps.Throttle = lt
	runConsumer(t, f.cfg, deps)

	row := func(upload string, price int64) kafka.Message {
		m := bulkreg.NewMessage(upload, "s", 1, bulkreg.Product{SellerSKU: "sku-1", Name: "n", CategoryCode: "c", Price: price, Stock: 1}, time.Now())
		v, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return kafka.Message{Key: []byte("s"), Value: v}
	}
	produce(t, f.brokers, f.topic, row("u1", 1000))
	l.passEach(t, pass, 1, 1)
	testwait.For(t, 5*time.Second, "the first row's slot", func() bool { return lt.reserves.Load() >= 1 })

	// The loss: the claim is gone from Redis, and the throttle knows.
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	lt.lose()
	produce(t, f.brokers, f.topic, row("u2", 2000))
	close(pass)

	testwait.For(t, 10*time.Second, "both rows' results", func() bool { return len(f.status.snapshot()) == 2 })
	calls, products := f.registry.count()
	if calls != 1 || products != 1 {
		t.Errorf("%d calls and %d products for one SKU, want 1 and 1: a claim taken before the loss was called on", calls, products)
	}
	st := f.status.snapshot()
	first, second := st["u1:1"], st["u2:1"]
	if second.State != "registered" {
		t.Errorf("the second upload's row is %s (%s), want registered: it claimed the SKU after the loss", second.State, second.Reason)
	}
	if first.State != "failed" || first.Code != CodeRegisteredOtherContent {
		t.Errorf("the first upload's row is %s %s (%s), want failed %s", first.State, first.Code, first.Reason, CodeRegisteredOtherContent)
	}
}
