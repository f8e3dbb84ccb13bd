// Package testkafka starts the embedded Kafka-protocol broker (kfake) for
// tests, listening on real sockets so kafka-go and kcat talk to it as to
// Apache Kafka.
package testkafka

import (
	"context"
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
