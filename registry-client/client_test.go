package registryclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/bulkreg/bulkreg"
)

var product = bulkreg.Product{SellerSKU: "SKU-1", Name: "Mug", CategoryCode: "50000001", Price: 12000, Stock: 3}

// The edges of HTTP that the sandbox does not produce on its own: proxies'
// HTML pages, cut bodies, both Retry-After forms, hung servers.
func TestClassifyAnswers(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		class      Class
		productID  string
		code       string
		field      string
		retryAfter time.Duration
		scope      Scope
		errHas     string
	}{
		{name: "201", status: 201, body: `{"product_id":"p-1","seller_sku":"SKU-1"}`, class: Registered, productID: "p-1"},
		{name: "200 replay", status: 200, body: `{"product_id":"p-1","seller_sku":"SKU-1"}`, class: Replayed, productID: "p-1"},
		{name: "201 truncated JSON", status: 201, body: `{"product_id":"p-`, class: Transient, errHas: "without a readable product id"},
		{name: "422 names the field", status: 422, body: `{"error":{"code":"invalid_price","message":"price must be a whole number greater than 0","field":"price"}}`,
			class: Permanent, code: "invalid_price", field: "price", errHas: "price: price must be"},
		{name: "409", status: 409, body: `{"error":{"code":"idempotency_conflict","message":"key reused with another body"}}`, class: Permanent, code: "idempotency_conflict"},
		{name: "400 without JSON", status: 400, body: "bad", class: Permanent, code: "http_400", errHas: `body "bad"`},
		{name: "429 seconds", status: 429, header: map[string]string{"Retry-After": "7"}, class: RateLimited, retryAfter: 7 * time.Second, scope: ScopeSeller},
		{name: "429 app-wide by header", status: 429, header: map[string]string{"Retry-After": "3", "X-RateLimit-Scope": "App"}, class: RateLimited, retryAfter: 3 * time.Second,
			scope: ScopeApp, errHas: "application's rate"},
		{name: "429 app-wide by code", status: 429, body: `{"error":{"code":"app_rate_limited","message":"the application reached its limit"}}`, class: RateLimited,
			code: "app_rate_limited", retryAfter: 1500 * time.Millisecond, scope: ScopeApp},
		{name: "429 the seller's by header", status: 429, header: map[string]string{"X-RateLimit-Scope": "seller"}, body: `{"error":{"code":"app_rate_limited"}}`, class: RateLimited,
			code: "app_rate_limited", retryAfter: 1500 * time.Millisecond, scope: ScopeSeller, errHas: "seller's rate"},
		{name: "429 HTTP-date", status: 429, header: map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, class: RateLimited, retryAfter: 90 * time.Second},
		{name: "429 date in the past", status: 429, header: map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, class: RateLimited, retryAfter: time.Second},
		{name: "429 zero seconds", status: 429, header: map[string]string{"Retry-After": "0"}, class: RateLimited, retryAfter: time.Second},
		{name: "429 without Retry-After", status: 429, class: RateLimited, retryAfter: 1500 * time.Millisecond},
		{name: "429 garbage Retry-After", status: 429, header: map[string]string{"Retry-After": "soon"}, class: RateLimited, retryAfter: 1500 * time.Millisecond},
		{name: "502 HTML", status: 502, body: "<html><body><h1>502 Bad Gateway</h1>\n<hr>nginx</body></html>", class: Transient, errHas: "502 Bad Gateway: body \"<html><body><h1>502 Bad Gateway</h1> <hr>nginx"},
		{name: "503 JSON", status: 503, body: `{"error":{"code":"unavailable","message":"try later"}}`, class: Transient, code: "unavailable"},
		{name: "408", status: 408, class: Transient, errHas: "empty body"},
		// Answers about bulkreg itself, not the row: failing the row for
		// them would fail every row.
		{name: "302 unexpected", status: 302, header: map[string]string{"Location": "/elsewhere"}, class: Misconfigured, errHas: "redirect (302)"},
		{name: "301 moved", status: 301, header: map[string]string{"Location": "https://new.example.com/v1"}, class: Misconfigured, errHas: "set the registry URL"},
		{name: "401 rotated key", status: 401, body: `{"error":{"code":"unauthorized","message":"invalid API key"}}`, class: Misconfigured, code: "unauthorized",
			errHas: "refused bulkreg's credentials (401 Unauthorized: invalid API key [unauthorized])"},
		{name: "401 without a body", status: 401, class: Misconfigured, errHas: "BULKREG_REGISTRY_AUTH_HEADER"},
		{name: "403", status: 403, body: "<html>Forbidden</html>", class: Misconfigured, errHas: "credentials (403 Forbidden"},
		{name: "407 proxy", status: 407, class: Misconfigured, errHas: "credentials (407"},
		{name: "404 page of a wrong base URL", status: 404, body: "404 page not found\n", class: Misconfigured, errHas: "no registration route"},
		{name: "404 HTML", status: 404, body: "<html><h1>Not Found</h1></html>", class: Misconfigured, errHas: "BULKREG_REGISTRY_URL"},
		{name: "404 JSON without the contract's error", status: 404, body: `{"message":"no Route matched with those values"}`, class: Misconfigured},
		{name: "404 the contract's answer about the row", status: 404, body: `{"error":{"code":"category_not_found","message":"no such category","field":"category_code"}}`,
			class: Permanent, code: "category_not_found", field: "category_code"},
		{name: "405", status: 405, body: "Method Not Allowed", class: Misconfigured, errHas: "no registration route"},
		{name: "410 is the row's", status: 410, body: `{"error":{"code":"gone","message":"gone"}}`, class: Permanent, code: "gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			c, err := New(Options{BaseURL: srv.URL, DefaultRetryAfter: 1500 * time.Millisecond, Now: func() time.Time { return now },
				HTTPClient: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}})
			if err != nil {
				t.Fatal(err)
			}
			res := c.Register(context.Background(), "seller-1", "u:1", product)
			if res.Class != tt.class || res.Status != tt.status {
				t.Fatalf("class %v status %d, want %v %d (err %v)", res.Class, res.Status, tt.class, tt.status, res.Err)
			}
			if res.ProductID != tt.productID || res.Code != tt.code || res.Field != tt.field || res.RetryAfter != tt.retryAfter {
				t.Errorf("got id %q code %q field %q retry-after %v, want %q %q %q %v", res.ProductID, res.Code, res.Field, res.RetryAfter,
					tt.productID, tt.code, tt.field, tt.retryAfter)
			}
			if res.OK() != (res.Err == nil) {
				t.Errorf("OK() %v but err %v", res.OK(), res.Err)
			}
			if tt.scope == "" && tt.class == RateLimited {
				tt.scope = ScopeSeller // the contract's 429 says nothing: the seller's limit
			}
			if res.Scope != tt.scope {
				t.Errorf("scope %q, want %q", res.Scope, tt.scope)
			}
			if tt.errHas != "" && (res.Err == nil || !strings.Contains(res.Err.Error(), tt.errHas)) {
				t.Errorf("error %v does not contain %q", res.Err, tt.errHas)
			}
		})
	}
}

// What goes on the wire is the contract: path, headers, JSON body.
func TestRequestFollowsTheContract(t *testing.T) {
	var got *http.Request
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got, body = r, string(b)
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{"product_id":"p-9"}`)
	}))
	defer srv.Close()
	c, err := New(Options{BaseURL: srv.URL + "/api/", AuthHeader: "X-Api-Key:  secret ", AllowInsecureAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	res := c.Register(context.Background(), "Seller_1-a", "up:17", product)
	if res.Class != Registered {
		t.Fatalf("class %v: %v", res.Class, res.Err)
	}
	if got.Method != http.MethodPost || got.URL.EscapedPath() != "/api/v1/sellers/Seller_1-a/products" {
		t.Errorf("request %s %s", got.Method, got.URL.EscapedPath())
	}
	for h, want := range map[string]string{"Content-Type": "application/json", "Idempotency-Key": "up:17", "X-Api-Key": "secret"} {
		if got.Header.Get(h) != want {
			t.Errorf("header %s = %q, want %q", h, got.Header.Get(h), want)
		}
	}
	if !strings.Contains(body, `"seller_sku":"SKU-1"`) || !strings.Contains(body, `"price":12000`) {
		t.Errorf("body %s", body)
	}
}

func TestTransportFailuresAreTransient(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
		defer srv.Close()
		defer close(release)
		c, _ := New(Options{BaseURL: srv.URL, Timeout: 100 * time.Millisecond})
		start := time.Now()
		res := c.Register(context.Background(), "s", "k", product)
		if res.Class != Transient || !strings.Contains(res.Err.Error(), "no answer from the registration API within 100ms") {
			t.Fatalf("class %v err %v", res.Class, res.Err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("timeout of 100ms took %v", d)
		}
	})
	t.Run("connection dropped", func(t *testing.T) {
		var n atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}))
		defer srv.Close()
		c, _ := New(Options{BaseURL: srv.URL})
		res := c.Register(context.Background(), "s", "k", product)
		if res.Class != Transient || res.Status != 0 || !strings.Contains(res.Err.Error(), "closed the connection") {
			t.Fatalf("class %v status %d err %v", res.Class, res.Status, res.Err)
		}
	})
	t.Run("body cut short", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(201)
			_, _ = io.WriteString(w, `{"product_id":`)
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}))
		defer srv.Close()
		c, _ := New(Options{BaseURL: srv.URL})
		res := c.Register(context.Background(), "s", "k", product)
		if res.Class != Transient || res.Status != 201 || !strings.Contains(res.Err.Error(), "could not be read") {
			t.Fatalf("class %v status %d err %v", res.Class, res.Status, res.Err)
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		c, _ := New(Options{BaseURL: url})
		res := c.Register(context.Background(), "s", "k", product)
		if res.Class != Transient || !strings.Contains(res.Err.Error(), "cannot be reached") {
			t.Fatalf("class %v err %v", res.Class, res.Err)
		}
	})
}

func TestNewRefusesBadOptions(t *testing.T) {
	for _, tt := range []struct {
		o    Options
		want string
	}{
		{Options{}, "BULKREG_REGISTRY_URL"},
		{Options{BaseURL: "localhost:8081"}, "not an absolute http(s) URL"},
		{Options{BaseURL: "ftp://x"}, "not an absolute http(s) URL"},
		{Options{BaseURL: "http://x", Timeout: -1}, "timeout"},
		{Options{BaseURL: "http://x", MaxConnsPerHost: -1}, "max connections"},
		{Options{BaseURL: "http://x", AuthHeader: "Bearer abc"}, `"Name: value"`},
		{Options{BaseURL: "http://x", AuthHeader: "X: a\r\nY: b"}, `"Name: value"`},
	} {
		if _, err := New(tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tt.o, err, tt.want)
		}
	}
}

func TestRetryPolicy(t *testing.T) {
	p := RetryPolicy{InitialInterval: 10 * time.Millisecond, MaxInterval: 40 * time.Millisecond, Multiplier: 2, Jitter: 0, MaxAttempts: 5}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	b := p.NewBackOff()
	var waits []time.Duration
	for w := b.NextBackOff(); w != backoff.Stop; w = b.NextBackOff() {
		waits = append(waits, w)
	}
	want := []time.Duration{10, 20, 40, 40}
	if len(waits) != len(want) {
		t.Fatalf("waits %v: %d retries for 5 attempts, want 4", waits, len(waits))
	}
	for i := range want {
		if waits[i] != want[i]*time.Millisecond {
			t.Errorf("wait %d = %v, want %v", i, waits[i], want[i]*time.Millisecond)
		}
	}
	for _, bad := range []RetryPolicy{
		{InitialInterval: 0, MaxInterval: 1, Multiplier: 2},
		{InitialInterval: 2, MaxInterval: 1, Multiplier: 2},
		{InitialInterval: 1, MaxInterval: 1, Multiplier: 0.5},
		{InitialInterval: 1, MaxInterval: 1, Multiplier: 2, Jitter: 1},
		{InitialInterval: 1, MaxInterval: 1, Multiplier: 2, MaxAttempts: -1},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if err := DefaultRetryPolicy().Validate(); err != nil {
		t.Errorf("default policy: %v", err)
	}

	// Retry stops at the first answer that is not transient, and at the cap.
	calls := 0
	res, n := Retry(context.Background(), p, func(context.Context) Result {
		calls++
		if calls < 3 {
			return Result{Class: Transient, Err: errors.New("503")}
		}
		return Result{Class: Registered}
	})
	if res.Class != Registered || n != 3 {
		t.Errorf("Retry: %v after %d attempts, want registered after 3", res.Class, n)
	}
	_, n = Retry(context.Background(), p, func(context.Context) Result { return Result{Class: Transient} })
	if n != 5 {
		t.Errorf("Retry gave up after %d attempts, want 5", n)
	}
}

// FuzzClassify: whatever the API answers, the client classifies it without
// panicking, success always carries a product id, and only success has no error.
func FuzzClassify(f *testing.F) {
	f.Add(201, "", `{"product_id":"p-1"}`)
	f.Add(429, "Wed, 21 Oct 2015 07:28:00 GMT", "")
	f.Add(429, "-5", "")
	f.Add(422, "", `{"error":{"code":"x","field":"price"}}`)
	f.Add(502, "", "<html>\xff\xfe</html>")
	c, err := New(Options{BaseURL: "http://x"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, status int, retryAfter, body string) {
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		res := c.classify(Result{Status: status}, h, []byte(body))
		if res.Class < Registered || res.Class > Misconfigured {
			t.Fatalf("status %d: class %v", status, res.Class)
		}
		if res.OK() != (res.Err == nil) {
			t.Fatalf("status %d: OK %v with err %v", status, res.OK(), res.Err)
		}
		if res.OK() && res.ProductID == "" {
			t.Fatalf("status %d: success without a product id", status)
		}
		if res.Class == RateLimited && (res.RetryAfter < 0 || res.RetryAfter > 24*time.Hour) {
			t.Fatalf("Retry-After %q → %v", retryAfter, res.RetryAfter)
		}
	})
}
