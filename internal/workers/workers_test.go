package workers

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testwait"
)

// TestGoroutinesAreKept: functions run one after the other reuse one
// goroutine; a burst leaves at most maxIdle waiting; Close ends them.
func TestGoroutinesAreKept(t *testing.T) {
	p := New(4)
	var ran atomic.Int32
	used := oneByOne(t, p, &ran, 100, 0)
	// One goroutine for all, but for a rare second: a goroutine counts
	// itself idle an instant before it waits, and a Go in that instant
	// starts another. A pool that never handed a function to a waiting
	// goroutine would fill up to maxIdle (4).
	if ran.Load() != 100 || p.Idle() > 2 || used > 4 {
		t.Fatalf("%d functions ran on %d goroutines, %d goroutines idle; want 100, at most 4 and at most 2 (one goroutine for nearly all)", ran.Load(), used, p.Idle())
	}

	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	release := make(chan struct{})
	wg.Add(50)
	for range 50 {
		p.Go(func() { defer wg.Done(); <-release })
	}
	close(release)
	wg.Wait()
	// Both counts settle within an instant: a goroutine done with the
	// burst counts itself idle before it sees the pool full and ends (for
	// an instant, one more than maxIdle are idle). A pool that kept the
	// burst's goroutines keeps 50.
	testwait.For(t, time.Second, "the burst's goroutines beyond maxIdle end", func() bool {
		return runtime.NumGoroutine() <= before+4 && p.Idle() <= 4
	})

	p.Close()
	testwait.For(t, time.Second, "every idle goroutine ends after Close", func() bool { return p.Idle() == 0 && runtime.NumGoroutine() <= before-1 })
	runsOne(t, p, "Go after Close")
}

// TestIdleGoroutinesExpire: a pool without Close keeps a goroutine while
// work keeps coming within idleFor, and lets it end once none does.
func TestIdleGoroutinesExpire(t *testing.T) {
	const idleFor = 200 * time.Millisecond
	p := NewExpiring(4, idleFor)
	before := runtime.NumGoroutine()
	var ran atomic.Int32
	used := oneByOne(t, p, &ran, 20, idleFor/10)
	// Work every idleFor/10 for 2 idleFor: the one goroutine was kept
	// throughout. A pool that ended it early would have run the functions
	// on many goroutines and could still end with one idle, so the
	// goroutines that ran them are counted (two at most, for the rare
	// second TestGoroutinesAreKept describes).
	if ran.Load() != 20 || used > 2 || p.Idle() > 2 || runtime.NumGoroutine() > before+2 {
		t.Fatalf("%d functions ran on %d goroutines, %d goroutines idle, %d more goroutines; want 20, at most 2, 2 and 2", ran.Load(), used, p.Idle(), runtime.NumGoroutine()-before)
	}
	start := time.Now()
	testwait.For(t, 10*idleFor, "the idle goroutine ends", func() bool { return p.Idle() == 0 && runtime.NumGoroutine() <= before })
	if waited := time.Since(start); waited < idleFor/2 {
		t.Errorf("the idle goroutine ended after %v, want about %v", waited, idleFor)
	}
	runsOne(t, p, "Go after the goroutines expired")
}

// oneByOne runs n functions on p one after the other, each once the one
// before has finished and its goroutine waits again, pausing between them,
// and returns how many goroutines ran them.
func oneByOne(t *testing.T, p *Pool, ran *atomic.Int32, n int, pause time.Duration) (goroutines int) {
	t.Helper()
	ids := map[string]bool{}
	for range n {
		done := make(chan string)
		p.Go(func() { ran.Add(1); done <- goroutineID() })
		ids[<-done] = true
		testwait.For(t, time.Second, "the goroutine waits for the next function", func() bool { return p.Idle() >= 1 })
		time.Sleep(pause)
	}
	return len(ids)
}

// goroutineID is the number runtime.Stack names the calling goroutine by.
func goroutineID() string {
	var buf [64]byte
	line := strings.TrimPrefix(string(buf[:runtime.Stack(buf[:], false)]), "goroutine ")
	id, _, _ := strings.Cut(line, " ")
	return id
}

// runsOne fails unless a function handed to p runs within a second.
func runsOne(t *testing.T, p *Pool, what string) {
	t.Helper()
	done := make(chan struct{})
	p.Go(func() { close(done) })
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatalf("%s did not run its function", what)
	}
}

func BenchmarkGo(b *testing.B) {
	p := New(64)
	defer p.Close()
	var wg sync.WaitGroup
	for b.Loop() {
		wg.Add(1)
		p.Go(func() { deep(40); wg.Done() })
		wg.Wait()
	}
}

func BenchmarkGoStatement(b *testing.B) {
	var wg sync.WaitGroup
	for b.Loop() {
		wg.Add(1)
		go func() { deep(40); wg.Done() }()
		wg.Wait()
	}
}

// deep uses about n × 256 bytes of stack, as a row's way through the
// consumer does.
func deep(n int) byte {
	var buf [256]byte
	buf[n%256] = byte(n)
	if n == 0 {
		return buf[0]
	}
	return deep(n-1) + buf[n%256]
}
