package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/ledger"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// holdAPI sits between the consumer and the sandbox and, per seller, holds
// or fails the calls whose product matches a rule: it puts the first
// claimer's call "in flight" while the test hands its key to another row.
type holdAPI struct {
	next  http.Handler
	mu    sync.Mutex
	rules map[string]*holdRule // by seller id
}

type holdRule struct {
	match   func(bulkreg.Product) bool
	hold    bool          // the first matching call waits for release
	fail    bool          // the held call is answered 503 instead of passed on
	failAll bool          // every matching call is answered 503 at once
	arrived chan struct{} // closed when the held call arrives
	release chan struct{} // closed by the test to let it go on
	once    sync.Once
}

func (h *holdAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var p bulkreg.Product
	_ = json.Unmarshal(body, &p) // a body that is not a product matches no rule
	seller, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1/sellers/"), "/")
	h.mu.Lock()
	rule := h.rules[seller]
	h.mu.Unlock()
	if rule != nil && rule.match(p) {
		if rule.failAll {
			http.Error(w, `{"error":{"code":"unavailable","message":"held down by the test"}}`, http.StatusServiceUnavailable)
			return
		}
		first := false
		rule.once.Do(func() { first = rule.hold })
		if first {
			close(rule.arrived)
			<-rule.release
			if rule.fail {
				http.Error(w, `{"error":{"code":"unavailable","message":"held down by the test"}}`, http.StatusServiceUnavailable)
				return
			}
		}
	}
	h.next.ServeHTTP(w, r)
}

func (h *holdAPI) set(seller string, r *holdRule) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.arrived, r.release = make(chan struct{}), make(chan struct{})
	h.rules[seller] = r
}

func publishRow(t *testing.T, s *stack, upload, seller string, row int, p bulkreg.Product) {
	t.Helper()
	v, err := json.Marshal(bulkreg.NewMessage(upload, seller, row, p, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	testkafka.Produce(t, s.brokers, s.topic, kafka.Message{Key: []byte(seller), Value: v})
}

// TestRefusalAfterATakeoverKeepsTheKey: a row A claims SKU T-1 and its
// lease lapses; a row B of another upload takes the claim over and calls
// with A's Idempotency-Key (TestLapsedClaimIsTakenOverWithItsKey seeds it
// the same way). Whatever each of them is then answered (A: 422, 409, 5xx,
// a replay; B: 201, 422, no call at all), in whichever order, the SKU ends
// as at most one product: a refusal of A's own content must not erase the
// key under which B may have registered, or B's redelivery registers the
// SKU a second time under its own key. The sandbox's audit judges: as many
// products as 201s.
func TestRefusalAfterATakeoverKeepsTheKey(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 1, limit: 100, window: 2 * time.Second, margin: 50 * time.Millisecond})
	ctx := context.Background()
	const lease = 300 * time.Millisecond
	lapse := func() { time.Sleep(lease + 150*time.Millisecond) } // the condition is time itself, on the ledger's own setting
	ld := ledger.New(s.rdb, ledger.Options{Lease: lease})
	hold := &holdAPI{next: s.calls.wrap(s.sandbox), rules: map[string]*holdRule{}}
	gated := httptest.NewServer(hold)
	t.Cleanup(gated.Close)
	consumerAPI, err := registryclient.New(registryclient.Options{BaseURL: gated.URL, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	direct, err := registryclient.New(registryclient.Options{BaseURL: s.api.URL, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.startConsumer(func(c *Config, d *Deps) {
		d.Ledger, d.Circuit, d.Registry = ld, closedBreaker{}, consumerAPI
		shortHold(c)
	})
	store := uploadstatus.New(s.rdb, time.Hour)

	good := ledgerProduct("T-1")
	other := ledgerProduct("T-1")
	other.Price = 13000
	bad := ledgerProduct("T-1")
	bad.Price = -5 // the sandbox refuses it: 422
	bad2 := ledgerProduct("T-1")
	bad2.Price = -7
	is := func(want bulkreg.Product) func(bulkreg.Product) bool {
		return func(p bulkreg.Product) bool { return p == want }
	}

	cases := []struct {
		name string
		a, b bulkreg.Product // A's content (the first claimer), B's (the row that takes A's key over)
		// bCall: B calls the API with A's key before it crashes (no mark, no release).
		bCall bool
		// inFlight: A's first call is held at the API while B takes the key
		// over and calls; failHeld answers it 503, else it goes on afterwards.
		inFlight, failHeld bool
		// aDown: every call of A's content is answered 503 (A is dead-lettered).
		aDown bool
		// fixed: a third upload's row published at the end (zero: none).
		fixed  bulkreg.Product
		aState string // A's row result
		bState string // B's redelivery's result ("" when B's row ends failed)
	}{
		{name: "B registered under A's key and crashed; A's own content refused (422)",
			a: bad, b: good, bCall: true, aState: uploadstatus.Failed, bState: uploadstatus.AlreadyRegistered},
		{name: "A's call in flight while B registers under its key; A answered 503, then refused (422)",
			a: bad, b: good, bCall: true, inFlight: true, failHeld: true, aState: uploadstatus.Failed, bState: uploadstatus.AlreadyRegistered},
		{name: "A's call in flight while B registers under its key; A's call then refused (422)",
			a: bad, b: good, bCall: true, inFlight: true, aState: uploadstatus.Failed, bState: uploadstatus.AlreadyRegistered},
		{name: "A's call in flight while B registers other content under its key; A answered 409",
			a: good, b: other, bCall: true, inFlight: true, aState: uploadstatus.Failed, bState: uploadstatus.AlreadyRegistered},
		{name: "B crashed before calling; A's own content refused (422); B registers under A's key",
			a: bad, b: good, aState: uploadstatus.Failed, bState: uploadstatus.Registered},
		{name: "B registered under A's key; A's calls all 5xx (dead-lettered)",
			a: bad, b: good, bCall: true, aDown: true, aState: uploadstatus.Failed, bState: uploadstatus.AlreadyRegistered},
		{name: "B registered A's content under A's key; A's call is a replay",
			a: good, b: good, bCall: true, aState: uploadstatus.Registered, bState: uploadstatus.AlreadyRegistered},
		{name: "both contents refused (422); a fixed row of a third upload registers once",
			a: bad, b: bad2, bCall: true, fixed: good, aState: uploadstatus.Failed},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seller := fmt.Sprintf("seller-t%d", i)
			upA, upB, upC := fmt.Sprintf("up-a%d", i), fmt.Sprintf("up-b%d", i), fmt.Sprintf("up-c%d", i)
			keyA, keyB := bulkreg.IdempotencyKey(upA, 5), bulkreg.IdempotencyKey(upB, 2)
			rule := &holdRule{match: is(c.a), hold: c.inFlight, fail: c.failHeld, failAll: c.aDown}
			hold.set(seller, rule)

			var bRes registryclient.Result
			takeOver := func() {
				t.Helper()
				cl, err := ld.Claim(ctx, seller, "T-1", keyB, c.b.ContentHash(), "")
				if err != nil || cl.Verdict != ledger.Call || cl.CallKey != keyA {
					t.Fatalf("B's takeover: %+v, %v; want a call with A's key %s", cl, err, keyA)
				}
				if c.bCall {
					bRes = direct.Register(ctx, seller, keyA, c.b)
				}
				// B crashes here: no mark, no release.
			}
			if c.inFlight {
				publishRow(t, s, upA, seller, 5, c.a)
				select {
				case <-rule.arrived:
				case <-time.After(10 * time.Second):
					t.Fatal("A's call did not reach the API within 10 s")
				}
				lapse()
				takeOver()
				close(rule.release)
			} else {
				// A claimed and crashed before calling.
				if cl, err := ld.Claim(ctx, seller, "T-1", keyA, c.a.ContentHash(), ""); err != nil || cl.Verdict != ledger.Call {
					t.Fatalf("A's claim: %+v, %v", cl, err)
				}
				lapse()
				takeOver()
				lapse()
				publishRow(t, s, upA, seller, 5, c.a)
			}
			a := s.waitDone(store, upA, 1)
			publishRow(t, s, upB, seller, 2, c.b) // B's redelivery
			b := s.waitDone(store, upB, 1)
			if c.fixed != (bulkreg.Product{}) {
				publishRow(t, s, upC, seller, 2, c.fixed)
				s.waitDone(store, upC, 1)
			}

			au := s.audit(seller)
			t.Logf("B's call: %d %s; A: %+v; B: %+v; sandbox: %d products, %d accepted, %d replays, %d conflicts, %d invalid",
				bRes.Status, bRes.ProductID, a.Rows, b.Rows, au.Products, au.Accepted, au.Replays, au.Conflicts, au.Invalid)
			if au.Products != 1 || au.Accepted != 1 {
				t.Errorf("sandbox: %d products from %d registrations (201s); want 1 and 1: the SKU registered once", au.Products, au.Accepted)
			}
			if len(a.Rows) != 1 || a.Rows[0].State != c.aState {
				t.Errorf("A's row: %+v; want %s", a.Rows, c.aState)
			}
			if c.bState != "" {
				if len(b.Rows) != 1 || b.Rows[0].State != c.bState || (bRes.ProductID != "" && b.Rows[0].ProductID != bRes.ProductID) {
					t.Errorf("B's redelivered row: %+v; want %s as %q", b.Rows, c.bState, bRes.ProductID)
				}
			}
		})
	}
}
