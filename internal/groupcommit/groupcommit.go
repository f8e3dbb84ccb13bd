// Package groupcommit lets callers that write under the same key share one
// write: items that arrive while a write of their key is on the wire wait for
// it, and the next write carries them all.
//
// A consumer finishes or starts a window of a seller's rows within
// milliseconds; without sharing, each row would cost its own script call on
// the seller's (or the upload's) hash tag. Sharing a call saves Redis the
// script's fixed work per row, and the rows of one key come back together
// instead of one by one between other keys' calls. Unless a Group lingers
// (Linger), nothing waits for a batch to fill on a clock: a write that finds
// nothing on the wire leaves as soon as the callers already running have had
// their turn (gather), and a busy key batches exactly as much as the write on
// the wire lets it.
package groupcommit

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/bulkreg/bulkreg/internal/workers"
)

// Group batches the items of each key. Its zero value is not usable: use New.
type Group[K comparable, T, R any] struct {
	write func(ctx context.Context, key K, items []T) ([]R, error)
	max   int
	// writers keeps the goroutines of finished writes for the next key's:
	// a new goroutine grows its stack anew, copying it each time, down the
	// write's way through the Redis client (runtime.newstack, a visible
	// share of the consumer's CPU profile with a goroutine per writer).
	writers *workers.Pool

	// linger is how long a new writer waits before its key's first write
	// (Linger); 0: it leaves once the running callers have had their turn.
	linger time.Duration

	mu     sync.Mutex
	queues map[K][]*waiter[T, R] // keys with a write on the wire: what waits for the next
	// full wakes a lingering writer whose key's queue reached max: the
	// write would carry no more by waiting longer.
	full map[K]chan struct{}
}

// Option changes how a Group batches.
type Option func(*groupOptions)

type groupOptions struct{ linger time.Duration }

// Linger makes a key's writer that finds nothing on the wire wait d before
// its first write (or until max items wait), so that items arriving over d
// share it. Each caller waits up to d longer, and so does whatever it holds
// meanwhile: for writes at the end of a row's way (its status, read by
// people), not for writes on its way to its slot.
func Linger(d time.Duration) Option { return func(o *groupOptions) { o.linger = max(0, d) } }

type waiter[T, R any] struct {
	ctx  context.Context
	item T
	done chan result[R] // buffered: the writer never waits for its caller
}

type result[R any] struct {
	r   R
	err error
}

// New returns a Group whose writes carry at most maxItems items (at least
// 1). write returns one result per item, in order, or an error for all.
func New[K comparable, T, R any](maxItems int, write func(ctx context.Context, key K, items []T) ([]R, error), opts ...Option) *Group[K, T, R] {
	var o groupOptions
	for _, opt := range opts {
		opt(&o)
	}
	return &Group[K, T, R]{write: write, max: max(1, maxItems), linger: o.linger,
		queues: map[K][]*waiter[T, R]{}, full: map[K]chan struct{}{},
		writers: workers.NewExpiring(idleWriters, idleWritersFor)}
}

// A Group has no Close: its idle writers end on their own after
// idleWritersFor, far longer than the gaps between a busy consumer's writes.
const (
	idleWriters    = 16
	idleWritersFor = 2 * time.Second
)

// Do writes item under key, with the other items of key that are waiting
// when its write leaves, and returns its own result. When ctx ends before
// the item's write leaves, the item is not written and Do returns ctx's
// error; once the write left, Do still returns at once with ctx's error,
// and the item may have been written. ctx does not bound the write itself
// (it is shared), and its values do not reach it.
func (g *Group[K, T, R]) Do(ctx context.Context, key K, item T) (R, error) {
	w := &waiter[T, R]{ctx: ctx, item: item, done: make(chan result[R], 1)}
	g.mu.Lock()
	q, busy := g.queues[key]
	g.queues[key] = append(q, w)
	if g.linger > 0 { // the other groups (every row's claim, slot and check) skip the map
		g.lingerLocked(key, busy, len(q)+1)
	}
	g.mu.Unlock()
	if !busy {
		// A writer of its own, not this caller: the items queued behind
		// this one are others', and this caller returns once its own is
		// written. It runs until the key's queue is empty. Its writes carry
		// many callers' items, so no caller's context (deadline or values)
		// is theirs: a write is bounded by the client's own timeouts, and
		// each item still leaves when its own ctx ends.
		g.writers.Go(func() { g.drain(context.Background(), key) })
	}
	select {
	case res := <-w.done:
		return res.r, res.err
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
}

// drain writes key's queued items, at most max per write, until none are
// left; the next item of key then starts a writer of its own.
func (g *Group[K, T, R]) drain(ctx context.Context, key K) {
	if g.linger > 0 {
		g.wait(key)
	}
	g.gather(key)
	for {
		g.mu.Lock()
		q := g.queues[key]
		batch := make([]*waiter[T, R], 0, min(len(q), g.max))
		items := make([]T, 0, cap(batch))
		n := 0
		for ; n < len(q) && len(batch) < g.max; n++ {
			if err := q[n].ctx.Err(); err != nil {
				q[n].done <- result[R]{err: err}
				continue
			}
			batch = append(batch, q[n])
			items = append(items, q[n].item)
		}
		if len(batch) == 0 {
			delete(g.queues, key)
			g.mu.Unlock()
			return
		}
		if n == len(q) {
			g.queues[key] = nil // the sent waiters are not kept reachable while the key stays busy
		} else {
			g.queues[key] = q[n:]
		}
		g.mu.Unlock()

		rs, err := g.write(ctx, key, items)
		if err == nil && len(rs) != len(batch) {
			err = fmt.Errorf("a shared write of %d items returned %d results", len(batch), len(rs))
		}
		for i, w := range batch {
			if err != nil {
				w.done <- result[R]{err: err}
			} else {
				w.done <- result[R]{r: rs[i]}
			}
		}
	}
}

// lingerLocked keeps key's full channel, under g.mu: made for the new writer
// an item without one starts, closed once queued items reach max.
func (g *Group[K, T, R]) lingerLocked(key K, busy bool, queued int) {
	switch full, ok := g.full[key]; {
	case !busy && g.max > 1:
		g.full[key] = make(chan struct{})
	case ok && queued >= g.max:
		close(full)
		delete(g.full, key)
	}
}

// wait is a new writer's linger: until it passes or key's queue is full.
func (g *Group[K, T, R]) wait(key K) {
	g.mu.Lock()
	full, ok := g.full[key]
	g.mu.Unlock()
	if !ok { // filled before the writer ran
		return
	}
	t := time.NewTimer(g.linger)
	select {
	case <-t.C:
	case <-full:
	}
	t.Stop()
	g.mu.Lock()
	if g.full[key] == full {
		delete(g.full, key)
	}
	g.mu.Unlock()
}

// gatherTurns bounds how often a new writer yields before its first write.
const gatherTurns = 4

// gather lets the goroutines that are ready to run have their turn before a
// new writer takes its key's first batch, for as long as each turn brings
// more items (at most gatherTurns). The callers of one key come in bursts
// that are already running, not yet queued: a seller's rows let through its
// ask gate together, the rows whose slots share a check, a window's calls
// finishing. Without it the first of a burst would leave alone and the
// rest wait a round trip for the next write. Under bench many-sellers it
// sends fewer Redis commands per row, for no more CPU (bench/HISTORY.md has
// the figures). A turn is a yield, not a clock: a lone caller costs one.
func (g *Group[K, T, R]) gather(key K) {
	for turn, seen := 0, -1; turn < gatherTurns; turn++ {
		g.mu.Lock()
		n := len(g.queues[key])
		g.mu.Unlock()
		if n == seen {
			return
		}
		seen = n
		runtime.Gosched()
	}
}

// Queued is how many items of key wait for the next write (for tests).
func (g *Group[K, T, R]) Queued(key K) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queues[key])
}

// Writing reports whether key has a writer (for tests).
func (g *Group[K, T, R]) Writing(key K) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.queues[key]
	return ok
}
