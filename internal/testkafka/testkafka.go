// Package testkafka starts the embedded Kafka-protocol broker (kfake) for
// tests, listening on real sockets so kafka-go and kcat talk to it as to
// Apache Kafka.
package testkafka

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/bulkreg/bulkreg/internal/testwait"
)

// Start runs a one-broker cluster with the given topics, each of partitions
// partitions, and stops it when the test ends. It returns the bootstrap
// addresses.
func Start(t testing.TB, partitions int32, topics ...string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatalf("start embedded Kafka broker: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// StartShortSessions is Start with a broker that accepts the short group
// session timeouts tests use (kfake's default minimum is 6 s).
func StartShortSessions(t testing.TB, partitions int32, topics ...string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...), kfake.AllowAutoTopicCreation(),
		kfake.GroupMinSessionTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatalf("start embedded Kafka broker: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// Produce writes msgs to topic, keyed by the hash balancer, acknowledged by
// every in-sync replica, and fails t when they cannot be written.
func Produce(t testing.TB, brokers []string, topic string, msgs ...kafka.Message) {
	t.Helper()
	// The embedded broker can answer a seeded topic's metadata with
	// UNKNOWN_TOPIC_OR_PARTITION (rarely, under load). That answer comes
	// before any message is written (a partial write is a
	// kafka.WriteErrors, not this), so writing again cannot duplicate one.
	// Each try has a writer and transport of its own: kafka-go's shared
	// transport keeps a topic's metadata for 6 s, so tries 100 ms apart
	// with one writer would all read the same answer.
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

// Committed reads the group's committed offset of each of topic's first
// partitions partitions (-1: none committed).
func Committed(t testing.TB, brokers []string, group, topic string, partitions int) map[int]int64 {
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

// WaitGroupStable waits until the consumer group has n members and is
// stable, so a test's timing is not disturbed by the rebalances of members
// joining, and fails t when that takes longer than within.
func WaitGroupStable(t testing.TB, brokers []string, group string, n int, within time.Duration) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	testwait.For(t, within, fmt.Sprintf("group %s stable with %d members", group, n), func() bool {
		resp, err := client.DescribeGroups(context.Background(), &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		return err == nil && len(resp.Groups) == 1 && resp.Groups[0].GroupState == "Stable" && len(resp.Groups[0].Members) == n
	})
}
