package sim

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testbin"
)

var (
	seedFlag     = flag.Int64("sim.seed", -1, "replay this seed only (make soak SEED=n)")
	durationFlag = flag.Duration("sim.duration", 0, "run seeds one after another for this long (make soak DURATION=1h)")
	firstFlag    = flag.Int64("sim.first", 0, "with -sim.duration, the first seed (0: from the clock, printed)")
	logLevelFlag = flag.String("sim.log-level", "warn", "the consumers' BULKREG_LOG_LEVEL (debug to replay a seed in detail)")
	logDirFlag   = flag.String("sim.log-dir", "", "write each consumer's whole output to DIR/<seed>-consumer-<n>.log when a seed breaks a promise")
)

// shortSeeds run in every `go test ./...`: three seeds of about 25 s each,
// each drawing a fault the throttle or the circuit must get through: 303 (a
// latency spike that has the API count calls 1.5 s late: a settled slot
// must outlive its log key, or 429s follow), 301 (a 403 burst: no row may
// fail for an answer about bulkreg) and 515 (a latency spike past the
// registry timeout, margin 50 ms: calls counted after the client gave up
// must hold their slots until then).
var shortSeeds = []int64{303, 301, 515}

// TestSimulation is the short run inside `make test`.
func TestSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs seeded fault schedules for about a minute")
	}
	if *seedFlag >= 0 || *durationFlag > 0 {
		t.Skip("the soak flags are set: TestSoak runs them")
	}
	bin := testbin.Build(t, "producer", "consumer")
	for _, seed := range shortSeeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runSeed(t, bin, seed) })
	}
}

// TestSoak is `make soak`: one seed (-sim.seed) or seeds one after another
// for -sim.duration. It prints seeds, minutes and faults by kind.
func TestSoak(t *testing.T) {
	if *seedFlag < 0 && *durationFlag <= 0 {
		t.Skip("run with -sim.seed=N or -sim.duration=D (make soak)")
	}
	bin := testbin.Build(t, "producer", "consumer")
	started := time.Now()
	kinds := map[Kind]int{}
	var seeds []int64
	var failed []string
	one := func(seed int64) {
		seeds = append(seeds, seed)
		ok := t.Run(fmt.Sprint(seed), func(t *testing.T) {
			sc := runSeed(t, bin, seed)
			for k, n := range sc.Kinds() {
				kinds[k] += n
			}
		})
		if !ok {
			failed = append(failed, fmt.Sprint(seed))
		}
	}
	if *seedFlag >= 0 {
		one(*seedFlag)
	} else {
		seed := *firstFlag
		if seed == 0 {
			seed = time.Now().Unix() % 1_000_000
		}
		t.Logf("soak: seeds from %d for %s", seed, *durationFlag)
		for time.Since(started) < *durationFlag {
			one(seed)
			seed++
		}
	}
	var byKind []string
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		byKind = append(byKind, fmt.Sprintf("%s %d", k, kinds[k]))
	}
	t.Logf("soak: %d seeds (%d..%d) in %.1f minutes; faults injected: %s; failing seeds: %s",
		len(seeds), seeds[0], seeds[len(seeds)-1], time.Since(started).Minutes(), strings.Join(byKind, ", "), cmpOr(strings.Join(failed, " "), "none"))
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// runSeed runs one seed's scenario and fails t with its seed, its schedule
// and every broken promise.
func runSeed(t *testing.T, bin string, seed int64) Scenario {
	sc := Generate(seed)
	runScenario(t, bin, sc)
	return sc
}

// runScenario runs sc, judges it and fails t with its schedule and every
// broken promise; it returns the verdict and the world, stopped, for a
// named scenario's own checks.
func runScenario(t *testing.T, bin string, sc Scenario) (verdict, *world) {
	seed := sc.Seed
	began := time.Now()
	w := newWorld(t, bin, sc)
	w.run()
	ctx := context.Background()
	settleAt := w.start.Add(sc.FaultsEnd() + sc.SettleTime(settleBudget, sc.SessionTimeout()))
	ok, why := false, ""
	for {
		ok, why = w.settled(ctx)
		if ok || time.Now().After(settleAt) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	v := w.judge(ctx, ok, why, settleAt)
	w.stopAll()

	w.mu.Lock()
	var injected []string
	for _, in := range w.injected {
		line := fmt.Sprintf("  %s (at %s)", in.Fault, w.rel(in.Began))
		if in.Note != "" {
			line += " — " + in.Note
		}
		injected = append(injected, line)
	}
	w.mu.Unlock()
	var outcomes []string
	for _, k := range slices.Sorted(maps.Keys(v.outcomes)) {
		outcomes = append(outcomes, fmt.Sprintf("%s %d", k, v.outcomes[k]))
	}
	t.Logf("seed %d: %d rows (%s), settled %v after %.1fs, %d faults, %d violations",
		seed, v.rows, strings.Join(outcomes, ", "), ok, time.Since(began).Seconds(), len(sc.Faults), len(v.violations))
	if v.lossWarnings > 0 || v.migrations > 0 {
		t.Logf("seed %d: %d slot migrations, %d Redis losses injected, %d warnings that Redis lost the throttle's state", seed, v.migrations, len(w.losses), v.lossWarnings)
	}
	w.mu.Lock()
	expired := slices.Clone(w.expired)
	w.mu.Unlock()
	if len(expired) > 0 {
		t.Logf("seed %d: %d members dropped from the group as a Kafka coordinator would have and the embedded broker did not: %s",
			seed, len(expired), strings.Join(expired, ", "))
	}
	for _, n := range v.notes {
		t.Logf("note: %s", n)
	}
	if len(v.violations) > 0 {
		replay := fmt.Sprintf("replay: make soak SEED=%d", seed)
		if sc.Family != "" && seed < 0 {
			replay = "replay: go test ./sim -run " + t.Name()
		}
		t.Errorf("seed %d broke a promise (%s)\n%s\ninjected:\n%s\nviolations:\n  %s\n%s",
			seed, replay, sc, strings.Join(injected, "\n"), strings.Join(v.violations, "\n  "), w.consumerLogs(15))
		if *logDirFlag != "" {
			if err := w.writeLogs(*logDirFlag, seed); err != nil {
				t.Errorf("write the consumers' logs: %v", err)
			}
		}
	}
	return v, w
}
