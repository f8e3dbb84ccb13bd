package consumer

import (
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testwait"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
)

// TestACallWithoutAnAnswerHoldsItsSlotPastTheTimeout (issue 26, sim seeds
// 404 and 515): the API takes longer to handle a call than the client
// waits (a latency spike past the registry timeout). The client gives up,
// but the API, which does not see it leave, still counts the call when it
// handles it, after the timeout. Limit 4 per 1 s, margin 100 ms, timeout
// 600 ms, the first four calls handled (and counted) 650 ms after they
// arrive, the next four answered at once. Before, a timed-out call's slot
// was settled at the moment the client gave up (less the margin), so the
// next window's four calls were made about 1 s after the timeouts, while
// the four late counts were still inside the API's window: a 429. Now an
// unanswered call's slot covers its count up to the call timeout after it
// reached the API (send + timeout + margin), and the next window starts
// after that.
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
	s.startConsumer(func(cfg *Config, d *Deps) {
		rc, err := registryclient.New(registryclient.Options{BaseURL: s.api.URL, Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		d.Registry = rc
		cfg.CallTimeout = timeout
		cfg.SellerConcurrency = 2 * limit // both windows' rows at once
		// The timed-out rows retry after the next window's rows have
		// called, so those are the 201s that meet the late counts.
		r := s.retryPolicy()
		r.InitialInterval, r.MaxInterval, r.Jitter = 2*time.Second, 2*time.Second, 0
		d.Retry = r
	})
	s.waitGroupStable("registrar", 1)
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
