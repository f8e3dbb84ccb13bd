// Command bench measures the consumer end to end and prints JSON: the
// embedded Kafka broker, a real redis-server, the sandbox registration API
// (in this process) and N cmd/consumer processes, every window shrunk from
// 60 s to 3 s so a scenario takes seconds, not an hour. It is a program, not
// a test: everything shares the machine, so run it alone (check `uptime`).
//
//	go run ./bench                                  # every scenario this build has
//	go run ./bench -scenario many-sellers           # one; or a list: one-seller,many-sellers
//	go run ./bench -consumer-bin /tmp/old/consumer  # measure another build of cmd/consumer
//	go run ./bench -scenario many-sellers -sellers 40 -consumer-bin /tmp/old/consumer  # a load an older build can finish
//	go run ./bench -scenario many-sellers -redis-pipelining autopipe,goredis -rounds 2 -pause 20s  # interleaved
//
// Scenarios (the sandbox answers each call after 5 ms):
//
//	one-seller    1 seller × 500 rows, 4 consumers, 100 per 3 s, margin 50 ms
//	many-sellers  100 sellers × 500 rows, 4 consumers, 100 per 3 s, margin 100 ms
//	              (100 sellers at their limit: about 3,200 registrations/s)
//	global        20 sellers, one with 500 rows (published first) and 19 with
//	              10, 100 per seller and 200 for the whole application per 3 s,
//	              margin 100 ms.
//	idle          nothing published: 4 consumers measured for 20 s, 5 s after
//	              their group is stable (a fleet waits between uploads most of
//	              the day, and a short run carries its idle cost in every row)
//
// Per scenario it prints registrations/s sustained, consumer CPU µs and
// Redis round trips and commands per registered row, each seller's ratio to
// its lower bound (min/median/max), 429s and each consumer's peak RSS; with
// an app-wide limit also how much of it was used while rows waited and how
// many windows the small sellers took; for every scenario, idle included,
// each consumer's CPU a second. The JSON's "definitions" say exactly
// how each figure is computed; "machine" says where it ran.
package main

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	spinIfAsked()
	which := flag.String("scenario", "all", "comma-separated scenarios: one-seller, many-sellers, global, idle, or all")
	window := flag.Duration("window", 0, "override the seller window (and an equal app-wide window) of every scenario; 0 keeps 3s")
	consumerBin := flag.String("consumer-bin", "", "cmd/consumer binary to run, for example an older build (default: built from this tree)")
	manySellers := flag.Int("sellers", 0, "override the number of sellers of many-sellers (500 rows each); 0 keeps 100. A lighter load lets an older, slower consumer finish, so CPU per row can be compared in the same session")
	timesDir := flag.String("times", "", "also write each scenario's registration times, per seller in seconds from the run's first, to DIR/<scenario>-times.json (to see where a slow seller lost its time); DIR/<scenario>-<choice>-<round>-times.json, the choice with -redis-pipelining, the round with -rounds above 1")
	pipelining := flag.String("redis-pipelining", "", "comma-separated --redis-pipelining values of the consumers (autopipe, goredis, none), each scenario run once with each, interleaved; empty: the consumer's default")
	rounds := flag.Int("rounds", 1, "run every scenario (with every -redis-pipelining) this many times, round after round, so that what is compared is interleaved")
	pause := flag.Duration("pause", 0, "wait this long between two runs, so one run's load does not skew the next")
	busy := flag.Int("busy", 0, "keep this many cores busy with other processes during each run (issue 30: the pacing on a machine shared with a noisy neighbour); 0: none")
	pprofPort := flag.Int("pprof-port", 0, "serve consumer i's /debug/pprof on 127.0.0.1:PORT+i (--pprof-addr), to profile a run with go tool pprof; 0: not served")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	chosen, err := choose(*which)
	if err == nil && *window < 0 {
		err = fmt.Errorf("-window is %s, it must be positive (or 0 for each scenario's own)", *window)
	}
	if err == nil && *manySellers < 0 {
		err = fmt.Errorf("-sellers is %d, it must be positive (or 0 for 100)", *manySellers)
	}
	if err == nil && *manySellers > 0 && !slices.ContainsFunc(chosen, func(sc scenario) bool { return sc.Name == "many-sellers" }) {
		err = errors.New("-sellers changes the many-sellers scenario, which -scenario does not run")
	}
	var modes []string
	if err == nil {
		modes, err = pipeliningModes(*pipelining)
	}
	if err == nil && *rounds < 1 {
		err = fmt.Errorf("-rounds is %d, it must be at least 1", *rounds)
	}
	if err == nil && *busy < 0 {
		err = fmt.Errorf("-busy is %d, it must not be negative", *busy)
	}
	if err == nil && *pause < 0 {
		err = fmt.Errorf("-pause is %s, it must not be negative", *pause)
	}
	if err == nil && *timesDir != "" {
		// Made before the runs, so a directory that cannot be written
		// fails now and not after minutes of work.
		if mkErr := os.MkdirAll(*timesDir, 0o755); mkErr != nil {
			err = fmt.Errorf("-times: %w", mkErr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "bulkreg-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	bin, err := consumerBinary(dir, *consumerBin)
	if err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}

	var out []result
	for round := 1; round <= *rounds; round++ {
		for _, sc := range chosen {
			if *manySellers > 0 && sc.Name == "many-sellers" {
				sc.Groups = []sellerGroup{{*manySellers, sc.Groups[0].RowsEach}}
			}
			if *window > 0 {
				if sc.GlobalWindow == sc.Window {
					sc.GlobalWindow = *window
				}
				sc.Window = *window
			}
			for _, mode := range modes {
				if len(out) > 0 {
					time.Sleep(*pause)
				}
				name := runName(sc.Name, mode, round, *rounds)
				r, err := run(context.Background(), sc, mode, bin.Path, dir, *pprofPort, *busy, log)
				if err != nil {
					os.RemoveAll(dir)
					fmt.Fprintln(os.Stderr, "bench:", name+":", err)
					os.Exit(1)
				}
				r.Round = round
				if *timesDir != "" {
					if err := writeTimes(filepath.Join(*timesDir, name+"-times.json"), r.times); err != nil {
						os.RemoveAll(dir)
						fmt.Fprintln(os.Stderr, "bench:", err)
						os.Exit(1)
					}
				}
				out = append(out, r)
				fmt.Fprintf(os.Stderr, "bench: %s done: %s\n", name, brief(r))
			}
		}
	}
	os.RemoveAll(dir)
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{
		"machine":         machine(),
		"consumer_binary": bin,
		"note": "windows shrunk from 60 s; the broker, Redis, the sandbox and every consumer share this machine, " +
			"so the figures include their contention",
		"definitions": definitions(),
		"results":     out,
	}); err != nil {
		fmt.Fprintln(os.Stderr, "bench: write the JSON:", err)
		os.Exit(1)
	}
}

// choose resolves -scenario into scenarios, in the order given.
func choose(which string) ([]scenario, error) {
	all := scenarios()
	var names []string
	for _, sc := range all {
		names = append(names, sc.Name)
	}
	if which == "all" {
		return all, nil
	}
	var out []scenario
	for name := range strings.SplitSeq(which, ",") {
		i := slices.IndexFunc(all, func(sc scenario) bool { return sc.Name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("-scenario %q: no scenario %q; choose from %s or all", which, name, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// binaryInfo says which consumer was measured.
type binaryInfo struct {
	Path         string `json:"path"`
	BuiltByBench bool   `json:"built_from_this_tree_by_bench"`
	GoVersion    string `json:"go_version,omitempty"`
	Revision     string `json:"vcs_revision,omitempty"`
	RevisionAt   string `json:"vcs_time,omitempty"`
	Modified     string `json:"vcs_modified,omitempty"`
}

// consumerBinary builds cmd/consumer from this tree into dir, or checks the
// one given with -consumer-bin, and reads what the Go toolchain stamped in it.
func consumerBinary(dir, given string) (binaryInfo, error) {
	b := binaryInfo{Path: given}
	if given == "" {
		b.Path, b.BuiltByBench = filepath.Join(dir, "consumer"), true
		if out, err := exec.Command("go", "build", "-o", b.Path, "github.com/bulkreg/bulkreg/cmd/consumer").CombinedOutput(); err != nil {
			return b, fmt.Errorf("build cmd/consumer: %w\n%s", err, out)
		}
		// go build does not stamp the revision in every checkout (a git
		// worktree here), so ask git.
		if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
			b.Revision = strings.TrimSpace(string(out))
		}
		if out, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
			b.Modified = strconv.FormatBool(len(out) > 0)
		}
	} else {
		abs, err := filepath.Abs(given)
		if err != nil {
			return b, fmt.Errorf("-consumer-bin %s: %w", given, err)
		}
		st, err := os.Stat(abs)
		if err != nil {
			return b, fmt.Errorf("-consumer-bin: %w", err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return b, fmt.Errorf("-consumer-bin %s is not an executable file", given)
		}
		b.Path = abs
	}
	if bi, err := buildinfo.ReadFile(b.Path); err == nil {
		b.GoVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.RevisionAt = s.Value
			case "vcs.modified":
				b.Modified = s.Value
			}
		}
	}
	return b, nil
}
