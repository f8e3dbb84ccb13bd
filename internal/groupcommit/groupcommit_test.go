package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testwait"
)

// heldWrites records every write and holds those of a key until released.
type heldWrites struct {
	mu      sync.Mutex
	writes  map[string][][]int
	hold    map[string]chan struct{}
	fail    error
	results int // results to return per write; 0: one per item
}

func (h *heldWrites) write(_ context.Context, key string, items []int) ([]string, error) {
	h.mu.Lock()
	h.writes[key] = append(h.writes[key], items)
	hold := h.hold[key]
	fail, n := h.fail, h.results
	h.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if fail != nil {
		return nil, fail
	}
	if n == 0 {
		n = len(items)
	}
	out := make([]string, n)
	for i := range min(n, len(items)) {
		out[i] = fmt.Sprint(key, "/", items[i])
	}
	return out, nil
}

func (h *heldWrites) count(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.writes[key])
}

type outcome struct {
	item int
	r    string
	err  error
}

func TestGroup(t *testing.T) {
	tests := []struct {
		name    string
		queued  int   // items that arrive while the first write is held
		cancel  []int // of those, items whose ctx ends before the next write
		fail    error
		results int
		// want
		writes  [][]int
		wantErr func(item int, err error) bool
	}{
		{
			name: "a lone item leaves at once, alone", queued: 0,
			writes: [][]int{{0}},
		},
		{
			name: "items behind a write share the next, at most max each", queued: 7,
			writes: [][]int{{0}, {1, 2, 3}, {4, 5, 6}, {7}},
		},
		{
			name: "an item whose caller gave up is not written", queued: 4, cancel: []int{2},
			writes: [][]int{{0}, {1, 3, 4}},
			wantErr: func(item int, err error) bool {
				return (item == 2) == errors.Is(err, context.Canceled)
			},
		},
		{
			name: "a failed write fails each of its items", queued: 2, fail: errors.New("redis is down"),
			writes:  [][]int{{0}, {1, 2}},
			wantErr: func(_ int, err error) bool { return err != nil && err.Error() == "redis is down" },
		},
		{
			name: "a write that answers fewer results than items fails them", queued: 2, results: 1,
			writes:  [][]int{{0}, {1, 2}},
			wantErr: func(item int, err error) bool { return (item == 0) == (err == nil) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			h := &heldWrites{writes: map[string][][]int{}, hold: map[string]chan struct{}{"k": release}, fail: tc.fail, results: tc.results}
			g := New(3, h.write)
			out := make(chan outcome, 1+tc.queued)
			do := func(ctx context.Context, item int) {
				r, err := g.Do(ctx, "k", item)
				out <- outcome{item, r, err}
			}
			go do(context.Background(), 0)
			testwait.For(t, 5*time.Second, "the first write on the wire", func() bool { return h.count("k") == 1 })
			cancels := map[int]context.CancelFunc{}
			for _, i := range tc.cancel {
				cancels[i] = nil
			}
			for i := 1; i <= tc.queued; i++ {
				ctx := context.Background()
				if _, ok := cancels[i]; ok {
					ctx, cancels[i] = context.WithCancel(ctx)
				}
				go do(ctx, i)
				testwait.For(t, 5*time.Second, fmt.Sprint("item ", i, " queued"), func() bool { return g.Queued("k") == i })
			}
			for _, cancel := range cancels {
				cancel()
			}
			h.mu.Lock()
			h.hold = nil // only the first write is held
			h.mu.Unlock()
			close(release)
			for range 1 + tc.queued {
				o := <-out
				switch {
				case tc.wantErr != nil:
					if !tc.wantErr(o.item, o.err) {
						t.Errorf("item %d: unexpected error %v", o.item, o.err)
					}
				case o.err != nil:
					t.Errorf("item %d: %v", o.item, o.err)
				}
				if o.err == nil && o.r != fmt.Sprint("k/", o.item) {
					t.Errorf("item %d got result %q, want k/%d: results mixed up", o.item, o.r, o.item)
				}
			}
			testwait.For(t, 5*time.Second, "the writer gone", func() bool { return !g.Writing("k") })
			h.mu.Lock()
			got := fmt.Sprint(h.writes["k"])
			h.fail = nil
			h.mu.Unlock()
			if want := fmt.Sprint(tc.writes); got != want {
				t.Errorf("writes %s, want %s", got, want)
			}
			// The next item after the writer left starts a writer of its
			// own and is written alone.
			if r, err := g.Do(context.Background(), "k", 99); err != nil || r != "k/99" {
				t.Errorf("an item after the writer left: %q, %v", r, err)
			}
			if n := h.count("k"); n != len(tc.writes)+1 {
				t.Errorf("%d writes after one more item, want %d", n, len(tc.writes)+1)
			}
		})
	}
}

// One key's slow write does not hold back another key's items.
func TestKeysDoNotWaitForEachOther(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	h := &heldWrites{writes: map[string][][]int{}, hold: map[string]chan struct{}{"slow": release}}
	g := New(10, h.write)
	go func() { _, _ = g.Do(context.Background(), "slow", 1) }()
	testwait.For(t, 5*time.Second, "the slow key's write on the wire", func() bool { return h.count("slow") == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := g.Do(ctx, "fast", 2)
	if err != nil || r != "fast/2" {
		t.Fatalf("the other key's item: %q, %v; want fast/2 while the slow key's write is held", r, err)
	}
}

// A caller whose ctx ends after its write left returns at once; the write
// goes on for the others.
func TestCallerLeavesWhileItsWriteIsOnTheWire(t *testing.T) {
	release := make(chan struct{})
	h := &heldWrites{writes: map[string][][]int{}, hold: map[string]chan struct{}{"k": release}}
	g := New(10, h.write)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := g.Do(ctx, "k", 1); errc <- err }()
	testwait.For(t, 5*time.Second, "the write on the wire", func() bool { return h.count("k") == 1 })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the caller waited for a write after its ctx ended")
	}
	close(release)
	testwait.For(t, 5*time.Second, "the writer gone", func() bool { return !g.Writing("k") })
}

// A burst of callers that are all ready to run when the first one starts
// its key's writer shares that first write (gather), instead of the first
// leaving alone and the rest waiting for the next. One P makes the order of
// the goroutines the scheduler's, not a race: without gather the writer runs
// the moment its starter blocks, before the rest of the burst.
func TestABurstSharesTheFirstWrite(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	h := &heldWrites{writes: map[string][][]int{}, hold: map[string]chan struct{}{}}
	g := New(100, h.write)
	const burst = 8
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if r, err := g.Do(context.Background(), "k", i); err != nil || r != fmt.Sprint("k/", i) {
				t.Errorf("item %d: %q, %v", i, r, err)
			}
		}()
	}
	runtime.Gosched() // let every caller reach <-start
	close(start)
	wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.writes["k"]; len(w) != 1 || len(w[0]) != burst {
		t.Fatalf("writes %v, want one write of all %d items", w, burst)
	}
}

// TestLinger holds Linger's promises: items that arrive while a key's new
// writer lingers share its first write; a queue that reaches max leaves at
// once, without waiting the linger out; an item whose ctx ends during the
// linger is not written; a lone item waits the linger (and no more than a
// generous bound) before it is written.
func TestLinger(t *testing.T) {
	const linger = 300 * time.Millisecond
	t.Run("items arriving during the linger share one write", func(t *testing.T) {
		h := &heldWrites{writes: map[string][][]int{}, hold: map[string]chan struct{}{}}
		g := New(100, h.write, Linger(linger))
		var wg sync.WaitGroup
		start := time.Now()
		for i := range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r, err := g.Do(context.Background(), "k", i); err != nil || r != fmt.Sprint("k/", i) {
					t.Errorf("item %d: %q, %v", i, r, err)
				}
			}()
			time.Sleep(linger / 10) // spread over half the linger
		}
		wg.Wait()
		if took := time.Since(start); took < linger {
			t.Errorf("the items came back after %v, before the linger (%v) passed", took, linger)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if w := h.writes["k"]; len(w) != 1 || len(w[0]) != 5 {
			t.Fatalf("writes %v, want one write of all 5 items", w)
		}
	})
	t.Run("a full queue does not wait the linger out", func(t *testing.T) {
		h := &heldWrites{writes: map[string][][]int{}, hold: map[string]chan struct{}{}}
		g := New(4, h.write, Linger(time.Hour))
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := g.Do(context.Background(), "k", i); err != nil {
					t.Errorf("item %d: %v", i, err)
				}
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a queue of max items waited for the hour-long linger")
		}
		if n := h.count("k"); n != 1 {
			t.Fatalf("%d writes, want one of the 4 items", n)
		}
	})
	t.Run("an item whose ctx ends during the linger is not written", func(t *testing.T) {
		h := &heldWrites{writes: map[string][][]int{}, hold: map[string]chan struct{}{}}
		g := New(100, h.write, Linger(linger))
		ctx, cancel := context.WithTimeout(context.Background(), linger/3)
		defer cancel()
		errc := make(chan error, 1)
		go func() { _, err := g.Do(ctx, "k", 1); errc <- err }()
		if r, err := g.Do(context.Background(), "k", 2); err != nil || r != "k/2" {
			t.Fatalf("the item that stayed: %q, %v", r, err)
		}
		if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the item that left: %v, want its deadline", err)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if w := h.writes["k"]; len(w) != 1 || len(w[0]) != 1 || w[0][0] != 2 {
			t.Fatalf("writes %v, want one write of item 2 only", w)
		}
	})
	t.Run("a lone item is written after the linger", func(t *testing.T) {
		h := &heldWrites{writes: map[string][][]int{}, hold: map[string]chan struct{}{}}
		g := New(100, h.write, Linger(linger))
		start := time.Now()
		if _, err := g.Do(context.Background(), "k", 1); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < linger || took > linger+5*time.Second {
			t.Fatalf("written after %v, want the linger (%v)", took, linger)
		}
		// The next item starts a linger of its own once the key is idle (the
		// writer that wrote item 1 may still hold it for a moment).
		testwait.For(t, 5*time.Second, "the writer of item 1 gone", func() bool { return !g.Writing("k") })
		start = time.Now()
		if _, err := g.Do(context.Background(), "k", 2); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < linger {
			t.Fatalf("the next lone item was written after %v, before its linger", took)
		}
	})
}
