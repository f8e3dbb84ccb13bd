package kafkagroup

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

func testConfig(brokers []string, topic string) Config {
	return Config{Brokers: brokers, Topic: topic, Group: "test-group",
		SessionTimeout: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, RebalanceTimeout: 5 * time.Second,
		DrainTimeout: 1600 * time.Millisecond, CommitInterval: 100 * time.Millisecond, MaxInFlight: 20000, MaxInFlightPerPartition: 10000}
}

func testMetrics() Metrics {
	return Metrics{InFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "in_flight"}), Abandoned: prometheus.NewCounter(prometheus.CounterOpts{Name: "abandoned"}),
		Rebalances: prometheus.NewCounter(prometheus.CounterOpts{Name: "rebalances"}), Commits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "commits"}, []string{"result"})}
}

func always(context.Context) bool { return true }

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestGroupCommitsOnlyFinishedPrefix runs the Kafka side alone: rows finish
// in random order; the committed offset never passes an unfinished row, and
// after the member stops, a new member reads only what was not finished.
func TestGroupCommitsOnlyFinishedPrefix(t *testing.T) {
	const topic, n = "rows", 200
	brokers := testkafka.StartShortSessions(t, 2, topic)
	var msgs []kafka.Message
	for i := range n {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprint("seller-", i%7)), Value: []byte(fmt.Sprint(i))})
	}
	testkafka.Produce(t, brokers, topic, msgs...)

	cfg := testConfig(brokers, topic)
	var mu sync.Mutex
	held := map[string]*Row{} // rows never finished: the commit must stop below them
	seen := map[string]int{}
	handle := func(r *Row) {
		mu.Lock()
		seen[string(r.Msg.Value)]++
		v := string(r.Msg.Value)
		mu.Unlock()
		if v == "150" || v == "151" {
			mu.Lock()
			held[v] = r
			mu.Unlock()
			go func() { <-r.Partition().Ctx().Done(); r.GiveBack() }()
			return
		}
		go func() {
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			r.Finish()
		}()
	}
	g := New(cfg, testLogger(t), testMetrics(), Hooks{Handle: handle, Ready: always})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	testwait.For(t, 10*time.Second, "all rows read", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == n })
	time.Sleep(3 * cfg.CommitInterval)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return 10 s after its context ended")
	}
	// The held rows' partitions commit exactly at the held row with the
	// lowest offset; the other partition (if any) at its end.
	committed := testkafka.Committed(t, brokers, cfg.Group, topic, 2)
	low := map[int]int64{}
	for _, r := range held {
		if o, ok := low[r.Msg.Partition]; !ok || r.Msg.Offset < o {
			low[r.Msg.Partition] = r.Msg.Offset
		}
	}
	if len(low) == 0 {
		t.Fatal("no row was held")
	}
	for p, off := range low {
		if committed[p] != off {
			t.Errorf("partition %d committed at %d, want %d (the lowest unfinished row)", p, committed[p], off)
		}
	}

	// A second member resumes at the committed offsets: it sees the held
	// rows again and nothing else; the rows finished above them are named
	// in the commit's metadata (offsets.go) and passed over.
	mu.Lock()
	seen = map[string]int{}
	held = map[string]*Row{}
	mu.Unlock()
	again := map[string]bool{}
	g2 := New(cfg, testLogger(t), testMetrics(), Hooks{Ready: always, Handle: func(r *Row) {
		mu.Lock()
		again[string(r.Msg.Value)] = true
		mu.Unlock()
		r.Finish()
	}})
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- g2.Run(ctx2) }()
	testwait.For(t, 10*time.Second, "the held rows read again", func() bool { mu.Lock(); defer mu.Unlock(); return again["150"] && again["151"] })
	testwait.For(t, 10*time.Second, "every row committed", func() bool {
		total := int64(0)
		for _, off := range testkafka.Committed(t, brokers, cfg.Group, topic, 2) {
			total += off
		}
		return total == n
	})
	cancel2()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for v := range again {
		if v != "150" && v != "151" {
			t.Errorf("row %s was finished before, but the next member handled it again", v)
		}
	}
}

// TestRowsFinishedAboveAnUnfinishedOneAreNotHandledAgain: a row that stays
// unfinished holds the commit below the rows finished after it; when a
// rebalance takes the partition and gives it back, those rows are read
// again, and the member that finished them passes over them instead of
// handling them a second time (a dead-lettered row handled again could be
// called again and register).
func TestRowsFinishedAboveAnUnfinishedOneAreNotHandledAgain(t *testing.T) {
	const topic, n = "rows", 20
	brokers := testkafka.StartShortSessions(t, 1, topic)
	var msgs []kafka.Message
	for i := range n {
		msgs = append(msgs, kafka.Message{Key: []byte("seller"), Value: []byte(fmt.Sprint(i))})
	}
	testkafka.Produce(t, brokers, topic, msgs...)
	cfg := testConfig(brokers, topic)

	var mu sync.Mutex
	handled := map[string]int{} // by the first member
	g := New(cfg, testLogger(t), testMetrics(), Hooks{Ready: always, Handle: func(r *Row) {
		v := string(r.Msg.Value)
		mu.Lock()
		handled[v]++
		mu.Unlock()
		if v == "5" { // never finishes: the commit stays at its offset
			go func() { <-r.Partition().Ctx().Done(); r.GiveBack() }()
			return
		}
		r.Finish()
	}})
	count := func(v string) int { mu.Lock(); defer mu.Unlock(); return handled[v] }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	testwait.For(t, 10*time.Second, "every row handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(handled) == n })
	testwait.For(t, 10*time.Second, "the commit at the unfinished row", func() bool {
		return testkafka.Committed(t, brokers, cfg.Group, topic, 1)[0] == 5
	})

	// A second member joins and leaves: two rebalances. It finishes nothing.
	var took atomic.Bool // the second member got the partition
	g2 := New(cfg, testLogger(t), testMetrics(), Hooks{Ready: always, Handle: func(r *Row) { took.Store(true); go func() { <-r.Partition().Ctx().Done(); r.GiveBack() }() }})
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- g2.Run(ctx2) }()
	testwait.For(t, 15*time.Second, "the partition read again after the rebalance, by either member", func() bool { return took.Load() || count("5") >= 2 })
	// Counted before the second member leaves: the first one may take the
	// partition back and handle the row while the second's Run is still
	// waiting for its reader to close.
	before := count("5")
	cancel2()
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "the first member handling the partition again after the second left", func() bool { return count("5") > before })
	// Every row above the unfinished one read again, passed over or handled.
	testwait.For(t, 10*time.Second, "the first member reading the partition to its end again", func() bool {
		for _, p := range g.Partitions() {
			if cp, _ := p.offs.commitPoint(); cp == 5 && p.offs.unfinished() == 1 && p.offs.readThrough() == n {
				return true
			}
		}
		return false
	})
	for i := range n {
		v := fmt.Sprint(i)
		if v != "5" && count(v) != 1 {
			t.Errorf("row %s, finished the first time, was handled %d times by the member that finished it", v, count(v))
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAnIdleReaderHandsOnARowAtOnce: a reader with nothing to read waits in
// a fetch the broker holds up to about a second (fetchWait), and a row
// published meanwhile ends the wait: it is handed on well before the wait
// would have run out, wherever within it it was published. A fetch that
// waited its time out (a MinBytes above 1, a broker not woken) would make
// some of the rows, published across a whole wait, a second late.
func TestAnIdleReaderHandsOnARowAtOnce(t *testing.T) {
	const topic = "rows"
	brokers := testkafka.StartShortSessions(t, 1, topic)
	handled := make(chan time.Time, 16)
	g := New(testConfig(brokers, topic), testLogger(t), testMetrics(), Hooks{Ready: always, Handle: func(r *Row) {
		handled <- time.Now()
		r.Finish()
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	testkafka.Produce(t, brokers, topic, kafka.Message{Key: []byte("s"), Value: []byte("first")})
	select {
	case <-handled: // the member owns the partition and its reader waits in its next fetch
	case <-time.After(20 * time.Second):
		t.Fatal("the first row was not handed on within 20 s")
	}
	// Five rows, 300 ms apart: they fall across a whole wait of the broker.
	const most = fetchWait / 4
	for i := range 5 {
		time.Sleep(300 * time.Millisecond)
		sent := time.Now()
		testkafka.Produce(t, brokers, topic, kafka.Message{Key: []byte("s"), Value: []byte(fmt.Sprint(i))})
		select {
		case at := <-handled:
			if took := at.Sub(sent); took > most {
				t.Errorf("row %d was handed on %v after it was published, want under %v (the fetch it arrived in waited its time out)", i, took, most)
			}
		case <-time.After(2 * fetchWait):
			t.Fatalf("row %d was not handed on within %v", i, 2*fetchWait)
		}
	}
}
