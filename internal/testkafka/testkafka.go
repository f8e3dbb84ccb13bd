// Package testkafka starts the embedded Kafka-protocol broker (kfake) for
// tests, listening on real sockets so kafka-go and kcat talk to it as to
// Apache Kafka.
package testkafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
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
