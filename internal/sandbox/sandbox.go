// Package sandbox is a reference implementation of the registration API that
// consumers call (design.md, "Registration API"): strict where the contract
// is strict, so that tests, the demo and docker-compose exercise the client
// against the same answers the real API gives.
//
// It registers products per seller with an Idempotency-Key, counts 201s with
// a strict sliding window (or, to compare, a fixed window or a token bucket),
// optionally also for all sellers together (an app-wide limit, sliding),
// answers 429 with Retry-After beyond either limit (X-RateLimit-Scope says which), and can inject latency,
// 503s, slow answers and dropped connections. GET /audit reports what it
// counted, so a test can judge the client by the API's own numbers.
package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Defaults for the zero values of Options.
const (
	DefaultLimit   = 100
	DefaultWindow  = 60 * time.Second
	DefaultMaxBody = 64 << 10
)

// Options configure a Server. The zero value is the production contract: 100
// registrations per seller in any trailing 60 s, no faults.
type Options struct {
	// Limit is the most accepted registrations (201s) per seller in any
	// trailing Window. 0 means DefaultLimit.
	Limit int
	// Window is the trailing window the limit applies to. 0 means DefaultWindow.
	Window time.Duration
	// Policy is how the limit is counted: "sliding" (the contract, and the
	// default when empty), "fixed" or "token-bucket".
	Policy string
	// Burst is the token bucket's capacity; 0 means Limit. Only with
	// Policy "token-bucket".
	Burst int
	// GlobalLimit is the most accepted registrations of all sellers together
	// in any trailing GlobalWindow, counted as a sliding window whatever
	// Policy says; a registration needs room under both limits. 0: no
	// app-wide limit.
	GlobalLimit int
	// GlobalWindow is the app-wide limit's trailing window. 0 means Window.
	GlobalWindow time.Duration
	// Latency is added to every answer, plus a uniform random part in
	// [0, Jitter). It is spent before the request is handled, like the trip
	// to a distant API, so the moment a registration is counted moves with it.
	Latency, Jitter time.Duration
	// FailRate is the fraction of requests answered 503, before any state
	// changes.
	FailRate float64
	// SlowRate is the fraction of requests answered only SlowDelay after they
	// were handled. The registration does happen, as with a real API that is
	// slow to answer: a client that times out and retries gets a 200 replay.
	SlowRate  float64
	SlowDelay time.Duration
	// DropRate is the fraction of requests whose connection is closed without
	// an answer, before any state changes.
	DropRate float64
	// MaxBody is the largest request body accepted; larger ones get 413.
	// 0 means DefaultMaxBody.
	MaxBody int64
	// Logger gets one Debug record per answer. nil discards.
	Logger *slog.Logger
	// Now is the clock limits are counted by; nil means time.Now. Tests pass
	// a fake clock to put registrations exactly at window boundaries.
	Now func() time.Time
	// BasicAuth, "user:password", makes every registration need HTTP Basic
	// auth with these credentials (Authorization: Basic …, RFC 7617);
	// others are answered 401 and count as Invalid. Empty: none needed.
	BasicAuth string
	// KeepRequests is how many requests the server keeps whole (method,
	// target, header fields, body), the first ones it receives on any
	// route, for Requests and GET /admin/requests: a test reads exactly
	// what a client sent. 0 keeps none.
	KeepRequests int
}

// Audit is what the API counted, per seller, since it started.
type Audit struct {
	Sellers       map[string]SellerAudit `json:"sellers"`
	Policy        string                 `json:"policy"`
	Limit         int                    `json:"limit"`
	WindowSeconds float64                `json:"window_seconds"`
	Burst         int                    `json:"burst,omitempty"` // the token bucket's capacity
	// App is what the app-wide limit counted; absent without one.
	App *AppAudit `json:"app,omitempty"`
}

// AppAudit is what the API counted against its app-wide limit.
type AppAudit struct {
	Limit         int     `json:"limit"`
	WindowSeconds float64 `json:"window_seconds"`
	Accepted      int     `json:"accepted"`     // 201s of all sellers
	RateLimited   int     `json:"rate_limited"` // 429s answered for the app-wide limit (X-RateLimit-Scope: app)
	// MaxInWindow is the most 201s of all sellers in any trailing window.
	MaxInWindow int  `json:"max_in_window"`
	Exceeded    bool `json:"exceeded"` // MaxInWindow > Limit
}

// The values of the X-RateLimit-Scope header of a 429: which limit refused.
const (
	ScopeSeller = "seller" // the seller's limit (error code "rate_limited")
	ScopeApp    = "app"    // the app-wide limit (error code "app_rate_limited")
)

// ScopeHeader names the limit a 429 was answered for.
const ScopeHeader = "X-RateLimit-Scope"

// SellerAudit counts one seller's answers.
type SellerAudit struct {
	Accepted int `json:"accepted"` // 201s
	// Products is the number of distinct seller_sku values registered, one
	// SKU counted once in whichever normalization form it came (NFC or
	// NFD: productrules.NormalizeSKU). It
	// equals Accepted unless one product was registered twice under two
	// Idempotency-Keys, which is exactly the double registration to catch.
	Products    int `json:"products"`
	RateLimited int `json:"rate_limited"` // 429s, for either limit
	Replays     int `json:"replays"`      // 200s: a key already registered, same product
	Conflicts   int `json:"conflicts"`    // 409s: a key already registered, other product
	Invalid     int `json:"invalid"`      // 400, 413, 415 and 422: the request itself was refused
	Failed      int `json:"failed"`       // injected 503s and dropped connections
	// MaxInWindow is the most 201s in any trailing Window, computed from the
	// acceptance times whatever the policy.
	MaxInWindow int `json:"max_in_window"`
	// MaxCounted is the most the policy counted against its limit at once,
	// computed again from the acceptance times: sliding, MaxInWindow; fixed,
	// the most 201s in one window aligned to the Unix epoch; token-bucket,
	// the most tokens taken at once (the smallest bucket that would have
	// accepted every 201).
	MaxCounted int       `json:"max_counted"`
	First      time.Time `json:"first,omitzero"` // first 201
	Last       time.Time `json:"last,omitzero"`  // last 201
	// Exceeded: MaxCounted is above the limit (the bucket's capacity for
	// token-bucket), which the sandbox's own refusals must never allow.
	Exceeded bool `json:"exceeded"`

	// AppRateLimited is the part of RateLimited answered for the app-wide
	// limit; the rest were for the seller's own.
	AppRateLimited int `json:"app_rate_limited"`
	// Injected counts the answers Chaos injected (401, 403, 429 storms,
	// 5xx): not the contract's, so not in RateLimited or Failed.
	Injected int `json:"injected,omitempty"`
}

// faults are the injected misbehaviours; SetFaults changes them at runtime.
type faults struct {
	fail, slow, drop float64
	latency, jitter  time.Duration
	slowDelay        time.Duration
}

// delay is the time spent before a request is handled: the latency plus a
// uniform draw in [0, jitter).
func (f faults) delay() time.Duration {
	d := f.latency
	if f.jitter > 0 {
		d += rand.N(f.jitter)
	}
	return d
}

// Server is the registration API as an http.Handler.
type Server struct {
	limit   int
	window  time.Duration
	policy  string
	burst   int // the token bucket's capacity
	maxBody int64
	log     *slog.Logger
	now     func() time.Time
	mux     *http.ServeMux

	requests *prometheus.CounterVec
	latency  prometheus.Histogram

	// mu guards everything below. One lock for all sellers keeps the
	// check-then-accept of the limit and of idempotency atomic with no
	// subtlety; the critical sections are a few map look-ups long.
	outage outage // the outage switch (outage.go), locked on its own
	chaos  chaos  // injected answers and the call log (chaos.go), locked on their own

	basic    string   // Options.BasicAuth
	received received // the requests kept whole (auth.go), locked on their own

	mu       sync.Mutex
	faults   faults
	sellers  map[string]*seller
	products int // product ids handed out
	app      appLimit
}

// appLimit is the app-wide limit's state. Guarded by Server.mu.
type appLimit struct {
	limit       int // 0: none
	window      time.Duration
	accepted    seller // only its accepted times: every 201 of every seller, ascending
	rateLimited int
}

// New validates o and returns a Server with no registrations.
func New(o Options) (*Server, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.Limit < 0 {
		bad("Limit is %d, it must be 0 (the default %d) or more", o.Limit, DefaultLimit)
	}
	if o.Window < 0 {
		bad("Window is %s, it must be 0 (the default %s) or more", o.Window, DefaultWindow)
	}
	switch o.Policy {
	case "", PolicySliding, PolicyFixed, PolicyTokenBucket:
	default:
		bad("Policy is %q, it must be %q, %q or %q", o.Policy, PolicySliding, PolicyFixed, PolicyTokenBucket)
	}
	switch {
	case o.Burst < 0:
		bad("Burst is %d, it must be 0 (the limit) or more", o.Burst)
	case o.Burst > 0 && o.Policy != PolicyTokenBucket:
		bad("Burst is %d, but only the %q policy has a bucket (Policy is %q)", o.Burst, PolicyTokenBucket, o.Policy)
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"FailRate", o.FailRate}, {"SlowRate", o.SlowRate}, {"DropRate", o.DropRate}} {
		if !(r.v >= 0 && r.v <= 1) { // also refuses NaN
			bad("%s is %v, it must be a fraction between 0 and 1", r.name, r.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Latency", o.Latency}, {"Jitter", o.Jitter}, {"SlowDelay", o.SlowDelay}} {
		if d.v < 0 {
			bad("%s is %s, it must not be negative", d.name, d.v)
		}
	}
	if o.GlobalLimit < 0 {
		bad("GlobalLimit is %d, it must be 0 (no app-wide limit) or more", o.GlobalLimit)
	}
	if o.GlobalWindow < 0 {
		bad("GlobalWindow is %s, it must be 0 (the seller's Window) or more", o.GlobalWindow)
	}
	if o.MaxBody < 0 {
		bad("MaxBody is %d, it must be 0 (the default %d) or more", o.MaxBody, DefaultMaxBody)
	}
	if o.BasicAuth != "" && !strings.Contains(o.BasicAuth, ":") {
		bad("BasicAuth must be written user:password")
	}
	if o.KeepRequests < 0 {
		bad("KeepRequests is %d, it must be 0 (none) or more", o.KeepRequests)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("sandbox options are invalid: %w", err)
	}

	s := &Server{
		limit: o.Limit, window: o.Window, policy: o.Policy, burst: o.Burst, maxBody: o.MaxBody, log: o.Logger, now: o.Now,
		faults:  faults{fail: o.FailRate, slow: o.SlowRate, drop: o.DropRate, latency: o.Latency, jitter: o.Jitter, slowDelay: o.SlowDelay},
		sellers: map[string]*seller{},
		basic:   o.BasicAuth,
	}
	s.received.keep = o.KeepRequests
	if s.limit == 0 {
		s.limit = DefaultLimit
	}
	if s.window == 0 {
		s.window = DefaultWindow
	}
	if s.policy == "" {
		s.policy = PolicySliding
	}
	if s.burst == 0 && s.policy == PolicyTokenBucket {
		s.burst = s.limit
	}
	s.app.limit, s.app.window = o.GlobalLimit, o.GlobalWindow
	if s.app.window == 0 {
		s.app.window = s.window
	}
	if s.maxBody == 0 {
		s.maxBody = DefaultMaxBody
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}

	// A registry per Server: tests run many servers in one process, and a
	// global registry would refuse the second one's metrics.
	reg := prometheus.NewRegistry()
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bulkreg_sandbox_requests_total",
		Help: "Registration requests answered, by HTTP status code (\"dropped\": connection closed without an answer, \"canceled\": the client left during the injected latency).",
	}, []string{"code"})
	s.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "bulkreg_sandbox_request_duration_seconds",
		Help:    "Time from receiving a registration request to answering it, injected latency included.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5 ms … 16 s
	})
	reg.MustRegister(s.requests, s.latency)

	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/sellers/{seller_id}/products", s.register)
	s.mux.HandleFunc("GET /audit", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Audit())
	})
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s.outageRoutes()
	s.chaosRoutes()
	return s, nil
}

// ServeHTTP serves every route: POST /v1/sellers/{seller_id}/products,
// GET /audit, GET /healthz, GET /metrics and /admin/outage (outage.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.keep(r)
	s.mux.ServeHTTP(w, r)
}

// SetFaults changes the injected faults while the server runs (SlowDelay
// stays as configured). A rate outside [0, 1] or a negative duration is
// refused with an error naming it, and nothing changes.
func (s *Server) SetFaults(fail, slow, drop float64, latency, jitter time.Duration) error {
	var errs []error
	for _, r := range []struct {
		name string
		v    float64
	}{{"fail", fail}, {"slow", slow}, {"drop", drop}} {
		if !(r.v >= 0 && r.v <= 1) { // also refuses NaN
			errs = append(errs, fmt.Errorf("the %s rate is %v, it must be a fraction between 0 and 1", r.name, r.v))
		}
	}
	if latency < 0 {
		errs = append(errs, fmt.Errorf("the latency is %s, it must not be negative", latency))
	}
	if jitter < 0 {
		errs = append(errs, fmt.Errorf("the jitter is %s, it must not be negative", jitter))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sandbox: faults not changed: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.fail, s.faults.slow, s.faults.drop, s.faults.latency, s.faults.jitter = fail, slow, drop, latency, jitter
	return nil
}

// Audit returns what the API counted for every seller it has seen.
func (s *Server) Audit() Audit {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := Audit{Sellers: make(map[string]SellerAudit, len(s.sellers)), Policy: s.policy, Limit: s.limit, WindowSeconds: s.window.Seconds(), Burst: s.burst}
	for id, sl := range s.sellers {
		sa := SellerAudit{
			Accepted: len(sl.accepted), Products: len(sl.skus),
			RateLimited: sl.rateLimited, AppRateLimited: sl.appRateLimited, Replays: sl.replays, Conflicts: sl.conflicts, Invalid: sl.invalid, Failed: sl.failed,
			Injected:    sl.injected,
			MaxInWindow: maxInWindow(sl.accepted, s.window),
		}
		if n := len(sl.accepted); n > 0 {
			sa.First, sa.Last = sl.accepted[0], sl.accepted[n-1]
		}
		capacity := s.limit
		switch s.policy {
		case PolicyFixed:
			sa.MaxCounted = maxInAlignedWindow(sl.accepted, s.window)
		case PolicyTokenBucket:
			sa.MaxCounted, capacity = maxTokens(sl.accepted, s.window, s.limit), s.burst
		default:
			sa.MaxCounted = sa.MaxInWindow
		}
		sa.Exceeded = sa.MaxCounted > capacity
		a.Sellers[id] = sa
	}
	if s.app.limit > 0 {
		a.App = &AppAudit{Limit: s.app.limit, WindowSeconds: s.app.window.Seconds(), Accepted: len(s.app.accepted.accepted),
			RateLimited: s.app.rateLimited, MaxInWindow: maxInWindow(s.app.accepted.accepted, s.app.window)}
		a.App.Exceeded = a.App.MaxInWindow > s.app.limit
	}
	return a
}

// AcceptedTimes returns the time of every 201 the seller got, ascending. The
// slice is a copy.
func (s *Server) AcceptedTimes(sellerID string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl, ok := s.sellers[sellerID]; ok {
		return append([]time.Time(nil), sl.accepted...)
	}
	return nil
}

// answer is a response decided while holding the lock and written after it.
type answer struct {
	status     int
	body       []byte
	retryAfter int    // seconds; 0: no Retry-After header
	scope      string // of a 429: ScopeSeller or ScopeApp
	sku        string // the product's seller_sku, when the body was read
	code       string // the error code, for the call log
}

func errorAnswer(status int, e *apiError) answer {
	body, _ := json.Marshal(struct {
		Error *apiError `json:"error"`
	}{e}) // cannot fail: strings only
	return answer{status: status, body: body, code: e.Code}
}

// register is POST /v1/sellers/{seller_id}/products. The order of the checks
// is the contract's: injected faults, then the request's own validity (which
// never consumes the limit), then idempotency, then the limit.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx := r.Context()
	sellerID, key := r.PathValue("seller_id"), r.Header.Get("Idempotency-Key")

	s.mu.Lock()
	f := s.faults
	s.mu.Unlock()
	call := Call{Received: start, Seller: sellerID, Key: key}
	if !sleep(ctx, f.delay()) {
		call.Handled = time.Now()
		s.logCall(call)
		s.observe(ctx, start, sellerID, key, "canceled")
		return
	}
	call.Handled = time.Now()
	if s.refuseForOutage(ctx, w, r, start, sellerID, key) {
		call.Status, call.Code, call.Injected = http.StatusServiceUnavailable, "unavailable", true
		s.logCall(call)
		return
	}
	if s.refuseCredentials(w, r) {
		call.Status, call.Code = http.StatusUnauthorized, "unauthorized"
		s.count(sellerID, func(sl *seller) { sl.invalid++ })
		s.logCall(call)
		s.observe(ctx, start, sellerID, key, strconv.Itoa(http.StatusUnauthorized))
		return
	}
	if s.chaosNeedsSKU() {
		call.SKU = peekSKU(r, s.maxBody)
	}
	if s.chaosDrops(call.SKU) {
		s.count(sellerID, func(sl *seller) { sl.injected++ })
		drop(w)
		call.Injected = true
		s.logCall(call)
		s.observe(ctx, start, sellerID, key, "dropped")
		return
	}
	if a, ok := s.chaosAnswer(sellerID, call.SKU); ok {
		s.count(sellerID, func(sl *seller) { sl.injected++ })
		s.write(w, a)
		call.Status, call.Code, call.Injected = a.status, a.code, true
		s.logCall(call)
		s.observe(ctx, start, sellerID, key, strconv.Itoa(a.status))
		return
	}
	// Independent draws: a rate of 1 always fires, 0 never (Float64 < 1).
	if rand.Float64() < f.fail {
		s.count(sellerID, func(sl *seller) { sl.failed++ })
		a := errorAnswer(http.StatusServiceUnavailable, &apiError{Code: "unavailable", Message: "the service is unavailable (injected fault); retry later"})
		s.write(w, a)
		call.Status, call.Code, call.Injected = a.status, a.code, true
		s.logCall(call)
		s.observe(ctx, start, sellerID, key, strconv.Itoa(a.status))
		return
	}
	if rand.Float64() < f.drop {
		s.count(sellerID, func(sl *seller) { sl.failed++ })
		drop(w)
		call.Injected = true
		s.logCall(call)
		s.observe(ctx, start, sellerID, key, "dropped")
		return
	}
	slow := rand.Float64() < f.slow

	a := s.handle(w, r, sellerID, key)
	call.Status, call.Code, call.SKU = a.status, a.code, a.sku
	s.logCall(call)
	if slow {
		// Processed already: only the answer is late. If the client has
		// given up there is no one to answer.
		sleep(ctx, f.slowDelay)
	}
	s.write(w, a)
	s.observe(ctx, start, sellerID, key, strconv.Itoa(a.status))
}

// handle checks and applies one registration.
func (s *Server) handle(w http.ResponseWriter, r *http.Request, sellerID, key string) answer {
	refuse := func(status int, e *apiError) answer {
		s.count(sellerID, func(sl *seller) { sl.invalid++ })
		return errorAnswer(status, e)
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return refuse(http.StatusUnsupportedMediaType, &apiError{Code: "unsupported_media_type",
			Message: fmt.Sprintf("Content-Type must be application/json, got %q", r.Header.Get("Content-Type")), Field: "Content-Type"})
	}
	if key == "" {
		return refuse(http.StatusBadRequest, &apiError{Code: "missing_idempotency_key",
			Message: "the Idempotency-Key header is required", Field: "Idempotency-Key"})
	}
	if n := len(key); n > maxKeyLen {
		return refuse(http.StatusBadRequest, &apiError{Code: "invalid_idempotency_key",
			Message: fmt.Sprintf("the Idempotency-Key header must be at most %d bytes, it has %d", maxKeyLen, n), Field: "Idempotency-Key"})
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return refuse(http.StatusRequestEntityTooLarge, &apiError{Code: "body_too_large",
				Message: fmt.Sprintf("the body must be at most %d bytes", s.maxBody)})
		}
		return refuse(http.StatusBadRequest, &apiError{Code: "invalid_body", Message: "the body could not be read: " + err.Error()})
	}
	p, e, status := decodeProduct(body)
	if e != nil {
		return refuse(status, e)
	}
	if refusedName(s.refusesName(), p.Name) {
		a := refuse(http.StatusUnprocessableEntity, &apiError{Code: "invalid_value",
			Message: "name is not allowed by the marketplace (refused by chaos: an API stricter than the validator)", Field: "name"})
		a.sku = p.SellerSKU
		return a
	}
	a := s.admit(sellerID, key, p)
	a.sku = p.SellerSKU
	return a
}

// admit applies a valid registration: idempotency, then the limit.
func (s *Server) admit(sellerID, key string, p product) answer {
	canonical, _ := json.Marshal(p) // cannot fail: strings and integers only

	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.seller(sellerID)
	if prev, ok := sl.keys[key]; ok {
		if string(prev.canonical) == string(canonical) {
			sl.replays++
			return answer{status: http.StatusOK, body: prev.answer}
		}
		sl.conflicts++
		return errorAnswer(http.StatusConflict, &apiError{Code: "idempotency_conflict",
			Message: "this Idempotency-Key already registered a different product for this seller", Field: "Idempotency-Key"})
	}
	// The clock is read under the lock, so acceptance times are in the
	// order the limit was checked in.
	now := s.now()
	// The app-wide limit is asked first: it only reads, while admitting
	// under the seller's policy counts the registration.
	if ok, wait := s.app.room(now); !ok {
		sl.rateLimited++
		sl.appRateLimited++
		s.app.rateLimited++
		secs := retryAfterSeconds(wait)
		a := errorAnswer(http.StatusTooManyRequests, &apiError{Code: "app_rate_limited",
			Message: fmt.Sprintf("the application reached its limit of %d registrations per %s for all sellers together; retry after %d s", s.app.limit, s.app.window, secs)})
		a.retryAfter, a.scope = secs, ScopeApp
		return a
	}
	if ok, wait := sl.admit(s.policy, s.limit, s.burst, s.window, now); !ok {
		sl.rateLimited++
		secs := retryAfterSeconds(wait)
		a := errorAnswer(http.StatusTooManyRequests, &apiError{Code: "rate_limited",
			Message: fmt.Sprintf("seller %s reached the limit of %d registrations per %s; retry after %d s", sellerID, s.limit, s.window, secs)})
		a.retryAfter, a.scope = secs, ScopeSeller
		return a
	}
	if s.app.limit > 0 {
		s.app.accepted.record(now)
	}
	s.products++
	id := "p-" + strconv.Itoa(s.products)
	resp, _ := json.Marshal(struct {
		ProductID string `json:"product_id"`
		SellerSKU string `json:"seller_sku"`
	}{id, p.SellerSKU})
	sl.keys[key] = registration{canonical: canonical, answer: resp}
	sl.skus[p.SellerSKU] = struct{}{}
	return answer{status: http.StatusCreated, body: resp}
}

// seller returns the state of a seller, creating it. s.mu must be held.
func (s *Server) seller(id string) *seller {
	sl, ok := s.sellers[id]
	if !ok {
		sl = newSeller()
		s.sellers[id] = sl
	}
	return sl
}

func (s *Server) count(sellerID string, f func(*seller)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.seller(sellerID))
}

func (s *Server) write(w http.ResponseWriter, a answer) {
	w.Header().Set("Content-Type", "application/json")
	if a.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(a.retryAfter))
	}
	if a.scope != "" {
		w.Header().Set(ScopeHeader, a.scope)
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

func (s *Server) observe(ctx context.Context, start time.Time, sellerID, key, code string) {
	s.requests.WithLabelValues(code).Inc()
	s.latency.Observe(time.Since(start).Seconds())
	s.log.LogAttrs(ctx, slog.LevelDebug, "registration answered",
		slog.String("seller", sellerID), slog.String("key", key), slog.String("status", code))
}

// drop closes the connection without an answer, the way a crashed proxy or a
// reset does. Hijacking is the faithful way on HTTP/1; where it is not
// available (HTTP/2) aborting the handler resets the stream instead.
func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// sleep waits d, or less if ctx ends first; it reports whether it waited all of d.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
