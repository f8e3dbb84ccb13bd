// Package circuit is a fleet-wide circuit breaker in front of the
// registration API, shared by every consumer through Redis and failing closed
// like the throttle.
//
// Each consumer asks Allow right before a call and Reports the call's outcome
// after it. While the circuit is closed every call is counted in a sliding
// window (Settings.Window, a ring of Settings.Buckets buckets). A transient
// failure (5xx, timeout, connection error) opens the circuit when the window
// says the API itself is down rather than a row being broken:
//
//   - at least MinCalls calls in the window, and
//   - transient failures are at least FailureRatio of them, and
//   - the failures come from at least MinFailedRows distinct rows (one poison
//     row can never open it), and
//   - from at least MinFailedSellers distinct sellers, never fewer than two,
//     and
//   - they are spread: left out the seller that failed most, the other
//     sellers still failed at least twice and at least FailureRatio of their
//     calls (one seller's broken rows cannot open it while other sellers'
//     calls succeed).
//
// It opens too when at least MinFailedSellers sellers' last two calls or
// more failed (the last within the window), from at least MinFailedRows rows,
// with at least MinCalls calls in the window, and no other seller was
// answered since the newest of those streaks began (two buckets or more
// after it): the answers from before the failures say nothing of the API
// since, and a consumer holds a seller after its first failures, so an
// outage that begins between the fleet's bursts leaves few failures to
// outweigh them.
//
// A failure of one seller (its rows alone keep failing) is that seller's
// problem, never the fleet's: its rows spend their own retry budget and are
// dead-lettered, while other sellers flow. That holds when the seller is the
// only one calling too: one seller's failures cannot tell a fault of its own
// (its account, one product) from an outage of the API, so they never open
// the circuit. If the API is in fact down, that seller's rows back off on
// their own (the consumer's RetryPolicy: by default 8 attempts over 30–90 s,
// each one a throttle slot, so at most the seller's limit per window) and go
// to the dead-letter topic as transient, which `producer redrive` sends
// again; the circuit opens as soon as a second seller's calls fail too.
//
// Several sellers' failures are theirs too when the API is shown up
// meanwhile (two sellers failing for good must not hold a third, healthy
// one): the circuit does not open while a seller in the window is wholly
// healthy (answered on enough calls, one of them in the newer half of the
// window and in a later bucket than the window's first failure, since
// answers from before the failures began prove nothing of the API since,
// and no transient failure; enough is the fewest calls that all
// succeed with a chance of 5 % or less at FailureRatio: 5 at 0.5), and the
// sellers failing then are remembered as sick. So are the sellers whose
// failures opened it when its probe, a row of another seller, is answered. A
// sick seller's failures do not open it until another seller fails with them
// (as in an outage); an answered call of its own cures it, and the circuit's
// opening forgets them all.
//
// A call the API refused for bulkreg itself (Refused: 401, 403, a 404 off
// the route, 405, 3xx) opens the circuit at once, with Status.Reason
// Misconfigured: every row would get the same answer, so none should spend
// an attempt on it, and nothing but a probe calls until an operator fixes
// the credential or the URL (the probe's first answer closes it). Unless
// the window shows the refusal is one seller's: another seller was answered
// in it and no other seller refused (Outcome Refused says more).
//
// Open: no call is allowed; Decision.RetryAt says when to ask again. After
// ProbeMin the first caller to ask gets the probe (the circuit turns
// half-open): exactly one call fleet-wide tests the API, holding the probe for
// ProbeLease so a prober that crashes does not wedge the circuit (after the
// lease the next caller takes the probe over). Everybody else is refused and
// asks again after at most ProbeMin. Any answer to the probe (2xx, or a
// refusal of the row such as 4xx or 429: the API is answering) closes the
// circuit and clears the window; a transient failure opens it again and
// multiplies the probe interval by ProbeMultiplier, up to ProbeMax.
//
// Keys share the hash tag {circuit} (or {circuit:<Name>}), so every script
// runs on one Redis Cluster slot:
//
//	bulkreg:{circuit}:state   HASH  state, opened_at, next_probe, probe lease, probe interval, counters
//	bulkreg:{circuit}:window  HASH  the ring of buckets (calls, failures, capped distinct sellers and rows) and its shape (bucket width, count)
//	bulkreg:{circuit}:failing HASH  per seller whose last reported call failed: its failures in a row since its last answered call (for the sellers' pages, Seller)
//
// Failing closed: when Redis does not answer, Allow refuses and its error
// wraps ErrUnavailable. Losing Redis's data closes the circuit (an empty state
// is closed): calls resume at the throttle's pace and, if the API is still
// down, the window opens the circuit again within MinCalls calls.
//
// # Metrics
//
// Collector exports, for the consumer to register:
//
//	bulkreg_circuit_state          gauge    0 closed, 1 open, 2 half-open (the fleet's state, read from Redis at each scrape)
//	bulkreg_circuit_open_seconds   gauge    how long the circuit has been open (half-open included); 0 when closed
//	bulkreg_circuit_refused_total  counter  calls this process did not make because the circuit refused them
//	bulkreg_circuit_probes_total   counter  probe calls this process was given
//	bulkreg_circuit_allowed_locally_total  counter  calls allowed without asking Redis (Settings.TrustClosed)
//	bulkreg_circuit_reports_batched_total  counter  answered calls counted in a batch instead of a report of their own
//	bulkreg_circuit_misconfigured  gauge    1 while the circuit is held open because the API refused bulkreg itself
//
// Every consumer exports the same state and open seconds; alert on their max.
//
// # In a consumer
//
// One Breaker per process, its Collector registered, ProbeLease above the
// registry call's timeout. Per row attempt:
//
//  1. WaitReady before reserving a throttle slot (and before each fetch from
//     Kafka, where the in-flight cap is checked): while the circuit is open
//     it blocks, so no slot is taken and reading pauses. While closed it
//     returns at once without asking Redis.
//  2. Allow right before the call, after the slot's sleep. An error (wraps
//     ErrUnavailable) is Redis down: no call, as with the throttle. Not
//     Allowed: give the slot back, spend no attempt, go back to 1.
//  3. Report after the call, before judging the attempt: Outcome is
//     OutcomeOf(result class), or Abandoned when the caller's own context
//     ended. A Failure whose Report answers a State other than Closed, or
//     that was a probe (Decision.Probe), belongs to an outage: it does not
//     count against the row's attempts, nor does the time until the circuit
//     closes count against its retry time. A Refused call whose Report
//     answers a State other than Closed never counts: the circuit holds the
//     row; one answered Closed is the seller's own failure. While the process trusts that
//     the circuit is closed (Settings.TrustClosed), an answered call that
//     was not a probe is counted in a local batch and answered from the
//     view; the next report that goes to Redis (a failure, a probe, or an
//     answered call once the batch is TrustClosed/2 old) carries the batch,
//     which is counted in the window's bucket of its newest answer, not in
//     the one it reaches Redis in.
package circuit

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/redisfail"
	"github.com/bulkreg/bulkreg/lua"
)

// ErrUnavailable is wrapped in every error caused by Redis not answering (or
// answering with an error). Allow refuses then: the caller must not call the
// API and should ask again later. It wraps redisfail.ErrUnavailable, the
// error every package that talks to Redis gives when Redis is unavailable.
var ErrUnavailable = redisfail.Named("the circuit breaker's Redis could not answer, so no call is allowed")

// Decision is Allow's answer.
type Decision struct {
	State   State         // the circuit's state as this call saw it
	Allowed bool          // the caller may call the API now
	Probe   bool          // the call is the probe: its Report decides the circuit; Allowed is true
	RetryAt time.Time     // when !Allowed: when to ask again (Redis clock); when Allowed, now
	Wait    time.Duration // RetryAt − now as Redis saw it; 0 when Allowed
	OpenFor time.Duration // how long the circuit has been open, half-open included; 0 when closed
	probeID string
	at      time.Time // the Redis clock when the decision was made
}

// Call is one call's outcome, for Report.
type Call struct {
	Seller  string  // the seller the call was for
	Row     string  // the row's Idempotency-Key (distinct rows tell an outage from a poison row)
	Outcome Outcome // what the call told about the API
}

// Status is the circuit as Redis holds it.
type Status struct {
	State   State
	OpenFor time.Duration // how long it has been open, half-open included; 0 when closed
	// RetryAt is when a call may next be allowed (Redis clock): now when
	// closed or when a probe is due, later while waiting for the probe or for
	// the probe's answer.
	RetryAt time.Time
	Wait    time.Duration // RetryAt − Now, never negative
	Now     time.Time     // the Redis clock when the state was read
	// Changed is set by Report when that report opened or closed the circuit.
	Changed bool
	// Own is set by Report when the failed probe it reported was its
	// seller's own (a seller known to fail while the API answers others):
	// the probe passed on at once, and the row spends its retry budget.
	Own bool
	// Reason is why the circuit is not closed; "" when closed.
	Reason Reason
	// Fleet-wide counters, read by Peek only (kept for Settings.Retention
	// after the last change): probes handed out, times the circuit opened,
	// probes taken over after their lease ran out.
	Probes, Opens, Lapsed int64
}

// Breaker is one process's handle on the fleet's circuit. It is safe for
// concurrent use; every Breaker on the same Redis and Settings.Name shares
// one circuit.
type Breaker struct {
	rdb    redis.UniversalClient
	s      Settings
	keys   []string
	allow  *redis.Script
	report *redis.Script
	peek   *redis.Script
	seller *redis.Script

	refused atomic.Int64 // Allow answers that refused a call (local and from Redis)
	probes  atomic.Int64 // probes this process was given
	// calls allowed without asking Redis (TrustClosed)
	allowedLocally atomic.Int64
	// answered calls counted in a batch instead of a report of their own
	batched atomic.Int64

	// ask serialises the Redis requests of Allow while the circuit is not
	// closed, or closed as of longer ago than TrustClosed: a crowd of rows
	// whose wait ended together costs one request, and the others read its
	// answer from the view.
	ask chan struct{}
	// renewing: a Peek renewing a closed view runs in the background
	// (renew).
	renewing atomic.Bool

	mu      sync.Mutex
	view    view
	last    view          // the last answer, kept when Redis fails (for metrics)
	changed chan struct{} // closed and replaced whenever the view changes
	// unsent: answered calls Report counted here and has not sent to Redis
	// yet (guarded by mu).
	unsent batch
	// failed: sellers whose last call this process reported was a
	// transient failure (guarded by mu): their next answered call is
	// reported at once, so their failing streak ends as the call is
	// answered (SellerCalls.Streak).
	failed map[string]struct{}
}

// New returns the breaker of the fleet's circuit on rdb (one Redis or a Redis
// Cluster). Zero fields of s take their defaults.
func New(rdb redis.UniversalClient, s Settings) (*Breaker, error) {
	if rdb == nil {
		return nil, errors.New("circuit: a Redis client is required")
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s = s.withDefaults()
	tag := "{circuit}"
	if s.Name != "" {
		tag = "{circuit:" + s.Name + "}"
	}
	b := &Breaker{
		rdb:     rdb,
		s:       s,
		keys:    []string{"bulkreg:" + tag + ":state", "bulkreg:" + tag + ":window", "bulkreg:" + tag + ":failing"},
		allow:   redis.NewScript(lua.Script("circuit_allow.lua")),
		report:  redis.NewScript(lua.Script("circuit_report.lua")),
		peek:    redis.NewScript(lua.Script("circuit_peek.lua")),
		seller:  redis.NewScript(lua.Script("circuit_seller.lua")),
		ask:     make(chan struct{}, 1),
		changed: make(chan struct{}),
	}
	return b, nil
}

// Settings returns the settings in force, defaults filled in.
func (b *Breaker) Settings() Settings { return b.s }

// Keys returns the circuit's Redis keys: the state hash and the window hash.
func (b *Breaker) Keys() (state, window string) { return b.keys[0], b.keys[1] }

// Allow says whether the caller may call the API now. Ask right before each
// call (after the throttle's slot is reached), and Report the outcome of every
// allowed call with the Decision it was allowed by.
//
// While this process knows the circuit is open and its retry time has not
// come, Allow refuses without asking Redis. Otherwise it asks Redis; when
// Redis does not answer it refuses and the error wraps ErrUnavailable.
func (b *Breaker) Allow(ctx context.Context) (Decision, error) {
	if d, ok := b.refuseLocally(); ok {
		return d, nil
	}
	if d, ok := b.allowLocally(); ok {
		return d, nil
	}
	if b.s.TrustClosed > 0 || !b.closedView() {
		// Not closed, or closed longer ago than this process trusts (the
		// view failed allowLocally): one request at a time from this
		// process; whoever waited reads the answer from the view first.
		// Only a process that asks before every call (TrustClosed ≤ 0)
		// asks concurrently while the circuit is closed.
		select {
		case b.ask <- struct{}{}:
		case <-ctx.Done():
			b.refused.Add(1)
			return Decision{}, fmt.Errorf("circuit: waiting to ask whether a call is allowed: %w", ctx.Err())
		}
		defer func() { <-b.ask }()
		if d, ok := b.refuseLocally(); ok {
			return d, nil
		}
		if d, ok := b.allowLocally(); ok {
			return d, nil
		}
	}
	id := rand.Text()
	v, err := b.allow.Run(ctx, b.rdb, b.keys[:1], id, b.s.ProbeLease.Microseconds(),
		b.s.ProbeMin.Microseconds(), b.s.Retention.Milliseconds()).Slice()
	if err != nil {
		b.forget()
		b.refused.Add(1)
		return Decision{}, b.fail(ctx, "ask whether a call is allowed", err)
	}
	d, err := parseDecision(v)
	if err != nil {
		b.forget()
		b.refused.Add(1)
		return Decision{}, fmt.Errorf("circuit: ask whether a call is allowed: %w: %w", ErrUnavailable, err)
	}
	switch {
	case d.Probe:
		d.probeID = id
		b.probes.Add(1)
		// Everybody else in this process is refused until the probe's
		// answer; they learn it from Report's answer or ask after ProbeMin.
		b.learn(d.at, d.State, b.s.ProbeMin, false, d.OpenFor)
	case !d.Allowed:
		b.refused.Add(1)
		b.learn(d.at, d.State, d.Wait, false, d.OpenFor)
	default:
		b.learn(d.at, d.State, 0, true, d.OpenFor)
	}
	return d, nil
}

// Report records the outcome of a call made with d and answers the circuit's
// state after it. Report every call Allow allowed, once, including the probe
// (a probe never reported blocks every consumer until its lease ends).
//
// When c.Outcome is Failure and the answer's State is not Closed, the failure
// belongs to an outage: the caller should not count it against the row's
// retry budget. A probe's failure never counts.
func (b *Breaker) Report(ctx context.Context, d Decision, c Call) (Status, error) {
	var outcome string
	switch c.Outcome {
	case Success, Failure, Answered, Abandoned, Refused:
		outcome = c.Outcome.String()
	default:
		return Status{}, fmt.Errorf("circuit: report: unknown outcome %d", c.Outcome)
	}
	if c.Outcome != Abandoned {
		if c.Seller == "" || strings.Contains(c.Seller, "\n") {
			return Status{}, fmt.Errorf("circuit: report: the seller id %q is empty or holds a newline", c.Seller)
		}
		if c.Row == "" || strings.Contains(c.Row, "\n") {
			return Status{}, fmt.Errorf("circuit: report: the row key %q is empty or holds a newline", c.Row)
		}
	}
	answered := c.Outcome == Success || c.Outcome == Answered
	if answered && d.probeID == "" {
		if st, ok := b.countLocally(c.Seller); ok {
			return st, nil
		}
	}
	unsent := b.takeUnsent()
	unsentAt := "" // none: the script counts the batch as of now
	if unsent.calls > 0 {
		unsentAt = strconv.FormatInt(unsent.lastAt.UnixMicro(), 10)
	}
	v, err := b.report.Run(ctx, b.rdb, b.keys, outcome, d.probeID, c.Seller, c.Row,
		b.s.Window.Microseconds(), b.s.Buckets, b.s.MinCalls, strconv.FormatFloat(b.s.FailureRatio, 'g', -1, 64),
		b.s.MinFailedRows, b.s.MinFailedSellers, b.s.ProbeMin.Microseconds(), b.s.ProbeMax.Microseconds(),
		strconv.FormatFloat(b.s.ProbeMultiplier, 'g', -1, 64), b.s.Retention.Milliseconds(),
		unsent.calls, strings.Join(unsent.sellers, "\n"), unsentAt).Slice()
	if err != nil {
		b.forget()
		b.putBack(unsent)
		return Status{}, b.fail(ctx, "report a call's outcome", err)
	}
	st, err := parseReport(v)
	if err != nil {
		b.forget()
		return Status{}, fmt.Errorf("circuit: report a call's outcome: %w: %w", ErrUnavailable, err)
	}
	b.learn(st.Now, st.State, st.Wait, st.State == Closed, st.OpenFor)
	switch {
	case answered:
		b.sellerAnswered(c.Seller)
	case c.Outcome == Failure:
		b.sellerFailed(c.Seller)
	}
	return st, nil
}

// Peek reads the circuit's state from Redis without changing it.
func (b *Breaker) Peek(ctx context.Context) (Status, error) {
	v, err := b.peek.Run(ctx, b.rdb, b.keys[:1], b.s.ProbeMin.Microseconds()).Slice()
	if err != nil {
		b.forget()
		return Status{}, b.fail(ctx, "read the circuit's state", err)
	}
	st, err := parsePeek(v)
	if err != nil {
		b.forget()
		return Status{}, fmt.Errorf("circuit: read the circuit's state: %w: %w", ErrUnavailable, err)
	}
	b.learn(st.Now, st.State, st.Wait, st.Wait == 0, st.OpenFor)
	return st, nil
}

// SellerCalls is how the API answers one seller's calls, as reported to
// Redis while the circuit is closed.
type SellerCalls struct {
	// Failures and Answered count the seller's transient failures (5xx, no
	// answer) and answered calls in the circuit's window (answered calls a
	// process batches are counted when they reach Redis, in the bucket of
	// the batch's newest answer).
	Failures, Answered int
	// Streak is the seller's failures in a row since its last answered
	// call, FirstFailure the oldest of them (when the streak began),
	// LastFailure the newest and Now the Redis clock when it
	// was read. A seller's first answered call after a failure is reported
	// at once, never batched, so an answer ends the streak as it comes; a
	// batch of another process's answers ends it only when its newest
	// answer is newer than the streak's last failure.
	// Streaks outlive the window (a seller at its limit calls in bursts a
	// limit window apart) and end when the circuit opens or closes.
	Streak                         int
	FirstFailure, LastFailure, Now time.Time
	// What the other sellers' calls say. OthersFailing counts those whose
	// last two calls or more failed, the last within the window;
	// OthersAnswered those answered since this seller's streak began (two
	// buckets of the window or more after the one it began in: a call sent
	// before an outage and answered just after it is in the next one
	// whenever a bucket boundary falls between) whose last call was answered;
	// OthersCalling those with calls in the window at all.
	OthersFailing, OthersAnswered, OthersCalling int
	// Quiet is how long the streak must have lasted, with no other seller
	// calling, before its failing counts as the seller's own (Own). The
	// reader sets it: a seller at its limit calls in bursts a limit window
	// and a margin apart, so the others' silence for less than that proves
	// nothing. 0: at once.
	Quiet time.Duration
}

// Failing reports whether the marketplace is not taking this seller's
// rows: its last three calls or more failed, none answered since, and
// more than twice as many as the window holds answered calls of the
// seller (a few random errors among many answers are not failing). The
// first answered call ends it. Whether the fleet's circuit opened is not
// asked: a lone seller's failures never open it.
func (c SellerCalls) Failing() bool { return c.Streak >= 3 && c.Streak > 2*c.Answered }

// Own reports whether the seller's failures are its own: the API answered
// another seller since they began, or no other seller called for as long as
// the streak lasted, Quiet at least (one seller's calls cannot tell its
// fault from the API's; what it sees is its rows failing). Answers from
// before they began prove nothing: at an outage's first failure the others'
// earlier answers are still in the window.
func (c SellerCalls) Own() bool {
	return c.OthersAnswered > 0 || c.OthersCalling == 0 && c.Now.Sub(c.FirstFailure) >= c.Quiet
}

// Outage reports whether the seller's failures look like the API's: not
// its own, and other sellers' last calls fail too. The circuit opens for
// such failures once its window holds enough of them. Neither Own nor
// Outage: other sellers call, but none has been answered or has failed
// twice since this seller's failures began; the next calls tell.
func (c SellerCalls) Outage() bool { return !c.Own() && c.OthersFailing > 0 }

// Seller reads how the API answers seller's calls without changing
// anything: for the seller's pages, which say so while the marketplace
// fails that seller.
func (b *Breaker) Seller(ctx context.Context, seller string) (SellerCalls, error) {
	v, err := b.seller.Run(ctx, b.rdb, b.keys[1:], b.s.Window.Microseconds(), b.s.Buckets, seller).Int64Slice()
	if err != nil {
		return SellerCalls{}, fmt.Errorf("circuit: read seller %s's calls: %w", seller, err)
	}
	if len(v) != 9 {
		return SellerCalls{}, fmt.Errorf("circuit: read seller %s's calls: %d values, want 9", seller, len(v))
	}
	c := SellerCalls{Failures: int(v[0]), Answered: int(v[1]), Streak: int(v[2]), Now: time.UnixMicro(v[4]),
		OthersFailing: int(v[5]), OthersAnswered: int(v[6]), OthersCalling: int(v[7])}
	if v[3] > 0 {
		c.LastFailure = time.UnixMicro(v[3])
	}
	if v[8] > 0 {
		c.FirstFailure = time.UnixMicro(v[8])
	}
	return c, nil
}

// WaitReady blocks while this process knows that no call can be allowed
// (the circuit is open and its probe not yet due, or a probe is out), and
// returns nil as soon as a call may be: the circuit is closed, or a probe is
// due and some row should ask Allow for it. What this process learned from
// Redis holds for its retry time, at most ProbeMin when the circuit was
// closed; only then does WaitReady ask Redis (Peek), so a consumer can call it
// before reading each batch of rows and before taking each throttle slot. It
// returns an error wrapping ErrUnavailable when Redis does not answer, or
// ctx's error. It is a hint that saves slots and reads: Allow still decides.
func (b *Breaker) WaitReady(ctx context.Context) error {
	for {
		b.mu.Lock()
		v, ch := b.view, b.changed
		b.mu.Unlock()
		now := time.Now()
		switch {
		case v.known && now.Before(v.until):
			if v.due || v.state == Closed {
				return nil
			}
			t := time.NewTimer(v.until.Sub(now))
			select {
			case <-t.C:
			case <-ch:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			t.Stop()
		default:
			st, err := b.Peek(ctx)
			if err != nil {
				return err
			}
			if st.Wait == 0 {
				return nil
			}
		}
	}
}

// Changed returns a channel closed the next time this process learns
// something new about the circuit (any Allow, Report or Peek answer, or a
// failure to get one).
func (b *Breaker) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// Local is what this process last learned of the circuit, without asking
// Redis (even if Redis failed since): known is false before the first answer.
func (b *Breaker) Local() (state State, openFor time.Duration, known bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.last
	if !v.known {
		return Closed, 0, false
	}
	if v.state == Closed {
		return Closed, 0, true
	}
	return v.state, v.openFor + time.Since(v.learned), true
}

// Refused is the number of calls this process's Allow refused.
func (b *Breaker) Refused() int64 { return b.refused.Load() }

// Probes is the number of probes this process was given.
func (b *Breaker) Probes() int64 { return b.probes.Load() }

// fail turns a Redis error into the breaker's error: ErrUnavailable unless
// the caller's own context was cancelled.
func (b *Breaker) fail(ctx context.Context, op string, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("circuit: %s: %w", op, ctx.Err())
	}
	return fmt.Errorf("circuit: %s: %w (%w)", op, ErrUnavailable, err)
}
