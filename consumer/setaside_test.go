package consumer

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/ledger"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// TestDeadLetteredRowReadAgainIsNotCalled: a row uses its attempts while
// the API is down and is dead-lettered, and its member dies before its
// offset is committed, so the record is read again once the API is up. The
// re-read must not register it: the row would be both registered and in the
// dead-letter topic, for an operator to send again. Another consumer group
// reading the topic from its start stands in for the next owner of the
// partition: it reads the very same record. A copy of the row sent again
// (redrive) is another record and registers.
func TestDeadLetteredRowReadAgainIsNotCalled(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 1, limit: 100, window: 2 * time.Second, margin: 50 * time.Millisecond})
	ctx := context.Background()
	ld := ledger.New(s.rdb, ledger.Options{Lease: time.Minute})
	hold := &holdAPI{next: s.sandbox, rules: map[string]*holdRule{}}
	gated := httptest.NewServer(s.calls.wrap(hold)) // counts the calls the hold answers 503 too
	t.Cleanup(gated.Close)
	api, err := registryclient.New(registryclient.Options{BaseURL: gated.URL, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	withAPI := func(group string) func(*Config, *Deps) {
		return func(cfg *Config, d *Deps) {
			cfg.Group = group
			shortHold(cfg)
			d.Ledger, d.Circuit, d.Registry = ld, closedBreaker{}, api
			p := s.retryPolicy()
			p.MaxAttempts = 3
			d.Retry = p
		}
	}
	store := uploadstatus.New(s.rdb, time.Hour)
	const seller, sku = "seller-d", "D-1"
	own := bulkreg.IdempotencyKey("up-d", 2)
	hold.set(seller, &holdRule{match: func(p bulkreg.Product) bool { return p.SellerSKU == sku }, failAll: true})

	first := s.startConsumer(withAPI("registrar"))
	s.publishSKUs("up-d", seller, []string{sku}) // offset 0 of partition 0
	st := s.waitDone(store, "up-d", 1)
	if len(st.Rows) != 1 || st.Rows[0].State != uploadstatus.Failed || st.Rows[0].Code != "transient" {
		t.Fatalf("row after the API's 503s: %+v; want failed, transient", st.Rows)
	}
	if n := len(readDLQ(t, s.brokers, s.topic, 1)); n != 1 {
		t.Fatalf("%d dead letters, want 1", n)
	}
	e, err := ld.Lookup(ctx, seller, []string{sku})
	if err != nil {
		t.Fatal(err)
	}
	if got := e[sku]; got.State != ledger.Claimed || !got.At.IsZero() {
		t.Fatalf("ledger entry after the dead letter: %+v; want the claim released", got)
	}
	// Its attempts in the note: the calls made with its key while its
	// seller was held, until the hold limit.
	s.calls.mu.Lock()
	before := s.calls.byKey[own]
	s.calls.mu.Unlock()
	attempts := before
	record := ledger.Record(s.topic, 0, 0)
	if note, err := s.rdb.HGet(ctx, ledger.AsideKey(seller), record).Result(); err != nil || !strings.HasPrefix(note, fmt.Sprintf("transient\t%d\t", attempts)) || attempts < 1 {
		t.Fatalf("set-aside note of %s: %q, %v; want transient after %d attempts", record, note, err, attempts)
	}
	failed := st.Rows[0]

	// The API is up again; the same record is read again.
	hold.set(seller, &holdRule{match: func(bulkreg.Product) bool { return false }})
	again := s.startConsumer(withAPI("next-owner"))
	asides := again.m.rows.WithLabelValues("set_aside")
	testwait.For(t, 20*time.Second, "the re-read row finished", func() bool { return testutil.ToFloat64(asides) == 1 })
	s.calls.mu.Lock()
	after := s.calls.byKey[own]
	s.calls.mu.Unlock()
	if after != before {
		t.Errorf("the re-read row was called %d more times; want none", after-before)
	}
	if a := s.audit(seller); a.Products != 0 {
		t.Errorf("%d products at the API after the re-read, want 0", a.Products)
	}
	st, err = store.Get(ctx, "up-d")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Rows) != 1 || st.Rows[0].State != uploadstatus.Failed || st.Rows[0].Code != failed.Code ||
		st.Rows[0].Reason != failed.Reason || st.Rows[0].Attempts != failed.Attempts {
		t.Errorf("row after the re-read: %+v; want the dead letter's result again, %+v", st.Rows, failed)
	}

	// redrive: the row's copy registers, once, under the row's own key.
	s.publishSKUs("up-d", seller, []string{sku})
	s.waitProducts(seller, 1, 20*time.Second)
	testwait.For(t, 20*time.Second, "the copy recorded registered", func() bool {
		st, err := store.Get(ctx, "up-d")
		return err == nil && len(st.Rows) == 1 && st.Rows[0].State == uploadstatus.Registered
	})
	if a := s.audit(seller); a.Products != 1 || a.Accepted != 1 {
		t.Errorf("sandbox after the copy: %d products, %d accepted; want 1 each", a.Products, a.Accepted)
	}
	if n := testutil.ToFloat64(first.m.rows.WithLabelValues("dead_lettered")); n != 1 {
		t.Errorf("the first consumer dead-lettered %v rows, want 1", n)
	}
	if n := testutil.ToFloat64(asides); n != 1 {
		t.Errorf("the next owner finished %v rows as set aside, want 1 (the copy is not)", n)
	}
	if n := testutil.ToFloat64(again.m.rows.WithLabelValues("dead_lettered")); n != 0 {
		t.Errorf("the next owner counted %v dead letters, want 0: it wrote none", n)
	}
}

// TestARowRegisteredByAnotherReadingIsNotDeadLettered: a row's calls fail
// while another reading of the same record (the partition's next owner,
// after this process was paused past its claim's lease) registers it. When
// the row's attempts run out it claims again before writing a dead letter,
// finds the registration and records the row registered: the row is never
// both registered and in the dead-letter topic.
func TestARowRegisteredByAnotherReadingIsNotDeadLettered(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 1, limit: 100, window: 2 * time.Second, margin: 50 * time.Millisecond})
	ctx := context.Background()
	ld := ledger.New(s.rdb, ledger.Options{Lease: time.Minute})
	hold := &holdAPI{next: s.sandbox, rules: map[string]*holdRule{}}
	gated := httptest.NewServer(s.calls.wrap(hold))
	t.Cleanup(gated.Close)
	api, err := registryclient.New(registryclient.Options{BaseURL: gated.URL, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const seller, sku = "seller-r", "R-1"
	own := bulkreg.IdempotencyKey("up-r", 2)
	// The row's one attempt is held at the API and then answered 503.
	rule := &holdRule{match: func(p bulkreg.Product) bool { return p.SellerSKU == sku }, hold: true, fail: true,
		arrived: make(chan struct{}), release: make(chan struct{})}
	hold.set(seller, rule)
	s.startConsumer(func(cfg *Config, d *Deps) {
		d.Ledger, d.Circuit, d.Registry = ld, closedBreaker{}, api
		p := s.retryPolicy()
		p.MaxAttempts = 1
		d.Retry = p
	})
	store := uploadstatus.New(s.rdb, time.Hour)
	s.publishSKUs("up-r", seller, []string{sku})
	select {
	case <-rule.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the row's call did not reach the API")
	}
	// While it is out, the other reading registers the row under its own key.
	if _, err := ld.Mark(ctx, seller, sku, own, ledgerProduct(sku).ContentHash(), "P-OTHER"); err != nil {
		t.Fatal(err)
	}
	close(rule.release)
	st := s.waitDone(store, "up-r", 1)
	if len(st.Rows) != 1 || st.Rows[0].State != uploadstatus.Registered || st.Rows[0].ProductID != "P-OTHER" {
		t.Errorf("row: %+v; want registered as P-OTHER (the other reading's registration)", st.Rows)
	}
	// A dead letter is acknowledged before its row is recorded, so one
	// written is in the topic once the row is done.
	if n := dlqLen(t, s.brokers, s.topic); n != 0 {
		t.Errorf("%d dead letters of a row registered by another reading, want 0", n)
	}
}
