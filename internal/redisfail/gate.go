package redisfail

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Gate knows whether Redis answers: a caller that must not act while Redis
// is down (the consumer, before each registry call: a row that got its slot
// before Redis went down still sleeps towards it) asks it, and callers
// waiting for Redis wait on it instead of each polling Redis. It learns of
// an outage from any caller (Down) and of the end of one from its own ping
// (Run).
type Gate struct {
	ping     func(context.Context) error
	interval time.Duration
	log      *slog.Logger
	onDown   func()

	// ok is read without the lock (Healthy and Wait run before every
	// registry call); it changes only under mu, with upWait.
	ok     atomic.Bool
	mu     sync.Mutex
	upWait chan struct{} // closed when Redis comes back
}

// NewGate pings with ping every interval once Run runs; onDown is called
// once per outage, as it begins.
func NewGate(ping func(context.Context) error, interval time.Duration, log *slog.Logger, onDown func()) *Gate {
	g := &Gate{ping: ping, interval: interval, log: log, onDown: onDown, upWait: make(chan struct{})}
	g.ok.Store(true)
	return g
}

// Run pings Redis every interval until ctx ends.
func (g *Gate) Run(ctx context.Context) {
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
			g.Down(err)
		} else {
			g.up()
		}
	}
}

// Healthy reports whether Redis answered last time anyone asked.
func (g *Gate) Healthy() bool { return g.ok.Load() }

// Down records that a Redis call failed because Redis did not answer.
func (g *Gate) Down(err error) {
	g.mu.Lock()
	was := g.ok.Swap(false)
	g.mu.Unlock()
	if was {
		g.onDown()
		g.log.Warn("redis is unavailable: no registry calls until it answers again", "err", err)
	}
}

func (g *Gate) up() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.ok.Load() {
		g.ok.Store(true)
		close(g.upWait)
		g.upWait = make(chan struct{})
		g.log.Info("redis answers again: resuming registry calls")
	}
}

// Wait blocks until Redis is up (true) or ctx ends (false).
func (g *Gate) Wait(ctx context.Context) bool {
	if g.ok.Load() {
		return true
	}
	g.mu.Lock()
	ok, ch := g.ok.Load(), g.upWait
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
