package autopipe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

// slowRedis starts a redis-server whose DEBUG SLEEP holds a pipeline on the
// wire for as long as a test needs, so what queues meanwhile is known.
func slowRedis(t *testing.T) *testredis.Server {
	t.Helper()
	return testredis.Start(t, "--enable-debug-command", "yes")
}

// hold sends DEBUG SLEEP through the hooked client and returns once its
// pipeline is on the wire: what is issued next queues behind it for d.
func hold(t *testing.T, rdb *redis.Client, h *Hook, d time.Duration) <-chan error {
	t.Helper()
	before := h.Stats().Pipelines
	done := make(chan error, 1)
	go func() { done <- rdb.Do(context.Background(), "DEBUG", "SLEEP", d.Seconds()).Err() }()
	testwait.For(t, 5*time.Second, "a pipeline sent", func() bool { return h.Stats().Pipelines > before })
	return done
}

func TestCommandsIssuedWhileOneIsInFlightShareOnePipeline(t *testing.T) {
	srv := slowRedis(t)
	rdb := srv.Client()
	h := Install(rdb, Options{})
	done := hold(t, rdb, h, 500*time.Millisecond)
	const n = 50
	var wg sync.WaitGroup
	errs := make([]error, n)
	got := make([]int64, n)
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = rdb.IncrBy(context.Background(), fmt.Sprintf("k%d", i), int64(i+1)).Result()
		})
	}
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if errs[i] != nil || got[i] != int64(i+1) {
			t.Errorf("INCRBY k%d = %d, %v; want %d", i, got[i], errs[i], i+1)
		}
	}
	st := h.Stats()
	// the sleep, then the 50 increments that queued behind it: a few
	// pipelines at most (one when all queued before the sleep came back)
	if st.Commands != n+1 || st.Pipelines > 4 {
		t.Errorf("sent %d commands in %d pipelines, want %d commands in at most 4", st.Commands, st.Pipelines, n+1)
	}
}

func TestEachCommandKeepsItsOwnAnswerAndError(t *testing.T) {
	srv := slowRedis(t)
	rdb, direct := srv.Client(), srv.Client()
	h := Install(rdb, Options{})
	ctx := context.Background()
	if err := direct.LPush(ctx, "list", "x").Err(); err != nil {
		t.Fatal(err)
	}
	done := hold(t, rdb, h, 300*time.Millisecond)
	var wg sync.WaitGroup
	var okErr, wrongErr, getErr error
	var val string
	wg.Go(func() { okErr = rdb.Set(ctx, "a", "1", 0).Err() })
	wg.Go(func() { wrongErr = rdb.Incr(ctx, "list").Err() }) // WRONGTYPE
	wg.Go(func() { val, getErr = rdb.Get(ctx, "missing").Result() })
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if okErr != nil {
		t.Errorf("SET in a pipeline with a failing command: %v", okErr)
	}
	if wrongErr == nil || !errors.Is(getErr, redis.Nil) || val != "" {
		t.Errorf("INCR on a list: %v; GET missing: %q, %v; want WRONGTYPE and redis.Nil", wrongErr, val, getErr)
	}
	if st := h.Stats(); st.Commands != 4 {
		t.Errorf("sent %d commands, want 4", st.Commands)
	}
}

func TestACallerWhoseContextEndsWhileQueuedIsNotSent(t *testing.T) {
	srv := slowRedis(t)
	rdb, direct := srv.Client(), srv.Client()
	h := Install(rdb, Options{})
	done := hold(t, rdb, h, 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := rdb.Set(ctx, "late", "1", 0).Err()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SET queued past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 300*time.Millisecond {
		t.Errorf("the caller waited %s for a pipeline instead of its 50 ms deadline", took)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// what follows goes out after the abandoned SET would have
	if err := rdb.Set(context.Background(), "after", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n := direct.Exists(context.Background(), "late", "after").Val(); n != 1 {
		t.Errorf("%d of late, after exist; want only after: an abandoned command was sent", n)
	}
}

func TestScriptsLoadOnceThroughThePipeline(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	h := Install(rdb, Options{})
	s := redis.NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := s.Run(ctx, rdb, []string{"n"}, 2).Err(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n, _ := rdb.Get(ctx, "n").Int(); n != 40 {
		t.Errorf("n = %d after 20 scripts adding 2, want 40", n)
	}
	// EVALSHA answered NOSCRIPT at first, then EVAL loaded it: more
	// commands than 20, all through the hook
	if st := h.Stats(); st.Commands < 20 {
		t.Errorf("the hook sent %d commands, want at least 20", st.Commands)
	}
}

func TestClusterCommandsOnEveryNode(t *testing.T) {
	c := testredis.StartCluster(t, 3)
	rdb := c.Client()
	h := Install(rdb, Options{})
	ctx := context.Background()
	const n = 300
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := rdb.Set(ctx, fmt.Sprintf("key-%d", i), i, 0).Err(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	nodes := map[string]bool{}
	for i := range n {
		k := fmt.Sprintf("key-%d", i)
		if v, err := rdb.Get(ctx, k).Int(); err != nil || v != i {
			t.Fatalf("GET %s = %d, %v; want %d", k, v, err, i)
		}
		if i < 30 {
			addr, err := rdb.MasterForKey(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			nodes[addr.Options().Addr] = true
		}
	}
	if len(nodes) < 2 {
		t.Errorf("keys landed on %d node(s): the test does not cross nodes", len(nodes))
	}
	if st := h.Stats(); st.Commands != 2*n {
		t.Errorf("the hook sent %d commands, want %d", st.Commands, 2*n)
	}
}

func TestIdleCommandsLeaveAtOnce(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	h := Install(rdb, Options{})
	ctx := context.Background()
	for i := range 20 {
		if err := rdb.Set(ctx, "k", i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// one after another: nothing to batch, each its own round trip
	if st := h.Stats(); st.Pipelines != 20 || st.Commands != 20 {
		t.Errorf("%+v, want 20 pipelines of one command", st)
	}
}

// TestDirectGoesOnItsOwn: a command under Direct is not batched; the
// commands around it still are.
func TestDirectGoesOnItsOwn(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	h := Install(rdb, Options{})
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	before := h.Stats()
	now, err := rdb.Time(Direct(ctx)).Result()
	if err != nil || time.Since(now).Abs() > time.Second {
		t.Fatalf("TIME under Direct = %v, %v; want this machine's clock", now, err)
	}
	if got, err := rdb.Get(Direct(ctx), "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET under Direct = %q, %v; want v", got, err)
	}
	if st := h.Stats(); st != before {
		t.Errorf("two commands under Direct went through the hook: %+v before, %+v after", before, st)
	}
	if err := rdb.Get(ctx, "k").Err(); err != nil {
		t.Fatal(err)
	}
	if st := h.Stats(); st.Commands != before.Commands+1 {
		t.Errorf("a command without Direct: %d commands through the hook, want %d", st.Commands, before.Commands+1)
	}
}
