// Package redisclock places Redis's clock on this process's clock from every
// answer that carries it (a reservation, a check, a read of TIME).
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
package redisclock

import (
	"context"
	"sync"
	"time"
)

// Clock is what this process knows of Redis's clock. Its methods may be
// called from any goroutine.
type Clock struct {
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

// New is a Clock that knows nothing yet.
func New() *Clock { return &Clock{base: time.Now()} }

func (c *Clock) micros(t time.Time) float64 {
	return float64(t.Sub(c.base)) / float64(time.Microsecond)
}

// Observe records an answer that read Redis's clock (redisNow) between
// sent and arrived on this process's clock.
func (c *Clock) Observe(sent, arrived, redisNow time.Time) {
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

// Place returns where the Redis time at falls on this process's clock: the
// true instant is within [earliest, latest]. ok is false before the first
// answer.
func (c *Clock) Place(at time.Time) (earliest, latest time.Time, ok bool) {
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

// Sync reads Redis's clock (read: a round trip of its own, not queued
// behind other commands) every interval while active reports true, until
// ctx ends. Answers that come in busy pipelines are slow (tens of
// milliseconds under load), and a slot placed from them alone would be that
// uncertain; a caller that counts a call's lateness from the earliest place
// would judge a slot granted for now late by that much.
func (c *Clock) Sync(ctx context.Context, interval time.Duration, active func() bool, read func(context.Context) (time.Time, error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if active() {
			rctx, cancel := context.WithTimeout(ctx, interval)
			sent := time.Now()
			now, err := read(rctx)
			arrived := time.Now()
			cancel()
			if err == nil {
				c.Observe(sent, arrived, now)
			}
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}
