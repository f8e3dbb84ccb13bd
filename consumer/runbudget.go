package consumer

import (
	"context"
	"slices"
	"sync"
	"time"
)

// startBudget is how many calls this process lets fall due at once: what
// it can start within MaxLateness (Config.MaxDueNow). A runner whose next
// slots may be due now takes one per row before it reserves, and gives each
// back when the row's call starts or its slot turns out later. When many
// sellers' first windows are free at once, each would otherwise book its
// whole window at the same instant, and most slots would go by before a
// call could start (each one lost to its seller: its next window is placed
// after it). Runners are served by rank, the time their seller started
// asking (runner.rank), so the seller that started first gets its whole
// window first, and its later windows repeat the same spacing; served in
// the order they asked, every seller's window would spread over everyone's.
type startBudget struct {
	total int

	mu      sync.Mutex
	free    int
	waiting []*budgetWait
}

type budgetWait struct {
	rank      time.Time
	want, got int
	ready     chan struct{}
}

func newStartBudget(n int) *startBudget { return &startBudget{total: n, free: n} }

// take waits until the runner's turn (by rank) and returns how many starts
// it got: at least one, at most want. A runner waits for half the budget (or
// want, when less) so that a seller's window is not cut into many small
// batches. It returns 0 when ctx ended first.
func (b *startBudget) take(ctx context.Context, rank time.Time, want int) int {
	want = max(1, want)
	b.mu.Lock()
	if (len(b.waiting) == 0 || rank.Before(b.waiting[0].rank)) && b.free >= b.enough(want) {
		got := min(want, b.free)
		b.free -= got
		b.mu.Unlock()
		return got
	}
	w := &budgetWait{rank: rank, want: want, ready: make(chan struct{})}
	i, _ := slices.BinarySearchFunc(b.waiting, rank, func(w *budgetWait, r time.Time) int {
		if w.rank.After(r) {
			return 1
		}
		return -1 // after the waiters of the same rank
	})
	b.waiting = slices.Insert(b.waiting, i, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return w.got
	case <-ctx.Done():
	}
	b.mu.Lock()
	if i := slices.Index(b.waiting, w); i >= 0 {
		b.waiting = slices.Delete(b.waiting, i, i+1)
	}
	got := w.got // granted as ctx ended, else 0
	b.mu.Unlock()
	b.give(got) // the next waiter may fit now
	return 0
}

// enough is what a runner that wants want waits for.
func (b *startBudget) enough(want int) int { return max(1, min(want, b.total/2)) }

// give returns n starts and serves the runners waiting, in order.
func (b *startBudget) give(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += n
	for len(b.waiting) > 0 && b.free >= b.enough(b.waiting[0].want) {
		w := b.waiting[0]
		w.got = min(w.want, b.free)
		b.free -= w.got
		b.waiting[0] = nil
		b.waiting = b.waiting[1:]
		close(w.ready)
	}
}
