package consumer

import (
	"context"
	"sync"
	"time"
)

// warmth remembers how many calls ran at once lately, so the pause between
// a seller's windows can keep that many connections open. A call that must
// connect first reaches the API later than its slot by the connect time (a
// lost SYN costs a second), which the lateness check cannot see; a server or
// proxy that closes connections idle for a minute (a common default) would
// close every one of them between two windows of 60 s.
type warmth struct {
	mu     sync.Mutex
	peak   int // most calls at once since the last tick
	recent int // most calls at once since rows were last all finished
}

// calling records that n calls are in progress, this one included.
func (w *warmth) calling(n int) {
	w.mu.Lock()
	w.peak = max(w.peak, n)
	w.mu.Unlock()
}

// tick ends one KeepWarm period and answers how many connections to warm:
// none when calls ran in the period (they kept their connections warm
// themselves) or when no row is waiting for a call (idle connections may go).
func (w *warmth) tick(rowsInFlight bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	peak := w.peak
	w.peak = 0
	if !rowsInFlight {
		w.recent = 0
		return 0
	}
	w.recent = max(w.recent, peak)
	if peak > 0 {
		return 0
	}
	return w.recent
}

// keepWarm warms connections every KeepWarm while calls pause, until ctx
// ends. The warming requests take free call tokens, never more: together
// with the calls they stay within MaxConcurrentCalls, so within the
// client's connections.
func (c *Consumer) keepWarm(ctx context.Context) {
	t := time.NewTicker(c.cfg.KeepWarm)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := c.warm.tick(c.group.RowsInFlight() > 0)
		taken := 0
	take:
		for taken < n {
			select {
			case c.calls <- struct{}{}:
				taken++
			default:
				break take
			}
		}
		if taken == 0 {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, c.cfg.KeepWarm)
		answered := c.deps.Registry.Warm(wctx, taken)
		cancel()
		for range taken {
			<-c.calls
		}
		c.log.Debug("kept connections to the registration API warm", "wanted", n, "answered", answered)
	}
}
