package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testwait"
)

// TestStartBudgetServesTheEarliestRankFirst: the process's starts go to the
// runner whose seller started asking first, whatever the order of asking;
// a runner waits for half the budget (or what it wants, when less), gets
// at most what it wants, and one whose context ends holds nothing.
func TestStartBudgetServesTheEarliestRankFirst(t *testing.T) {
	b := newStartBudget(8)
	ctx := context.Background()
	t0 := time.Now()
	if got := b.take(ctx, t0, 6); got != 6 {
		t.Fatalf("the first runner got %d starts of 8, want the 6 it wanted", got)
	}
	type grant struct {
		who string
		n   int
	}
	grants := make(chan grant, 3)
	ask := func(who string, rank time.Time, want int) {
		go func() { grants <- grant{who, b.take(ctx, rank, want)} }()
	}
	ask("late", t0.Add(2*time.Second), 5) // asks first, ranks last
	testwait.For(t, 2*time.Second, "the late runner waiting", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.waiting) == 1 })
	ask("early", t0.Add(time.Second), 3)
	testwait.For(t, 2*time.Second, "the early runner waiting", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.waiting) == 2 })
	cancelled, cancel := context.WithCancel(ctx)
	go func() { grants <- grant{"gone", b.take(cancelled, t0.Add(3*time.Second), 1)} }()
	testwait.For(t, 2*time.Second, "the third runner waiting", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.waiting) == 3 })
	cancel()
	if g := <-grants; g.who != "gone" || g.n != 0 {
		t.Fatalf("%s got %d, want the cancelled runner to get 0 first", g.who, g.n)
	}
	b.give(4) // 6 free: the early runner's 3 (it waits for its 3), then 3 left, under the late one's 4
	if g := <-grants; g.who != "early" || g.n != 3 {
		t.Fatalf("%s got %d starts, want the earlier-ranked runner served first with its 3", g.who, g.n)
	}
	select {
	case g := <-grants:
		t.Fatalf("%s got %d starts with 3 free, want it to wait for half the budget (4)", g.who, g.n)
	case <-time.After(50 * time.Millisecond):
	}
	b.give(2)
	if g := <-grants; g.who != "late" || g.n != 5 {
		t.Fatalf("%s got %d, want the late runner's 5", g.who, g.n)
	}
	if b.free != 0 {
		t.Errorf("%d starts free after the grants, want 0", b.free)
	}
}
