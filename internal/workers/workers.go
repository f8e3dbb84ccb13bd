// Package workers runs functions on goroutines that are kept between them.
//
// A consumer starts a goroutine whenever a parked row resumes (its timer
// fired, its turn came) or a lane takes a row. Each new goroutine starts
// with a small stack and grows it, copying it each time, down the row's deep
// way through the throttle, the registry client and JSON: 8 % of the
// consumer's CPU in the bench (runtime.newstack). A goroutine that finished
// one function and waits for the next keeps its grown stack.
package workers

import (
	"sync"
	"sync/atomic"
	"time"
)

// Pool hands functions to idle goroutines, or starts one. Its zero value is
// not usable: use New.
type Pool struct {
	work    chan func() // unbuffered: a send succeeds only into an idle goroutine's hands
	maxIdle int32
	idleFor time.Duration // 0: an idle goroutine waits until Close
	idle    atomic.Int32
	done    chan struct{}
	close   sync.Once
}

// New returns a pool that keeps at most maxIdle goroutines waiting: a burst
// of wake-ups leaves no more than that many stacks behind.
func New(maxIdle int) *Pool {
	return &Pool{work: make(chan func()), maxIdle: int32(max(0, maxIdle)), done: make(chan struct{})}
}

// NewExpiring returns a pool like New whose idle goroutines also end after
// waiting idleFor without work. It is for owners that have no Close of their
// own (a batching client kept as long as the process, or built by every
// test): a quiet pool leaves no goroutines behind, and a busy one keeps
// them, since it hands work on long before idleFor.
func NewExpiring(maxIdle int, idleFor time.Duration) *Pool {
	p := New(maxIdle)
	p.idleFor = max(0, idleFor)
	return p
}

// Go runs f on an idle goroutine of the pool, or on a new one, and returns
// at once, like the go statement.
func (p *Pool) Go(f func()) {
	select {
	case p.work <- f:
	default:
		go p.loop(f)
	}
}

// loop runs f, then waits for the next function as long as the pool keeps
// fewer than maxIdle goroutines waiting, is not closed and (with idleFor)
// has work for it in time.
func (p *Pool) loop(f func()) {
	var expire *time.Timer
	var expired <-chan time.Time // nil, which never fires, without idleFor
	for {
		f()
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		if p.idleFor > 0 {
			if expire == nil {
				expire = time.NewTimer(p.idleFor)
				expired = expire.C
			} else {
				expire.Reset(p.idleFor) // since Go 1.23 a Reset timer sends nothing stale
			}
		}
		select {
		case f = <-p.work:
			p.idle.Add(-1)
		case <-expired:
			p.idle.Add(-1)
			return
		case <-p.done:
			p.idle.Add(-1)
			return
		}
	}
}

// Idle is how many goroutines wait for work.
func (p *Pool) Idle() int { return int(p.idle.Load()) }

// Close lets the waiting goroutines end; functions still running finish, and
// Go still works, each function then on a goroutine of its own.
func (p *Pool) Close() { p.close.Do(func() { close(p.done) }) }
