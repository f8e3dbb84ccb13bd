package consumer

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLanes: a lane runs at most its concurrency at once, in arrival order,
// and a slow seller does not delay another.
func TestLanes(t *testing.T) {
	var queued, active atomic.Int64
	release := make(chan struct{})
	var mu sync.Mutex
	running := map[string]int{}
	peak := map[string]int{}
	var order []int64
	var done sync.WaitGroup
	ls := newLanes(3, func(r *row) {
		seller := string(r.msg.Key)
		mu.Lock()
		running[seller]++
		peak[seller] = max(peak[seller], running[seller])
		if seller == "fast" {
			order = append(order, r.msg.Offset)
		}
		mu.Unlock()
		if seller == "slow" {
			<-release
		}
		mu.Lock()
		running[seller]--
		mu.Unlock()
		done.Done()
	}, func(d int) { queued.Add(int64(d)) }, func(d int) { active.Add(int64(d)) })

	mk := func(seller string, off int64) *row {
		r := &row{}
		r.msg.Key = []byte(seller)
		r.msg.Offset = off
		return r
	}
	done.Add(20 + 10)
	for i := range 20 {
		ls.add("slow", mk("slow", int64(i)))
	}
	for i := range 10 {
		ls.add("fast", mk("fast", int64(100+i)))
	}
	waitFor(t, 2*time.Second, "the fast seller's 10 rows", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 10 })
	if got := queued.Load(); got != 17 {
		t.Errorf("queued = %d, want 17 (20 slow rows, 3 running)", got)
	}
	// The fast seller is done and its lane gone; the slow one holds its 3.
	waitFor(t, time.Second, "only the slow seller active", func() bool { return active.Load() == 1 && ls.sellers() == 1 })
	purged := ls.purge(func(r *row) bool { return r.msg.Offset >= 15 && string(r.msg.Key) == "slow" })
	if len(purged) != 5 {
		t.Errorf("purged %d rows, want 5 (offsets 15-19)", len(purged))
	}
	done.Add(-5)
	close(release)
	done.Wait()
	waitFor(t, time.Second, "lanes removed", func() bool { return ls.sellers() == 0 })
	if peak["slow"] != 3 || peak["fast"] > 3 {
		t.Errorf("peak concurrency slow %d fast %d, want 3 and ≤ 3", peak["slow"], peak["fast"])
	}
	if queued.Load() != 0 || active.Load() != 0 {
		t.Errorf("after the end: queued %d, active sellers %d, want 0", queued.Load(), active.Load())
	}
}
