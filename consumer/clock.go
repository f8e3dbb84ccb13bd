package consumer

import (
	"context"
	"sync"
	"time"
)

// redisClock places Redis's clock on this process's clock from every answer
// that carries it (a reservation, a check).
//
// One answer only says that Redis read its clock somewhere between the
// request's send and the answer's arrival, so the offset between the two
// clocks is known within that round trip. Under load a round trip is long
// (the command queues behind a pipeline, behind other scripts in Redis): a
// slot placed from its own reservation alone is uncertain by tens of
// milliseconds, and a call judged late from the early end of that
// uncertainty would give its slot back although it is on time (under bench
// many-sellers' load, most missed slots would be such, not late even from
// the late end).
//
// Every answer bounds the same offset, so the bounds of all answers hold at
// once: the process keeps the tightest lower and upper bound seen, each
// widened by maxDrift × its age, since the two clocks may run at slightly
// different rates. Then one quick round trip now and then places every slot
// within it. An answer outside the current bounds means a clock was stepped
// (NTP, a VM migration): the bounds start over from that answer alone.
type redisClock struct {
	base time.Time // this process's origin; durations from it are monotonic

	mu sync.Mutex
	ok bool
	// lo ≤ offset ≤ hi, offset = Redis µs − local µs since base, as of
	// loAt and hiAt (local µs since base)
	lo, hi     float64
	loAt, hiAt float64
}

// maxDrift is how fast the two clocks may drift apart: 500 ppm, ten times
// what an unsynchronised quartz clock does and far above an NTP-disciplined one.
const maxDrift = 500e-6

func newRedisClock() *redisClock { return &redisClock{base: time.Now()} }

func (c *redisClock) micros(t time.Time) float64 {
	return float64(t.Sub(c.base)) / float64(time.Microsecond)
}

// observe records an answer that read Redis's clock (redisNow) between
// sent and arrived on this process's clock.
func (c *redisClock) observe(sent, arrived, redisNow time.Time) {
	s, a := c.micros(sent), c.micros(arrived)
	r := float64(redisNow.UnixMicro())
	lo, hi := r-a, r-s
	c.mu.Lock()
	defer c.mu.Unlock()
	curLo, curHi := c.lo-maxDrift*max(0, a-c.loAt), c.hi+maxDrift*max(0, a-c.hiAt)
	if !c.ok || lo > curHi || hi < curLo {
		c.ok, c.lo, c.hi, c.loAt, c.hiAt = true, lo, hi, a, a
		return
	}
	if lo > curLo {
		c.lo, c.loAt = lo, a
	}
	if hi < curHi {
		c.hi, c.hiAt = hi, a
	}
}

// place returns where the Redis time at falls on this process's clock: the
// true instant is within [earliest, latest]. ok is false before the first
// answer.
func (c *redisClock) place(at time.Time) (earliest, latest time.Time, ok bool) {
	now := c.micros(time.Now())
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ok {
		return time.Time{}, time.Time{}, false
	}
	lo, hi := c.lo-maxDrift*max(0, now-c.loAt), c.hi+maxDrift*max(0, now-c.hiAt)
	r := float64(at.UnixMicro())
	// local = Redis − offset: the largest offset gives the earliest instant
	// One microsecond each way for the float arithmetic: a placement may be
	// wider than the truth, never narrower.
	earliest = c.base.Add(time.Duration((r-hi)*float64(time.Microsecond)) - time.Microsecond)
	latest = c.base.Add(time.Duration((r-lo)*float64(time.Microsecond)) + time.Microsecond)
	return earliest, latest, true
}

// syncClock reads Redis's clock every Config.ClockSync in a round trip of
// its own, while rows are taking slots. The throttle's answers come in
// pipelines shared with hundreds of other commands, so under load none is
// quick (tens of milliseconds at best in bench many-sellers), and a slot's
// place on this clock, from them alone, would be that uncertain. A call's
// lateness is counted from the earliest place, so a slot granted for now
// would be judged late by that much before the row did anything.
func (c *Consumer) syncClock(ctx context.Context) {
	t := time.NewTicker(c.cfg.ClockSync)
	defer t.Stop()
	for {
		if c.reserving.Load() > 0 {
			rctx, cancel := context.WithTimeout(ctx, c.cfg.ClockSync)
			sent := time.Now()
			now, err := c.deps.RedisTime(rctx)
			arrived := time.Now()
			cancel()
			if err == nil {
				c.clock.observe(sent, arrived, now)
			}
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}
