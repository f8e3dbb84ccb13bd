package consumer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkreg/bulkreg/circuit"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
)

// Breaker is the fleet-wide circuit breaker in front of the registration API
// (*circuit.Breaker), used as its package documentation prescribes: WaitReady
// before reading and before each slot, Allow right before each call, Report
// after it.
type Breaker interface {
	WaitReady(ctx context.Context) error
	Allow(ctx context.Context) (circuit.Decision, error)
	Report(ctx context.Context, d circuit.Decision, c circuit.Call) (circuit.Status, error)
	// Local is what this process last learned of the circuit, without
	// asking Redis; Changed is closed the next time it learns something.
	Local() (state circuit.State, openFor time.Duration, known bool)
	Changed() <-chan struct{}
	// Collector exports the breaker's metrics (bulkreg_circuit_*).
	Collector() prometheus.Collector
}

// reportTimeout bounds one Report: the call is made by then, and its outcome
// matters most when it was the probe (an unreported probe holds the fleet
// for the probe's lease).
const reportTimeout = 2 * time.Second

// circuitDown handles an error of the breaker: Redis not answering stops
// registry calls (the Redis gate), as it does for the throttle.
func (c *Consumer) circuitDown(err error) {
	if errors.Is(err, circuit.ErrUnavailable) || unavailable(err) {
		c.redis.Down(err)
	} else {
		c.log.Warn("the circuit breaker failed; no registry call until it answers", "err", err)
	}
}

// readyToRead is the partition readers' check before each fetch, next to
// the in-flight caps: reading pauses while the circuit is open, so rows
// wait in Kafka. When a probe is due, a consumer that holds rows lets one
// of them ask for it and reads no more until the circuit closes; a consumer
// that holds none reads, so the fleet always has a row to probe with (after
// a rebalance every row may be back in Kafka), also when its last row ends
// while the circuit is still open (dead-lettered: a sick seller's rows,
// whose failed probes do not change the circuit). It reports false when ctx
// ended.
func (c *Consumer) readyToRead(ctx context.Context) bool {
	b := c.deps.Circuit
	retry := c.redisBackOff()
	for {
		if !c.redis.Wait(ctx) {
			return false
		}
		if err := b.WaitReady(ctx); err != nil {
			if ctx.Err() != nil {
				return false
			}
			c.circuitDown(err)
			if !sleep(ctx, retry.NextBackOff()) {
				return false
			}
			continue
		}
		news := b.Changed()
		if st, _, known := b.Local(); !known || st == circuit.Closed || c.runners.count() == 0 {
			return true
		}
		select {
		case <-news:
		case <-c.runners.idle():
		case <-ctx.Done():
			return false
		}
	}
}

// rowCircuit is one row's side of the circuit breaker for the call of its
// batch.
type rowCircuit struct {
	c   *Consumer
	r   *row
	log *slog.Logger

	d       circuit.Decision // Allow's decision for the call about to be made
	allowed bool             // d allowed a call not yet reported
	// outage: the call's transient failure belongs to an outage (the
	// circuit was open after it, or it was the probe), or the API refused
	// bulkreg itself and the circuit holds every row: not the seller's.
	outage bool
	// own: the API refused bulkreg for this seller alone (others were
	// answered): the circuit stayed closed, and it is the seller's failure.
	own bool
}

// allow asks the circuit right before the call. It reports false when no
// call may be made: the circuit refused (open, or another consumer's probe
// is out) or could not be asked (Redis); the row then gives its slot back
// and spends no attempt.
func (rc *rowCircuit) allow(ctx context.Context) bool {
	rc.outage, rc.own, rc.allowed = false, false, false
	d, err := rc.c.deps.Circuit.Allow(ctx)
	if err != nil {
		if ctx.Err() == nil { // not our own deadline or cancellation
			rc.c.circuitDown(err)
		}
		rc.log.Debug("could not ask the circuit breaker before the call; no call", "err", err)
		return false
	}
	if !d.Allowed {
		rc.log.Debug("the circuit breaker refused the call: the registration API is not answering", "state", d.State, "retry_in", d.Wait)
		return false
	}
	if d.Probe {
		rc.log.Info("probing the registration API for the fleet", "open_for", d.OpenFor)
	}
	rc.d, rc.allowed = d, true
	return true
}

// abandon reports an allowed call that was not made (it would have been
// late, or Redis went down meanwhile). Only a probe needs it: the next
// caller gets the probe at once instead of after its lease.
func (rc *rowCircuit) abandon() {
	if !rc.allowed {
		return
	}
	rc.allowed = false
	if !rc.d.Probe {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	defer cancel()
	if _, err := rc.c.deps.Circuit.Report(ctx, rc.d, circuit.Call{Outcome: circuit.Abandoned}); err != nil {
		rc.log.Warn("could not give the unused probe back to the circuit breaker; it passes on after its lease", "err", err)
	}
}

// report tells the circuit what the call told about the API, and judges
// whether a transient failure was the row's or the outage's (outage).
// cancelled: the row's own context ended the call (drain timeout).
func (rc *rowCircuit) report(res registryclient.Result, cancelled bool) {
	if !rc.allowed {
		return
	}
	rc.allowed = false
	m := rc.r.m
	o := circuit.OutcomeOf(res.Class)
	if cancelled {
		o = circuit.Abandoned
	}
	st, err := rc.c.deps.Circuit.Report(rc.c.reports.get(), rc.d, circuit.Call{Seller: m.SellerID, Row: m.IdempotencyKey, Outcome: o})
	if err != nil {
		rc.c.circuitDown(err)
		rc.log.Warn("could not report the call to the circuit breaker", "outcome", o, "probe", rc.d.Probe, "err", err)
	}
	if o != circuit.Failure && o != circuit.Refused {
		if rc.d.Probe && o != circuit.Abandoned {
			rc.log.Info("the registration API answers again: the circuit is closed", "open_for", rc.d.OpenFor)
		}
		return
	}
	// A failed probe of a seller the circuit knows to be sick (its calls fail
	// while others' are answered) is that seller's failure (st.Own).
	sick := err == nil && st.Own
	rc.outage = (rc.d.Probe || (err == nil && st.State != circuit.Closed)) && !sick
	rc.own = o == circuit.Refused && err == nil && !rc.outage
	switch {
	case err != nil || !st.Changed || st.State != circuit.Open || rc.d.Probe:
	case o == circuit.Refused:
		rc.log.Error("the registration API refused bulkreg itself, not the row: the circuit is held open, no registry calls until a probe gets an answer; fix the registry credentials or URL",
			"status", res.Status, "err", res.Err)
	default:
		rc.log.Warn("transient failures across rows: the circuit is open, no registry calls until a probe succeeds")
	}
}

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
