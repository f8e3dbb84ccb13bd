package consumer

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// lazyBackOff is a backoff.BackOff made only when an interval is first
// asked for. A row takes a Redis backoff for its claim, its slot, its place
// at the circuit and its writes, and nearly always succeeds at the first
// attempt: made eagerly they would be about 400 bytes a row of garbage
// (pprof -alloc_space of a bench many-sellers consumer).
type lazyBackOff struct {
	c *Consumer // the backoff is c.newRedisBackOff(): a func field would cost a second allocation, the method value
	b backoff.BackOff
}

func (l *lazyBackOff) NextBackOff() time.Duration {
	if l.b == nil {
		l.b = l.c.newRedisBackOff()
	}
	return l.b.NextBackOff()
}

// Reset of a backoff never asked is a no-op: the one made later starts
// from its initial interval, as a reset one would.
func (l *lazyBackOff) Reset() {
	if l.b != nil {
		l.b.Reset()
	}
}
