package consumer

import "sync"

// lanes dispatches rows to one lane per seller. A lane runs at most
// concurrency rows of its seller at once (each one waiting for its throttle
// slot or calling the API) and queues the rest in arrival order, so a seller
// with 500 rows waiting for its window holds at most one window's worth of
// slots and never holds up another seller's rows: those go to their own lane,
// even when they were read from the same partition right behind.
//
// Memory is bounded outside: a row enters a lane only after the reader got an
// in-flight token for it.
type lanes struct {
	concurrency int
	// run is the pipeline. It returns true when the row is finished or
	// given back, false when the row parked (job.go): then it calls done,
	// on another goroutine, when the row ends.
	run func(r *row, done func()) bool
	// spawn starts a lane's worker (goStatement; the consumer's workers).
	spawn func(func())

	mu       sync.Mutex
	bySeller map[string]*lane
	// empty is closed when the last lane retires (idle), nil when nobody waits.
	empty chan struct{}

	// observers for metrics; never nil
	onQueued func(delta int)
	onActive func(delta int)
}

type lane struct {
	queue  []*row
	active int
}

func newLanes(concurrency int, run func(*row, func()) bool, onQueued, onActive func(int)) *lanes {
	return &lanes{concurrency: max(1, concurrency), run: run, bySeller: map[string]*lane{}, onQueued: onQueued, onActive: onActive, spawn: goStatement}
}

// add hands r to its seller's lane: a new worker when the lane is below its
// concurrency, the lane's queue otherwise.
func (ls *lanes) add(seller string, r *row) {
	ls.mu.Lock()
	ln := ls.bySeller[seller]
	if ln == nil {
		ln = &lane{}
		ls.bySeller[seller] = ln
		ls.onActive(1)
	}
	if ln.active >= ls.concurrency {
		ln.queue = append(ln.queue, r)
		ls.mu.Unlock()
		ls.onQueued(1)
		return
	}
	ln.active++
	ls.mu.Unlock()
	ls.spawn(func() { ls.work(seller, ln, r) })
}

// work runs rows of one lane until its queue is empty or a row parks; the
// parked row's end goes on with the lane's queue on its own goroutine.
func (ls *lanes) work(seller string, ln *lane, r *row) {
	for r != nil {
		if !ls.run(r, func() { ls.work(seller, ln, ls.next(seller, ln)) }) {
			return
		}
		r = ls.next(seller, ln)
	}
}

// next takes the lane's next queued row for a worker whose row ended, or
// retires the worker (nil) when the queue is empty.
func (ls *lanes) next(seller string, ln *lane) *row {
	ls.mu.Lock()
	if len(ln.queue) == 0 {
		ln.active--
		if ln.active == 0 {
			delete(ls.bySeller, seller)
			ls.onActive(-1)
			if len(ls.bySeller) == 0 && ls.empty != nil {
				close(ls.empty)
				ls.empty = nil
			}
		}
		ls.mu.Unlock()
		return nil
	}
	r := ln.queue[0]
	ln.queue[0] = nil
	ln.queue = ln.queue[1:]
	if len(ln.queue) == 0 {
		ln.queue = nil // let the drained backing array go
	}
	ls.mu.Unlock()
	ls.onQueued(-1)
	return r
}

// rowsBySeller counts each seller's rows in this consumer: queued, waiting for
// a slot or calling.
func (ls *lanes) rowsBySeller() map[string]int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make(map[string]int, len(ls.bySeller))
	for s, ln := range ls.bySeller {
		out[s] = ln.active + len(ln.queue)
	}
	return out
}

// idle returns a channel closed once no lane holds a row (at once when
// none does).
func (ls *lanes) idle() <-chan struct{} {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(ls.bySeller) == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if ls.empty == nil {
		ls.empty = make(chan struct{})
	}
	return ls.empty
}

// sellers counts lanes with rows.
func (ls *lanes) sellers() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.bySeller)
}

// purge takes out of the queues every row for which drop is true (rows of a
// revoked partition) and returns them; a queued row has no slot to give back.
func (ls *lanes) purge(drop func(*row) bool) []*row {
	ls.mu.Lock()
	var out []*row
	for _, ln := range ls.bySeller {
		kept := ln.queue[:0]
		for _, r := range ln.queue {
			if drop(r) {
				out = append(out, r)
			} else {
				kept = append(kept, r)
			}
		}
		clear(ln.queue[len(kept):])
		ln.queue = kept
	}
	ls.mu.Unlock()
	if len(out) > 0 {
		ls.onQueued(-len(out))
	}
	return out
}
