package consumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/bulkreg/bulkreg/internal/testwait"
)

// startBroker runs the embedded broker like testkafka.Start, but accepts the
// short session timeouts these tests use (kfake's default minimum is 6 s).
func startBroker(t testing.TB, partitions int32, topics ...string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...), kfake.AllowAutoTopicCreation(),
		kfake.GroupMinSessionTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatalf("start embedded Kafka broker: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(&tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type tlogWriter struct{ t testing.TB }

func (w *tlogWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func testConfig(brokers []string, topic string) Config {
	cfg := DefaultConfig()
	cfg.Brokers = brokers
	cfg.Topic = topic
	cfg.Group = "test-group"
	cfg.SessionTimeout = 2 * time.Second
	cfg.HeartbeatInterval = 200 * time.Millisecond
	cfg.RebalanceTimeout = 5 * time.Second
	cfg.CommitInterval = 100 * time.Millisecond
	cfg.DrainTimeout = MaxDrainTimeout(cfg.SessionTimeout, cfg.HeartbeatInterval) // 1.6 s
	return cfg
}

func produce(t testing.TB, brokers []string, topic string, msgs ...kafka.Message) {
	t.Helper()
	// The embedded broker can answer a seeded topic's metadata with
	// UNKNOWN_TOPIC_OR_PARTITION (rarely, under load). That answer comes
	// before any message is written (a partial write is a
	// kafka.WriteErrors, not this), so writing again cannot duplicate one.
	// Each try has a writer and transport of its own: kafka-go's shared
	// transport keeps a topic's metadata for 6 s, so five tries 100 ms
	// apart with one writer would all read the same answer.
	var err error
	for range 20 {
		tr := &kafka.Transport{}
		w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Hash{}, BatchTimeout: 5 * time.Millisecond, BatchSize: 1000, RequiredAcks: kafka.RequireAll,
			Transport: tr}
		err = w.WriteMessages(context.Background(), msgs...)
		w.Close()
		tr.CloseIdleConnections()
		if !errors.Is(err, kafka.UnknownTopicOrPartition) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// committedOffsets reads the group's committed offsets.
func committedOffsets(t testing.TB, brokers []string, group, topic string, partitions int) map[int]int64 {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	parts := make([]int, partitions)
	for i := range parts {
		parts[i] = i
	}
	resp, err := client.OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err != nil {
		t.Fatalf("fetch committed offsets: %v", err)
	}
	out := map[int]int64{}
	for _, p := range resp.Topics[topic] {
		out[p.Partition] = p.CommittedOffset
	}
	return out
}

// TestGroupCommitsOnlyFinishedPrefix runs the Kafka side alone: rows finish
// in random order; the committed offset never passes an unfinished row, and
// after the member stops, a new member reads only what was not finished.
func TestGroupCommitsOnlyFinishedPrefix(t *testing.T) {
	const topic, n = "rows", 200
	brokers := startBroker(t, 2, topic)
	var msgs []kafka.Message
	for i := range n {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprint("seller-", i%7)), Value: []byte(fmt.Sprint(i))})
	}
	produce(t, brokers, topic, msgs...)

	cfg := testConfig(brokers, topic)
	var mu sync.Mutex
	held := map[string]*row{} // rows never finished: the commit must stop below them
	seen := map[string]int{}
	handle := func(r *row) {
		mu.Lock()
		seen[string(r.msg.Value)]++
		v := string(r.msg.Value)
		mu.Unlock()
		if v == "150" || v == "151" {
			mu.Lock()
			held[v] = r
			mu.Unlock()
			go func() { <-r.ctx().Done(); r.giveBack() }()
			return
		}
		go func() {
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			r.finish()
		}()
	}
	g := newGroup(cfg, testLogger(t), newMetrics(prometheus.NewRegistry(), func() float64 { return 0 }))
	g.handle = handle
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.run(ctx) }()
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
	committed := committedOffsets(t, brokers, cfg.Group, topic, 2)
	low := map[int]int64{}
	for _, r := range held {
		if o, ok := low[r.msg.Partition]; !ok || r.msg.Offset < o {
			low[r.msg.Partition] = r.msg.Offset
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
	// in the commit's metadata (finished.go) and passed over.
	mu.Lock()
	seen = map[string]int{}
	held = map[string]*row{}
	mu.Unlock()
	again := map[string]bool{}
	g2 := newGroup(cfg, testLogger(t), newMetrics(prometheus.NewRegistry(), func() float64 { return 0 }))
	g2.handle = func(r *row) {
		mu.Lock()
		again[string(r.msg.Value)] = true
		mu.Unlock()
		r.finish()
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- g2.run(ctx2) }()
	testwait.For(t, 10*time.Second, "the held rows read again", func() bool { mu.Lock(); defer mu.Unlock(); return again["150"] && again["151"] })
	testwait.For(t, 10*time.Second, "every row committed", func() bool {
		total := int64(0)
		for _, off := range committedOffsets(t, brokers, cfg.Group, topic, 2) {
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
	brokers := startBroker(t, 1, topic)
	var msgs []kafka.Message
	for i := range n {
		msgs = append(msgs, kafka.Message{Key: []byte("seller"), Value: []byte(fmt.Sprint(i))})
	}
	produce(t, brokers, topic, msgs...)
	cfg := testConfig(brokers, topic)

	var mu sync.Mutex
	handled := map[string]int{} // by the first member
	g := newGroup(cfg, testLogger(t), newMetrics(prometheus.NewRegistry(), func() float64 { return 0 }))
	g.handle = func(r *row) {
		v := string(r.msg.Value)
		mu.Lock()
		handled[v]++
		mu.Unlock()
		if v == "5" { // never finishes: the commit stays at its offset
			go func() { <-r.ctx().Done(); r.giveBack() }()
			return
		}
		r.finish()
	}
	count := func(v string) int { mu.Lock(); defer mu.Unlock(); return handled[v] }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.run(ctx) }()
	testwait.For(t, 10*time.Second, "every row handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(handled) == n })
	testwait.For(t, 10*time.Second, "the commit at the unfinished row", func() bool {
		return committedOffsets(t, brokers, cfg.Group, topic, 1)[0] == 5
	})

	// A second member joins and leaves: two rebalances. It finishes nothing.
	g2 := newGroup(cfg, testLogger(t), newMetrics(prometheus.NewRegistry(), func() float64 { return 0 }))
	var took atomic.Bool // the second member got the partition
	g2.handle = func(r *row) { took.Store(true); go func() { <-r.ctx().Done(); r.giveBack() }() }
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- g2.run(ctx2) }()
	testwait.For(t, 15*time.Second, "the partition read again after the rebalance, by either member", func() bool { return took.Load() || count("5") >= 2 })
	cancel2()
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
	before := count("5")
	testwait.For(t, 15*time.Second, "the first member handling the partition again after the second left", func() bool { return count("5") > before })
	// Every row above the unfinished one read again, passed over or handled.
	testwait.For(t, 10*time.Second, "the first member reading the partition to its end again", func() bool {
		for _, p := range g.partitions() {
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
