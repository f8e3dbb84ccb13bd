package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// start serves a new Server over real HTTP.
func start(t testing.TB, o Options) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

// apiErr decodes the error body of a refusal.
func (r reply) apiErr(t *testing.T) apiError {
	t.Helper()
	var e struct{ Error apiError }
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("status %d body %q is not error JSON: %v", r.status, r.body, err)
	}
	return e.Error
}

// call posts one registration; contentType "" means application/json.
func call(c *http.Client, url, seller, key, contentType, body string) (reply, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/sellers/"+seller+"/products", strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	if contentType == "" {
		contentType = "application/json"
	}
	req.Header.Set("Content-Type", contentType)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, err
}

func mustCall(t testing.TB, c *http.Client, url, seller, key, body string) reply {
	t.Helper()
	r, err := call(c, url, seller, key, "", body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func productJSON(sku string) string {
	return fmt.Sprintf(`{"seller_sku":%q,"name":"상품","category_code":"50000001","price":12000,"stock":10,"shipping_fee":0}`, sku)
}

// with returns a valid product with one field set to raw JSON, or removed
// when raw is "".
func with(field, raw string) string {
	m := map[string]json.RawMessage{}
	_ = json.Unmarshal([]byte(productJSON("sku-1")), &m)
	if raw == "" {
		delete(m, field)
	} else {
		m[field] = json.RawMessage(raw)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func TestAnswerClasses(t *testing.T) {
	srv, ts := start(t, Options{Limit: 1, Window: time.Minute, MaxBody: 1024})
	c := ts.Client()
	var first []byte
	for _, tc := range []struct {
		name                     string
		seller, key, ctype, body string
		want                     int
		wantCode, wantField      string
	}{
		{name: "registered", seller: "s1", key: "u1:1", body: productJSON("A"), want: 201},
		{name: "replay answers the original body", seller: "s1", key: "u1:1", body: ` { "stock":10, "price":12000, "seller_sku":"A", "name":"상품", "category_code":"50000001", "extra":true } `, want: 200},
		{name: "same key, other product", seller: "s1", key: "u1:1", body: productJSON("B"), want: 409, wantCode: "idempotency_conflict", wantField: "Idempotency-Key"},
		{name: "limit reached", seller: "s1", key: "u1:2", body: productJSON("B"), want: 429, wantCode: "rate_limited"},
		{name: "keys are per seller", seller: "s2", key: "u1:1", body: productJSON("B"), want: 201},
		{name: "not JSON", seller: "s3", key: "k", body: `{"seller_sku":`, want: 400, wantCode: "invalid_json"},
		{name: "two JSON values", seller: "s3", key: "k", body: productJSON("A") + productJSON("A"), want: 400, wantCode: "invalid_json"},
		{name: "JSON array", seller: "s3", key: "k", body: `[1]`, want: 400, wantCode: "invalid_json"},
		{name: "JSON null", seller: "s3", key: "k", body: `null`, want: 400, wantCode: "invalid_json"},
		{name: "missing Idempotency-Key", seller: "s3", body: productJSON("A"), want: 400, wantCode: "missing_idempotency_key", wantField: "Idempotency-Key"},
		{name: "overlong Idempotency-Key", seller: "s3", key: strings.Repeat("k", 256), body: productJSON("A"), want: 400, wantCode: "invalid_idempotency_key", wantField: "Idempotency-Key"},
		{name: "not application/json", seller: "s3", key: "k", ctype: "text/plain", body: productJSON("A"), want: 415, wantCode: "unsupported_media_type", wantField: "Content-Type"},
		{name: "charset parameter is fine", seller: "s3", key: "k", ctype: "application/json; charset=utf-8", body: productJSON("A"), want: 201},
		{name: "body over MaxBody", seller: "s4", key: "k", body: with("description", strconv.Quote(strings.Repeat("x", 1024))), want: 413, wantCode: "body_too_large"},
		{name: "invalid field", seller: "s4", key: "k", body: with("price", "12.5"), want: 422, wantCode: "invalid_price", wantField: "price"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := call(c, ts.URL, tc.seller, tc.key, tc.ctype, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if r.status != tc.want {
				t.Fatalf("status %d, want %d; body %s", r.status, tc.want, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			switch {
			case tc.want == 201:
				var p struct {
					ProductID string `json:"product_id"`
					SellerSKU string `json:"seller_sku"`
				}
				if err := json.Unmarshal(r.body, &p); err != nil || !strings.HasPrefix(p.ProductID, "p-") || !strings.Contains(tc.body, `"`+p.SellerSKU+`"`) {
					t.Fatalf("201 body %s: want {product_id: p-…, seller_sku}", r.body)
				}
				if first == nil {
					first = r.body
				}
			case tc.want == 200:
				if !bytes.Equal(r.body, first) {
					t.Fatalf("replay body %s, want the original %s", r.body, first)
				}
			default:
				e := r.apiErr(t)
				if e.Code != tc.wantCode || e.Field != tc.wantField || e.Message == "" {
					t.Fatalf("error %+v, want code %q field %q and a message", e, tc.wantCode, tc.wantField)
				}
			}
			if tc.want == 429 {
				ra, err := strconv.Atoi(r.header.Get("Retry-After"))
				if err != nil || ra < 59 || ra > 60 {
					t.Fatalf("Retry-After %q, want 59 or 60 (the first registration leaves the 60 s window then)", r.header.Get("Retry-After"))
				}
			}
		})
	}
	a := srv.Audit()
	want := map[string]SellerAudit{
		"s1": {Accepted: 1, Products: 1, Replays: 1, Conflicts: 1, RateLimited: 1, MaxInWindow: 1, MaxCounted: 1},
		"s2": {Accepted: 1, Products: 1, MaxInWindow: 1, MaxCounted: 1},
		"s3": {Accepted: 1, Products: 1, Invalid: 7, MaxInWindow: 1, MaxCounted: 1},
		"s4": {Invalid: 2},
	}
	for id, w := range want {
		got := a.Sellers[id]
		got.First, got.Last = time.Time{}, time.Time{}
		if got != w {
			t.Errorf("audit of %s: %+v, want %+v", id, got, w)
		}
	}
}

func TestValidation(t *testing.T) {
	_, ts := start(t, Options{Limit: 1000})
	c := ts.Client()
	for i, tc := range []struct {
		name, body string
		field      string // "" means the body is valid: 201
		message    string // part of the message
	}{
		{"seller_sku missing", with("seller_sku", ""), "seller_sku", "seller_sku is required"},
		{"seller_sku empty", with("seller_sku", `""`), "seller_sku", "seller_sku is required"},
		{"seller_sku blank", with("seller_sku", `"  "`), "seller_sku", "seller_sku is required"},
		{"seller_sku not a string", with("seller_sku", `12`), "seller_sku", "must be text (a JSON string), got a number"},
		{"seller_sku 100 characters", with("seller_sku", strconv.Quote(strings.Repeat("가", 100))), "", ""},
		{"seller_sku 101 characters", with("seller_sku", strconv.Quote(strings.Repeat("가", 101))), "seller_sku", "at most 100 characters"},
		{"name missing", with("name", ""), "name", "name is required"},
		{"name 201 characters", with("name", strconv.Quote(strings.Repeat("n", 201))), "name", "at most 200 characters"},
		{"category_code empty", with("category_code", `""`), "category_code", "category_code is required"},
		{"price fraction", with("price", `12.5`), "price", "price must be a whole number greater than 0"},
		{"price whole but written as a fraction", with("price", `12000.0`), "price", "whole number greater than 0"},
		{"price exponent", with("price", `1e3`), "price", "whole number greater than 0"},
		{"price zero", with("price", `0`), "price", "whole number greater than 0"},
		{"price negative", with("price", `-1`), "price", "whole number greater than 0"},
		{"price string", with("price", `"12000"`), "price", "whole number greater than 0"},
		{"price null", with("price", `null`), "price", "price is required"},
		{"price missing", with("price", ""), "price", "price is required"},
		{"price beyond int64", with("price", `9223372036854775808`), "price", "whole number greater than 0"},
		{"stock zero", with("stock", `0`), "", ""},
		{"stock negative", with("stock", `-1`), "stock", "stock must be a whole number from 0 to 1,000,000, got \"-1\""},
		{"stock fraction", with("stock", `1.5`), "stock", "whole number from 0 to 1,000,000"},
		{"stock missing", with("stock", ""), "stock", "stock is required"},
		{"shipping_fee absent", with("shipping_fee", ""), "", ""},
		{"shipping_fee negative", with("shipping_fee", `-3000`), "shipping_fee", "whole number from 0 to 1,000,000"},
		{"shipping_fee string", with("shipping_fee", `"3000"`), "shipping_fee", "whole number from 0 to 1,000,000"},
		{"image_url https", with("image_url", `"https://img.example.com/a.jpg"`), "", ""},
		{"image_url ftp", with("image_url", `"ftp://img.example.com/a.jpg"`), "image_url", "web address starting with https:// or http://"},
		{"image_url not a URL", with("image_url", `"a.jpg"`), "image_url", "web address starting with https:// or http://"},
		{"image_url without host", with("image_url", `"https://"`), "image_url", "image_url must name a site after https:// or http://"},
		{"image_url with a space", with("image_url", `"https://img.example.com/my image.jpg"`), "image_url", "image_url must be a web address without spaces"},
		{"brand not a string", with("brand", `5`), "brand", "brand must be text (a JSON string)"},
		{"unknown fields are allowed", with("colour", `"red"`), "", ""},
		{"first broken field is named", `{"seller_sku":"","price":0}`, "seller_sku", "seller_sku is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustCall(t, c, ts.URL, "s", "k"+strconv.Itoa(i), tc.body)
			if tc.field == "" {
				if r.status != 201 {
					t.Fatalf("status %d, want 201; body %s", r.status, r.body)
				}
				return
			}
			if r.status != 422 {
				t.Fatalf("status %d, want 422; body %s", r.status, r.body)
			}
			e := r.apiErr(t)
			if e.Field != tc.field || e.Code != "invalid_"+tc.field || !strings.Contains(e.Message, tc.message) {
				t.Fatalf("error %+v, want field %s, code invalid_%s and a message containing %q", e, tc.field, tc.field, tc.message)
			}
		})
	}
}

// TestSlidingLimit runs on the real clock: 150 calls in a row for one seller
// with a limit of 100 per 2 s, then honours the last Retry-After.
func TestSlidingLimit(t *testing.T) {
	const window = 2 * time.Second
	srv, ts := start(t, Options{Limit: 100, Window: window})
	c := ts.Client()
	counts := map[int]int{}
	var last reply
	begin := time.Now()
	for i := range 150 {
		last = mustCall(t, c, ts.URL, "s", "k"+strconv.Itoa(i), productJSON("sku-"+strconv.Itoa(i)))
		counts[last.status]++
	}
	elapsed := time.Since(begin)
	if elapsed >= window {
		t.Fatalf("150 calls took %v, longer than the %v window: the counts below would not mean anything", elapsed, window)
	}
	t.Logf("150 calls in %v: %v", elapsed, counts)
	if counts[201] != 100 || counts[429] != 50 || len(counts) != 2 {
		t.Fatalf("answers %v, want exactly 100 × 201 and 50 × 429", counts)
	}
	if last.status != 429 || last.apiErr(t).Code != "rate_limited" {
		t.Fatalf("last answer %d %s, want 429 rate_limited", last.status, last.body)
	}
	ra, err := strconv.Atoi(last.header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 2 {
		t.Fatalf("Retry-After %q, want 1 or 2 seconds (the first registration leaves the window within 2 s)", last.header.Get("Retry-After"))
	}
	time.Sleep(time.Duration(ra) * time.Second)
	if r := mustCall(t, c, ts.URL, "s", "after", productJSON("after")); r.status != 201 {
		t.Fatalf("after sleeping Retry-After (%d s): status %d, want 201; body %s", ra, r.status, r.body)
	}
	a := srv.Audit().Sellers["s"]
	if a.Accepted != 101 || a.RateLimited != 50 || a.MaxInWindow != 100 || a.Exceeded {
		t.Fatalf("audit %+v, want 101 accepted, 50 rate limited, at most 100 in a window", a)
	}
}

// fakeClock is a clock a test sets by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// TestPolicies sends the same bursts to each policy, with a limit of 10 per
// 10 s: 10 calls at 9 s, 10 at 10 s (a fixed-window boundary), 10 at 18.9 s
// and 10 at 19 s (exactly one window after the first burst). Only the
// sliding window keeps every trailing window at the limit.
func TestPolicies(t *testing.T) {
	base := time.Unix(1_700_000_000, 0) // a multiple of 10 s since the epoch
	bursts := []time.Duration{9 * time.Second, 10 * time.Second, 18900 * time.Millisecond, 19 * time.Second}
	for _, tc := range []struct {
		policy     string
		burst      int
		accepted   []int // per burst
		retryAfter []int // of the burst's last 429, 0 if none
		maxIn      int
		maxCounted int // as the policy counts: in one aligned window, or tokens taken at once
	}{
		// At 19 s the first burst, at exactly 9 s, is no longer in (9 s, 19 s].
		{PolicySliding, 0, []int{10, 0, 0, 10}, []int{0, 9, 1, 0}, 10, 10},
		// A new window opens at 10 s: 20 registrations within one second.
		{PolicyFixed, 0, []int{10, 10, 0, 0}, []int{0, 0, 2, 1}, 20, 10},
		// The bucket refills one token a second: 1 at 10 s, 8 more by 18.9 s.
		{PolicyTokenBucket, 0, []int{10, 1, 8, 1}, []int{0, 1, 1, 1}, 19, 10},
		// A bucket of 4: 4 at once, 1 a second later, 4 by 18.9 s (a full
		// bucket holds no more), none at 19 s.
		{PolicyTokenBucket, 4, []int{4, 1, 4, 0}, []int{1, 1, 1, 1}, 9, 4},
	} {
		t.Run(fmt.Sprintf("%s-%d", tc.policy, tc.burst), func(t *testing.T) {
			clock := &fakeClock{}
			srv, ts := start(t, Options{Limit: 10, Window: 10 * time.Second, Policy: tc.policy, Burst: tc.burst, Now: clock.Now})
			c := ts.Client()
			total := 0
			for b, at := range bursts {
				clock.Set(base.Add(at))
				accepted, retryAfter := 0, 0
				for i := range 10 {
					key := fmt.Sprintf("b%d-%d", b, i)
					r := mustCall(t, c, ts.URL, "s", key, productJSON(key))
					switch r.status {
					case 201:
						accepted++
					case 429:
						retryAfter, _ = strconv.Atoi(r.header.Get("Retry-After"))
					default:
						t.Fatalf("status %d %s", r.status, r.body)
					}
				}
				total += accepted
				if accepted != tc.accepted[b] || retryAfter != tc.retryAfter[b] {
					t.Errorf("burst at %v: %d accepted, Retry-After %d; want %d and %d", at, accepted, retryAfter, tc.accepted[b], tc.retryAfter[b])
				}
			}
			a := srv.Audit().Sellers["s"]
			if a.Accepted != total || a.RateLimited != 40-total || a.MaxInWindow != tc.maxIn || a.MaxCounted != tc.maxCounted || a.Exceeded {
				t.Errorf("audit %+v, want %d accepted, %d rate limited, max in window %d, %d counted at most, not exceeded", a, total, 40-total, tc.maxIn, tc.maxCounted)
			}
			times := srv.AcceptedTimes("s")
			if len(times) != total || !times[0].Equal(base.Add(bursts[0])) {
				t.Errorf("accepted times %v, want %d starting at the first burst", times, total)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	t.Run("FailRate 1: every answer 503, nothing registered", func(t *testing.T) {
		srv, ts := start(t, Options{FailRate: 1})
		c := ts.Client()
		for range 5 {
			r := mustCall(t, c, ts.URL, "s", "k", productJSON("A"))
			if r.status != 503 || r.apiErr(t).Code != "unavailable" {
				t.Fatalf("status %d %s, want 503 unavailable", r.status, r.body)
			}
		}
		if a := srv.Audit().Sellers["s"]; a != (SellerAudit{Failed: 5}) {
			t.Fatalf("audit %+v, want only 5 failed", a)
		}
		if err := srv.SetFaults(0, 0, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		// A 200 here would mean a 503 had registered the key.
		if r := mustCall(t, c, ts.URL, "s", "k", productJSON("A")); r.status != 201 {
			t.Fatalf("after the faults stop: status %d, want 201", r.status)
		}
	})
	t.Run("DropRate 1: connection closed without an answer", func(t *testing.T) {
		srv, ts := start(t, Options{DropRate: 1})
		// A new connection per request: net/http retries a request carrying
		// an Idempotency-Key once when a reused connection drops, which
		// would make the server count two drops for one call.
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		for range 3 {
			if r, err := call(c, ts.URL, "s", "k", "", productJSON("A")); err == nil {
				t.Fatalf("got an answer %d %s, want a connection error", r.status, r.body)
			}
		}
		if a := srv.Audit().Sellers["s"]; a != (SellerAudit{Failed: 3}) {
			t.Fatalf("audit %+v, want only 3 failed", a)
		}
	})
	t.Run("slow answers are processed, then answered late", func(t *testing.T) {
		const delay = 300 * time.Millisecond
		srv, ts := start(t, Options{SlowRate: 1, SlowDelay: delay})
		impatient := &http.Client{Timeout: delay / 3}
		if _, err := call(impatient, ts.URL, "s", "k1", "", productJSON("A")); err == nil {
			t.Fatal("a client with a timeout below SlowDelay got an answer")
		}
		began := time.Now()
		r := mustCall(t, ts.Client(), ts.URL, "s", "k2", productJSON("B"))
		if took := time.Since(began); r.status != 201 || took < delay {
			t.Fatalf("status %d after %v, want 201 after at least %v", r.status, took, delay)
		}
		// The timed-out call did register: its retry is a replay.
		if err := srv.SetFaults(0, 0, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		if r := mustCall(t, ts.Client(), ts.URL, "s", "k1", productJSON("A")); r.status != 200 {
			t.Fatalf("retry of the timed-out call: status %d, want 200 (replay)", r.status)
		}
		if a := srv.Audit().Sellers["s"]; a.Accepted != 2 || a.Replays != 1 {
			t.Fatalf("audit %+v, want 2 accepted and 1 replay", a)
		}
	})
	t.Run("latency and jitter delay every answer", func(t *testing.T) {
		const latency, jitter = 100 * time.Millisecond, 50 * time.Millisecond
		_, ts := start(t, Options{Latency: latency, Jitter: jitter})
		for i, body := range []string{productJSON("A"), `not json`} {
			began := time.Now()
			r := mustCall(t, ts.Client(), ts.URL, "s", "k"+strconv.Itoa(i), body)
			if took := time.Since(began); took < latency {
				t.Fatalf("answer %d after %v, want at least %v", r.status, took, latency)
			}
		}
	})
}

// TestFaultFractions: a rate between 0 and 1 fails about that fraction of
// requests, and exactly the failed ones leave nothing registered. The bounds
// are five standard deviations of the binomial count either side.
func TestFaultFractions(t *testing.T) {
	bounds := func(n int, p float64) (lo, hi int) {
		mean, sd := float64(n)*p, math.Sqrt(float64(n)*p*(1-p))
		return int(mean - 5*sd), int(math.Ceil(mean + 5*sd))
	}
	t.Run("FailRate 0.3: about 30% answered 503", func(t *testing.T) {
		const n, rate = 1000, 0.3
		srv, err := New(Options{Limit: n, FailRate: rate})
		if err != nil {
			t.Fatal(err)
		}
		counts := map[int]int{}
		for i := range n {
			key := "k" + strconv.Itoa(i)
			req := httptest.NewRequest(http.MethodPost, "/v1/sellers/s/products", strings.NewReader(productJSON(key)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			counts[rec.Code]++
		}
		lo, hi := bounds(n, rate)
		if counts[503] < lo || counts[503] > hi || counts[201] != n-counts[503] {
			t.Fatalf("answers %v over %d requests, want %d..%d × 503 and the rest 201", counts, n, lo, hi)
		}
		if a := srv.Audit().Sellers["s"]; a.Failed != counts[503] || a.Accepted != counts[201] || a.Products != counts[201] {
			t.Fatalf("audit %+v, want %d failed and %d accepted", a, counts[503], counts[201])
		}
	})
	t.Run("DropRate 0.25: about 25% of connections closed", func(t *testing.T) {
		const n, rate = 200, 0.25
		srv, ts := start(t, Options{Limit: n, DropRate: rate})
		// a new connection per request: net/http replays a request with an
		// Idempotency-Key once when a reused connection drops
		tr := &http.Transport{DisableKeepAlives: true}
		t.Cleanup(tr.CloseIdleConnections)
		c := &http.Client{Transport: tr}
		dropped, registered := 0, 0
		for i := range n {
			key := "k" + strconv.Itoa(i)
			r, err := call(c, ts.URL, "s", key, "", productJSON(key))
			switch {
			case err != nil:
				dropped++
			case r.status == 201:
				registered++
			default:
				t.Fatalf("status %d %s", r.status, r.body)
			}
		}
		lo, hi := bounds(n, rate)
		if dropped < lo || dropped > hi {
			t.Fatalf("%d of %d connections dropped, want %d..%d", dropped, n, lo, hi)
		}
		if a := srv.Audit().Sellers["s"]; a.Failed != dropped || a.Accepted != registered {
			t.Fatalf("audit %+v, want %d failed and %d accepted", a, dropped, registered)
		}
	})
}

// TestJitter draws the pre-handling delay many times: every draw lies in
// [latency, latency + jitter), and the draws spread over that range.
func TestJitter(t *testing.T) {
	const latency, jitter = 100 * time.Millisecond, 50 * time.Millisecond
	f := faults{latency: latency, jitter: jitter}
	lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
	for range 1000 {
		d := f.delay()
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < latency || hi >= latency+jitter {
		t.Fatalf("delays in [%s, %s], want within [%s, %s)", lo, hi, latency, latency+jitter)
	}
	// 1000 uniform draws all missing a quarter of the range: (3/4)^1000
	if lo > latency+jitter/4 || hi < latency+3*jitter/4 {
		t.Fatalf("delays in [%s, %s]: the jitter does not spread them over [%s, %s)", lo, hi, latency, latency+jitter)
	}
	if d := (faults{latency: latency}).delay(); d != latency {
		t.Errorf("no jitter: delay %s, want exactly %s", d, latency)
	}
}

func TestSetFaultsRefusesNonsense(t *testing.T) {
	srv, ts := start(t, Options{})
	for _, tc := range []struct {
		name             string
		fail, slow, drop float64
		latency, jitter  time.Duration
		want             string
	}{
		{"fail rate above 1", 1.5, 0, 0, 0, 0, "fail rate is 1.5"},
		{"slow rate negative", 0, -0.1, 0, 0, 0, "slow rate is -0.1"},
		{"drop rate NaN", 0, 0, math.NaN(), 0, 0, "drop rate is NaN"},
		{"negative latency", 0, 0, 0, -time.Second, 0, "latency is -1s"},
		{"negative jitter", 0, 0, 0, 0, -time.Second, "jitter is -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := srv.SetFaults(tc.fail, tc.slow, tc.drop, tc.latency, tc.jitter)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("SetFaults = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// nothing changed: still no faults
	if r := mustCall(t, ts.Client(), ts.URL, "s", "k", productJSON("A")); r.status != 201 {
		t.Fatalf("after refused SetFaults: status %d, want 201", r.status)
	}
}

func TestAuditHealthAndMetricsOverHTTP(t *testing.T) {
	_, ts := start(t, Options{Limit: 1, Window: 30 * time.Second})
	c := ts.Client()
	mustCall(t, c, ts.URL, "s", "k1", productJSON("A"))
	mustCall(t, c, ts.URL, "s", "k1", productJSON("A"))
	mustCall(t, c, ts.URL, "s", "k2", productJSON("B"))

	get := func(path string) string {
		t.Helper()
		resp, err := c.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	if h := get("/healthz"); strings.TrimSpace(h) != "ok" {
		t.Errorf("/healthz %q, want ok", h)
	}
	var a Audit
	if err := json.Unmarshal([]byte(get("/audit")), &a); err != nil {
		t.Fatal(err)
	}
	s := a.Sellers["s"]
	if a.Policy != "sliding" || a.Limit != 1 || a.WindowSeconds != 30 ||
		s.Accepted != 1 || s.Products != 1 || s.Replays != 1 || s.RateLimited != 1 || s.MaxInWindow != 1 || s.First.IsZero() || !s.First.Equal(s.Last) {
		t.Errorf("audit over HTTP %+v, seller %+v", a, s)
	}
	m := get("/metrics")
	for _, want := range []string{
		`bulkreg_sandbox_requests_total{code="201"} 1`,
		`bulkreg_sandbox_requests_total{code="200"} 1`,
		`bulkreg_sandbox_requests_total{code="429"} 1`,
		`bulkreg_sandbox_request_duration_seconds_count 3`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestConcurrent sends 200 requests at once across 20 sellers, twice: the
// limit and idempotency must hold exactly under contention (run with -race).
func TestConcurrent(t *testing.T) {
	const sellers, perSeller = 20, 10
	fire := func(t *testing.T, ts *httptest.Server, key func(i int) string) map[int]int {
		var wg sync.WaitGroup
		var mu sync.Mutex
		counts := map[int]int{}
		var errs atomic.Int32
		for s := range sellers {
			for i := range perSeller {
				wg.Go(func() {
					r, err := call(ts.Client(), ts.URL, "s"+strconv.Itoa(s), key(i), "", productJSON(key(i)))
					if err != nil {
						errs.Add(1)
						return
					}
					mu.Lock()
					counts[r.status]++
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		if n := errs.Load(); n > 0 {
			t.Fatalf("%d requests failed", n)
		}
		return counts
	}
	t.Run("limit", func(t *testing.T) {
		srv, ts := start(t, Options{Limit: 5, Window: time.Minute})
		counts := fire(t, ts, func(i int) string { return "k" + strconv.Itoa(i) })
		if counts[201] != 100 || counts[429] != 100 {
			t.Fatalf("answers %v, want 100 × 201 and 100 × 429", counts)
		}
		for id, a := range srv.Audit().Sellers {
			if a.Accepted != 5 || a.Products != 5 || a.RateLimited != 5 || a.MaxInWindow != 5 || a.Exceeded {
				t.Errorf("seller %s: %+v, want 5 accepted and 5 rate limited", id, a)
			}
		}
	})
	t.Run("one key", func(t *testing.T) {
		srv, ts := start(t, Options{Limit: 5, Window: time.Minute})
		counts := fire(t, ts, func(int) string { return "same" })
		if counts[201] != sellers || counts[200] != sellers*(perSeller-1) {
			t.Fatalf("answers %v, want %d × 201 and %d × 200", counts, sellers, sellers*(perSeller-1))
		}
		for id, a := range srv.Audit().Sellers {
			if a.Accepted != 1 || a.Products != 1 || a.Replays != perSeller-1 {
				t.Errorf("seller %s: %+v, want 1 accepted and %d replays", id, a, perSeller-1)
			}
		}
	})
}

func TestDoubleRegistrationShows(t *testing.T) {
	srv, ts := start(t, Options{})
	mustCall(t, ts.Client(), ts.URL, "s", "upload-1:1", productJSON("A"))
	mustCall(t, ts.Client(), ts.URL, "s", "upload-2:1", productJSON("A"))
	if a := srv.Audit().Sellers["s"]; a.Accepted != 2 || a.Products != 1 {
		t.Fatalf("audit %+v, want 2 accepted but 1 product", a)
	}
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		o     Options
		field string
	}{
		{Options{Limit: -1}, "Limit"},
		{Options{Window: -time.Second}, "Window"},
		{Options{Policy: "leaky"}, "Policy"},
		{Options{Policy: PolicyTokenBucket, Burst: -1}, "Burst"},
		{Options{Policy: PolicyFixed, Burst: 5}, "Burst"},
		{Options{FailRate: 1.5}, "FailRate"},
		{Options{SlowRate: -0.1}, "SlowRate"},
		{Options{DropRate: 2}, "DropRate"},
		{Options{Latency: -1}, "Latency"},
		{Options{MaxBody: -1}, "MaxBody"},
		{Options{GlobalLimit: -1}, "GlobalLimit"},
		{Options{GlobalWindow: -time.Second}, "GlobalWindow"},
	} {
		if _, err := New(tc.o); err == nil || !strings.Contains(err.Error(), tc.field+" is") {
			t.Errorf("New(%+v): error %v, want one naming %s", tc.o, err, tc.field)
		}
	}
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a := s.Audit(); a.Limit != 100 || a.WindowSeconds != 60 || a.Policy != "sliding" {
		t.Errorf("defaults %+v, want 100 per 60 s sliding", a)
	}
}

// BenchmarkRegister measures 201s over real HTTP: parallel clients, distinct
// keys, 1000 sellers, a limit that is never reached.
func BenchmarkRegister(b *testing.B) {
	_, ts := start(b, Options{Limit: 1 << 30, Window: time.Minute})
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	b.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			key := strconv.FormatInt(i, 10)
			r, err := call(c, ts.URL, "s"+strconv.FormatInt(i%1000, 10), key, "", productJSON(key))
			if err != nil || r.status != 201 {
				b.Errorf("status %d err %v", r.status, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// TestAppWideLimit: with an app-wide limit the API refuses a registration
// when either limit is full, says which in X-RateLimit-Scope and the error
// code, counts the app-wide window as a sliding one, and audits both.
func TestAppWideLimit(t *testing.T) {
	clock := &fakeClock{}
	base := time.Unix(1_700_000_000, 0)
	clock.Set(base)
	srv, ts := start(t, Options{Limit: 3, Window: 10 * time.Second, GlobalLimit: 5, GlobalWindow: 20 * time.Second, Now: clock.Now})
	c := ts.Client()
	n := 0
	post := func(seller string) reply {
		n++
		key := fmt.Sprintf("k%d", n)
		return mustCall(t, c, ts.URL, seller, key, productJSON(key))
	}
	refused := func(r reply, scope, code string, retryAfter int) {
		t.Helper()
		if r.status != 429 || r.header.Get(ScopeHeader) != scope || r.apiErr(t).Code != code || r.header.Get("Retry-After") != strconv.Itoa(retryAfter) {
			t.Fatalf("answer %d, scope %q, Retry-After %q, body %s; want 429 for the %s limit (%s), Retry-After %d",
				r.status, r.header.Get(ScopeHeader), r.header.Get("Retry-After"), r.body, scope, code, retryAfter)
		}
	}
	for range 3 {
		if r := post("a"); r.status != 201 || r.header.Get(ScopeHeader) != "" {
			t.Fatalf("a's registration: %d %s (scope %q)", r.status, r.body, r.header.Get(ScopeHeader))
		}
	}
	refused(post("a"), ScopeSeller, "rate_limited", 10)
	for range 2 {
		if r := post("b"); r.status != 201 {
			t.Fatalf("b's registration: %d %s", r.status, r.body)
		}
	}
	// Five in the app-wide window: b and c are refused for the application.
	refused(post("b"), ScopeApp, "app_rate_limited", 20)
	refused(post("c"), ScopeApp, "app_rate_limited", 20)
	// a's own window is over, the application's is not.
	clock.Set(base.Add(10 * time.Second))
	refused(post("a"), ScopeApp, "app_rate_limited", 10)
	// Exactly a window later the first five leave it: (now − window, now].
	clock.Set(base.Add(20 * time.Second))
	for _, s := range []string{"a", "c", "c", "c", "b"} {
		if r := post(s); r.status != 201 {
			t.Fatalf("%s after the app-wide window: %d %s", s, r.status, r.body)
		}
	}
	refused(post("b"), ScopeApp, "app_rate_limited", 20)
	a := srv.Audit()
	want := AppAudit{Limit: 5, WindowSeconds: 20, Accepted: 10, RateLimited: 4, MaxInWindow: 5}
	if a.App == nil || *a.App != want {
		t.Errorf("app-wide audit %+v, want %+v", a.App, want)
	}
	for seller, w := range map[string][2]int{"a": {2, 1}, "b": {2, 2}, "c": {1, 1}} {
		if got := a.Sellers[seller]; got.RateLimited != w[0] || got.AppRateLimited != w[1] {
			t.Errorf("seller %s: %d × 429, %d of them app-wide; want %d and %d", seller, got.RateLimited, got.AppRateLimited, w[0], w[1])
		}
	}
	// Counted as a sliding window whatever the seller's policy: 6 within
	// one trailing window is over the limit, and the audit says so.
	srv2, ts2 := start(t, Options{Limit: 100, Window: time.Second, Policy: PolicyFixed, GlobalLimit: 2, Now: clock.Now})
	clock.Set(base.Add(900 * time.Millisecond))
	for i := range 3 {
		r := mustCall(t, ts2.Client(), ts2.URL, "s", fmt.Sprintf("f%d", i), productJSON(fmt.Sprintf("f%d", i)))
		if want := []int{201, 201, 429}[i]; r.status != want {
			t.Fatalf("registration %d: %d, want %d", i, r.status, want)
		}
	}
	clock.Set(base.Add(1100 * time.Millisecond)) // a new fixed window for the seller, not for the application
	if r := mustCall(t, ts2.Client(), ts2.URL, "s", "f3", productJSON("f3")); r.status != 429 || r.header.Get(ScopeHeader) != ScopeApp {
		t.Errorf("after the seller's fixed window rolled over: %d (scope %q), want an app-wide 429", r.status, r.header.Get(ScopeHeader))
	}
	if a := srv2.Audit(); a.App == nil || a.App.WindowSeconds != 1 || a.App.MaxInWindow != 2 {
		t.Errorf("app-wide audit %+v, want the seller's window (1 s) by default and 2 in it", a.App)
	}
	if a := srvWithout(t).Audit(); a.App != nil {
		t.Errorf("no app-wide limit, yet the audit has %+v", a.App)
	}
}

func srvWithout(t *testing.T) *Server {
	s, _ := start(t, Options{})
	return s
}
