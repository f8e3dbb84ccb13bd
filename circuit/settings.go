// Settings: the breaker's thresholds and times, their defaults and their validation.

package circuit

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Settings configure a Breaker. A zero field means the default given in its
// comment (DefaultSettings). The defaults and how they were chosen are in
// docs/operations.md, "When the registration API is down", and in
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
