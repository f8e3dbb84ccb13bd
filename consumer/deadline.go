package consumer

import (
	"context"
	"sync"
	"time"
)

// sharedDeadline hands out a context that ends within d, shared by every
// caller of the same stretch of d/16: each gets at least 15/16 of d, and a
// registered row's report to the circuit breaker costs no timer of its own.
// Never for a deadline that must be exact (a slot's check ends at its slot).
type sharedDeadline struct {
	d time.Duration

	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc // the current context's, kept only so it is not lost: it ends on its own
	ends   time.Time
}

func newSharedDeadline(d time.Duration) *sharedDeadline { return &sharedDeadline{d: d} }

// get answers a context that ends within d from now, no sooner than 15/16
// of d. It is never cancelled early: callers do not cancel it.
func (s *sharedDeadline) get() context.Context {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil || s.ends.Sub(now) < s.d-s.d/16 {
		s.ends = now.Add(s.d)
		s.ctx, s.cancel = context.WithDeadline(context.Background(), s.ends)
	}
	return s.ctx
}
