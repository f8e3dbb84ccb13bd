package consumer

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// redisGate knows whether Redis answers. The throttle fails closed on its own
// (no slot without Redis), but a row that got its slot before Redis went down
// still sleeps towards it; the gate is checked right before each registry call
// so no call is made while Redis is known to be down, and rows waiting for
// Redis wait on the gate instead of each polling Redis.
type redisGate struct {
	ping     func(context.Context) error
	interval time.Duration
	log      *slog.Logger
	onDown   func()

	mu     sync.Mutex
	ok     bool
	upWait chan struct{} // closed when Redis comes back
}

func newRedisGate(ping func(context.Context) error, interval time.Duration, log *slog.Logger, onDown func()) *redisGate {
	return &redisGate{ping: ping, interval: interval, log: log, onDown: onDown, ok: true, upWait: make(chan struct{})}
}

// run pings Redis every interval until ctx ends.
func (g *redisGate) run(ctx context.Context) {
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, g.interval)
		err := g.ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			g.down(err)
		} else {
			g.up()
		}
	}
}

// healthy reports whether Redis answered last time anyone asked.
func (g *redisGate) healthy() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ok
}

// down records that a Redis call failed because Redis did not answer.
func (g *redisGate) down(err error) {
	g.mu.Lock()
	was := g.ok
	g.ok = false
	g.mu.Unlock()
	if was {
		g.onDown()
		g.log.Warn("redis is unavailable: no registry calls until it answers again", "err", err)
	}
}

func (g *redisGate) up() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.ok {
		g.ok = true
		close(g.upWait)
		g.upWait = make(chan struct{})
		g.log.Info("redis answers again: resuming registry calls")
	}
}

// wait blocks until Redis is up or ctx ends.
func (g *redisGate) wait(ctx context.Context) bool {
	g.mu.Lock()
	ok, ch := g.ok, g.upWait
	g.mu.Unlock()
	if ok {
		return true
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}
