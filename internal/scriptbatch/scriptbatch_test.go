package scriptbatch

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/redis/go-redis/v9"
)

// A batch runs each script on its own slice of KEYS and ARGV, in order, and
// hands each reply to its step: steps with different key and argument
// counts (release.lua with one key and with two) must not shift each other.
func TestStepsRunInOrderOnTheirOwnKeysAndArgs(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	const log, tb, calls = "bulkreg:{s:a}:log", "bulkreg:{s:a}:tb", "bulkreg:{s:a}:calls"
	rdb.ZAdd(ctx, log, redis.Z{Score: 100, Member: "slot-1"}, redis.Z{Score: 200, Member: "slot-2"})
	rdb.ZAdd(ctx, tb, redis.Z{Score: 300, Member: "slot-3"})

	var replies []any
	keep := func(v any) error { replies = append(replies, v); return nil }
	steps := []Step{
		{Script: "settle.lua", Keys: []string{log, "bulkreg:{s:a}:block"}, Args: []any{50, "slot-1", 1000, "sliding"}, Reply: keep},
		{Script: "release.lua", Keys: []string{log}, Args: []any{"slot-2"}, Reply: keep},
		{Script: "release.lua", Keys: []string{log}, Args: []any{"slot-2"}, Reply: keep},
		{Script: "release.lua", Keys: []string{tb, "bulkreg:{s:a}:tb:tat"}, Args: []any{"slot-3", "1000"}, Reply: keep},
		{Script: "compliance_record.lua", Keys: []string{calls}, Args: []any{1_700_000_000_000_000, "201|registered|k|1", int64(1) << 50}, Reply: keep},
		{Script: "settle.lua", Keys: []string{log, "bulkreg:{s:a}:block"}, Args: []any{80, "slot-1", 1000, "sliding"}, Reply: keep}, // LT: later, no change
	}
	r := New()
	if err := r.Run(ctx, rdb, steps...); err != nil {
		t.Fatal(err)
	}
	want := []string{"[0]", "1", "0", "1", "[1700000000000000 1]", "[0]"}
	if len(replies) != len(want) {
		t.Fatalf("%d replies, want %d: %v", len(replies), len(want), replies)
	}
	for i, w := range want {
		if got := fmtReply(replies[i]); got != w {
			t.Errorf("step %d (%s): reply %s, want %s", i+1, steps[i].Script, got, w)
		}
	}
	if got := rdb.ZRangeWithScores(ctx, log, 0, -1).Val(); len(got) != 1 || got[0].Member != "slot-1" || got[0].Score != 50 {
		t.Errorf("log after the batch: %v, want slot-1 at 50 only", got)
	}
	if n := rdb.ZCard(ctx, tb).Val(); n != 0 {
		t.Errorf("token bucket log holds %d, want 0", n)
	}
	if got := rdb.ZRange(ctx, calls, 0, -1).Val(); len(got) != 1 || got[0] != "201|registered|k|1" {
		t.Errorf("call history %v", got)
	}

	// The same scripts again, in any number and order, reuse their script:
	// the sequence travels in ARGV.
	replies = nil
	twice := append(slices.Clone(steps[1:]), steps...)
	if err := r.Run(ctx, rdb, twice...); err != nil {
		t.Fatal(err)
	}
	if len(replies) != len(twice) || len(r.scripts) != 1 {
		t.Errorf("a batch of %d steps over the same scripts: %d replies, %d scripts composed; want %d and 1", len(twice), len(replies), len(r.scripts), len(twice))
	}
	// Redis losing its script cache (a restart, a failover) costs one EVAL
	// with the body.
	rdb.ScriptFlush(ctx)
	replies = nil
	if err := r.Run(ctx, rdb, steps[:2]...); err != nil {
		t.Fatalf("after SCRIPT FLUSH: %v", err)
	}
	if len(replies) != 2 {
		t.Errorf("after SCRIPT FLUSH: %d replies, want 2", len(replies))
	}
}

func fmtReply(v any) string {
	switch v := v.(type) {
	case []any:
		s := make([]string, len(v))
		for i, e := range v {
			s[i] = fmtReply(e)
		}
		return "[" + strings.Join(s, " ") + "]"
	case int64:
		return strconv.FormatInt(v, 10)
	case string:
		return v
	case nil:
		return "nil"
	}
	return "?"
}

// A step that fails stops the batch there: the steps before it are done,
// those after it are not, and the error names the scripts.
func TestAFailingStepStopsTheBatch(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	rdb.Set(ctx, "bulkreg:{s:a}:str", "x", 0)
	rdb.ZAdd(ctx, "bulkreg:{s:a}:log", redis.Z{Score: 1, Member: "m1"}, redis.Z{Score: 2, Member: "m2"})
	err := New().Run(ctx, rdb,
		Step{Script: "release.lua", Keys: []string{"bulkreg:{s:a}:log"}, Args: []any{"m1"}},
		Step{Script: "release.lua", Keys: []string{"bulkreg:{s:a}:str"}, Args: []any{"m"}}, // WRONGTYPE
		Step{Script: "release.lua", Keys: []string{"bulkreg:{s:a}:log"}, Args: []any{"m2"}},
	)
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") || !strings.Contains(err.Error(), "release.lua") {
		t.Fatalf("error %v, want WRONGTYPE naming release.lua", err)
	}
	if got := rdb.ZRange(ctx, "bulkreg:{s:a}:log", 0, -1).Val(); len(got) != 1 || got[0] != "m2" {
		t.Errorf("log %v, want [m2]: the first step done, the third not", got)
	}
}

// On Cluster a batch runs on its tag's node; one that spans two tags is
// refused as a whole, with nothing done.
func TestClusterOneTagPerBatch(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.StartCluster(t, 3).Client()
	for _, tag := range []string{"a", "b"} {
		if err := rdb.ZAdd(ctx, "bulkreg:{s:"+tag+"}:log", redis.Z{Score: 10, Member: "m"}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	r := New()
	if err := r.Run(ctx, rdb,
		Step{Script: "settle.lua", Keys: []string{"bulkreg:{s:a}:log", "bulkreg:{s:a}:block"}, Args: []any{5, "m", 1000, "sliding"}},
		Step{Script: "compliance_record.lua", Keys: []string{"bulkreg:{s:a}:calls"}, Args: []any{0, "c", 1_000_000}},
	); err != nil {
		t.Fatalf("one tag: %v", err)
	}
	if s := rdb.ZScore(ctx, "bulkreg:{s:a}:log", "m").Val(); s != 5 {
		t.Errorf("settled score %v, want 5", s)
	}
	err := r.Run(ctx, rdb,
		Step{Script: "release.lua", Keys: []string{"bulkreg:{s:a}:log"}, Args: []any{"m"}},
		Step{Script: "release.lua", Keys: []string{"bulkreg:{s:b}:log"}, Args: []any{"m"}},
	)
	if err == nil {
		t.Fatal("a batch over two hash tags ran on Cluster")
	}
	for _, tag := range []string{"a", "b"} {
		if n := rdb.ZCard(ctx, "bulkreg:{s:"+tag+"}:log").Val(); n != 1 {
			t.Errorf("tag %s: %d slots left, want 1 (nothing done)", tag, n)
		}
	}
}

func TestComposeRefuses(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"check.lua", "declares flags"},
		{"nope.lua", "no script"},
	} {
		if _, err := Compose("settle.lua", tc.name); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compose(%s): %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
