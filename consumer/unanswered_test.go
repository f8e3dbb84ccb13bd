package consumer

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testwait"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
)

// TestACallWithoutAnAnswerHoldsItsSlotPastTheTimeout: the API takes longer
// to handle a call than the client waits (a latency spike past the registry
// timeout). The client gives up, but the API, which does not see it leave,
// still counts the call when it handles it, after the timeout. Limit 4 per
// 1 s, margin 100 ms, timeout 600 ms, the first four calls handled (and
// counted) 650 ms after they arrive, the next four answered at once. The
// log holds every call's latest count (its slot + the lateness + two
// timeouts) from its reservation on, an unanswered call is not settled
// earlier, and the next window starts a window after that. Were a timed-out
// call's slot settled at the moment the client gave up (less the margin),
// the next window's four calls would be made about 1 s after the timeouts,
// while the four late counts were still inside the API's window: a 429.
func TestACallWithoutAnAnswerHoldsItsSlotPastTheTimeout(t *testing.T) {
	const (
		limit   = 4
		timeout = 600 * time.Millisecond
		late    = timeout + 50*time.Millisecond // within the margin past the timeout
	)
	s := newStack(t, stackOptions{partitions: 1, limit: limit, window: time.Second, margin: 100 * time.Millisecond})
	if err := s.sandbox.SetFaults(0, 0, 0, late, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	s.startTwoWindows(s.api.URL, timeout, limit, 2*time.Second)
	s.publish("up-1", "seller-a", 2*limit)
	testwait.For(t, 10*time.Second, "the first window's calls at the sandbox", func() bool { return len(s.sandbox.Calls()) >= limit })
	if err := s.sandbox.SetFaults(0, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	s.waitProducts("seller-a", 2*limit, 20*time.Second)
	// Every row's last call answered: the timed-out rows' retries (replays
	// of calls the API counted) come 2 s after, and a 429 among them shows.
	testwait.For(t, 10*time.Second, "the timed-out rows' retries at the sandbox", func() bool { return len(s.sandbox.Calls()) >= 3*limit })

	// The scenario happened: the first calls were counted after the client
	// gave up on them.
	lateCounts := 0
	for _, c := range s.sandbox.Calls() {
		if c.Status == 201 && c.Handled.Sub(c.Received) > timeout {
			lateCounts++
		}
	}
	if lateCounts != limit {
		t.Fatalf("%d calls were counted after the client's %v timeout, want %d (the test's setup did not happen)", lateCounts, timeout, limit)
	}
	s.checkCompliant("seller-a", 2*limit)
}

// TestACallCountedAWindowLateHoldsTheNextWindow: the API counts a window's
// calls a little more than a window after they arrive (a latency spike of
// 1.15 s, limit 4 per 1 s, margin 100 ms), and answers them then. The next
// window's slots come first: were they placed before those answers, its
// calls would start while the first window's had no answer, the API would
// count both windows' calls within one second, and the settle that would
// move the next window would come after it had called (429s). The next
// window's slots are placed after the latest counts of the first window's
// calls, which the log holds until their answers come.
func TestACallCountedAWindowLateHoldsTheNextWindow(t *testing.T) {
	const (
		limit = 4
		late  = 1150 * time.Millisecond
	)
	s := newStack(t, stackOptions{partitions: 1, limit: limit, window: time.Second, margin: 100 * time.Millisecond})
	// The first window's calls reach the API late (it counts them when
	// they reach it); every later call at once.
	var n atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= limit {
			time.Sleep(late)
		}
		s.api.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(api.Close)
	s.startTwoWindows(api.URL, 3*time.Second, limit, 0)
	s.publish("up-1", "seller-a", 2*limit)
	s.waitProducts("seller-a", 2*limit, 20*time.Second)
	s.checkCompliant("seller-a", 2*limit)
}

// TestACallCountedPastItsSettleCapHoldsTheSeller: the client gives up on
// the first window's calls after 700 ms, and the API counts them 1.25 s
// after they arrive: more than W + margin (1.1 s) after their slots. Were a
// settle capped at moving a slot no further than that, the next window's
// calls would come a window after it, 2.2 s, while the late counts at
// 1.25 s were still in the API's window: 429s. The log holds the latest instant
// such a call may be counted (two timeouts after it started) from its
// reservation on, and the next window calls a window after it.
func TestACallCountedPastItsSettleCapHoldsTheSeller(t *testing.T) {
	const (
		limit   = 4
		timeout = 700 * time.Millisecond
		late    = 1250 * time.Millisecond
	)
	s := newStack(t, stackOptions{partitions: 1, limit: limit, window: time.Second, margin: 100 * time.Millisecond})
	var n, lateCounts atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > limit {
			s.api.Config.Handler.ServeHTTP(w, r)
			return
		}
		time.Sleep(late) // the API sees no client leave: it counts the call now
		rec := httptest.NewRecorder()
		s.api.Config.Handler.ServeHTTP(rec, r)
		if rec.Code == http.StatusCreated {
			lateCounts.Add(1)
		}
	}))
	t.Cleanup(api.Close)
	s.startTwoWindows(api.URL, timeout, limit, 3*time.Second)
	s.publish("up-1", "seller-a", 2*limit)
	s.waitProducts("seller-a", 2*limit, 20*time.Second)
	if got := lateCounts.Load(); got != limit {
		t.Fatalf("%d calls were counted %v after they were sent, past the client's %v timeout, want %d (the test's setup did not happen)", got, late, timeout, limit)
	}
	s.checkCompliant("seller-a", 2*limit)
}

// startTwoWindows starts one consumer calling the API at url with the
// client timeout, both windows' rows of a seller at once (limit a window);
// retryAfter > 0 has timed-out rows retry only after that, once the next
// window's rows have called, so those are the 201s that meet late counts.
func (s *stack) startTwoWindows(url string, timeout time.Duration, limit int, retryAfter time.Duration) {
	t := s.t
	t.Helper()
	s.startConsumer(func(cfg *Config, d *Deps) {
		rc, err := registryclient.New(registryclient.Options{BaseURL: url, Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		d.Registry = rc
		cfg.CallTimeout = timeout
		cfg.SellerConcurrency = 2 * limit
		if retryAfter > 0 {
			r := s.retryPolicy()
			r.InitialInterval, r.MaxInterval, r.Jitter = retryAfter, retryAfter, 0
			d.Retry = r
		}
	})
	s.waitGroupStable("registrar", 1)
}
