package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/deadletter"
	"github.com/bulkreg/bulkreg/internal/redisfail"
	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/ledger"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// TestKeyAndValueNameDifferentSellers: a message keyed by one seller whose
// value names another is dead-lettered at once and registered under neither.
func TestKeyAndValueNameDifferentSellers(t *testing.T) {
	f := newFixture(t, 2, nil)
	f.start()
	v, err := json.Marshal(bulkreg.NewMessage("u1", "seller-a", 1, bulkreg.Product{SellerSKU: "A-1", Name: "n", CategoryCode: "c", Price: 1, Stock: 1}, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	testkafka.Produce(t, f.brokers, f.topic, kafka.Message{Key: []byte("seller-b"), Value: v})
	f.publish("u2", "seller-a", 1) // a good row behind it, so the test knows the bad one was read

	testwait.For(t, 10*time.Second, "the good row recorded", func() bool { return len(f.status.snapshot()) == 1 })
	dl := f.dlq(1)
	if len(dl) != 1 || header(dl[0], deadletter.HeaderErrorClass) != deadletter.ClassBadMessage || !bytes.Equal(dl[0].Value, v) || string(dl[0].Key) != "seller-b" {
		t.Fatalf("dead letters %+v, want the original message with class %s", dl, deadletter.ClassBadMessage)
	}
	if msg := header(dl[0], deadletter.HeaderErrorMessage); !bytes.Contains([]byte(msg), []byte(`"seller-b"`)) || !bytes.Contains([]byte(msg), []byte(`"seller-a"`)) {
		t.Errorf("dead letter message %q does not name both sellers", msg)
	}
	f.registry.mu.Lock()
	calls := f.registry.calls["u1:1"]
	f.registry.mu.Unlock()
	if calls != 0 {
		t.Errorf("the mismatched row was sent to the API %d times, want 0", calls)
	}
	if _, ok := f.status.snapshot()["u1:1"]; ok {
		t.Error("the mismatched row has a result in its upload's status; it belongs to no seller")
	}
}

// startLedgerConsumer runs a consumer of the stack with the SKU ledger ld.
func (s *stack) startLedgerConsumer(ld *ledger.Ledger) {
	s.t.Helper()
	s.startConsumer(func(_ *Config, d *Deps) { d.Ledger = ld })
}

func ledgerProduct(sku string) bulkreg.Product {
	return bulkreg.Product{SellerSKU: sku, Name: "상품 " + sku, CategoryCode: "50000001", Price: 12000, Stock: 10}
}

// publishSKUs sends one upload whose rows carry the given SKUs, in order.
func (s *stack) publishSKUs(upload, seller string, skus []string) {
	s.t.Helper()
	msgs := make([]kafka.Message, 0, len(skus))
	for i, sku := range skus {
		v, err := json.Marshal(bulkreg.NewMessage(upload, seller, i+2, ledgerProduct(sku), time.Now()))
		if err != nil {
			s.t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(seller), Value: v})
	}
	testkafka.Produce(s.t, s.brokers, s.topic, msgs...)
}

func (s *stack) waitDone(store *uploadstatus.Store, upload string, rows int) uploadstatus.Status {
	s.t.Helper()
	var st uploadstatus.Status
	testwait.For(s.t, 30*time.Second, fmt.Sprintf("%d rows of %s recorded", rows, upload), func() bool {
		var err error
		st, err = store.Get(context.Background(), upload)
		return err == nil && st.Registered+st.AlreadyRegistered+st.Failed >= rows
	})
	return st
}

// TestSameSKUInTwoUploadsInFlight: two uploads carry the same 30 SKUs (in
// opposite orders) and are both in Kafka before 4 consumers start, so their
// rows race for every SKU. The API registers each SKU once; for each SKU one
// row is registered and the other already registered with its product.
func TestSameSKUInTwoUploadsInFlight(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 4, limit: 100, window: 2 * time.Second, margin: 50 * time.Millisecond, latency: 5 * time.Millisecond, jitter: 5 * time.Millisecond})
	ld := ledger.New(s.rdb, ledger.Options{})
	var skus, reversed []string
	for i := range 30 {
		skus = append(skus, fmt.Sprintf("RACE-%02d", i))
	}
	for i := range skus {
		reversed = append(reversed, skus[len(skus)-1-i])
	}
	s.publishSKUs("up-x", "seller-r", skus)
	s.publishSKUs("up-y", "seller-r", reversed)
	for range 4 {
		s.startLedgerConsumer(ld)
	}
	store := uploadstatus.New(s.rdb, time.Hour)
	x := s.waitDone(store, "up-x", 30)
	y := s.waitDone(store, "up-y", 30)

	a := s.audit("seller-r")
	if a.Products != 30 || a.Accepted != 30 || a.RateLimited != 0 {
		t.Errorf("sandbox: %d products, %d accepted, %d × 429; want 30, 30, 0", a.Products, a.Accepted, a.RateLimited)
	}
	if x.Registered+y.Registered != 30 || x.AlreadyRegistered+y.AlreadyRegistered != 30 || x.Failed+y.Failed != 0 {
		t.Errorf("registered %d+%d, already %d+%d, failed %d+%d; want 30 registered and 30 already registered in all",
			x.Registered, y.Registered, x.AlreadyRegistered, y.AlreadyRegistered, x.Failed, y.Failed)
	}
	// Per SKU: one registered row, one already registered row, one product id.
	bySKU := map[string][]uploadstatus.RowResult{}
	for _, st := range []struct {
		s    uploadstatus.Status
		skus []string
	}{{x, skus}, {y, reversed}} {
		for _, r := range st.s.Rows {
			sku := st.skus[r.Row-2]
			bySKU[sku] = append(bySKU[sku], r)
		}
	}
	for _, sku := range skus {
		rs := bySKU[sku]
		if len(rs) != 2 || rs[0].ProductID == "" || rs[0].ProductID != rs[1].ProductID ||
			!((rs[0].State == uploadstatus.Registered) != (rs[1].State == uploadstatus.Registered)) {
			t.Errorf("%s: %+v; want one registered and one already registered row with the same product", sku, rs)
		}
	}
	t.Logf("up-x: %d registered, %d already; up-y: %d registered, %d already; API replays %d",
		x.Registered, x.AlreadyRegistered, y.Registered, y.AlreadyRegistered, a.Replays)
}

// TestLapsedClaimIsTakenOverWithItsKey: a consumer claimed SKU L-1 for
// upload up-0 row 5, called the API (201) and crashed before recording it.
// Its lease lapses; another upload's row with L-1 takes the claim over and
// calls with up-0's Idempotency-Key, so the API replays the product instead
// of registering a second one. When up-0's row is read again it finds its
// own registration without calling.
func TestLapsedClaimIsTakenOverWithItsKey(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 2, limit: 100, window: 2 * time.Second, margin: 50 * time.Millisecond})
	ctx := context.Background()
	const lease = 500 * time.Millisecond
	ld := ledger.New(s.rdb, ledger.Options{Lease: lease})
	p := ledgerProduct("L-1")
	crashedKey := bulkreg.IdempotencyKey("up-0", 5)
	if c, err := ld.Claim(ctx, "seller-l", "L-1", crashedKey, p.ContentHash(), ""); err != nil || c.Verdict != ledger.Call {
		t.Fatalf("seed claim: %+v, %v", c, err)
	}
	rc, err := registryclient.New(registryclient.Options{BaseURL: s.api.URL, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	first := rc.Register(ctx, "seller-l", crashedKey, p)
	if first.Status != http.StatusCreated {
		t.Fatalf("seed registration: %+v", first)
	}
	// The crashed consumer's claim lapses a lease after it was taken; the
	// condition is time itself, counted on the ledger's own setting.
	time.Sleep(lease + 100*time.Millisecond)

	s.startLedgerConsumer(ld)
	store := uploadstatus.New(s.rdb, time.Hour)
	s.publishSKUs("up-1", "seller-l", []string{"L-1"})
	st := s.waitDone(store, "up-1", 1)
	if len(st.Rows) != 1 || st.Rows[0].State != uploadstatus.AlreadyRegistered || st.Rows[0].ProductID != first.ProductID {
		t.Errorf("up-1's row: %+v; want already registered as %s", st.Rows, first.ProductID)
	}

	// The crashed row's redelivery: up-0 row 5.
	v, err := json.Marshal(bulkreg.NewMessage("up-0", "seller-l", 5, p, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	testkafka.Produce(t, s.brokers, s.topic, kafka.Message{Key: []byte("seller-l"), Value: v})
	st = s.waitDone(store, "up-0", 1)
	if len(st.Rows) != 1 || st.Rows[0].State != uploadstatus.Registered || st.Rows[0].ProductID != first.ProductID {
		t.Errorf("up-0's redelivered row: %+v; want registered as %s (its own registration)", st.Rows, first.ProductID)
	}
	a := s.audit("seller-l")
	if a.Products != 1 || a.Accepted != 1 {
		t.Errorf("sandbox: %d products, %d accepted; want 1 each", a.Products, a.Accepted)
	}
	if _, n := s.calls.maxPerKey(); n != 2 {
		t.Errorf("calls per key: %d, want 2 (the seed and up-1's replay; up-0's redelivery makes none)", n)
	}
	if n := s.calls.byKey[bulkreg.IdempotencyKey("up-1", 2)]; n != 0 {
		t.Errorf("up-1's own key was sent %d times, want 0: the takeover calls with up-0's key", n)
	}
}

// registersFirst is a registration API in front of the sandbox that, at
// the first call, has another row register the same SKU and the ledger
// record it, before the call goes through: a registration the ledger
// holds as another product by the time the call is answered.
type registersFirst struct {
	Registry
	once  sync.Once
	first func()
}

func (r *registersFirst) Register(ctx context.Context, seller, key string, p bulkreg.Product) registryclient.Result {
	r.once.Do(r.first)
	return r.Registry.Register(ctx, seller, key, p)
}

// TestARegistrationOverAnotherIsReportedTwice: a row's own call registers
// its product (201) while the ledger already holds the SKU as another
// row's product: the row is registered (it was sent, and the marketplace
// made a product) and says the marketplace now holds the SKU twice, naming
// both products and where the first came from, in the seller's words.
func TestARegistrationOverAnotherIsReportedTwice(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 1, limit: 100, window: 2 * time.Second, margin: 50 * time.Millisecond})
	ctx := context.Background()
	ld := ledger.New(s.rdb, ledger.Options{Lease: 10 * time.Second})
	p := ledgerProduct("D-1")
	otherKey := bulkreg.IdempotencyKey("up-0", 7)
	rc, err := registryclient.New(registryclient.Options{BaseURL: s.api.URL, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var first registryclient.Result
	reg := &registersFirst{Registry: rc, first: func() {
		first = rc.Register(ctx, "seller-d", otherKey, p)
		if _, err := ld.Mark(ctx, "seller-d", "D-1", otherKey, p.ContentHash(), first.ProductID); err != nil {
			t.Errorf("mark the other row's registration: %v", err)
		}
	}}
	s.startConsumer(func(_ *Config, d *Deps) { d.Ledger, d.Circuit, d.Registry = ld, closedBreaker{}, reg })
	store := uploadstatus.New(s.rdb, time.Hour)
	s.publishSKUs("up-1", "seller-d", []string{"D-1"})
	st := s.waitDone(store, "up-1", 1)
	if first.Status != http.StatusCreated {
		t.Fatalf("the other row's registration: %+v", first)
	}
	if len(st.Rows) != 1 {
		t.Fatalf("up-1's rows: %+v, want 1", st.Rows)
	}
	got := st.Rows[0]
	if got.State != uploadstatus.Registered || got.ProductID == "" || got.ProductID == first.ProductID || got.Code != CodeRegisteredTwice {
		t.Errorf("up-1's row: %+v; want registered as a new product with code %s", got, CodeRegisteredTwice)
	}
	for _, want := range []string{got.ProductID, first.ProductID, "up-0", "row 7", "twice"} {
		if !strings.Contains(got.Reason, want) {
			t.Errorf("the row's reason %q does not say %q", got.Reason, want)
		}
	}
	if strings.Contains(got.Reason, "nothing was sent") {
		t.Errorf("the row's reason %q says nothing was sent; this row's call was", got.Reason)
	}
	if len(got.Details) != 1 || got.Details[0].Code != CodeRegisteredTwice || got.Details[0].Params["other"] != first.ProductID ||
		got.Details[0].Params["product"] != got.ProductID || got.Details[0].Params["kind"] != "from" || got.Details[0].Params["row"] != "7" {
		t.Errorf("the row's details %+v; want %s naming both products and the first's row", got.Details, CodeRegisteredTwice)
	}
	if a := s.audit("seller-d"); a.Accepted != 2 {
		t.Errorf("sandbox: %d registrations accepted, want 2 (the other row's and this row's)", a.Accepted)
	}
	es, err := ld.Lookup(ctx, "seller-d", []string{"D-1"})
	if e := es["D-1"]; err != nil || e.ProductID != first.ProductID || e.Row != otherKey {
		t.Errorf("the ledger's entry: %+v, %v; want the first registration kept", es, err)
	}
}

// tabbedProductIDs answers every registration with a product id the ledger
// cannot hold (a tab in it), as an API might.
type tabbedProductIDs struct{ Registry }

func (r tabbedProductIDs) Register(ctx context.Context, seller, key string, p bulkreg.Product) registryclient.Result {
	res := r.Registry.Register(ctx, seller, key, p)
	if res.ProductID != "" {
		res.ProductID += "\tx"
	}
	return res
}

// TestARegistrationTheLedgerCannotHold: the API registers rows under product
// ids the ledger refuses (a tab): the batch's other writes go on, each row is
// finished registered under its product id (it was registered; calling again
// would not help), and no row is called twice.
func TestARegistrationTheLedgerCannotHold(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 1, limit: 100, window: 2 * time.Second, margin: 50 * time.Millisecond})
	rc, err := registryclient.New(registryclient.Options{BaseURL: s.api.URL, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.startConsumer(func(_ *Config, d *Deps) { d.Circuit, d.Registry = closedBreaker{}, tabbedProductIDs{rc} })
	store := uploadstatus.New(s.rdb, time.Hour)
	skus := []string{"T-1", "T-2", "T-3"}
	s.publishSKUs("up-t", "seller-t", skus)
	st := s.waitDone(store, "up-t", len(skus))
	if len(st.Rows) != len(skus) {
		t.Fatalf("up-t's rows: %+v, want %d", st.Rows, len(skus))
	}
	for _, r := range st.Rows {
		if r.State != uploadstatus.Registered || !strings.HasSuffix(r.ProductID, "\tx") {
			t.Errorf("row %d: %+v; want registered under its product id with the tab", r.Row, r)
		}
	}
	if a := s.audit("seller-t"); a.Accepted != len(skus) {
		t.Errorf("sandbox: %d registrations accepted, want %d, one per row", a.Accepted, len(skus))
	}
	es, err := ledger.New(s.rdb, ledger.Options{}).Lookup(context.Background(), "seller-t", skus)
	if err != nil {
		t.Fatal(err)
	}
	for _, sku := range skus {
		if e := es[sku]; e.State == ledger.Registered {
			t.Errorf("the ledger holds %s as registered (%+v); it cannot hold a product id with a tab", sku, e)
		}
	}
}

// TestLedgerConflictAndRefusal: an SKU registered before with other content
// fails without a call; a row the API refuses (422) forgets its claim so a
// fixed row of a later upload registers under its own key.
func TestLedgerConflictAndRefusal(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 2, limit: 100, window: 2 * time.Second, margin: 50 * time.Millisecond})
	ctx := context.Background()
	ld := ledger.New(s.rdb, ledger.Options{})
	old := ledgerProduct("C-1")
	old.Price = 99
	if _, err := ld.Mark(ctx, "seller-c", "C-1", "up-old:2", old.ContentHash(), "P-OLD"); err != nil {
		t.Fatal(err)
	}
	s.startLedgerConsumer(ld)
	store := uploadstatus.New(s.rdb, time.Hour)

	bad := ledgerProduct("C-2")
	bad.Price = -5 // the sandbox refuses it: 422
	var msgs []kafka.Message
	for i, p := range []bulkreg.Product{ledgerProduct("C-1"), bad} {
		v, _ := json.Marshal(bulkreg.NewMessage("up-1", "seller-c", i+2, p, time.Now()))
		msgs = append(msgs, kafka.Message{Key: []byte("seller-c"), Value: v})
	}
	testkafka.Produce(t, s.brokers, s.topic, msgs...)
	st := s.waitDone(store, "up-1", 2)
	rows := map[int]uploadstatus.RowResult{}
	for _, r := range st.Rows {
		rows[r.Row] = r
	}
	if r := rows[2]; r.State != uploadstatus.Failed || r.Code != CodeRegisteredOtherContent ||
		r.Reason != `seller_sku "C-1" is already registered as P-OLD; bulk registration does not change existing products` {
		t.Errorf("row 2 (changed product): %+v", r)
	}
	if r := rows[3]; r.State != uploadstatus.Failed || r.Code == CodeRegisteredOtherContent {
		t.Errorf("row 3 (refused by the API): %+v", r)
	}
	if n := s.calls.byKey[bulkreg.IdempotencyKey("up-1", 2)]; n != 0 {
		t.Errorf("the changed product was sent %d times, want 0", n)
	}
	if m, err := ld.Lookup(ctx, "seller-c", []string{"C-2"}); err != nil || len(m) != 0 {
		t.Errorf("C-2 after the API refused it: %+v, %v; want no entry", m, err)
	}

	// Fixed and uploaded again: registered under the new row's own key.
	s.publishSKUs("up-2", "seller-c", []string{"C-2"})
	st = s.waitDone(store, "up-2", 1)
	if len(st.Rows) != 1 || st.Rows[0].State != uploadstatus.Registered {
		t.Errorf("the fixed row: %+v", st.Rows)
	}
	if n := s.calls.byKey[bulkreg.IdempotencyKey("up-2", 2)]; n != 1 {
		t.Errorf("the fixed row's own key was sent %d times, want 1", n)
	}
}

// flakyLedger is the real ledger, except that while down every call fails
// the way a Redis that does not answer fails; its batches' claims fail
// where the fixture runs them (flakySteps).
type flakyLedger struct {
	*ledger.Ledger
	down   atomic.Bool
	claims atomic.Int64 // claims, or batches of claims, refused while down
}

func (l *flakyLedger) Claim(ctx context.Context, seller, sku, row, hash, from string) (ledger.Claim, error) {
	if l.down.Load() {
		l.claims.Add(1)
		return ledger.Claim{}, fmt.Errorf("claim: %w", redisfail.Wrap(syscall.ECONNREFUSED))
	}
	return l.Ledger.Claim(ctx, seller, sku, row, hash, from)
}

// flakySteps runs a batch's steps on rdb, and refuses them while the
// ledger is down.
func (l *flakyLedger) flakySteps(rdb redis.Scripter) stepRunner {
	run := redisSteps(rdb)
	return func(ctx context.Context, steps []scriptbatch.Step) error {
		if l.down.Load() {
			l.claims.Add(1)
			return fmt.Errorf("claim: %w", redisfail.Wrap(syscall.ECONNREFUSED))
		}
		return run(ctx, steps)
	}
}

// TestLedgerUnavailableFailsClosed: while the ledger does not answer no row
// is called or finished; they wait and are registered once it answers.
func TestLedgerUnavailableFailsClosed(t *testing.T) {
	f := newFixture(t, 2, nil)
	rdb := testredis.Start(t).Client()
	ld := &flakyLedger{Ledger: ledger.New(rdb, ledger.Options{})}
	f.throttle.steps, f.calls.steps = ld.flakySteps(rdb), redisSteps(rdb)
	ld.down.Store(true)
	c, err := New(f.cfg, f.ledgerDeps(ld))
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)

	f.publish("u1", "s1", 5)
	testwait.For(t, 10*time.Second, "the rows asking the ledger", func() bool { return ld.claims.Load() >= 10 })
	if calls, _ := f.registry.count(); calls != 0 || len(f.status.snapshot()) != 0 || f.throttle.reserves.Load() != 0 {
		t.Fatalf("while the ledger is down: %d calls, %d rows recorded, %d slots asked for; want none", calls, len(f.status.snapshot()), f.throttle.reserves.Load())
	}
	ld.down.Store(false)
	testwait.For(t, 10*time.Second, "5 rows registered", func() bool { return f.registeredCount("u1") == 5 })
	if calls, products := f.registry.count(); calls != 5 || products != 5 {
		t.Errorf("%d calls for %d products, want 5 and 5", calls, products)
	}
}
