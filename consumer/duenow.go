package consumer

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// dueNow hands out the consumer's MaxDueNow tokens (see Consumer.ask), a seller
// that started asking first before the others.
//
// A seller's time from first registration to last is set by its first
// window: each later window repeats its slots a window later. When the
// first windows of many sellers fall due at once (an upload burst, the end
// of an outage), tokens handed to rows in the order they asked would spread
// every seller's first window over the whole burst (with 100 sellers × 500
// rows on 4 consumers and 2 cores, bench many-sellers, the worst seller
// would take 1.1 × its lower bound). Served one seller after the other,
// each seller's window takes only as long as its own calls, and a seller
// that starts later is not slower: its time counts from its first
// registration.
type dueNow struct {
	mu    sync.Mutex
	free  int
	seq   uint64
	queue waiters
	// keep is how long a seller keeps its rank after its last row gave its
	// token back: rows of one upload reach the consumer in several fetches,
	// and the later ones belong to the burst the first ones started (ranked
	// last, a seller of 100 would take 1.1 × its lower bound: 19 rows at
	// once, the other 81 a second later).
	keep  time.Duration
	ranks map[string]*rank
	now   func() time.Time // time.Now; a test's clock
	spawn func(func())     // runs a granted row's job on a goroutine (goStatement; the consumer's workers)
}

// rank of a seller: the order in which it started asking.
type rank struct {
	order uint64
	users int       // rows holding or waiting for a token
	idle  time.Time // when users last fell to 0
}

type waiter struct {
	rank, seq uint64
	seller    string
	to        tokenWaiter // told once: the token was handed over, or ctx ended first
	stop      func() bool // unregisters the ctx watch
	index     int         // in the heap; -1 once out of it
}

func newDueNow(n int, keep time.Duration) *dueNow {
	return &dueNow{free: n, keep: keep, ranks: map[string]*rank{}, now: time.Now, spawn: goStatement}
}

// tokenWaiter is a row queued for a token of a dueNow. An interface rather
// than a func: a row's job passed as one is not a new closure on the heap
// each time it asks, twice per row.
type tokenWaiter interface {
	tokenGranted(from *dueNow, ok bool)
}

// acquireOr takes a token for a row of seller at once (true), or queues the
// row without a goroutine (false): to is then told once, on another
// goroutine, with true when the token is handed over, false when ctx ended
// first (then the row holds none). A consumer queues thousands of rows here
// when many sellers' first windows fall due at once.
func (d *dueNow) acquireOr(ctx context.Context, seller string, to tokenWaiter) bool {
	d.mu.Lock()
	d.seq++
	now := d.now()
	r := d.ranks[seller]
	if r == nil || r.users == 0 && now.Sub(r.idle) > d.keep {
		if d.seq%1024 == 0 {
			d.forget(now)
		}
		r = &rank{order: d.seq}
		d.ranks[seller] = r
	}
	r.users++
	if d.free > 0 {
		d.free--
		d.mu.Unlock()
		return true
	}
	w := &waiter{rank: r.order, seq: d.seq, seller: seller, to: to}
	heap.Push(&d.queue, w)
	// Registered under the lock, so release (which takes it) never sees
	// a waiter without its stop.
	w.stop = context.AfterFunc(ctx, func() { d.cancel(w) })
	d.mu.Unlock()
	return false
}

// cancel takes w out of the queue when its ctx ended before it was handed a
// token. One handed over as ctx ended is given back.
func (d *dueNow) cancel(w *waiter) {
	d.mu.Lock()
	if w.index >= 0 {
		heap.Remove(&d.queue, w.index)
		d.left(w.seller)
		d.mu.Unlock()
		w.to.tokenGranted(d, false)
		return
	}
	d.mu.Unlock()
	d.release(w.seller) // handed a token just as ctx ended: release could not stop this call
	w.to.tokenGranted(d, false)
}

// release gives back a token of a row of seller: to the best-ranked waiter.
func (d *dueNow) release(seller string) {
	d.mu.Lock()
	d.left(seller)
	if d.queue.Len() == 0 {
		d.free++
		d.mu.Unlock()
		return
	}
	w := heap.Pop(&d.queue).(*waiter)
	d.mu.Unlock()
	if w.stop() { // else its ctx ended and cancel gives the token back
		d.spawn(func() { w.to.tokenGranted(d, true) })
	}
}

// left: one row of seller no longer holds or waits for a token.
func (d *dueNow) left(seller string) {
	if r := d.ranks[seller]; r != nil {
		if r.users--; r.users == 0 {
			r.idle = d.now()
		}
	}
}

// forget drops the ranks kept longer than keep, so the map holds the
// sellers of the last keep only.
func (d *dueNow) forget(now time.Time) {
	for s, r := range d.ranks {
		if r.users == 0 && now.Sub(r.idle) > d.keep {
			delete(d.ranks, s)
		}
	}
}

// waiters is a heap by (rank, seq): the earliest seller's earliest row.
type waiters []*waiter

func (q waiters) Len() int { return len(q) }
func (q waiters) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].seq < q[j].seq
}
func (q waiters) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *waiters) Push(x any) {
	w := x.(*waiter)
	w.index = len(*q)
	*q = append(*q, w)
}
func (q *waiters) Pop() any {
	old := *q
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	w.index = -1
	return w
}
