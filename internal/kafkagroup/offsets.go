package kafkagroup

import (
	"slices"
	"sort"
	"sync"
	"time"
)

// offsets tracks one partition's rows between reading and finishing, and
// answers the one question committing needs: up to where is everything done?
//
// Kafka's committed offset is the next offset to read, so the commit point is
// the lowest offset not yet finished, or, when every row read is finished, the
// offset after the last one read. Rows finish in any order (sellers wait for
// their own windows), so a finished row above an unfinished one is not
// committed until the lower one finishes: a crash redelivers it, and its
// Idempotency-Key makes the second call a replay.
type offsets struct {
	mu      sync.Mutex
	pending []pendingRow // in read (offset) order; finished rows at the front are dropped
	next    int64        // offset after the last row read; -1 before the first
	// ahead are rows finished before this assignment (by this member in an
	// earlier generation, or by the member whose commit named them) and not
	// read again yet: read reports them finished.
	ahead map[int64]bool
}

type pendingRow struct {
	offset int64
	since  time.Time // when the row was produced (or read, when the broker gives no time)
	done   bool
}

// newOffsets starts at the assignment's offset: a committed offset, or a
// negative "first/last offset" marker when the group has none yet.
func newOffsets(start int64) *offsets {
	o := &offsets{next: -1}
	if start >= 0 {
		o.next = start
	}
	return o
}

// finishedBefore notes rows finished before this assignment, at or above
// from (where it starts): read passes over them.
func (o *offsets) finishedBefore(from int64, rows []int64) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, off := range rows {
		if off >= from {
			if o.ahead == nil {
				o.ahead = map[int64]bool{}
			}
			o.ahead[off] = true
		}
	}
	return len(o.ahead)
}

// read registers a row just read. Offsets arrive in increasing order, with
// gaps where the log has none (compaction, transaction markers). It reports
// true for a row finished before this assignment (finishedBefore): the row
// counts as finished at once and is not to be handled.
func (o *offsets) read(offset int64, since time.Time) (finished bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next = offset + 1
	if o.ahead[offset] {
		delete(o.ahead, offset)
		if len(o.pending) > 0 { // above an unfinished row: kept until that one finishes
			o.pending = append(o.pending, pendingRow{offset: offset, since: since, done: true})
		}
		return true
	}
	o.pending = append(o.pending, pendingRow{offset: offset, since: since})
	return false
}

// finish marks a row done. It reports false for an offset that was never
// read or is already finished, which is a bug in the caller.
func (o *offsets) finish(offset int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := sort.Search(len(o.pending), func(i int) bool { return o.pending[i].offset >= offset })
	if i == len(o.pending) || o.pending[i].offset != offset || o.pending[i].done {
		return false
	}
	o.pending[i].done = true
	n := 0
	for n < len(o.pending) && o.pending[n].done {
		n++
	}
	if n > 0 {
		// Copy down instead of reslicing so the backing array does not grow forever.
		o.pending = append(o.pending[:0], o.pending[n:]...)
	}
	return true
}

// commitPoint is the offset to commit, and false when nothing was read or
// assigned yet.
func (o *offsets) commitPoint() (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pending) > 0 {
		return o.pending[0].offset, true
	}
	return o.next, o.next >= 0
}

// finishedAbove lists, in increasing order, the finished rows above the
// commit point: the rows a commit cannot cover yet, since a row below them
// is unfinished, and those finished before this assignment and not read
// again yet.
func (o *offsets) finishedAbove() []int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []int64
	for _, p := range o.pending {
		if p.done {
			out = append(out, p.offset)
		}
	}
	for off := range o.ahead {
		out = append(out, off)
	}
	slices.Sort(out)
	return out
}

// readThrough is the offset after the last row read (-1 before the first).
func (o *offsets) readThrough() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.next
}

// oldest is when the oldest unfinished row was produced; zero when none.
func (o *offsets) oldest() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range o.pending {
		if !p.done {
			return p.since
		}
	}
	return time.Time{}
}

// unfinished counts rows read and not finished.
func (o *offsets) unfinished() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, p := range o.pending {
		if !p.done {
			n++
		}
	}
	return n
}
