package consumer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
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
}

// reportTimeout bounds one Report: the call is made by then, and its outcome
// matters most when it was the probe (an unreported probe holds the fleet
// for the probe's lease).
const reportTimeout = 2 * time.Second

// registerCircuit exports the breaker's metrics (bulkreg_circuit_*) when it
// has them (*circuit.Breaker does).
func registerCircuit(reg prometheus.Registerer, b Breaker) error {
	col, ok := b.(interface{ Collector() prometheus.Collector })
	if !ok {
		return nil
	}
	return reg.Register(col.Collector())
}

// circuitOpen reports whether this process last learned that the circuit is
// not closed. Without a breaker it never is.
func (c *Consumer) circuitOpen() bool {
	if c.deps.Circuit == nil {
		return false
	}
	st, _, known := c.deps.Circuit.Local()
	return known && st != circuit.Closed
}

// circuitDown handles an error of the breaker: Redis not answering stops
// registry calls (the Redis gate), as it does for the throttle.
func (c *Consumer) circuitDown(err error) {
	if errors.Is(err, circuit.ErrUnavailable) || unavailable(err) {
		c.redis.down(err)
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
	if b == nil {
		return true
	}
	retry := c.redisBackOff()
	for {
		if !c.redis.wait(ctx) {
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
		if st, _, known := b.Local(); !known || st == circuit.Closed || c.sellersHolding() == 0 {
			return true
		}
		select {
		case <-news:
		case <-c.rowsIdle():
		case <-ctx.Done():
			return false
		}
	}
}

// probeTurn lets one row of this process at a time go for the probe while
// the circuit is open, so a due probe costs one throttle slot per consumer,
// not one per waiting row.
type probeTurn struct {
	mu   sync.Mutex
	held bool
	free chan struct{} // closed when the turn is given back
}

func newProbeTurn() *probeTurn { return &probeTurn{free: make(chan struct{})} }

// take takes the turn; when another row holds it, it answers a channel
// closed when that row gives it back.
func (t *probeTurn) take() (bool, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held {
		return false, t.free
	}
	t.held = true
	return true, nil
}

func (t *probeTurn) give() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held = false
	close(t.free)
	t.free = make(chan struct{})
}

// rowCircuit is one row's side of the circuit breaker, from its first
// attempt to its outcome. With no breaker every step lets the row through.
type rowCircuit struct {
	c   *Consumer
	r   *row
	log *slog.Logger

	turn    bool             // the row holds the process's probe turn
	d       circuit.Decision // Allow's decision for the call about to be made
	allowed bool             // d allowed a call not yet reported
	// refused: the last attempt made no call because the circuit refused it
	// or could not be asked; it costs the row nothing.
	refused bool
	// failed: the last Allow failed (Redis): back off before the next one.
	failed bool
	retry  backoff.BackOff
	// outage: the last call's transient failure belongs to an outage (the
	// circuit was open after it, or it was the probe), or the API refused
	// bulkreg itself and the circuit holds every row: not the row's fault.
	outage bool
	// own: the API refused bulkreg for this seller alone (others were
	// answered): the circuit stayed closed, and it is the seller's failure.
	own bool
	// sick: the row's failed probe was its seller's own (circuit.Status.Own):
	// meeting the open circuit afterwards does not make it the outage's.
	sick bool
}

// Not inlined: on the heap it keeps the sleeping row's stack small (process).
//
//go:noinline
func (c *Consumer) newRowCircuit(r *row, log *slog.Logger) *rowCircuit {
	return &rowCircuit{c: c, r: r, log: log}
}

// wait blocks, holding no slot, while the circuit is open, and lets the row
// go on when the circuit is closed or when a probe is due and this row has
// the process's turn to ask for it. met reports that the row met an outage
// (the circuit was not closed): its earlier failures were the outage's, so
// its retry budget starts afresh. ok is false when the row must be given
// back (rebalance, shutdown).
func (rc *rowCircuit) wait() (met, ok bool) {
	b := rc.c.deps.Circuit
	if b == nil {
		return false, true
	}
	rc.done()
	ctx := rc.r.ctx()
	if rc.failed {
		rc.failed = false
		if !sleep(ctx, rc.retry.NextBackOff()) {
			return met, false
		}
	}
	retry := rc.c.redisBackOff()
	for {
		if !rc.c.redis.wait(ctx) {
			return met, false
		}
		if st, _, known := b.Local(); known && st != circuit.Closed {
			met = true
			rc.log.Debug("the row waits until the circuit closes or a probe is due", "state", st)
		}
		if err := b.WaitReady(ctx); err != nil {
			if ctx.Err() != nil {
				return met, false
			}
			rc.c.circuitDown(err)
			if !sleep(ctx, retry.NextBackOff()) {
				return met, false
			}
			continue
		}
		news := b.Changed()
		st, _, known := b.Local()
		if !known || st == circuit.Closed {
			return met, true
		}
		met = true
		got, free := rc.c.turn.take()
		if got {
			rc.turn = true
			rc.log.Debug("the row takes this process's turn to probe the registration API", "state", st)
			return met, true
		}
		rc.log.Debug("the row waits while another row of this process holds the turn to probe", "state", st)
		select {
		case <-free:
		case <-news:
		case <-ctx.Done():
			return met, false
		}
	}
}

// done gives the probe turn back, if the row holds it.
func (rc *rowCircuit) done() {
	if rc.turn {
		rc.turn = false
		rc.c.turn.give()
	}
}

// allow asks the circuit right before the call. It reports false when no
// call may be made: the circuit refused (open, or another consumer's probe
// is out) or could not be asked (Redis); the row then gives its slot back
// and spends no attempt.
func (rc *rowCircuit) allow(ctx context.Context) bool {
	rc.refused, rc.outage, rc.own, rc.allowed = false, false, false, false
	b := rc.c.deps.Circuit
	if b == nil {
		return true
	}
	d, err := b.Allow(ctx)
	if err != nil {
		rc.refused = true
		if ctx.Err() == nil { // not our own deadline or cancellation
			rc.c.circuitDown(err)
			rc.failed = true
			if rc.retry == nil {
				rc.retry = rc.c.redisBackOff()
			}
		}
		rc.log.Debug("could not ask the circuit breaker before the call; no call", "err", err)
		return false
	}
	if rc.retry != nil {
		rc.retry.Reset()
	}
	if !d.Allowed {
		rc.refused = true
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
	rc.sick = err == nil && st.Own
	rc.outage = (rc.d.Probe || (err == nil && st.State != circuit.Closed)) && !rc.sick
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

// refusedBulkreg acts on an answer that refused bulkreg itself, not the row
// (registryclient.Misconfigured: a rotated credential, a wrong URL). Every
// row would get the same answer, so it is nobody's failure: the attempt is
// not counted, the row stays unfinished (its offset is not committed past)
// and goes back to wait while the circuit, opened by the report, holds the
// fleet until a probe gets an answer. Without a circuit that holds it (none
// configured, or its Redis did not take the report) the row asks again
// after a growing wait, still spending nothing. When the circuit judged the
// refusal the seller's own (other sellers are answered), the row spends its
// retry budget as for a transient failure and is dead-lettered with the
// class misconfigured, which redrive sends again.
func (c *Consumer) refusedBulkreg(r *row, t *tries, res *registryclient.Result, cb *rowCircuit, sku *skuClaim, log *slog.Logger) (wait time.Duration, again bool) {
	if cb.own {
		if t.firstFailure.IsZero() {
			t.firstFailure = time.Now()
		}
		if t.retry == nil {
			t.retry = c.deps.Retry.NewBackOff()
		}
		if wait = t.retry.NextBackOff(); wait == backoff.Stop {
			log.Error("the registration API refuses this seller's calls while it answers others: sending the row to the dead-letter topic", "attempts", t.attempts, "status", res.Status, "err", res.Err)
			c.deadLetterHeld(r, deadLetterOf(r, *res, t.attempts, t.firstFailure), sku, log)
			return 0, false
		}
		log.Warn("the registration API refused this seller's call while it answers others, retrying", "attempt", t.attempts, "in", wait, "status", res.Status, "err", res.Err)
		return wait, true
	}
	t.attempts--
	if cb.outage {
		log.Info("the registration API refused bulkreg itself; the row waits for the circuit, no attempt spent", "status", res.Status, "err", res.Err)
		return 0, true
	}
	if t.refused == nil {
		t.refused = c.redisBackOff()
	}
	wait = t.refused.NextBackOff()
	log.Error("the registration API refused bulkreg itself, not the row: no attempt spent, asking again later; fix the registry credentials or URL",
		"status", res.Status, "in", wait, "err", res.Err)
	return wait, true
}

// sellersHolding is the number of sellers with rows in this process.
func (c *Consumer) sellersHolding() int {
	if c.runners != nil {
		return c.runners.count()
	}
	return c.lanes.sellers()
}

// rowsIdle is closed once this process holds no row.
func (c *Consumer) rowsIdle() <-chan struct{} {
	if c.runners != nil {
		return c.runners.idle()
	}
	return c.lanes.idle()
}
