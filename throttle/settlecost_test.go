package throttle

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/scriptbatch"
)

// BenchmarkSettleInACallsBatch measures what the settle adds to the script
// a consumer writes after a seller's calls (internal/scriptbatch): each
// call's compliance record, the calls' ledger marks in one step, with no
// settle (a slot that needs none) and with the calls' settles (SettleStep:
// one step). Reported: Redis's µs per call (INFO commandstats,
// so neither the round trip nor the client is counted), for a batch of 4
// calls of one seller whose log holds a full window of 100 latest counts.
//
//	go test -run '^$' -bench SettleInACallsBatch -benchtime 5000x ./throttle/
func BenchmarkSettleInACallsBatch(b *testing.B) {
	ctx := context.Background()
	rdb := startRedis(b).Client()
	p := PerMinute(100)
	p.CallTimeout = 20 * time.Second
	th, err := New(rdb, p)
	if err != nil {
		b.Fatal(err)
	}
	const calls = 4
	for _, bc := range []struct {
		name   string
		settle bool
	}{{"no-settle", false}, {"settle", true}} {
		b.Run(bc.name, func(b *testing.B) {
			s := seller("cost-" + bc.name)
			var rs []Reservation
			for range p.Limit {
				rs = append(rs, reserve(b, th, s))
			}
			runner := scriptbatch.New()
			tag := "{s:" + s + "}"
			batch := func(round int) []scriptbatch.Step {
				var steps []scriptbatch.Step
				var marks []any
				var settles []Settled
				for i := range calls {
					r := rs[(round*calls+i)%len(rs)]
					key := "k-" + strconv.Itoa(round) + "-" + strconv.Itoa(i)
					steps = append(steps,
						scriptbatch.Step{Script: "compliance_record.lua", Keys: []string{"bulkreg:" + tag + ":calls"},
							Args: []any{r.At.UnixMicro(), "201|registered|" + key + "|1", int64(1) << 50}})
					marks = append(marks, "sku-"+key, key, "h", "p-"+key, 3_600_000)
					settles = append(settles, Settled{Res: r, Answer: r.At.Add(5 * time.Millisecond)})
				}
				steps = append(steps, scriptbatch.Step{Script: "ledger_mark.lua", Keys: []string{"bulkreg:" + tag + ":ledger"}, Args: marks})
				if bc.settle {
					st := th.SettleStep(s, settles)
					if len(st) != 1 {
						b.Fatalf("%d settle steps, want 1", len(st))
					}
					steps = append(steps, st...)
				}
				return steps
			}
			if err := runner.Run(ctx, rdb, batch(0)...); err != nil { // loads the script
				b.Fatal(err)
			}
			rdb.ConfigResetStat(ctx)
			round := 0
			for b.Loop() {
				round++
				if err := runner.Run(ctx, rdb, batch(round)...); err != nil {
					b.Fatal(err)
				}
				if bc.settle {
					// the round's entries back to their latest counts, so
					// every round moves its calls' entries
					var zs []redis.Z
					for i := range calls {
						r := rs[(round*calls+i)%len(rs)]
						zs = append(zs, redis.Z{Score: float64(r.At.Add(th.p.reach()).UnixMicro()), Member: r.ID})
					}
					rdb.ZAdd(ctx, th.keys(s).log, zs...)
				}
			}
			b.StopTimer()
			b.ReportMetric(evalshaMicros(ctx, b, rdb)/calls, "redis-µs/call")
		})
	}
}

// evalshaMicros is the server's mean time per EVALSHA since the last
// CONFIG RESETSTAT.
func evalshaMicros(ctx context.Context, b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
			for field := range strings.SplitSeq(rest, ",") {
				if v, ok := strings.CutPrefix(field, "usec_per_call="); ok {
					f, err := strconv.ParseFloat(v, 64)
					if err != nil {
						b.Fatal(err)
					}
					return f
				}
			}
		}
	}
	b.Fatalf("no cmdstat_evalsha in %q", info)
	return 0
}
