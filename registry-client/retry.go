package registryclient

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// RetryPolicy paces retries of Transient failures. It is a policy, not a
// loop, because the consumer must take a new throttle slot before every
// attempt; Retry is the loop for callers that need no slot.
type RetryPolicy struct {
	InitialInterval time.Duration // first wait
	MaxInterval     time.Duration // cap on one wait
	MaxElapsed      time.Duration // give up once this much time has passed (0: no cap)
	Multiplier      float64       // growth per attempt
	Jitter          float64       // randomization factor in [0,1): each wait is ±Jitter of its value
	MaxAttempts     int           // attempts in all, the first included (0: no cap)
}

// DefaultRetryPolicy suits the real API: about 8 attempts over up to five
// minutes before a row is dead-lettered.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		InitialInterval: 500 * time.Millisecond,
		MaxInterval:     30 * time.Second,
		MaxElapsed:      5 * time.Minute,
		Multiplier:      2,
		Jitter:          0.5,
		MaxAttempts:     8,
	}
}

// Validate names the first setting that cannot work.
func (p RetryPolicy) Validate() error {
	switch {
	case p.InitialInterval <= 0:
		return fmt.Errorf("retry initial interval must be positive, got %v", p.InitialInterval)
	case p.MaxInterval < p.InitialInterval:
		return fmt.Errorf("retry max interval %v is below the initial interval %v", p.MaxInterval, p.InitialInterval)
	case p.MaxElapsed < 0:
		return fmt.Errorf("retry max elapsed %v is negative", p.MaxElapsed)
	case p.Multiplier < 1:
		return fmt.Errorf("retry multiplier must be at least 1, got %v", p.Multiplier)
	case p.Jitter < 0 || p.Jitter >= 1:
		return fmt.Errorf("retry jitter must be in [0, 1), got %v", p.Jitter)
	case p.MaxAttempts < 0:
		return fmt.Errorf("retry max attempts %d is negative", p.MaxAttempts)
	}
	return nil
}

// NewBackOff starts the waits of one row. NextBackOff answers backoff.Stop
// once MaxAttempts attempts were made or MaxElapsed has passed.
func (p RetryPolicy) NewBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = p.InitialInterval
	b.MaxInterval = p.MaxInterval
	b.MaxElapsedTime = p.MaxElapsed
	b.Multiplier = p.Multiplier
	b.RandomizationFactor = p.Jitter
	b.Reset()
	if p.MaxAttempts > 0 {
		return backoff.WithMaxRetries(b, uint64(p.MaxAttempts-1))
	}
	return b
}

// Retry calls attempt until it answers anything but Transient, the policy
// gives up, or ctx ends. It answers the last result and the attempts made.
func Retry(ctx context.Context, p RetryPolicy, attempt func(ctx context.Context) Result) (Result, int) {
	b := p.NewBackOff()
	for n := 1; ; n++ {
		res := attempt(ctx)
		if res.Class != Transient {
			return res, n
		}
		wait := b.NextBackOff()
		if wait == backoff.Stop {
			return res, n
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, n
		case <-t.C:
		}
	}
}
