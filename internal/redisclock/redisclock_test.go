package redisclock

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testwait"
)

// redisAt is the Redis clock's reading at local instant t, for a Redis clock
// that is offset ahead of this process's.
func redisAt(c *Clock, t time.Time, offset time.Duration) time.Time {
	return time.UnixMicro(c.base.UnixMicro() + t.Sub(c.base).Microseconds()).Add(offset)
}

func TestClockKeepsTheTruthAndTheTightestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset time.Duration
		rtts   []time.Duration // round trips of the answers, in order
		width  time.Duration   // the placement's width after them, at most
	}{
		{"one slow answer", 3 * time.Second, []time.Duration{40 * time.Millisecond}, 40 * time.Millisecond},
		{"a quick answer among slow ones", -time.Hour, []time.Duration{40 * time.Millisecond, 300 * time.Microsecond, 35 * time.Millisecond, 50 * time.Millisecond}, time.Millisecond},
		{"slow answers narrow each other", 0, []time.Duration{20 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond}, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New()
			rng := rand.New(rand.NewPCG(1, 2))
			at := time.Now()
			for _, rtt := range tc.rtts {
				sent := at
				// Redis reads its clock anywhere within the round trip
				read := sent.Add(time.Duration(rng.Float64() * float64(rtt)))
				c.Observe(sent, sent.Add(rtt), redisAt(c, read, tc.offset))
				at = at.Add(2 * time.Millisecond)
			}
			slot := at.Add(time.Second) // a slot one second ahead, local truth
			earliest, latest, ok := c.Place(redisAt(c, slot, tc.offset))
			if !ok {
				t.Fatal("no placement after answers")
			}
			if earliest.After(slot) || latest.Before(slot) {
				t.Errorf("slot at %s placed in [%s, %s]: the truth is outside", slot.Sub(c.base), earliest.Sub(c.base), latest.Sub(c.base))
			}
			if w := latest.Sub(earliest); w > tc.width+2*time.Microsecond { // the rounding allowance
				t.Errorf("placement %s wide, want at most %s", w, tc.width)
			}
		})
	}
}

func TestClockManyAnswersNeverLoseTheTruth(t *testing.T) {
	c := New()
	rng := rand.New(rand.NewPCG(3, 4))
	const offset = 1234567 * time.Microsecond
	at := time.Now()
	for i := range 5000 {
		rtt := time.Duration(100+rng.IntN(50_000)) * time.Microsecond
		read := at.Add(time.Duration(rng.Float64() * float64(rtt)))
		c.Observe(at, at.Add(rtt), redisAt(c, read, offset))
		slot := at.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		earliest, latest, _ := c.Place(redisAt(c, slot, offset))
		// one microsecond of rounding on each side
		if earliest.After(slot.Add(time.Microsecond)) || latest.Before(slot.Add(-time.Microsecond)) {
			t.Fatalf("answer %d: slot %s placed in [%s, %s]", i, slot.Sub(c.base), earliest.Sub(c.base), latest.Sub(c.base))
		}
		at = at.Add(time.Duration(rng.IntN(2000)) * time.Microsecond)
	}
}

func TestClockStartsOverWhenAClockSteps(t *testing.T) {
	c := New()
	now := time.Now()
	c.Observe(now, now.Add(100*time.Microsecond), redisAt(c, now, 0))
	// Redis's clock stepped 2 s ahead (NTP): the old bounds exclude every
	// answer now, so they are dropped for the new one
	later := now.Add(time.Millisecond)
	c.Observe(later, later.Add(5*time.Millisecond), redisAt(c, later.Add(time.Millisecond), 2*time.Second))
	slot := later.Add(time.Second)
	earliest, latest, _ := c.Place(redisAt(c, slot, 2*time.Second))
	if earliest.After(slot) || latest.Before(slot) {
		t.Errorf("after a step of the Redis clock the slot %s is placed in [%s, %s]", slot.Sub(c.base), earliest.Sub(c.base), latest.Sub(c.base))
	}
}

// TestSyncReadsRedisOnItsOwn: Sync reads Redis's clock every interval on
// its own, so slots are placed within the quick round trips, not the slow
// ones of busy pipelines; only while active, and until ctx ends.
func TestSyncReadsRedisOnItsOwn(t *testing.T) {
	const offset = 90 * time.Minute
	const interval = 5 * time.Millisecond
	var reads atomic.Int64
	c := New()
	read := func(ctx context.Context) (time.Time, error) {
		reads.Add(1)
		return time.Now().Add(offset), nil
	}
	var active atomic.Bool
	active.Store(true) // a row is taking a slot
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); c.Sync(ctx, interval, active.Load, read) }()
	testwait.For(t, 5*time.Second, "10 reads of Redis's clock", func() bool { return reads.Load() >= 10 })
	elapsed := time.Since(start)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Sync went on after its context ended")
	}
	n := reads.Load()
	if most := int64(elapsed/interval) + 2; n > most {
		t.Errorf("%d reads of Redis's clock in %v, want at most one per %v (%d)", n, elapsed, interval, most)
	}
	slot := time.Now().Add(time.Second)
	earliest, latest, ok := c.Place(slot.Add(offset))
	if !ok || earliest.After(slot) || latest.Before(slot) {
		t.Fatalf("a slot 1 s ahead placed in [%v, %v] (ok %v), want around it", earliest.Sub(slot), latest.Sub(slot), ok)
	}
	if w := latest.Sub(earliest); w > 2*time.Millisecond {
		t.Errorf("placement %v wide after %d quick reads, want under 2 ms", w, n)
	}

	// Not active: no read.
	active.Store(false)
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	c.Sync(ctx, interval, active.Load, read)
	if reads.Load() != n {
		t.Errorf("Redis's clock was read %d times while not active, want 0", reads.Load()-n)
	}
}
