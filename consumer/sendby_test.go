package consumer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/throttle"
)

// pausingBreaker is the fleet's circuit breaker, but the process stops for
// pause inside the first Allow, right before its call: a consumer paused
// (SIGSTOP, a stalled VM) between its slot and its send.
type pausingBreaker struct {
	*circuit.Breaker
	pause  time.Duration
	paused atomic.Bool
}

func (p *pausingBreaker) Allow(ctx context.Context) (circuit.Decision, error) {
	if p.paused.CompareAndSwap(false, true) {
		time.Sleep(p.pause)
	}
	return p.Breaker.Allow(ctx)
}

// TestAPausedCallerDoesNotSendPastItsSendBy: the throttle's log holds each
// call's latest count on the assumption that it is sent within SendWithin
// of its slot (20 ms here); the consumer itself would allow 200 ms. The
// consumer is paused 150 ms right before its first call: it must look at
// the clock again before sending, find the reservation's SendBy passed, and
// not send; the row calls under a new slot, within that slot's bound. The
// API (the sandbox) saw one call, sent between the second slot and its
// SendBy. A consumer that judged only its own MaxLateness would send the
// call 150 ms after its slot, later than the log's latest count allows.
func TestAPausedCallerDoesNotSendPastItsSendBy(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 1, limit: 10, window: time.Second, margin: 100 * time.Millisecond})
	var rt *recordingThrottle
	s.startConsumer(func(cfg *Config, d *Deps) {
		cfg.MaxLateness = 200 * time.Millisecond
		p := cfg.ThrottlePolicy(s.limit, s.window, s.margin)
		p.SendWithin = 20 * time.Millisecond
		th, err := throttle.New(s.rdb, p)
		if err != nil {
			t.Fatal(err)
		}
		rt = &recordingThrottle{Throttle: th, released: map[string]bool{}}
		d.Throttle = rt
		d.Circuit = &pausingBreaker{Breaker: s.breaker(), pause: 150 * time.Millisecond}
	})
	s.waitGroupStable("registrar", 1)
	s.publish("up-1", "seller-a", 1)
	s.waitProducts("seller-a", 1, 10*time.Second)
	calls := s.sandbox.Calls()
	rt.mu.Lock()
	granted := append([]throttle.Reservation(nil), rt.granted...)
	rt.mu.Unlock()
	if len(calls) != 1 || len(granted) < 2 {
		t.Fatalf("%d calls at the API under %d slots, want 1 call, made under a slot taken after the paused one", len(calls), len(granted))
	}
	sent := calls[0].Received // on this machine's clock, which is Redis's
	if sent.After(granted[0].SendBy) && sent.Before(granted[1].At) {
		t.Errorf("the call reached the API at %v, %v after the paused slot's SendBy: the paused consumer sent it", sent, sent.Sub(granted[0].SendBy))
	}
	last := granted[len(granted)-1]
	if sent.Before(last.At) || sent.After(last.SendBy.Add(50*time.Millisecond)) {
		t.Errorf("the call reached the API at %v, want between its slot %v and its SendBy %v (+50 ms for the network)", sent, last.At, last.SendBy)
	}
}
