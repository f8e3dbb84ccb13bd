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
)

// Pool hands functions to idle goroutines, or starts one. Its zero value is
// not usable: use New.
type Pool struct {
	work    chan func() // unbuffered: a send succeeds only into an idle goroutine's hands
	maxIdle int32
	idle    atomic.Int32
	done    chan struct{}
	close   sync.Once
}

// New returns a pool that keeps at most maxIdle goroutines waiting: a burst
// of wake-ups leaves no more than that many stacks behind.
func New(maxIdle int) *Pool {
	return &Pool{work: make(chan func()), maxIdle: int32(max(0, maxIdle)), done: make(chan struct{})}
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
// fewer than maxIdle goroutines waiting and is not closed.
func (p *Pool) loop(f func()) {
	for {
		f()
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		select {
		case f = <-p.work:
			p.idle.Add(-1)
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
