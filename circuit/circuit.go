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
//	bulkreg:{circuit}:window  HASH  the ring of buckets (calls, failures, capped distinct sellers and rows)
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
//     answered call once the batch is TrustClosed/2 old) carries the batch.
package circuit

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"slices"
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

// State is the circuit's state. Its value is the bulkreg_circuit_state gauge.
type State int

const (
	Closed   State = 0 // calls flow
	Open     State = 1 // no call until the probe is due
	HalfOpen State = 2 // one probe call is out; everybody else waits
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "unknown"
}

func parseState(s string) (State, error) {
	switch s {
	case "closed":
		return Closed, nil
	case "open":
		return Open, nil
	case "half-open":
		return HalfOpen, nil
	}
	return 0, fmt.Errorf("unknown circuit state %q", s)
}

// Outcome is what one call told about the API.
type Outcome int

const (
	// Success: 201 or 200. The API works.
	Success Outcome = iota + 1
	// Failure: a transient failure (5xx, 408, timeout, refused or reset
	// connection, unreadable answer): the outage signal.
	Failure
	// Answered: the API answered but refused the row (400, 409, 422, 429, any
	// other 4xx). Not an outage signal; it counts as a call in the window, and
	// as the probe's answer it closes the circuit.
	Answered
	// Abandoned: the caller gave up before an answer for reasons of its own
	// (its context was cancelled at shutdown or rebalance). Nothing is
	// counted; a probe given up hands the probe to the next caller at once.
	Abandoned
	// Refused: the API refused bulkreg itself, not the row (401, 403, a 404
	// off the route, 405, 3xx: registryclient.Misconfigured). Every call
	// would get the same answer, so one such answer opens the circuit at
	// once, whatever the window's counts, with Reason Misconfigured; it is
	// held like an outage until a probe gets an answer (an operator fixed
	// the credential or the URL). As the probe's answer it counts as a
	// failure. One exception: when another seller's call was answered in
	// the window and no other seller was refused, the refusal is that
	// seller's own (the API refuses it alone, say a 403 for an app it
	// revoked): the circuit stays closed, Report answers Closed, and the
	// caller treats it as the seller's failure.
	Refused
)

// Reason says why the circuit is not closed.
type Reason string

const (
	// Unavailable: transient failures spread over sellers (an outage).
	Unavailable Reason = "unavailable"
	// Misconfigured: the API refused bulkreg itself (Refused): its
	// credentials or its URL need an operator. Nothing is registered until
	// then, whatever the rows hold.
	Misconfigured Reason = "misconfigured"
)

func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Answered:
		return "answered"
	case Abandoned:
		return "abandoned"
	case Refused:
		return "refused"
	}
	return "unknown"
}

// Settings configure a Breaker. A zero field means the default given in its
// comment (DefaultSettings). The defaults and how they were chosen are in
// the package's README section "When the registration API is down" and in
// defaults_test.go (BenchmarkDefaults measures them).
type Settings struct {
	// Name separates independent circuits on one Redis (keys
	// bulkreg:{circuit:<Name>}:…). "" is the fleet's one circuit, bulkreg:{circuit}:….
	Name string
	// Window is how far back calls are counted. Default 20 s: at one
	// seller's 100/min pace it holds 33 calls, more than MinCalls, and the
	// successes before an outage leave it within about half a window
	// (measured: open 5–9 s after the API went down, BenchmarkDefaults). A
	// 30 s window took 13 s, with rows spending up to 6 of their 8 attempts.
	Window time.Duration
	// Buckets is how many pieces Window is counted in; calls age out one
	// bucket at a time. Default 10 (2 s each at the default Window).
	Buckets int
	// MinCalls is the fewest calls in the window before the circuit may open.
	// Default 20.
	MinCalls int
	// FailureRatio is the share of transient failures among the window's
	// calls at or above which the circuit opens. Default 0.5: with the
	// heaviest fault injection the tests use (10 % 503s) the worst window
	// measured held 15–26 % failures, and with 20 % 503s plus 5 % dropped
	// connections 32–34 % (BenchmarkDefaults, two runs); an outage reaches
	// 100 %.
	FailureRatio float64
	// MinFailedRows is the fewest distinct rows (Idempotency-Keys) with a
	// transient failure in the window. Default 5: a few poison rows retrying
	// cannot open the circuit, whatever their ratio.
	MinFailedRows int
	// MinFailedSellers is the fewest distinct sellers with a transient failure
	// in the window. Default 2, and never fewer: one seller's failures are
	// that seller's problem, even when it is the only seller calling (the
	// package comment says why); 1 acts as 2.
	MinFailedSellers int
	// ProbeMin is the wait from opening to the first probe, and the longest a
	// caller refused during a probe waits before asking again. Default 1 s.
	ProbeMin time.Duration
	// ProbeMax caps the probe interval. Default 15 s: once the API is back,
	// calls resume within about 15 s (measured 9–13 s after a 60 s outage;
	// 28 s once, when the first probe after it met an injected 503), at the
	// cost of four probes a minute during a long outage.
	ProbeMax time.Duration
	// ProbeMultiplier multiplies the probe interval after each failed probe.
	// Default 2.
	ProbeMultiplier float64
	// ProbeLease is how long a probe is held before another caller may take
	// it over (the prober crashed or hangs). It must exceed the registry
	// call's timeout, or a slow probe is doubled. Default 15 s (the registry
	// client's 10 s timeout plus margin).
	ProbeLease time.Duration
	// Retention is how long the state hash is kept after its last change
	// (it holds the fleet-wide probe and open counters). Default 24 h.
	Retention time.Duration
	// PeekTimeout bounds the Redis read the Collector makes at each scrape.
	// Default 1 s.
	PeekTimeout time.Duration
	// TrustClosed is how long an answer that the circuit is closed lets this
	// process allow calls without asking Redis. Every answer from Redis
	// renews it; a process that allows calls from a view TrustClosed/2 old
	// reads the state in the background, and a busy process sends a report
	// at least every TrustClosed/2 (its answered calls go in batches). So
	// it asks before a call only when it has been idle that long, and
	// learns that the circuit opened within about TrustClosed/2 and a round
	// trip, or at once from a failure's answer. Asking before every call
	// put a round trip between a row's slot and its call; on 2 cores under
	// 3,000 calls/s that round trip was most of the rows' lateness (bench
	// many-sellers). The cost: a process may start calls for up to
	// TrustClosed after the fleet opened the circuit, when none of its
	// reports went to Redis since. Default 250 ms; negative asks Redis
	// before every call.
	TrustClosed time.Duration
}

// DefaultSettings returns the documented defaults.
func DefaultSettings() Settings {
	return Settings{
		Window:           20 * time.Second,
		Buckets:          10,
		MinCalls:         20,
		FailureRatio:     0.5,
		MinFailedRows:    5,
		MinFailedSellers: 2,
		ProbeMin:         time.Second,
		ProbeMax:         15 * time.Second,
		ProbeMultiplier:  2,
		ProbeLease:       15 * time.Second,
		Retention:        24 * time.Hour,
		PeekTimeout:      time.Second,
		TrustClosed:      250 * time.Millisecond,
	}
}

// withDefaults fills the zero fields.
func (s Settings) withDefaults() Settings {
	d := DefaultSettings()
	s.Window = cmp.Or(s.Window, d.Window)
	s.Buckets = cmp.Or(s.Buckets, d.Buckets)
	s.MinCalls = cmp.Or(s.MinCalls, d.MinCalls)
	s.FailureRatio = cmp.Or(s.FailureRatio, d.FailureRatio)
	s.MinFailedRows = cmp.Or(s.MinFailedRows, d.MinFailedRows)
	s.MinFailedSellers = cmp.Or(s.MinFailedSellers, d.MinFailedSellers)
	s.ProbeMin = cmp.Or(s.ProbeMin, d.ProbeMin)
	s.ProbeMax = cmp.Or(s.ProbeMax, max(d.ProbeMax, s.ProbeMin))
	s.ProbeMultiplier = cmp.Or(s.ProbeMultiplier, d.ProbeMultiplier)
	s.ProbeLease = cmp.Or(s.ProbeLease, d.ProbeLease)
	s.Retention = cmp.Or(s.Retention, d.Retention)
	s.PeekTimeout = cmp.Or(s.PeekTimeout, d.PeekTimeout)
	s.TrustClosed = cmp.Or(s.TrustClosed, d.TrustClosed)
	return s
}

// Validate reports every field that is out of range, by name. Zero fields
// are valid (they mean the default).
func (s Settings) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("circuit: "+format, args...)) }
	if strings.ContainsAny(s.Name, "{}\n") {
		bad("Settings.Name must not contain braces or newlines, got %q", s.Name)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Window", s.Window}, {"ProbeMin", s.ProbeMin}, {"ProbeMax", s.ProbeMax}, {"ProbeLease", s.ProbeLease},
		{"Retention", s.Retention}, {"PeekTimeout", s.PeekTimeout}} {
		if d.v < 0 {
			bad("Settings.%s must not be negative (0 means the default), got %s", d.name, d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"Buckets", s.Buckets}, {"MinCalls", s.MinCalls}, {"MinFailedRows", s.MinFailedRows}, {"MinFailedSellers", s.MinFailedSellers}} {
		if n.v < 0 {
			bad("Settings.%s must not be negative (0 means the default), got %d", n.name, n.v)
		}
	}
	if !(s.FailureRatio >= 0 && s.FailureRatio <= 1) { // also refuses NaN
		bad("Settings.FailureRatio must be a fraction in (0, 1] (0 means the default), got %v", s.FailureRatio)
	}
	if !(s.ProbeMultiplier == 0 || s.ProbeMultiplier >= 1) || math.IsInf(s.ProbeMultiplier, 0) {
		bad("Settings.ProbeMultiplier must be at least 1 (0 means the default), got %v", s.ProbeMultiplier)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	f := s.withDefaults()
	switch {
	case f.ProbeMax < f.ProbeMin:
		return fmt.Errorf("circuit: Settings.ProbeMax (%s) must not be below ProbeMin (%s)", f.ProbeMax, f.ProbeMin)
	case f.Window/time.Duration(f.Buckets) < time.Millisecond:
		return fmt.Errorf("circuit: Settings.Window / Buckets must be at least 1ms, got %s / %d", f.Window, f.Buckets)
	case f.ProbeMin < time.Millisecond:
		return fmt.Errorf("circuit: Settings.ProbeMin must be at least 1ms, got %s", f.ProbeMin)
	}
	return nil
}

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
}

// batch is the answered calls (successes, refusals of a row) of a process
// while the circuit is closed, sent with the next report that goes to Redis.
// While the circuit is closed such a call changes nothing but the window's
// counts, and sending each one put every call of the fleet through one script
// on one Redis key (one Cluster node): one report per call was about a
// seventh of Redis's time per registered row (bench many-sellers).
type batch struct {
	calls   int
	sellers []string // distinct, at most Settings.MinFailedSellers: the window keeps no more
	since   time.Time
}

// addSeller adds seller unless the batch has it or holds most sellers.
func (u *batch) addSeller(seller string, most int) {
	if len(u.sellers) < most && !slices.Contains(u.sellers, seller) {
		u.sellers = append(u.sellers, seller)
	}
}

// view is what this process last learned of the circuit, in local time.
type view struct {
	known   bool // false until the first answer, and after Redis failed
	state   State
	until   time.Time // local time until which the view holds (a refused caller's RetryAt)
	due     bool      // a call may be allowed now (closed, or a probe is due) as of the last answer
	openFor time.Duration
	learned time.Time // local time of the answer
	at      time.Time // Redis time of the answer: an older answer does not replace it
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
		keys:    []string{"bulkreg:" + tag + ":state", "bulkreg:" + tag + ":window"},
		allow:   redis.NewScript(lua.Script("circuit_allow.lua")),
		report:  redis.NewScript(lua.Script("circuit_report.lua")),
		peek:    redis.NewScript(lua.Script("circuit_peek.lua")),
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
	if (c.Outcome == Success || c.Outcome == Answered) && d.probeID == "" {
		if st, ok := b.countLocally(c.Seller); ok {
			return st, nil
		}
	}
	unsent := b.takeUnsent()
	v, err := b.report.Run(ctx, b.rdb, b.keys, outcome, d.probeID, c.Seller, c.Row,
		b.s.Window.Microseconds(), b.s.Buckets, b.s.MinCalls, strconv.FormatFloat(b.s.FailureRatio, 'g', -1, 64),
		b.s.MinFailedRows, b.s.MinFailedSellers, b.s.ProbeMin.Microseconds(), b.s.ProbeMax.Microseconds(),
		strconv.FormatFloat(b.s.ProbeMultiplier, 'g', -1, 64), b.s.Retention.Milliseconds(),
		unsent.calls, strings.Join(unsent.sellers, "\n")).Slice()
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

// countLocally counts an answered call that was not a probe in the unsent
// batch, and answers from the view, while this process trusts its view that
// the circuit is closed (Settings.TrustClosed) and the batch is younger than
// half of that: the report that sends it then renews the trust before it
// runs out, so busy callers keep being allowed without asking Redis. false:
// the call goes to Redis, with the batch.
func (b *Breaker) countLocally(seller string) (Status, bool) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.view
	if !v.known || v.state != Closed || b.s.TrustClosed <= 0 || now.Sub(v.learned) >= b.s.TrustClosed {
		return Status{}, false
	}
	u := &b.unsent
	if u.calls == 0 {
		u.since = now
	} else if now.Sub(u.since) >= b.s.TrustClosed/2 {
		return Status{}, false
	}
	u.calls++
	u.addSeller(seller, b.s.MinFailedSellers)
	b.batched.Add(1)
	at := v.at.Add(now.Sub(v.learned))
	return Status{State: Closed, RetryAt: at, Now: at}, true
}

// takeUnsent empties the unsent batch for the report that sends it. A batch
// older than the window is dropped: its calls left the window meanwhile.
func (b *Breaker) takeUnsent() batch {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.unsent
	b.unsent = batch{}
	if u.calls > 0 && time.Since(u.since) > b.s.Window {
		return batch{}
	}
	return u
}

// putBack returns a batch whose report failed to the unsent one, for the
// next report (the script may have run with it: then its calls count twice,
// which only makes a failure ratio look lower for a window).
func (b *Breaker) putBack(u batch) {
	if u.calls == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := &b.unsent
	if cur.calls == 0 || u.since.Before(cur.since) {
		cur.since = u.since
	}
	cur.calls += u.calls
	for _, s := range u.sellers {
		cur.addSeller(s, b.s.MinFailedSellers)
	}
}

// refuseLocally answers a refusal from the view when the view says the
// circuit is not closed and its retry time has not come.
func (b *Breaker) refuseLocally() (Decision, bool) {
	b.mu.Lock()
	v := b.view
	b.mu.Unlock()
	now := time.Now()
	if !v.known || v.state == Closed || v.due || !now.Before(v.until) {
		return Decision{}, false
	}
	b.refused.Add(1)
	return Decision{State: v.state, RetryAt: v.until, Wait: v.until.Sub(now), OpenFor: v.openFor + now.Sub(v.learned)}, true
}

// allowLocally allows a call without asking Redis while this process
// learned within TrustClosed that the circuit is closed. Once that answer is
// half a TrustClosed old it renews the view in the background.
func (b *Breaker) allowLocally() (Decision, bool) {
	b.mu.Lock()
	v := b.view
	b.mu.Unlock()
	if !v.known || v.state != Closed || b.s.TrustClosed <= 0 {
		return Decision{}, false
	}
	age := time.Since(v.learned)
	if age >= b.s.TrustClosed {
		return Decision{}, false
	}
	if age >= b.s.TrustClosed/2 {
		b.renew()
	}
	at := v.at.Add(age)
	b.allowedLocally.Add(1)
	return Decision{State: Closed, Allowed: true, RetryAt: at, at: at}, true
}

// renew reads the circuit's state (Peek) in the background, one read at a
// time, so that a busy process's closed view does not run out. A busy
// process's reports renew it too, but only every TrustClosed/2 and only once
// their answer is back: under a burst (bench many-sellers, 2 cores) that
// answer took longer than the rest of the trust, the view ran out, and every
// call then waited for a round trip of its own before it started. 71 ms at
// the median for the calls that came too late to be made. Renewed ahead, a
// call waits for Redis only in a process that was idle for TrustClosed.
// A failed read forgets the view, as every failed request does.
func (b *Breaker) renew() {
	if !b.renewing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer b.renewing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), b.s.PeekTimeout)
		defer cancel()
		_, _ = b.Peek(ctx) // it learns the answer, or forgets the view
	}()
}

func (b *Breaker) closedView() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.view.known && b.view.state == Closed
}

// learn records an answer of Redis, given at the Redis time at, in the view.
// wait is how long until a call may be allowed; due says one may be now.
func (b *Breaker) learn(at time.Time, s State, wait time.Duration, due bool, openFor time.Duration) {
	now := time.Now()
	until := now.Add(wait)
	if due {
		// Until someone asks: a due probe is taken by the first asker, so
		// the view holds for a poll interval at most.
		until = now.Add(b.s.ProbeMin)
	}
	b.set(view{known: true, state: s, until: until, due: due, openFor: openFor, learned: now, at: at})
}

// forget drops the view after Redis failed: the next Allow asks Redis again.
func (b *Breaker) forget() { b.set(view{}) }

func (b *Breaker) set(v view) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v.known && b.view.known && v.at.Before(b.view.at) {
		// Answers of concurrent requests arrive in any order: one the
		// script gave before the view's (a report made just before the
		// circuit opened) must not turn an open view back to closed.
		return
	}
	b.view = v
	if v.known {
		b.last = v
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

// fail turns a Redis error into the breaker's error: ErrUnavailable unless
// the caller's own context was cancelled.
func (b *Breaker) fail(ctx context.Context, op string, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("circuit: %s: %w", op, ctx.Err())
	}
	return fmt.Errorf("circuit: %s: %w (%w)", op, ErrUnavailable, err)
}

// parse helpers: the scripts answer µs timestamps as strings (exact, where a
// Lua number could be rounded) and counts as integers.

func micros(v any) (int64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("want a string of µs, got %T", v)
	}
	return strconv.ParseInt(s, 10, 64)
}

func str(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("want a string, got %T", v)
	}
	return s, nil
}

func integer(v any) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("want an integer, got %T", v)
	}
	return n, nil
}

func since(opened, now int64) time.Duration {
	if opened <= 0 || now < opened {
		return 0
	}
	return time.Duration(now-opened) * time.Microsecond
}

func parseDecision(v []any) (Decision, error) {
	if len(v) != 6 {
		return Decision{}, fmt.Errorf("the allow script answered %d values, want 6", len(v))
	}
	s, err1 := str(v[0])
	allowed, err2 := integer(v[1])
	probe, err3 := integer(v[2])
	retry, err4 := micros(v[3])
	now, err5 := micros(v[4])
	opened, err6 := micros(v[5])
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return Decision{}, fmt.Errorf("the allow script answered %v: %w", v, err)
	}
	state, err := parseState(s)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{State: state, Allowed: allowed == 1, Probe: probe == 1, RetryAt: time.UnixMicro(retry), OpenFor: since(opened, now), at: time.UnixMicro(now)}
	if retry > now {
		d.Wait = time.Duration(retry-now) * time.Microsecond
	}
	return d, nil
}

func parseReport(v []any) (Status, error) {
	if len(v) != 6 {
		return Status{}, fmt.Errorf("the report script answered %d values, want 6", len(v))
	}
	s, err1 := str(v[0])
	changed, err2 := integer(v[1])
	retry, err3 := micros(v[2])
	now, err4 := micros(v[3])
	opened, err5 := micros(v[4])
	reason, err6 := str(v[5])
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return Status{}, fmt.Errorf("the report script answered %v: %w", v, err)
	}
	state, err := parseState(s)
	if err != nil {
		return Status{}, err
	}
	st := status(state, retry, now, opened, changed == 1)
	st.Reason = Reason(reason)
	return st, nil
}

func parsePeek(v []any) (Status, error) {
	if len(v) != 8 {
		return Status{}, fmt.Errorf("the peek script answered %d values, want 8", len(v))
	}
	s, err1 := str(v[0])
	retry, err2 := micros(v[1])
	now, err3 := micros(v[2])
	opened, err4 := micros(v[3])
	probes, err5 := integer(v[4])
	opens, err6 := integer(v[5])
	lapsed, err7 := integer(v[6])
	reason, err8 := str(v[7])
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7, err8); err != nil {
		return Status{}, fmt.Errorf("the peek script answered %v: %w", v, err)
	}
	state, err := parseState(s)
	if err != nil {
		return Status{}, err
	}
	st := status(state, retry, now, opened, false)
	st.Probes, st.Opens, st.Lapsed, st.Reason = probes, opens, lapsed, Reason(reason)
	return st, nil
}

func status(s State, retry, now, opened int64, changed bool) Status {
	st := Status{State: s, RetryAt: time.UnixMicro(retry), Now: time.UnixMicro(now), OpenFor: since(opened, now), Changed: changed}
	if retry > now {
		st.Wait = time.Duration(retry-now) * time.Microsecond
	}
	return st
}
