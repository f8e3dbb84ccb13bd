package consumer

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/ledger"
	"github.com/bulkreg/bulkreg/throttle"
)

// lossThrottle is the in-memory throttle with a loss of Redis's data the
// test brings about (lose): from then on a slot granted before it fails its
// check (another epoch), no slot starts before the hold's end, and every
// reservation reports that end, as the real throttle's hash-slot marker
// does.
type lossThrottle struct {
	*memThrottle
	mu   sync.Mutex
	held time.Time // the hold's end after the loss; zero: no loss
}

func (l *lossThrottle) lose(hold time.Duration) {
	l.mu.Lock()
	l.held = time.Now().Add(hold)
	l.mu.Unlock()
	l.memThrottle.mu.Lock()
	l.memThrottle.blockedAll = l.held
	l.memThrottle.mu.Unlock()
}

func (l *lossThrottle) heldUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

func (l *lossThrottle) ReserveN(ctx context.Context, seller string, n int, before ...scriptbatch.Step) ([]throttle.Reservation, error) {
	rs, err := l.memThrottle.ReserveN(ctx, seller, n, before...)
	if held := l.heldUntil(); err == nil && !held.IsZero() {
		for i := range rs {
			rs[i].Epoch, rs[i].HeldUntil = "2", held
		}
	}
	return rs, err
}

func (l *lossThrottle) CheckN(ctx context.Context, seller string, rs []throttle.Reservation) ([]throttle.SlotCheck, error) {
	chks, err := l.memThrottle.CheckN(ctx, seller, rs)
	if !l.heldUntil().IsZero() {
		for i := range chks {
			chks[i].Epoch = "2"
			chks[i].Good = chks[i].Good && rs[i].Epoch == "2"
		}
	}
	return chks, err
}

// lossFixture is a consumer with the real SKU ledger (ledger) on its own
// redis-server and the loss throttle, and row makes a row of seller s for
// sku-1 with a price of its own (so other content).
type lossFixture struct {
	*fixture
	rdb redis.UniversalClient
	lt  *lossThrottle
}

func newLossFixture(t *testing.T) *lossFixture {
	f := newFixture(t, 1, nil)
	f.cfg.MaxLateness = 40 * time.Millisecond
	return &lossFixture{fixture: f, rdb: f.rdb, lt: &lossThrottle{memThrottle: f.throttle}}
}

func (f *lossFixture) row(upload string, price int64) kafka.Message {
	m := bulkreg.NewMessage(upload, "s", 1, bulkreg.Product{SellerSKU: "sku-1", Name: "n", CategoryCode: "c", Price: price, Stock: 1}, time.Now())
	v, err := json.Marshal(m)
	if err != nil {
		f.t.Fatal(err)
	}
	return kafka.Message{Key: []byte("s"), Value: v}
}

// lose flushes the Redis of the ledger and has the throttle hold for hold.
func (f *lossFixture) lose(hold time.Duration) {
	if err := f.rdb.FlushAll(context.Background()).Err(); err != nil {
		f.t.Error(err)
	}
	f.lt.lose(hold)
}

// checkOnce: the SKU was registered once, by whichever row registered it,
// and the other row failed as registered with other content.
func (f *lossFixture) checkOnce(t *testing.T) {
	t.Helper()
	testwait.For(t, 10*time.Second, "both rows' results", func() bool { return len(f.status.snapshot()) == 2 })
	calls, products := f.registry.count()
	if calls != 1 || products != 1 {
		t.Errorf("%d calls and %d products for one SKU, want 1 and 1: two rows called with claims of their own", calls, products)
	}
	st := f.status.snapshot()
	won, lost := st["u1:1"], st["u2:1"]
	if lost.State == "registered" {
		won, lost = lost, won
	}
	if won.State != "registered" {
		t.Errorf("the registering row is %s (%s), want registered", won.State, won.Reason)
	}
	if lost.State != "failed" || lost.Code != CodeRegisteredOtherContent {
		t.Errorf("the other row is %s %s (%s), want failed %s", lost.State, lost.Code, lost.Reason, CodeRegisteredOtherContent)
	}
}

// TestAClaimOlderThanALossIsTakenAgain: Redis loses the seller's data
// (the ledger's claims with the throttle's log: one hash slot) while a row
// of one upload holds its SKU's claim and waits for its slot; a row of
// another upload, with other content for the same SKU, comes meanwhile. The
// first row's slot fails its check and the row claims again, in the batch
// the second row's claim may be in, after the loss's hold: one registers
// and the other fails as registered with other content. The SKU is
// registered once, where two rows that each held a claim in their own eyes
// would both have called with their own keys and registered it twice.
func TestAClaimOlderThanALossIsTakenAgain(t *testing.T) {
	f := newLossFixture(t)
	l := &gatedLedger{Ledger: ledger.New(f.rdb, ledger.Options{})}
	pass := l.gate()
	// The first row's slot is a second away, so the loss comes while it
	// waits for it.
	if err := f.lt.Block(context.Background(), "s", time.Second); err != nil {
		t.Fatal(err)
	}
	deps := f.ledgerDeps(l)
	deps.Throttle = f.lt
	runConsumer(t, f.cfg, deps)

	testkafka.Produce(t, f.brokers, f.topic, f.row("u1", 1000))
	l.passEach(t, pass, 1, 1)
	testwait.For(t, 5*time.Second, "the first row's slot", func() bool { return f.lt.reserves.Load() >= 1 })
	f.lose(300 * time.Millisecond)
	testkafka.Produce(t, f.brokers, f.topic, f.row("u2", 2000))
	close(pass)
	f.checkOnce(t)
}

// TestAClaimTakenDuringALossHoldIsTakenAgain: Redis loses the seller's
// data while another consumer's call for the SKU is out (the test plays
// it: it marks the SKU registered during the hold, as that call's answer
// does). A row of another upload, with other content for the same SKU,
// claims it during the hold and finds no claim: the loss erased the other
// row's. Its slot comes at the hold's end, when every call out at the loss
// has been answered; its claim, taken before then, is taken again after
// it: the row finds the SKU registered and fails as registered with other
// content without a call. Had it called on its first claim, the SKU would
// have two products.
func TestAClaimTakenDuringALossHoldIsTakenAgain(t *testing.T) {
	f := newLossFixture(t)
	ctx := context.Background()
	l := ledger.New(f.rdb, ledger.Options{})
	deps := f.ledgerDeps(l)
	deps.Throttle = f.lt
	runConsumer(t, f.cfg, deps)
	f.lose(700 * time.Millisecond)
	testkafka.Produce(t, f.brokers, f.topic, f.row("u2", 2000))
	testwait.For(t, 5*time.Second, "the row's claim", func() bool {
		return f.rdb.HExists(ctx, ledger.Key("s"), "sku-1").Val()
	})
	other := bulkreg.Product{SellerSKU: "sku-1", Name: "n", CategoryCode: "c", Price: 1000, Stock: 1}
	if _, err := l.Mark(ctx, "s", "sku-1", bulkreg.IdempotencyKey("u1", 1), other.ContentHash(), "p-other"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the row's result", func() bool { return len(f.status.snapshot()) == 1 })
	if calls, products := f.registry.count(); calls != 0 || products != 0 {
		t.Errorf("%d calls and %d products, want none: the row called on a claim taken during the hold", calls, products)
	}
	if st := f.status.snapshot()["u2:1"]; st.State != "failed" || st.Code != CodeRegisteredOtherContent {
		t.Errorf("the row is %s %s (%s), want failed %s", st.State, st.Code, st.Reason, CodeRegisteredOtherContent)
	}
}
