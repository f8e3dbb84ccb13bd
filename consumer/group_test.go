package consumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
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
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Hash{}, BatchTimeout: 5 * time.Millisecond, BatchSize: 1000, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	// The embedded broker once answered a seeded topic's metadata with
	// UNKNOWN_TOPIC_OR_PARTITION (1 make test run; 0 of 20 runs beside two
	// busy loops). That answer comes before any message is written (a
	// partial write is a kafka.WriteErrors, not this), so writing again
	// cannot duplicate one.
	var err error
	for range 5 {
		if err = w.WriteMessages(context.Background(), msgs...); !errors.Is(err, kafka.UnknownTopicOrPartition) {
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
	// rows again and the finished rows above them, nothing below.
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
	for _, v := range []string{"0", "1", "2"} {
		if again[v] {
			t.Errorf("row %s was finished and committed before, but read again", v)
		}
	}
}
