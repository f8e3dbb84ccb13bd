package main

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/internal/config"
)

// bindCircuit binds the circuit breaker's settings (BULKREG_CIRCUIT_*); the
// defaults are circuit.DefaultSettings, and the package documents how they
// were measured.
func bindCircuit(b *config.Binder, s *circuit.Settings) {
	b.Duration(&s.Window, "circuit-window", "circuit breaker: how far back registry calls are counted to tell an outage of the registration API from a bad row")
	b.Int(&s.Buckets, "circuit-buckets", "circuit breaker: in how many steps calls age out of the window")
	b.Int(&s.MinCalls, "circuit-min-calls", "circuit breaker: fewest calls in the window before the circuit may open")
	b.Float(&s.FailureRatio, "circuit-failure-ratio", "circuit breaker: share of transient failures (5xx, timeouts, connection errors) among the window's calls that opens the circuit, in (0, 1]")
	b.Int(&s.MinFailedRows, "circuit-min-failed-rows", "circuit breaker: fewest distinct rows failing in the window before it opens (a few poison rows never open it)")
	b.Int(&s.MinFailedSellers, "circuit-min-failed-sellers", "circuit breaker: fewest distinct sellers failing in the window before it opens, never fewer than 2 (one seller's failures are its own)")
	b.Duration(&s.ProbeMin, "circuit-probe-min", "circuit breaker: wait from opening to the first probe call, and the longest a refused caller waits before asking again")
	b.Duration(&s.ProbeMax, "circuit-probe-max", "circuit breaker: longest wait between two probe calls while the registration API stays down")
	b.Float(&s.ProbeMultiplier, "circuit-probe-multiplier", "circuit breaker: growth of the wait between probes after each failed probe (at least 1)")
	b.Duration(&s.ProbeLease, "circuit-probe-lease", "circuit breaker: a probe not answered within this long passes to the next consumer; above --registry-timeout")
	b.Duration(&s.TrustClosed, "circuit-trust-closed", "circuit breaker: how long an answer that the circuit is closed lets this consumer call without asking Redis first (a busy consumer renews it in the background once half of it has passed), and report answered calls in batches sent at least every half of it; 0 asks before every call and reports each")
}

// circuitSettings is s as circuit.New takes it: the flag's 0 (ask before
// every call) is the package's negative.
func circuitSettings(s circuit.Settings) circuit.Settings {
	if s.TrustClosed == 0 {
		s.TrustClosed = -1
	}
	return s
}

// checkCircuit names every circuit setting that cannot work. Zero would
// mean the package's default; here every default is written out, so zero is
// a mistake.
func checkCircuit(s circuit.Settings, registryTimeout time.Duration) error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s (%s) %s", name, config.EnvName(name), fmt.Sprintf(format, args...)))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"circuit-window", s.Window}, {"circuit-probe-min", s.ProbeMin}, {"circuit-probe-max", s.ProbeMax}, {"circuit-probe-lease", s.ProbeLease}} {
		if d.v <= 0 {
			bad(d.name, "must be greater than 0, got %s", d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"circuit-buckets", s.Buckets}, {"circuit-min-calls", s.MinCalls}, {"circuit-min-failed-rows", s.MinFailedRows}, {"circuit-min-failed-sellers", s.MinFailedSellers}} {
		if n.v <= 0 {
			bad(n.name, "must be greater than 0, got %d", n.v)
		}
	}
	if !(s.FailureRatio > 0 && s.FailureRatio <= 1) {
		bad("circuit-failure-ratio", "must be a fraction greater than 0 and at most 1, got %v", s.FailureRatio)
	}
	if !(s.ProbeMultiplier >= 1) || math.IsInf(s.ProbeMultiplier, 0) {
		bad("circuit-probe-multiplier", "must be at least 1, got %v", s.ProbeMultiplier)
	}
	if s.TrustClosed < 0 {
		bad("circuit-trust-closed", "must not be negative (0 asks Redis before every call), got %s", s.TrustClosed)
	}
	if s.ProbeMax > 0 && s.ProbeMax < s.ProbeMin {
		bad("circuit-probe-max", "(%s) must not be below --circuit-probe-min (%s)", s.ProbeMax, s.ProbeMin)
	}
	if s.ProbeLease > 0 && s.ProbeLease <= registryTimeout {
		bad("circuit-probe-lease", "(%s) must be longer than --registry-timeout (%s): a probe still waiting for its answer would be handed to a second consumer",
			s.ProbeLease, registryTimeout)
	}
	if len(errs) == 0 {
		if err := s.Validate(); err != nil { // what is left: a window too finely cut
			errs = append(errs, fmt.Errorf("the --circuit-* settings (BULKREG_CIRCUIT_*): %w", err))
		}
	}
	return errors.Join(errs...)
}
