package registryclient_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
)

// These tests talk to the real sandbox over HTTP on loopback.

func startSandbox(t testing.TB, o sandbox.Options) (*sandbox.Server, *registryclient.Client) {
	t.Helper()
	sb, err := sandbox.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sb)
	t.Cleanup(srv.Close)
	c, err := registryclient.New(registryclient.Options{BaseURL: srv.URL, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return sb, c
}

func item(i int) bulkreg.Product {
	return bulkreg.Product{SellerSKU: fmt.Sprintf("SKU-%d", i), Name: fmt.Sprintf("Item %d", i), CategoryCode: "50000001", Price: 1000 + int64(i), Stock: 1}
}

func TestSandboxClasses(t *testing.T) {
	sb, c := startSandbox(t, sandbox.Options{Limit: 1, Window: time.Minute})
	ctx := context.Background()

	first := c.Register(ctx, "s1", "u:1", item(1))
	if first.Class != registryclient.Registered || first.Status != 201 || first.ProductID == "" {
		t.Fatalf("first call: %v %d %q %v", first.Class, first.Status, first.ProductID, first.Err)
	}
	again := c.Register(ctx, "s1", "u:1", item(1))
	if again.Class != registryclient.Replayed || again.Status != 200 || again.ProductID != first.ProductID {
		t.Fatalf("same key again: %v %d %q, want a replay of %q", again.Class, again.Status, again.ProductID, first.ProductID)
	}
	conflict := c.Register(ctx, "s1", "u:1", item(2))
	if conflict.Class != registryclient.Permanent || conflict.Status != 409 {
		t.Fatalf("same key, other body: %v %d", conflict.Class, conflict.Status)
	}
	bad := item(3)
	bad.Price = 0
	invalid := c.Register(ctx, "s1", "u:3", bad)
	if invalid.Class != registryclient.Permanent || invalid.Status != 422 || invalid.Field != "price" || invalid.Message == "" {
		t.Fatalf("price 0: %v %d field %q message %q", invalid.Class, invalid.Status, invalid.Field, invalid.Message)
	}
	limited := c.Register(ctx, "s1", "u:4", item(4))
	if limited.Class != registryclient.RateLimited || limited.RetryAfter < 59*time.Second || limited.RetryAfter > 60*time.Second {
		t.Fatalf("second registration inside the window with limit 1: %v retry-after %v", limited.Class, limited.RetryAfter)
	}
	if err := sb.SetFaults(1, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	failed := c.Register(ctx, "s1", "u:5", item(5))
	if failed.Class != registryclient.Transient || failed.Status != 503 {
		t.Fatalf("injected failure: %v %d", failed.Class, failed.Status)
	}
	a := sb.Audit().Sellers["s1"]
	if a.Accepted != 1 || a.Products != 1 || a.Replays != 1 || a.Conflicts != 1 || a.Invalid != 1 || a.RateLimited != 1 {
		t.Errorf("audit %+v, want one of each", a)
	}
}

// The transient faults of the sandbox, each seen by the client as Transient,
// and a retry after a timeout that did register turns into a replay.
func TestSandboxTransientFaults(t *testing.T) {
	sb, err := sandbox.New(sandbox.Options{Limit: 100, Window: time.Minute, SlowDelay: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		sb.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c, err := registryclient.New(registryclient.Options{BaseURL: srv.URL, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Warm a pooled connection, then drop the next request's connection:
	// the client must not resend the POST on its own (one Register, one POST).
	if res := c.Register(ctx, "s1", "u:0", item(0)); res.Class != registryclient.Registered {
		t.Fatalf("warm-up: %v %v", res.Class, res.Err)
	}
	if err := sb.SetFaults(0, 0, 1, 0, 0); err != nil {
		t.Fatal(err)
	}
	before := hits.Load()
	dropped := c.Register(ctx, "s1", "u:1", item(1))
	if dropped.Class != registryclient.Transient || dropped.Status != 0 {
		t.Fatalf("dropped connection: %v %d %v", dropped.Class, dropped.Status, dropped.Err)
	}
	if n := hits.Load() - before; n != 1 {
		t.Errorf("one Register sent %d POSTs after a dropped connection, want 1", n)
	}

	// Slow past the client's timeout: transient, but the sandbox registered
	// it, so the retry with the same key is a replay, not a second product.
	if err := sb.SetFaults(0, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	slow := c.Register(ctx, "s1", "u:2", item(2))
	if slow.Class != registryclient.Transient || !strings.Contains(slow.Err.Error(), "no answer from the registration API within 100ms") {
		t.Fatalf("slow answer: %v %v", slow.Class, slow.Err)
	}
	if err := sb.SetFaults(0, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	var retry registryclient.Result
	deadline := time.Now().Add(2 * time.Second)
	for retry = c.Register(ctx, "s1", "u:2", item(2)); retry.Class == registryclient.Transient && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond) // the slow answer may still be on its way
		retry = c.Register(ctx, "s1", "u:2", item(2))
	}
	if retry.Class != registryclient.Replayed {
		t.Fatalf("retry after the timeout: %v %v, want a replay", retry.Class, retry.Err)
	}
	a := sb.Audit().Sellers["s1"]
	if a.Products != 2 || a.Accepted != 2 || a.Replays != 1 {
		t.Errorf("audit %+v, want 2 products (u:0, u:2), 1 replay", a)
	}

	// A caller that gives up is told so, not that the API is unreachable.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if res := c.Register(cctx, "s1", "u:3", item(3)); res.Class != registryclient.Transient || !strings.Contains(res.Err.Error(), "cancelled") {
		t.Errorf("cancelled call: %v %v", res.Class, res.Err)
	}
}

// 150 calls inside the window: exactly 100 registered, 50 refused, and the
// Retry-After of a refusal is enough for the next call to succeed.
func TestSandbox150CallsInOneWindow(t *testing.T) {
	window := 2 * time.Second
	sb, c := startSandbox(t, sandbox.Options{Limit: 100, Window: window})
	ctx := context.Background()
	var registered, limited int
	var last registryclient.Result
	start := time.Now()
	for i := 1; i <= 150; i++ {
		res := c.Register(ctx, "s1", fmt.Sprintf("u:%d", i), item(i))
		switch res.Class {
		case registryclient.Registered:
			registered++
		case registryclient.RateLimited:
			limited++
			last = res
		default:
			t.Fatalf("call %d: %v %v", i, res.Class, res.Err)
		}
	}
	if elapsed := time.Since(start); elapsed >= window {
		t.Fatalf("150 calls took %v, longer than the %v window: the test proves nothing", elapsed, window)
	}
	if registered != 100 || limited != 50 {
		t.Fatalf("%d registered and %d rate-limited, want 100 and 50", registered, limited)
	}
	if last.RetryAfter <= 0 || last.RetryAfter > window {
		t.Fatalf("Retry-After %v, want within (0, %v]", last.RetryAfter, window)
	}
	time.Sleep(last.RetryAfter)
	if res := c.Register(ctx, "s1", "u:151", item(151)); res.Class != registryclient.Registered {
		t.Fatalf("after honouring Retry-After %v: %v %v", last.RetryAfter, res.Class, res.Err)
	}
	if a := sb.Audit().Sellers["s1"]; a.Accepted != 101 || a.RateLimited != 50 || a.MaxInWindow != 100 || a.Exceeded {
		t.Errorf("audit %+v", a)
	}
}

// 200 concurrent calls across 20 sellers with 10% injected 503s and jitter:
// with the retry policy every product is registered once.
func TestSandboxConcurrentWithFaults(t *testing.T) {
	sb, c := startSandbox(t, sandbox.Options{Limit: 100, Window: time.Minute, FailRate: 0.1, Latency: 2 * time.Millisecond, Jitter: 10 * time.Millisecond})
	policy := registryclient.RetryPolicy{InitialInterval: 5 * time.Millisecond, MaxInterval: 50 * time.Millisecond, MaxElapsed: 10 * time.Second, Multiplier: 2, Jitter: 0.5, MaxAttempts: 10}
	ctx := context.Background()
	var mu sync.Mutex
	attempts := map[int]int{}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			seller := fmt.Sprintf("seller-%02d", i%20)
			res, n := registryclient.Retry(ctx, policy, func(ctx context.Context) registryclient.Result {
				return c.Register(ctx, seller, fmt.Sprintf("u:%d", i), item(i))
			})
			mu.Lock()
			defer mu.Unlock()
			attempts[n]++
			if !res.OK() {
				t.Errorf("row %d of %s: %v after %d attempts: %v", i, seller, res.Class, n, res.Err)
			}
		})
	}
	wg.Wait()
	audit := sb.Audit()
	var products, failed int
	for seller, a := range audit.Sellers {
		products += a.Products
		failed += a.Failed
		if a.Products != 10 || a.Accepted != 10 || a.MaxInWindow > 100 || a.Exceeded {
			t.Errorf("%s: %+v, want 10 products and no excess", seller, a)
		}
	}
	if products != 200 {
		t.Errorf("%d products, want 200", products)
	}
	// With 10% failures about 20 of 200 first attempts fail; none at all
	// means the faults were not injected and the test proved nothing.
	if failed == 0 {
		t.Error("no injected 503 was seen")
	}
	t.Logf("attempts per row: %v, injected 503s: %d", attempts, failed)
}

// BenchmarkRegister measures calls per second, client and sandbox on
// loopback, each call a new product of one of 1,000 sellers.
func BenchmarkRegister(b *testing.B) {
	_, c := startSandbox(b, sandbox.Options{Limit: 1 << 30, Window: time.Minute})
	ctx := context.Background()
	var n sync.Mutex
	next := 0
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n.Lock()
			next++
			i := next
			n.Unlock()
			if res := c.Register(ctx, fmt.Sprintf("s%d", i%1000), fmt.Sprintf("u:%d", i), item(i)); res.Class != registryclient.Registered {
				b.Fatalf("%v %v", res.Class, res.Err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// TestSandboxAppWideLimit: the sandbox's app-wide 429 is told apart from
// the seller's, by the answer alone.
func TestSandboxAppWideLimit(t *testing.T) {
	sb, c := startSandbox(t, sandbox.Options{Limit: 2, Window: time.Minute, GlobalLimit: 3, GlobalWindow: time.Minute})
	ctx := context.Background()
	for i, want := range []struct {
		seller string
		class  registryclient.Class
		scope  registryclient.Scope
	}{
		{"s1", registryclient.Registered, ""},
		{"s1", registryclient.Registered, ""},
		{"s1", registryclient.RateLimited, registryclient.ScopeSeller},
		{"s2", registryclient.Registered, ""},
		{"s2", registryclient.RateLimited, registryclient.ScopeApp},
		{"s3", registryclient.RateLimited, registryclient.ScopeApp},
	} {
		res := c.Register(ctx, want.seller, fmt.Sprintf("u:%d", i), item(i))
		if res.Class != want.class || res.Scope != want.scope {
			t.Errorf("call %d of %s: %v scope %q (%v), want %v scope %q", i, want.seller, res.Class, res.Scope, res.Err, want.class, want.scope)
		}
		if res.Class == registryclient.RateLimited && (res.RetryAfter < 59*time.Second || res.RetryAfter > 60*time.Second) {
			t.Errorf("call %d: Retry-After %v, want the window's rest, about 60 s", i, res.RetryAfter)
		}
	}
	if a := sb.Audit(); a.App == nil || a.App.RateLimited != 2 || a.App.Accepted != 3 || a.Sellers["s1"].AppRateLimited != 0 || a.Sellers["s1"].RateLimited != 1 {
		t.Errorf("audit %+v %+v, want 2 app-wide 429s and 3 accepted; s1 refused once by its own limit", a.App, a.Sellers["s1"])
	}
}

// TestSandboxAtAWrongURL: the real sandbox behind a registry URL with a
// wrong path answers its server's "404 page not found" (not the contract's
// JSON), and the sandbox behind a gateway that refuses the credential
// answers 401: both say bulkreg is misconfigured, neither fails the row
// (as Permanent answers, every row of the backlog would fail).
func TestSandboxAtAWrongURL(t *testing.T) {
	sb, err := sandbox.New(sandbox.Options{Limit: 10, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	gate := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "fresh" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"the API key was revoked"}}`))
			return
		}
		sb.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(gate)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name, url, key string
		class          registryclient.Class
		status         int
	}{
		{"wrong path", srv.URL + "/api", "fresh", registryclient.Misconfigured, 404},
		{"rotated key", srv.URL, "stale", registryclient.Misconfigured, 401},
		{"both right", srv.URL, "fresh", registryclient.Registered, 201},
	} {
		c, err := registryclient.New(registryclient.Options{BaseURL: tc.url, AuthHeader: "X-Api-Key: " + tc.key, AllowInsecureAuth: true})
		if err != nil {
			t.Fatal(err)
		}
		res := c.Register(context.Background(), "s1", "u:1", item(1))
		if res.Class != tc.class || res.Status != tc.status {
			t.Errorf("%s: %v %d (%v), want %v %d", tc.name, res.Class, res.Status, res.Err, tc.class, tc.status)
		}
		c.Close()
	}
	if a := sb.Audit().Sellers["s1"]; a.Products != 1 {
		t.Errorf("the sandbox holds %d products, want the one registration with the right URL and key", a.Products)
	}
}
