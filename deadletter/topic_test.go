package deadletter

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg/internal/testkafka"
)

// TestTopicIsNotCreated: bulkreg never creates topics. With the
// dead-letter topic missing (on a broker that would create it when asked),
// a dead letter is a failed write, and the topic still does not exist.
func TestTopicIsNotCreated(t *testing.T) {
	brokers := testkafka.StartShortSessions(t, 1, "rows")
	dlq := NewKafkaWriter(brokers, "rows.dlq", nil)
	dlq.w.MaxAttempts = 1
	defer dlq.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := dlq.WriteDeadLetter(ctx, Row{Original: kafka.Message{Topic: "rows", Key: []byte("s"), Value: []byte("{}")},
		Class: "transient", Message: "the registration API answered 503", Attempts: 8, FirstFailure: time.Now()})
	if err == nil {
		t.Fatal("a dead letter to a missing topic was written; want the write to fail")
	}
	conn, err := kafka.Dial("tcp", brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if p.Topic == "rows.dlq" {
			t.Fatal("writing a dead letter created the topic rows.dlq")
		}
	}
}
