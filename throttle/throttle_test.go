package throttle

import (
	"context"
	"crypto/rand"
	"errors"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

// maxInWindow is the sliding-window checker: the most calls inside any
// closed window [x−w, x] over the call times (the strictest way an API can
// count its window).
func maxInWindow(times []time.Time, w time.Duration) int {
	sorted := slices.Clone(times)
	slices.SortFunc(sorted, func(a, b time.Time) int { return a.Compare(b) })
	most, i := 0, 0
	for j := range sorted {
		for sorted[j].Sub(sorted[i]) > w {
			i++
		}
		most = max(most, j-i+1)
	}
	return most
}

// checkValidate: with field "" p is valid; otherwise Validate names
// Policy.<field> and New refuses p.
func checkValidate(t *testing.T, p Policy, field string) {
	t.Helper()
	err := p.Validate()
	if field == "" {
		if err != nil {
			t.Fatalf("Validate() = %v, want nil", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "Policy."+field) {
		t.Fatalf("Validate() = %v, want an error naming Policy.%s", err, field)
	}
	if _, err := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), p); err == nil {
		t.Fatalf("New accepted a policy with a bad %s", field)
	}
}

func TestMaxInWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		times []time.Time
		w     time.Duration
		want  int
	}{
		{"none", nil, time.Second, 0},
		{"one", at(5), time.Second, 1},
		{"spread", at(0, 1001, 2002), time.Second, 1},
		{"both ends of a window count", at(0, 1000), time.Second, 2},
		{"unsorted burst", at(1500, 0, 999, 10, 2600), time.Second, 3},
		{"same instant", at(7, 7, 7), time.Millisecond, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := maxInWindow(tc.times, tc.w); got != tc.want {
				t.Errorf("maxInWindow = %d, want %d", got, tc.want)
			}
		})
	}
}

func newThrottle(t *testing.T, rdb redis.UniversalClient, p Policy) *Throttle {
	t.Helper()
	th, err := New(rdb, p)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// startRedis runs a redis-server initialised for the throttle (Initialize):
// a new Redis, so the first reservations are not held as after a loss.
func startRedis(t testing.TB) *testredis.Server {
	t.Helper()
	srv := testredis.Start(t)
	c := srv.Client()
	if _, err := Initialize(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return srv
}

// startCluster runs a 3-master Redis Cluster initialised for the throttle.
func startCluster(t testing.TB) *testredis.Cluster {
	t.Helper()
	c := testredis.StartCluster(t, 3)
	if _, err := Initialize(context.Background(), c.Client()); err != nil {
		t.Fatal(err)
	}
	return c
}

// seller is a fresh seller id, so tests sharing a server never share a log.
func seller(prefix string) string { return prefix + "-" + rand.Text()[:8] }

func reserve(t testing.TB, th *Throttle, s string) Reservation {
	t.Helper()
	r, err := th.Reserve(context.Background(), s)
	if err != nil {
		t.Fatalf("Reserve(%q): %v", s, err)
	}
	return r
}

func TestPolicyValidate(t *testing.T) {
	ok := Policy{Limit: 100, Window: time.Minute}
	for _, tc := range []struct {
		name  string
		edit  func(*Policy)
		field string // "" = valid
	}{
		{"valid", func(*Policy) {}, ""},
		{"per minute", func(p *Policy) { *p = PerMinute(100) }, ""},
		{"every kind", func(p *Policy) { p.Kind = TokenBucket; p.Burst = 5 }, ""},
		{"zero limit", func(p *Policy) { p.Limit = 0 }, "Limit"},
		{"negative limit", func(p *Policy) { p.Limit = -1 }, "Limit"},
		{"zero window", func(p *Policy) { p.Window = 0 }, "Window"},
		{"negative window", func(p *Policy) { p.Window = -time.Second }, "Window"},
		{"negative margin", func(p *Policy) { p.Margin = -time.Millisecond }, "Margin"},
		{"negative max wait", func(p *Policy) { p.MaxWait = -time.Second }, "MaxWait"},
		{"negative burst", func(p *Policy) { p.Burst = -1 }, "Burst"},
		{"negative release timeout", func(p *Policy) { p.ReleaseTimeout = -time.Second }, "ReleaseTimeout"},
		{"unknown kind", func(p *Policy) { p.Kind = "leaky" }, "Kind"},
		{"sub-microsecond window", func(p *Policy) { p.Window = time.Nanosecond }, "Window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			tc.edit(&p)
			checkValidate(t, p, tc.field)
		})
	}
	if got := PerMinute(100); got != (Policy{Kind: Sliding, Limit: 100, Window: time.Minute, Margin: 250 * time.Millisecond}) {
		t.Errorf("PerMinute(100) = %+v", got)
	}
}

func TestEmptySellerRefused(t *testing.T) {
	th := newThrottle(t, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), PerMinute(100))
	ctx := context.Background()
	checks := map[string]error{
		"Reserve": func() error { _, err := th.Reserve(ctx, ""); return err }(),
		"Wait":    func() error { _, err := th.Wait(ctx, ""); return err }(),
		"Block":   th.Block(ctx, "", time.Second),
		"Peek":    func() error { _, err := th.Peek(ctx, ""); return err }(),
		"Release": th.Release(ctx, Reservation{ID: "x"}),
	}
	for name, err := range checks {
		if err == nil || !strings.Contains(err.Error(), "seller") {
			t.Errorf("%s with an empty seller id = %v, want an error naming the seller id", name, err)
		}
	}
}

func TestReserveFillsTheWindowThenReservesAhead(t *testing.T) {
	srv := startRedis(t)
	const limit, window = 3, time.Second
	th := newThrottle(t, srv.Client(), Policy{Limit: limit, Window: window, Margin: 100 * time.Millisecond})
	s := seller("fill")
	var got []Reservation
	for range limit + 2 {
		got = append(got, reserve(t, th, s))
	}
	for i, r := range got {
		if !r.Admitted || r.ID == "" || r.Seller != s {
			t.Fatalf("reservation %d = %+v, want admitted with an id", i, r)
		}
	}
	for i, r := range got[:limit] {
		if r.Wait > 100*time.Millisecond || r.InWindow != i+1 || r.Room != limit-i-1 {
			t.Errorf("reservation %d: wait %s, in window %d, room %d; want no wait, %d in window and room for %d", i, r.Wait, r.InWindow, r.Room, i+1, limit-i-1)
		}
	}
	// The (L+1)-th slot is W′ + 1µs after the first call's latest count (its
	// slot + reach: no settle came), the (L+2)-th after the second's.
	span := window + 100*time.Millisecond
	reach := th.Policy().reach()
	for i := limit; i < len(got); i++ {
		if want := got[i-limit].At.Add(reach + span + time.Microsecond); !got[i].At.Equal(want) {
			t.Errorf("reservation %d at %s, want %s (W′ + 1µs after reservation %d's latest count)", i, got[i].At, want, i-limit)
		}
		if got[i].InWindow != limit {
			t.Errorf("reservation %d: %d in window, want %d", i, got[i].InWindow, limit)
		}
		if got[i].Wait < span-200*time.Millisecond {
			t.Errorf("reservation %d: wait %s, want about %s", i, got[i].Wait, span)
		}
	}
}

func TestReserveBeyondMaxWaitHoldsNothing(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client()
	th := newThrottle(t, rdb, Policy{Limit: 1, Window: time.Second, MaxWait: 300 * time.Millisecond})
	s := seller("far")
	first := reserve(t, th, s)
	r := reserve(t, th, s)
	if r.Admitted || r.ID != "" {
		t.Fatalf("a slot 1 s ahead with a 300 ms max wait was taken: %+v", r)
	}
	// asked again when the slot will be within the max wait
	if want := first.At.Add(time.Second + time.Microsecond - 300*time.Millisecond); !r.At.Equal(want) {
		t.Errorf("ask again at %s, want %s", r.At, want)
	}
	if n := rdb.ZCard(context.Background(), th.keys(s).log).Val(); n != 1 {
		t.Errorf("the log holds %d slots, want 1 (a refused reservation writes nothing)", n)
	}
	// Wait asks again and gets the slot.
	w, err := th.Wait(context.Background(), s)
	if err != nil || !w.Admitted || w.At.Before(first.At.Add(time.Second)) {
		t.Fatalf("Wait = %+v, %v; want the slot a window after the first", w, err)
	}
}

func TestReserveIsIdempotentPerID(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client()
	for _, kind := range []Kind{Sliding, Fixed, TokenBucket} {
		t.Run(string(kind), func(t *testing.T) {
			th := newThrottle(t, rdb, Policy{Kind: kind, Limit: 2, Window: time.Second})
			s := seller("idem")
			ctx := context.Background()
			a, err := th.reserveID(ctx, s, "lost-answer")
			if err != nil {
				t.Fatal(err)
			}
			reserve(t, th, s)
			// the retry of a call whose answer was lost gets the slot it holds
			b, err := th.reserveID(ctx, s, "lost-answer")
			if err != nil {
				t.Fatal(err)
			}
			if !b.Admitted || !b.At.Equal(a.At) || b.ID != a.ID {
				t.Errorf("retry answered %+v, want the first answer's slot %+v", b, a)
			}
			if n := rdb.ZCard(ctx, th.keys(s).log).Val(); n != 2 {
				t.Errorf("the log holds %d slots after 2 reservations and a retry, want 2", n)
			}
		})
	}
}

// TestARetriedReservationReportsTheHold: the retry of a reservation whose
// answer was lost answers the hold after a loss as the lost answer had it,
// so a caller that never read the first answer still learns of the hold
// (the consumer compares its SKU claims with it).
func TestARetriedReservationReportsTheHold(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client()
	for _, kind := range []Kind{Sliding, Fixed, TokenBucket} {
		t.Run(string(kind), func(t *testing.T) {
			th := newThrottle(t, rdb, Policy{Kind: kind, Limit: 2, Window: time.Second, MaxWait: time.Minute})
			s := seller("held-retry")
			ctx := context.Background()
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			a, err := th.reserveID(ctx, s, "lost-answer")
			if err != nil || !a.Admitted || !a.Lost || a.HeldUntil.IsZero() {
				t.Fatalf("the first reservation after a flush answered %+v, %v; want a slot that found the loss and its hold", a, err)
			}
			b, err := th.reserveID(ctx, s, "lost-answer")
			if err != nil {
				t.Fatal(err)
			}
			if !b.Admitted || !b.At.Equal(a.At) || !b.HeldUntil.Equal(a.HeldUntil) {
				t.Errorf("retry answered slot %v held until %v, want the first answer's %v held until %v", b.At, b.HeldUntil, a.At, a.HeldUntil)
			}
		})
	}
}

func TestReleaseGivesTheSlotToTheNextCaller(t *testing.T) {
	srv := startRedis(t)
	for _, kind := range []Kind{Sliding, Fixed, TokenBucket} {
		t.Run(string(kind), func(t *testing.T) {
			// Window long enough that a fixed window does not roll over
			// during the test, and the next window's slot is clearly later.
			const window = 20 * time.Second
			a := newThrottle(t, srv.Client(), Policy{Kind: kind, Limit: 2, Window: window, MaxWait: 3 * window})
			b := newThrottle(t, srv.Client(), Policy{Kind: kind, Limit: 2, Window: window, MaxWait: 3 * window})
			s := seller("release")
			ctx := context.Background()
			if kind == Fixed {
				// Fixed windows are aligned on the epoch: start with most of
				// one ahead, or the third slot falls in the next window by
				// the clock rather than by the limit.
				awaitWindowAhead(t, srv.Client(), window, 5*time.Second)
			}
			reserve(t, a, s)
			held := reserve(t, a, s)
			if next := reserve(t, b, s); next.Wait < time.Second {
				t.Fatalf("third slot of a full window in %s, want later", next.Wait)
			} else if err := b.Release(ctx, next); err != nil {
				t.Fatal(err)
			}
			if err := a.Release(ctx, held); err != nil {
				t.Fatal(err)
			}
			// twice: releasing a slot not held does nothing
			if err := a.Release(ctx, held); err != nil {
				t.Fatal(err)
			}
			r := reserve(t, b, s)
			if !r.Admitted || r.Wait > time.Second {
				t.Fatalf("after a release the next caller got %+v, want the freed slot now", r)
			}
			if after := reserve(t, b, s); after.Wait < time.Second {
				t.Errorf("the freed slot was given twice: next wait %s", after.Wait)
			}
		})
	}
}

// awaitWindowAhead returns once the fixed window of length w that holds
// Redis's clock has at least ahead left, so a test's reservations all fall
// in one window.
func awaitWindowAhead(t *testing.T, rdb redis.UniversalClient, w, ahead time.Duration) {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	left := w - time.Duration(now.UnixMicro()%w.Microseconds())*time.Microsecond
	if left < ahead {
		time.Sleep(left + 10*time.Millisecond)
	}
}

func TestBlockMovesEveryCallersNextSlot(t *testing.T) {
	srv := startRedis(t)
	for _, kind := range []Kind{Sliding, Fixed, TokenBucket} {
		t.Run(string(kind), func(t *testing.T) {
			p := Policy{Kind: kind, Limit: 100, Window: time.Second, MaxWait: 5 * time.Second}
			a := newThrottle(t, srv.Client(), p)
			b := newThrottle(t, srv.Client(), p)
			s, other := seller("blocked"), seller("free")
			ctx := context.Background()
			if err := a.Block(ctx, s, 1500*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			st, err := b.Peek(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			if d := st.BlockedUntil.Sub(st.Now); d < 1400*time.Millisecond || d > 1500*time.Millisecond {
				t.Fatalf("blocked for %s after a 1.5 s Retry-After", d)
			}
			// an earlier block does not shorten it
			if err := b.Block(ctx, s, 100*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			for i, th := range []*Throttle{a, b, a, b} {
				if r := reserve(t, th, s); !r.Admitted || r.At.Before(st.BlockedUntil) {
					t.Errorf("caller %d after the block: %+v, want a slot at or after %s", i, r, st.BlockedUntil)
				}
			}
			if r := reserve(t, b, other); r.Wait > 100*time.Millisecond {
				t.Errorf("another seller waits %s; a block is per seller", r.Wait)
			}
			if err := a.Block(ctx, s, 0); err == nil || !strings.Contains(err.Error(), "retryAfter") {
				t.Errorf("Block with no Retry-After = %v, want an error naming retryAfter", err)
			}
		})
	}
}

func TestPeekAnswersWhatReserveWouldGive(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client()
	for _, kind := range []Kind{Sliding, Fixed, TokenBucket} {
		t.Run(string(kind), func(t *testing.T) {
			const window = 20 * time.Second // no fixed-window rollover during the test
			th := newThrottle(t, rdb, Policy{Kind: kind, Limit: 3, Window: window, MaxWait: 3 * window})
			s := seller("peek")
			ctx := context.Background()
			st, err := th.Peek(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			if st.InWindow != 0 || !st.BlockedUntil.IsZero() || st.NextFree.Sub(st.Now) != 0 {
				t.Fatalf("an idle seller peeks %+v, want nothing in the window, free now", st)
			}
			for range 3 {
				reserve(t, th, s)
			}
			before, _ := rdb.ZRangeWithScores(ctx, th.keys(s).log, 0, -1).Result()
			st, err = th.Peek(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			after, _ := rdb.ZRangeWithScores(ctx, th.keys(s).log, 0, -1).Result()
			if !slices.Equal(before, after) {
				t.Errorf("Peek changed the log: %v → %v", before, after)
			}
			if st.InWindow != 3 {
				t.Errorf("peek counts %d in the window, want 3", st.InWindow)
			}
			r := reserve(t, th, s)
			if !r.At.Equal(st.NextFree) {
				t.Errorf("peek said the next slot is %s, the reservation got %s", st.NextFree, r.At)
			}
		})
	}
}

func TestIdleSellersExpire(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client()
	ctx := context.Background()
	for _, kind := range []Kind{Sliding, Fixed, TokenBucket} {
		t.Run(string(kind), func(t *testing.T) {
			p := Policy{Kind: kind, Limit: 5, Window: 2 * time.Second}
			th := newThrottle(t, rdb, p)
			s := seller("ttl")
			reserve(t, th, s)
			if err := th.Block(ctx, s, time.Second); err != nil {
				t.Fatal(err)
			}
			k := th.keys(s)
			keys := []string{k.log, k.block}
			if kind == TokenBucket {
				keys = append(keys, k.tat)
			}
			for _, key := range keys {
				ttl := rdb.PTTL(ctx, key).Val()
				// at most: the newest slot (≤ max wait ahead) + W′ + 1 s
				if ttl <= 0 || ttl > th.Policy().MaxWait+p.span()+time.Second {
					t.Errorf("%s has TTL %s, want a TTL bounded by max wait + window + 1 s", key, ttl)
				}
			}
		})
	}
}

func TestRedisDownFailsClosed(t *testing.T) {
	srv := startRedis(t)
	// short timeouts and few retries so the outage costs the test little
	// (with go-redis defaults a dead Redis takes about 2 s to fail a call)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond,
		DialerRetries: 1, DialerRetryTimeout: 10 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	th := newThrottle(t, rdb, Policy{Limit: 10, Window: time.Second})
	s := seller("down")
	if r := reserve(t, th, s); !r.Admitted {
		t.Fatalf("before the outage: %+v", r)
	}
	srv.Stop()
	stopped := time.Now()
	ctx := context.Background()
	for range 3 {
		r, err := th.Reserve(ctx, s)
		if err == nil || r.Admitted {
			t.Fatalf("Reserve with Redis down = %+v, %v; want an error and no slot", r, err)
		}
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "Redis could not answer") {
			t.Fatalf("Reserve with Redis down: %v; want ErrUnavailable saying Redis could not answer", err)
		}
	}
	if r, err := th.Wait(ctx, s); !errors.Is(err, ErrUnavailable) || r.Admitted {
		t.Errorf("Wait with Redis down = %+v, %v; want ErrUnavailable", r, err)
	}
	if err := th.Block(ctx, s, time.Second); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Block with Redis down = %v; want ErrUnavailable", err)
	}
	if _, err := th.Peek(ctx, s); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Peek with Redis down = %v; want ErrUnavailable", err)
	}
	if err := th.Release(ctx, Reservation{Seller: s, ID: "x"}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Release with Redis down = %v; want ErrUnavailable", err)
	}

	// Callers reserving concurrently while Redis is down: not one admitted.
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, failed := 0, 0
	for range 8 {
		wg.Go(func() {
			for range 5 {
				r, err := th.Reserve(ctx, s)
				mu.Lock()
				if r.Admitted || err == nil {
					admitted++
				} else if errors.Is(err, ErrUnavailable) {
					failed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("outage checks took %s", time.Since(stopped))
	if admitted != 0 || failed != 40 {
		t.Errorf("40 reservations with Redis down: %d admitted, %d failed with ErrUnavailable; want 0 and 40", admitted, failed)
	}

	srv.Restart() // empty: the script cache too, so this also covers NOSCRIPT → EVAL
	restarted := time.Now()
	defer func() { t.Logf("answered again %s after the restart", time.Since(restarted)) }()
	var r Reservation
	testwait.For(t, 10*time.Second, "Reserve answered by the restarted Redis", func() bool {
		var err error
		r, err = th.Reserve(ctx, s)
		return err == nil
	})
	// Restarted empty, it lost the seller's window: the seller is held
	// LossHold from the first reservation (epoch_test.go).
	if !r.Admitted || !r.Lost || r.Wait != th.Policy().LossHold {
		t.Fatalf("after the restart: %+v, want a slot after the hold (%v)", r, th.Policy().LossHold)
	}
}

func TestWaitGivesTheSlotBackWhenCancelled(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client()
	th := newThrottle(t, rdb, Policy{Limit: 1, Window: 5 * time.Second})
	s := seller("cancel")
	reserve(t, th, s)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	r, err := th.Wait(ctx, s)
	if !errors.Is(err, context.DeadlineExceeded) || r.Admitted {
		t.Fatalf("Wait past its context = %+v, %v; want the context's error", r, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Wait returned %s after its context ended", d)
	}
	if n := rdb.ZCard(context.Background(), th.keys(s).log).Val(); n != 1 {
		t.Errorf("the log holds %d slots, want 1: the cancelled wait's slot must be given back", n)
	}
}

func TestWaitSleepsUntilTheSlot(t *testing.T) {
	srv := startRedis(t)
	th := newThrottle(t, srv.Client(), Policy{Limit: 1, Window: 300 * time.Millisecond})
	s := seller("sleep")
	first := reserve(t, th, s)
	r, err := th.Wait(context.Background(), s)
	if err != nil || !r.Admitted {
		t.Fatalf("Wait = %+v, %v", r, err)
	}
	// same machine: the local clock and the Redis clock agree to well under a millisecond
	if now := time.Now(); now.Before(r.At) {
		t.Errorf("Wait returned at %s, before its slot %s", now, r.At)
	}
	if r.At.Sub(first.At) <= 300*time.Millisecond {
		t.Errorf("second slot %s after the first, want more than the window", r.At.Sub(first.At))
	}
}

// TestInvariant is the throttle's contract: 32 callers over 4 clients take
// slots for one seller and "call" at them for 10 s; no trailing window holds
// more than the limit, and the 500th call comes within 2% of the lower bound.
func TestInvariant(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		srv := startRedis(t)
		var clients []redis.UniversalClient
		for range 4 {
			clients = append(clients, srv.Client())
		}
		checkInvariant(t, clients)
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		c := startCluster(t)
		var clients []redis.UniversalClient
		for range 4 {
			clients = append(clients, c.Client())
		}
		checkInvariant(t, clients)
	})
}

func checkInvariant(t *testing.T, clients []redis.UniversalClient) {
	const (
		limit   = 100
		window  = 2 * time.Second
		run     = 10 * time.Second
		callers = 32
	)
	p := Policy{Limit: limit, Window: window} // margin 0: the window is exact
	var ths []*Throttle
	for _, c := range clients {
		ths = append(ths, newThrottle(t, c, p))
	}
	s := seller("invariant")
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var (
		mu    sync.Mutex
		calls []time.Time
		errs  []error
		late  time.Duration // the most a caller woke after its slot
		early int           // callers that woke before their slot
		wg    sync.WaitGroup
	)
	for i := range callers {
		th := ths[i%len(ths)]
		wg.Go(func() {
			for {
				r, err := th.Wait(ctx, s)
				mu.Lock()
				switch {
				case ctx.Err() != nil:
					mu.Unlock()
					return
				case err != nil:
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				calls = append(calls, r.At) // the call, made at its slot
				// same machine: the local clock is the Redis clock
				late = max(late, time.Since(r.At))
				if time.Now().Before(r.At) {
					early++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d callers failed, first: %v", len(errs), errs[0])
	}
	if early > 0 {
		t.Errorf("%d callers returned from Wait before their slot", early)
	}
	slices.SortFunc(calls, func(a, b time.Time) int { return a.Compare(b) })
	if got := maxInWindow(calls, window); got > limit {
		t.Errorf("a trailing %s window holds %d calls, limit %d", window, got, limit)
	}
	if len(calls) < 500 {
		t.Fatalf("%d calls in %s, want at least 500", len(calls), run)
	}
	// 500 calls at L per W need 4 full windows after the first call.
	bound := 4 * window
	took := calls[499].Sub(calls[0])
	t.Logf("%d calls, max %d in any %s window; the 500th call %s after the first (lower bound %s, ratio %.4f); callers woke at most %s after their slot",
		len(calls), maxInWindow(calls, window), window, took, bound, took.Seconds()/bound.Seconds(), late)
	if took < bound || float64(took) > 1.02*float64(bound) {
		t.Errorf("the 500th call came %s after the first, want between %s and 1.02 × that", took, bound)
	}
}

// TestOnlyTheSlidingLogIsExact reserves a burst under each policy and counts
// the slots in every trailing window: a fixed window and a token bucket admit
// more than the limit, the sliding log never does.
func TestOnlyTheSlidingLogIsExact(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client()
	const limit, window = 10, time.Second
	for _, tc := range []struct {
		kind  Kind
		exact bool
	}{
		{Sliding, true},
		{Fixed, false},
		{TokenBucket, false},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			th := newThrottle(t, rdb, Policy{Kind: tc.kind, Limit: limit, Window: window, MaxWait: 3 * window})
			s := seller("burst")
			var slots []time.Time
			for range 3 * limit {
				r := reserve(t, th, s)
				if !r.Admitted {
					t.Fatalf("a burst of %d with a max wait of 3 windows was refused: %+v", 3*limit, r)
				}
				slots = append(slots, r.At)
			}
			got := maxInWindow(slots, window)
			t.Logf("%s: at most %d of the burst's %d slots in any %s", tc.kind, got, len(slots), window)
			if tc.exact && got > limit {
				t.Errorf("%s put %d slots in one window, limit %d", tc.kind, got, limit)
			}
			if !tc.exact && got <= limit {
				t.Errorf("%s kept the burst within %d per window (%d); this test must show it does not", tc.kind, limit, got)
			}
		})
	}
}

// TestReleasesKeepTheInvariant takes and gives back slots at random, leaving
// holes anywhere in the log, and checks the slots still held: never more
// than the limit in one window.
func TestReleasesKeepTheInvariant(t *testing.T) {
	srv := startRedis(t)
	const limit, window = 5, 100 * time.Millisecond
	th := newThrottle(t, srv.Client(), Policy{Limit: limit, Window: window, MaxWait: 10 * window})
	s := seller("holes")
	ctx := context.Background()
	r := mrand.New(mrand.NewPCG(1, 2))
	var held []Reservation
	released := 0
	for range 600 {
		if len(held) > 0 && r.IntN(3) == 0 {
			// give back a slot not reached yet, as a caller that will not use it
			i := len(held) - 1 - r.IntN(min(len(held), 2*limit))
			if time.Until(held[i].At) > 0 {
				if err := th.Release(ctx, held[i]); err != nil {
					t.Fatal(err)
				}
				held = slices.Delete(held, i, i+1)
				released++
				continue
			}
		}
		res, err := th.Reserve(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Admitted {
			time.Sleep(res.Wait)
			continue
		}
		held = append(held, res)
	}
	var at []time.Time
	for _, h := range held {
		at = append(at, h.At)
	}
	got := maxInWindow(at, window)
	t.Logf("%d slots held, %d released; at most %d in any %s", len(held), released, got, window)
	if got > limit || released < 50 {
		t.Errorf("%d slots in one window (limit %d) after %d releases", got, limit, released)
	}
}

// TestAGivenBackSlotIsRefilledNowDespiteSlotsBookedAhead (sliding): a call
// could not start in time and gave its slot back after the seller's next
// window had begun to be booked. The log then holds the limit's count of
// slots, yet the window has room now: the next ask gets it now, where
// appending after the last L slots put it a window later (one window more
// for the seller's upload). Once no room is left, slots go after.
func TestAGivenBackSlotIsRefilledNowDespiteSlotsBookedAhead(t *testing.T) {
	srv := startRedis(t)
	const window = 2 * time.Second
	p := Policy{Limit: 3, Window: window, Margin: 20 * time.Millisecond, MaxWait: 5 * window}
	th := newThrottle(t, srv.Client(), p)
	s := seller("refill")
	ctx := context.Background()
	r1, r2, _ := reserve(t, th, s), reserve(t, th, s), reserve(t, th, s)
	r4 := reserve(t, th, s) // the next window's first
	if r4.Wait < window/2 {
		t.Fatalf("the fourth slot with a limit of 3 is %v away, want about a window", r4.Wait)
	}
	if err := th.Release(ctx, r2); err != nil {
		t.Fatal(err)
	}
	again := reserve(t, th, s)
	if again.Wait > 200*time.Millisecond {
		t.Errorf("after a slot due now was given back the next ask waits %v, want the room now", again.Wait)
	}
	full := reserve(t, th, s)
	if want := r1.At.Add(p.span()); full.At.Before(want) {
		t.Errorf("with the window full again the next slot is %v, want at or after %v", full.At, want)
	}
	var at []time.Time
	for _, a := range sellerLog(t, th, srv.Client(), s) {
		at = append(at, a)
	}
	if len(at) != 5 {
		t.Fatalf("the seller's log holds %d slots, want 5", len(at))
	}
	if got := maxInWindow(at, p.span()); got > p.Limit {
		t.Errorf("%d slots in one window of %v, limit %d: %v", got, p.span(), p.Limit, at)
	}
}

// TestSettleMovesALatestCountEarlierOnly: a reservation writes its call's
// latest count, the slot + reach, into the log. A call answered 300 ms after
// its slot (the API counted it somewhere in between) moves it to the answer
// less the margin, and the next window's slot is then a window after the
// answer, not W′ after the latest count; one answered within the margin
// moves it to its slot. An answer after the latest count (an API slower than the
// call timeout) never moves it later: it blocks the seller until a window
// after the answer instead. A settle never brings back a slot given back, and leaves a
// fixed window's log alone.
func TestSettleMovesALatestCountEarlierOnly(t *testing.T) {
	srv := startRedis(t)
	ctx := context.Background()
	const window = 2 * time.Second
	p := Policy{Limit: 1, Window: window, Margin: 20 * time.Millisecond, MaxWait: 5 * window, CallTimeout: time.Second}
	one := newThrottle(t, srv.Client(), p)
	reach := one.Policy().reach()
	s := seller("settle")
	r1 := reserve(t, one, s)
	entries := func(s string) map[string]time.Time { return slotsOf(t, srv.Client(), one.keys(s).log) }
	if got, want := entries(s)[r1.ID], r1.At.Add(reach); !got.Equal(want) {
		t.Errorf("the reservation wrote %v into the log, want its latest count, the slot + %v = %v", got, reach, want)
	}
	answered := r1.At.Add(300 * time.Millisecond)
	st, ok := settleStep(one, r1, answered)
	if !ok {
		t.Fatal("SettleStep has nothing to do for a call answered 300 ms after its slot, before its latest count")
	}
	if err := scriptbatch.New().Run(ctx, srv.Client(), st); err != nil {
		t.Fatal(err)
	}
	if got := entries(s)[r1.ID]; !got.Equal(answered.Add(-p.Margin)) {
		t.Errorf("the settled latest count is at %v, want the answer less the margin, %v", got, answered.Add(-p.Margin))
	}
	if r2 := reserve(t, one, s); !r2.At.Equal(answered.Add(p.Window + time.Microsecond)) {
		t.Errorf("the next window's slot is at %v, want the answer + W + 1µs (%v)", r2.At, answered.Add(p.Window+time.Microsecond))
	}
	quick := seller("settle-quick")
	q := reserve(t, one, quick)
	if err := one.Settle(ctx, q, q.At.Add(p.Margin/2)); err != nil {
		t.Fatal(err)
	}
	if got := entries(quick)[q.ID]; !got.Equal(q.At) {
		t.Errorf("a call answered within the margin of its slot left its entry at %v, want its slot %v", got, q.At)
	}

	s = seller("settle-slow")
	q = reserve(t, one, s)
	slow := q.At.Add(reach + 500*time.Millisecond) // answered after its latest count
	if err := one.Settle(ctx, q, slow); err != nil {
		t.Fatal(err)
	}
	if got := entries(s)[q.ID]; !got.Equal(q.At.Add(reach)) {
		t.Errorf("an answer after the latest count moved it to %v, want it kept at %v", got, q.At.Add(reach))
	}
	if next := reserve(t, one, s); !next.At.After(slow.Add(p.Window)) {
		t.Errorf("after an answer past its latest count the next slot is %v, want after the answer + W (%v)", next.At, slow.Add(p.Window))
	}

	p.Limit = 3
	three := newThrottle(t, srv.Client(), p)
	s = seller("settle-3")
	a, b := reserve(t, three, s), reserve(t, three, s)
	if err := three.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := three.Settle(ctx, b, b.At.Add(time.Second)); err != nil { // given back: stays out
		t.Fatal(err)
	}
	log := entries(s)
	if _, ok := log[b.ID]; ok || len(log) != 1 || !log[a.ID].Equal(a.At.Add(reach)) {
		t.Errorf("the log is %v: a settle brought back a slot given back, or moved another", log)
	}

	fixed := newThrottle(t, srv.Client(), Policy{Kind: Fixed, Limit: 3, Window: 20 * time.Second, MaxWait: time.Minute})
	fs := seller("settle-fixed")
	f1 := reserve(t, fixed, fs)
	if err := fixed.Settle(ctx, f1, f1.At.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	score, err := srv.Client().ZScore(ctx, fixed.keys(fs).log, f1.ID).Result()
	if err != nil || time.UnixMicro(int64(score)).After(f1.At.Add(time.Millisecond)) {
		t.Errorf("a fixed window's slot moved to %v (%v), want it left at %v", time.UnixMicro(int64(score)), err, f1.At)
	}
}
