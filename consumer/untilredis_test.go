package consumer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestUntilRedisLogsALastingRefusalOnce: a Redis request refused several
// times in a row (not Redis missing: an OOM, a READONLY) is tried again
// until it succeeds, and an operator reads one warning for it and one line
// when it went through, not one warning per attempt.
func TestUntilRedisLogsALastingRefusalOnce(t *testing.T) {
	for _, refusals := range []int{0, 1, 4} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c := &Consumer{cfg: Config{RedisRetryMin: time.Millisecond, RedisRetryMax: time.Millisecond}}
		calls := 0
		err := c.untilRedis(context.Background(), "write the test's key", log, func(context.Context) error {
			calls++
			if calls <= refusals {
				return errors.New("OOM command not allowed when used memory > 'maxmemory'")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%d refusals: untilRedis = %v, want nil once Redis accepts", refusals, err)
		}
		if calls != refusals+1 {
			t.Errorf("%d refusals: the request ran %d times, want %d", refusals, calls, refusals+1)
		}
		out := buf.String()
		warns, debugs, infos := strings.Count(out, "level=WARN"), strings.Count(out, "level=DEBUG"), strings.Count(out, "level=INFO")
		wantWarn, wantInfo := min(refusals, 1), min(refusals, 1)
		if warns != wantWarn || debugs != max(refusals-1, 0) || infos != wantInfo {
			t.Errorf("%d refusals: logged %d warnings, %d debug lines, %d infos, want %d, %d, %d:\n%s",
				refusals, warns, debugs, infos, wantWarn, max(refusals-1, 0), wantInfo, out)
		}
		if refusals > 0 && !strings.Contains(out, "failed_attempts="+strconv.Itoa(refusals)) {
			t.Errorf("%d refusals: the line after success does not count them:\n%s", refusals, out)
		}
	}
}

// TestUntilRedisStopsWhenTheWaitEnds: a refusal that lasts past the
// caller's context returns the refusal, without another attempt.
func TestUntilRedisStopsWhenTheWaitEnds(t *testing.T) {
	c := &Consumer{cfg: Config{RedisRetryMin: time.Millisecond, RedisRetryMax: time.Millisecond}}
	ctx, cancel := context.WithCancel(context.Background())
	refused := errors.New("READONLY You can't write against a read only replica.")
	calls := 0
	err := c.untilRedis(ctx, "write the test's key", slog.New(slog.DiscardHandler), func(context.Context) error {
		calls++
		if calls == 3 {
			cancel()
		}
		return refused
	})
	if !errors.Is(err, refused) && !errors.Is(err, context.Canceled) {
		t.Fatalf("untilRedis = %v, want the refusal or the cancellation", err)
	}
	if calls != 3 {
		t.Errorf("the request ran %d times, want 3 (none after the context ended)", calls)
	}
}
