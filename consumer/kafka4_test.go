package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/producer/upload"
)

// TestAgainstKafka4: the producer's writer and a consumer group through a
// broker that refuses every protocol version Apache Kafka 4.0 removed
// (KIP-896) and closes the connection on one, as 4.0 does. Rows published
// with the upload service's writer (acks=all, hashed by seller) are read by
// two consumers of one group, registered once each at the sandbox, and
// committed to the end of every partition; the broker refused no request.
// Docker Compose and the dev overlay run Kafka 4.1; kafka-go negotiates
// its versions from the broker's answer, and this holds it to that.
func TestAgainstKafka4(t *testing.T) {
	const partitions, n = 3, 60
	s := newStack(t, stackOptions{partitions: partitions, limit: 100, window: 3 * time.Second, margin: 50 * time.Millisecond})
	k := testkafka.StartKafka4(t, partitions, []string{s.topic, bulkreg.DLQTopic(s.topic)}, kfake.GroupMinSessionTimeout(500*time.Millisecond))
	s.brokers = k.Brokers
	s.startConsumer()
	s.startConsumer()
	s.waitGroupStable("registrar", 2)

	w, err := upload.NewWriter(upload.WriterOptions{Brokers: k.Brokers, Topic: s.topic})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var msgs []kafka.Message
	for i := 1; i <= n; i++ {
		seller := fmt.Sprintf("seller-%d", i%4)
		p := bulkreg.Product{SellerSKU: fmt.Sprintf("k4-%d", i), Name: "상품", CategoryCode: "50000001", Price: 12000, Stock: 10}
		v, err := json.Marshal(bulkreg.NewMessage("upload-k4-"+seller, seller, i, p, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(seller), Value: v})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatalf("the producer's writer could not publish through a Kafka 4 broker: %v (refused: %v)", err, k.Refused())
	}

	testwait.For(t, 30*time.Second, fmt.Sprintf("%d rows registered at the sandbox", n), func() bool {
		total := 0
		for i := range 4 {
			total += s.audit(fmt.Sprintf("seller-%d", i)).Products
		}
		return total == n
	})
	testwait.For(t, 10*time.Second, "every partition committed to its end", func() bool {
		total := int64(0)
		for _, off := range testkafka.Committed(t, k.Brokers, "registrar", s.topic, partitions) {
			total += off
		}
		return total == n
	})
	for i := range 4 {
		s.checkCompliant(fmt.Sprintf("seller-%d", i), n/4)
	}
	if r := k.Refused(); len(r) != 0 {
		t.Errorf("the broker refused %v: a Kafka 4 broker closes the connection on these", r)
	}
}
