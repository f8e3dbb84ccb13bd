package throttle

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/lua"
)

// scanAll is settle.lua before its sliding give-back visited only the
// slots whose window the move fills (testdata/settle_scan_all.lua).
func scanAll(t testing.TB) *redis.Script {
	t.Helper()
	b, err := os.ReadFile("testdata/settle_scan_all.lua")
	if err != nil {
		t.Fatal(err)
	}
	return redis.NewScript(string(b))
}

// validLog reports whether no window of span ending at a slot holds more
// than limit slots: the log the reservation scripts keep.
func validLog(slots []int64, span int64, limit int) bool {
	for _, y := range slots {
		n := 0
		for _, x := range slots {
			if x >= y-span && x <= y {
				n++
			}
		}
		if n > limit {
			return false
		}
	}
	return true
}

// TestSettleVisitsOnlyTheSlotsItsMoveFills: on random valid sliding logs, a
// late settle gives back exactly the slots the script that visited every
// slot within W' after the settled place gave back (the same members left,
// with the same scores, and the same reply), against real Redis. Only slots
// in (held + W', at + W'] can go over the limit when the call moves from
// held to at; the new script visits only those.
func TestSettleVisitsOnlyTheSlotsItsMoveFills(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t).Client()
	before, after := scanAll(t), redis.NewScript(lua.Script("settle.lua"))
	seed := time.Now().UnixNano()
	rng := mrand.New(mrand.NewPCG(uint64(seed), 26))
	const cases = 400
	given := 0
	for c := range cases {
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		base := now.UnixMicro()
		span := int64(1_000_000 + rng.IntN(9_000_000)) // W' from 1 s to 10 s
		limit := 1 + rng.IntN(6)
		lead := int64(rng.IntN(int(span)))
		// Slots both runs may judge differently (their TIME differs by the
		// test's own few ms) would prove nothing: keep clear of now + lead.
		clear := func(x int64) bool { return x < base+lead-5_000 || x > base+lead+500_000 }
		var slots []int64
		for range 60 {
			x := base - span + rng.Int64N(4*span)
			if rng.IntN(4) == 0 && len(slots) > 0 {
				x = slots[rng.IntN(len(slots))] + rng.Int64N(span/4) // crowd a window
			}
			if !clear(x) {
				continue
			}
			if next := append(slices.Clone(slots), x); validLog(next, span, limit) {
				slots = next
			}
		}
		// the settled call: a slot before now, answered later (at <= now)
		var past []int
		for i, x := range slots {
			if x < base-1 {
				past = append(past, i)
			}
		}
		if len(past) == 0 {
			continue
		}
		self := past[rng.IntN(len(past))]
		held := slots[self]
		at := held + 1 + rng.Int64N(base-held)
		keys := [2]string{fmt.Sprintf("eq:{%d}:before", c), fmt.Sprintf("eq:{%d}:after", c)}
		for _, k := range keys {
			for i, x := range slots {
				m := "s" + strconv.Itoa(i)
				if i == self {
					m = "self"
				}
				if err := rdb.ZAdd(ctx, k, redis.Z{Score: float64(x), Member: m}).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		args := []any{at, "self", span, limit, lead}
		n0, err0 := before.Run(ctx, rdb, keys[:1], args...).Int()
		n1, err1 := after.Run(ctx, rdb, keys[1:], args...).Int()
		if err0 != nil || err1 != nil {
			t.Fatalf("seed %d case %d: %v, %v", seed, c, err0, err1)
		}
		z0, _ := rdb.ZRangeWithScores(ctx, keys[0], 0, -1).Result()
		z1, _ := rdb.ZRangeWithScores(ctx, keys[1], 0, -1).Result()
		if n0 != n1 || !slices.Equal(z0, z1) {
			t.Fatalf("seed %d case %d (W' %d µs, limit %d, lead %d µs, now %d, self %d → %d, log %v):\nvisiting every slot gave back %d, leaving %v\nvisiting the filled ones gave back %d, leaving %v",
				seed, c, span, limit, lead, base, held, at, slots, n0, z0, n1, z1)
		}
		given += n0
		rdb.Del(ctx, keys[0], keys[1])
	}
	// The comparison means something only if the give-back ran.
	if given < cases/10 {
		t.Errorf("seed %d: %d slots given back in %d cases; the logs hardly exercise the give-back", seed, given, cases)
	}
	t.Logf("seed %d: %d slots given back in %d cases, alike", seed, given, cases)
}

// BenchmarkSettle measures one late settle of a seller's sliding log with
// 100 calls per minute, 99 slots booked ahead (the window full) and the
// call counted 1.5 s after its slot, the way the consumer runs it with a
// slow API: the server's µs per settle.lua (INFO commandstats, so the
// round trip is not counted), for the script that visited every booked
// slot and the one that visits only those the move fills.
//
//	go test -run '^$' -bench Settle -benchtime 20000x ./throttle/
func BenchmarkSettle(b *testing.B) {
	ctx := context.Background()
	rdb := startRedis(b).Client()
	p := PerMinute(100)
	span, lead := p.span().Microseconds(), p.Margin.Microseconds() // LossHold − W′ by default
	for _, bc := range []struct {
		name   string
		script *redis.Script
	}{{"scan-all", scanAll(b)}, {"filled-only", redis.NewScript(lua.Script("settle.lua"))}} {
		b.Run(bc.name, func(b *testing.B) {
			now, err := rdb.Time(ctx).Result()
			if err != nil {
				b.Fatal(err)
			}
			base, key := now.UnixMicro(), "bench:{settle}:"+bc.name
			held, at := base-2_000_000, base-500_000
			zs := []redis.Z{{Score: float64(held), Member: "self"}}
			for i := range p.Limit - 1 {
				zs = append(zs, redis.Z{Score: float64(base + 1_000_000 + int64(i)*550_000), Member: "s" + strconv.Itoa(i)})
			}
			if err := rdb.ZAdd(ctx, key, zs...).Err(); err != nil {
				b.Fatal(err)
			}
			if err := bc.script.Load(ctx, rdb).Err(); err != nil {
				b.Fatal(err)
			}
			rdb.ConfigResetStat(ctx)
			for b.Loop() {
				if n, err := bc.script.EvalSha(ctx, rdb, []string{key}, at, "self", span, p.Limit, lead).Int(); err != nil || n != 0 {
					b.Fatalf("settle: %d given back, %v; want none from a full, valid window", n, err)
				}
				rdb.ZAdd(ctx, key, redis.Z{Score: float64(held), Member: "self"})
			}
			b.StopTimer()
			b.ReportMetric(evalshaMicros(ctx, b, rdb), "µs/settle")
			rdb.Del(ctx, key)
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
