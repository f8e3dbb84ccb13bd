package consumer

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/redisclock"
	"github.com/bulkreg/bulkreg/internal/testwait"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/throttle"
)

// TestAnAppWide429BlocksTheApplication: a 429 whose scope is the app-wide
// limit blocks the throttle's app-wide log, not the seller; a seller's 429
// still blocks the seller. Both rows are registered after their retry.
func TestAnAppWide429BlocksTheApplication(t *testing.T) {
	script := func(key string, n int) registryclient.Result {
		switch {
		case key == "u1:1" && n == 1:
			return registryclient.Result{Class: registryclient.RateLimited, Status: http.StatusTooManyRequests, RetryAfter: 200 * time.Millisecond,
				Scope: registryclient.ScopeApp, Err: errors.New("429 app")}
		case key == "u1:2" && n == 1:
			return registryclient.Result{Class: registryclient.RateLimited, Status: http.StatusTooManyRequests, RetryAfter: 200 * time.Millisecond,
				Scope: registryclient.ScopeSeller, Err: errors.New("429 seller")}
		}
		return registryclient.Result{Class: registryclient.Registered, Status: 201}
	}
	f := newFixture(t, 1, script)
	f.start()
	f.publish("u1", "s1", 2)
	testwait.For(t, 10*time.Second, "2 rows registered", func() bool { return f.registeredCount("u1") == 2 })
	f.throttle.mu.Lock()
	defer f.throttle.mu.Unlock()
	if f.throttle.globalBlocks != 1 || f.throttle.blocks != 1 {
		t.Errorf("app-wide blocks %d, seller blocks %d; want one each (one 429 of each scope)", f.throttle.globalBlocks, f.throttle.blocks)
	}
}

// TestTheSpreadCountsAsLateness: a call is made at the later of its two
// slots (At); the earlier is At − Spread, and lateness is measured from it.
func TestTheSpreadCountsAsLateness(t *testing.T) {
	redisNow := time.Unix(1_700_000_000, 0)
	sent := time.Unix(2_000_000_000, 0) // the local clock, anywhere
	arrived := sent.Add(3 * time.Millisecond)
	s := slot{Reservation: throttle.Reservation{At: redisNow.Add(time.Second), Spread: 20 * time.Millisecond}}
	s.place(redisclock.New(), sent, arrived, redisNow)
	if want := arrived.Add(time.Second); !s.due.Equal(want) {
		t.Errorf("due %v, want the answer's arrival + the wait to At: %v", s.due, want)
	}
	if want := sent.Add(time.Second - 20*time.Millisecond); !s.bound.Equal(want) {
		t.Errorf("bound %v, want the send + the wait to the earlier slot: %v", s.bound, want)
	}
}

// TestLatenessAboveTheTolerance: with an app-wide limit the lateness budget
// must exceed the tolerance between the two slots, or no call could start.
func TestLatenessAboveTheTolerance(t *testing.T) {
	p := throttle.Policy{Limit: 100, Window: time.Minute, Margin: 200 * time.Millisecond,
		Global:      throttle.Global{Limit: 1000, Window: time.Minute, Tolerance: 50 * time.Millisecond},
		CallTimeout: 20 * time.Second} // two of the default registry timeouts
	ok := Config{Brokers: []string{"localhost:9092"}}
	if err := ok.validate(p); err != nil {
		t.Errorf("default lateness (100 ms) above a 50 ms tolerance: %v", err)
	}
	bad := Config{Brokers: []string{"localhost:9092"}, MaxLateness: 50 * time.Millisecond}
	if err := bad.validate(p); err == nil || !strings.Contains(err.Error(), "--max-lateness") || !strings.Contains(err.Error(), "tolerance") {
		t.Errorf("a lateness equal to the tolerance: %v, want an error naming --max-lateness and the tolerance", err)
	}
	p.Global = throttle.Global{}
	if err := bad.validate(p); err != nil {
		t.Errorf("without an app-wide limit the tolerance does not matter: %v", err)
	}
}

// TestAppWideLimitEndToEnd: 20 sellers, one with 500 rows and 19 with 10,
// under 100 per seller and 200 app-wide per 3 s, through Kafka, two
// consumers, the real throttle on redis-server and the sandbox enforcing
// both limits. No 429 on either limit, never more than 200 in any trailing
// window, the first window used while rows wait, and every 10-row seller
// done within two windows of the first registration.
func TestAppWideLimitEndToEnd(t *testing.T) {
	const window, margin = 3 * time.Second, 100 * time.Millisecond
	g := throttle.Global{Limit: 200, Window: window}
	s := newStack(t, stackOptions{partitions: 4, limit: 100, window: window, margin: margin, latency: 2 * time.Millisecond, global: g})
	s.startConsumer()
	s.startConsumer()
	s.waitGroupStable("registrar", 2)
	s.publish("big", "big", 500)
	var small []string
	for i := range 19 {
		seller := fmt.Sprintf("small-%02d", i)
		small = append(small, seller)
		s.publish("up-"+seller, seller, 10)
	}
	for _, seller := range small {
		s.waitProducts(seller, 10, 30*time.Second)
	}
	s.waitProducts("big", 200, 30*time.Second)

	a := s.sandbox.Audit()
	if a.App == nil || a.App.RateLimited != 0 || a.App.MaxInWindow > g.Limit || a.App.Exceeded {
		t.Errorf("app-wide audit %+v: want no 429 and at most %d in any trailing %v", a.App, g.Limit, window)
	}
	var all []time.Time
	t0 := time.Time{}
	for seller, sa := range a.Sellers {
		if sa.RateLimited != 0 || sa.MaxInWindow > s.limit {
			t.Errorf("seller %s: %d × 429 (%d app-wide), %d in one window; want none and at most %d", seller, sa.RateLimited, sa.AppRateLimited, sa.MaxInWindow, s.limit)
		}
		if t0.IsZero() || sa.First.Before(t0) {
			t0 = sa.First
		}
		all = append(all, s.sandbox.AcceptedTimes(seller)...)
	}
	span := window + margin
	for _, seller := range small {
		sa := a.Sellers[seller]
		took := sa.Last.Sub(t0)
		t.Logf("seller %s: done %v after the first registration (%.2f windows)", seller, took.Round(time.Millisecond), took.Seconds()/span.Seconds())
		if sa.Products != 10 || took > 2*span {
			t.Errorf("seller %s: %d products, the last %v after the first registration; want 10 within two windows (%v)", seller, sa.Products, took, 2*span)
		}
	}
	// 100 rows of the big seller and 190 of the small ones wanted the first
	// window: at least 80 % of its 200 places were used. A call its machine
	// delays past the allowed lateness gives its slot up, which a busy
	// machine does; a window the big seller alone filled, or one filled a
	// window late, holds about half.
	used := 0
	for _, at := range all {
		if at.Before(t0.Add(span)) {
			used++
		}
	}
	t.Logf("first app-wide window: %d registrations; big seller: %d so far", used, a.Sellers["big"].Accepted)
	if used < 160 {
		t.Errorf("the first app-wide window held %d registrations while 290 rows waited, want at least 160 of its 200", used)
	}
}
