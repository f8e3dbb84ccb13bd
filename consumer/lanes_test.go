package consumer

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testwait"
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
	ls := newLanes(3, func(r *row, _ func()) bool {
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
		return true
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
	testwait.For(t, 2*time.Second, "the fast seller's 10 rows", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 10 })
	if got := queued.Load(); got != 17 {
		t.Errorf("queued = %d, want 17 (20 slow rows, 3 running)", got)
	}
	// The fast seller is done and its lane gone; the slow one holds its 3.
	testwait.For(t, time.Second, "only the slow seller active", func() bool { return active.Load() == 1 && ls.sellers() == 1 })
	purged := ls.purge(func(r *row) bool { return r.msg.Offset >= 15 && string(r.msg.Key) == "slow" })
	if len(purged) != 5 {
		t.Errorf("purged %d rows, want 5 (offsets 15-19)", len(purged))
	}
	done.Add(-5)
	close(release)
	done.Wait()
	testwait.For(t, time.Second, "lanes removed", func() bool { return ls.sellers() == 0 })
	if peak["slow"] != 3 || peak["fast"] > 3 {
		t.Errorf("peak concurrency slow %d fast %d, want 3 and ≤ 3", peak["slow"], peak["fast"])
	}
	if queued.Load() != 0 || active.Load() != 0 {
		t.Errorf("after the end: queued %d, active sellers %d, want 0", queued.Load(), active.Load())
	}
}

// TestLanesParkedRows: a row that parks (run returns false) keeps its place
// in the lane's concurrency without its worker; the lane goes on with its
// queue only when the parked row ends, on the goroutine that ends it.
func TestLanesParkedRows(t *testing.T) {
	var queued, active atomic.Int64
	var mu sync.Mutex
	var parked []func()
	var ran []int64
	var holding, peak int // rows started and not ended (parked ones included), and the most at once
	ls := newLanes(2, func(r *row, done func()) bool {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, r.msg.Offset)
		holding++
		peak = max(peak, holding)
		if r.msg.Offset%2 == 0 { // even rows park, odd ones end at once
			parked = append(parked, func() {
				mu.Lock()
				holding--
				mu.Unlock()
				done()
			})
			return false
		}
		holding--
		return true
	}, func(d int) { queued.Add(int64(d)) }, func(d int) { active.Add(int64(d)) })
	for i := range 6 {
		r := &row{}
		r.msg.Offset = int64(i)
		ls.add("s", r)
	}
	ranNow := func() []int64 { mu.Lock(); defer mu.Unlock(); return append([]int64(nil), ran...) }
	parkedNow := func() int { mu.Lock(); defer mu.Unlock(); return len(parked) }
	// Rows 0 and 1 start; 1 ends at once and its worker takes 2, which
	// parks: two rows parked, the lane is full, rows 3 to 5 stay queued.
	testwait.For(t, 2*time.Second, "rows 0 and 2 parked", func() bool { return parkedNow() == 2 })
	if got := ranNow(); len(got) != 3 {
		t.Fatalf("ran %v while two rows were parked, want only rows 0, 1 and 2", got)
	}
	if q := queued.Load(); q != 3 {
		t.Errorf("queued = %d while two rows were parked, want 3", q)
	}
	// Ending a parked row goes on with the queue: row 3 ends at once, 4
	// parks.
	mu.Lock()
	first := parked[0]
	mu.Unlock()
	go first()
	testwait.For(t, 2*time.Second, "row 4 parked", func() bool { return parkedNow() == 3 })
	if got := ranNow(); len(got) != 5 || got[3] != 3 || got[4] != 4 {
		t.Fatalf("after ending the first parked row ran %v, want rows 0 to 4 in order", got)
	}
	mu.Lock()
	rest := append([]func(){}, parked[1:]...)
	mu.Unlock()
	for _, done := range rest {
		go done()
	}
	testwait.For(t, 2*time.Second, "row 5 run and the lane gone", func() bool { return len(ranNow()) == 6 && ls.sellers() == 0 })
	if queued.Load() != 0 || active.Load() != 0 {
		t.Errorf("after the end: queued %d, active sellers %d, want 0", queued.Load(), active.Load())
	}
	// A worker that went on after its row parked would have started a third
	// row while two were parked, whenever it did.
	mu.Lock()
	defer mu.Unlock()
	if peak != 2 {
		t.Errorf("at most %d rows started and not ended at once, want the lane's concurrency, 2", peak)
	}
}

// TestLanesIdle: idle's channel is closed at once while no lane holds a row,
// and otherwise when the last row of the last lane ends, not before.
func TestLanesIdle(t *testing.T) {
	var mu sync.Mutex
	var parked []func()
	ls := newLanes(1, func(r *row, done func()) bool {
		mu.Lock()
		defer mu.Unlock()
		parked = append(parked, done)
		return false
	}, func(int) {}, func(int) {})
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	if !closed(ls.idle()) {
		t.Fatal("idle is not closed while no lane holds a row")
	}
	for _, seller := range []string{"a", "b"} {
		ls.add(seller, &row{})
	}
	ls.add("a", &row{}) // queued behind a's first row
	idle := ls.idle()
	take := func() func() {
		t.Helper()
		var done func()
		testwait.For(t, 2*time.Second, "a row parked", func() bool {
			mu.Lock()
			defer mu.Unlock()
			if len(parked) == 0 {
				return false
			}
			done, parked = parked[0], parked[1:]
			return true
		})
		return done
	}
	for i := range 3 { // a's first row, b's, then a's queued one
		take()()
		if last := i == 2; closed(idle) != last {
			t.Fatalf("after %d of 3 rows ended idle is closed: %v, want %v", i+1, closed(idle), last)
		}
	}
}
