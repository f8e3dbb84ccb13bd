package consumer

import (
	"testing"
	"time"
)

// TestRedisBackOffIsMadeOnlyWhenAsked: the lazy backoff gives the
// configured intervals (grown, jittered, capped) once asked, and one reset
// before it was ever asked changes nothing.
func TestRedisBackOffIsMadeOnlyWhenAsked(t *testing.T) {
	c := &Consumer{cfg: Config{RedisRetryMin: 20 * time.Millisecond, RedisRetryMax: 100 * time.Millisecond}}
	for _, tc := range []struct {
		name       string
		resetFirst bool
	}{{"asked at once", false}, {"reset before it was asked", true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := c.redisBackOff()
			l := b.(*lazyBackOff)
			if tc.resetFirst {
				b.Reset()
			}
			if l.b != nil {
				t.Fatal("the backoff was made before an interval was asked for")
			}
			// The first interval is RedisRetryMin ± the default jitter (50 %);
			// later ones grow and never pass RedisRetryMax ± jitter.
			if d := b.NextBackOff(); d < 10*time.Millisecond || d > 30*time.Millisecond {
				t.Fatalf("first interval %s, want 20 ms ± 50 %%", d)
			}
			for range 20 {
				if d := b.NextBackOff(); d <= 0 || d > 150*time.Millisecond {
					t.Fatalf("interval %s, want within (0, 150 ms]", d)
				}
			}
			b.Reset()
			if d := b.NextBackOff(); d < 10*time.Millisecond || d > 30*time.Millisecond {
				t.Fatalf("interval after a reset %s, want 20 ms ± 50 %%", d)
			}
		})
	}
}
