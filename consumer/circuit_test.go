package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/testwait"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
)

func TestProbeTurn(t *testing.T) {
	turn := newProbeTurn()
	got, _ := turn.take()
	if !got {
		t.Fatal("a free turn was not given")
	}
	again, free := turn.take()
	if again || free == nil {
		t.Fatalf("a held turn was given again (%v) or no channel to wait on (%v)", again, free)
	}
	select {
	case <-free:
		t.Fatal("the wait ended before the turn was given back")
	default:
	}
	turn.give()
	select {
	case <-free:
	case <-time.After(time.Second):
		t.Fatal("giving the turn back did not wake the waiter")
	}
	if got, _ := turn.take(); !got {
		t.Fatal("a turn given back was not given again")
	}
}

// dlqLen counts the messages of the dead-letter topic.
func dlqLen(t testing.TB, brokers []string, topic string) int {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 5 * time.Second}
	dlq := bulkreg.DLQTopic(topic)
	md, err := client.Metadata(context.Background(), &kafka.MetadataRequest{Topics: []string{dlq}})
	if err != nil || len(md.Topics) != 1 {
		t.Fatalf("metadata of %s: %v", dlq, err)
	}
	var reqs []kafka.OffsetRequest
	for _, p := range md.Topics[0].Partitions {
		reqs = append(reqs, kafka.FirstOffsetOf(p.ID), kafka.LastOffsetOf(p.ID))
	}
	offs, err := client.ListOffsets(context.Background(), &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{dlq: reqs}})
	if err != nil {
		t.Fatalf("offsets of %s: %v", dlq, err)
	}
	n := 0
	for _, p := range offs.Topics[dlq] {
		n += int(p.LastOffset - p.FirstOffset)
	}
	return n
}

// TestOutageHoldsRowsInKafka: the registration API answers 503 to everything
// for 4 s, twice a row's retry budget (5 attempts within 2 s: enough to
// outlast the circuit's opening on a busy machine, where it took up to 1.1 s,
// far too little for the outage), in the middle of an upload. While the circuit is open the consumer reads no new
// row (a second seller's rows published meanwhile stay in Kafka), holds at
// most the probe's throttle slot, and calls the API at most once per probe
// interval. Afterwards every row is registered once and none was
// dead-lettered.
func TestOutageHoldsRowsInKafka(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 1, limit: 50, window: time.Second, margin: 50 * time.Millisecond, latency: 3 * time.Millisecond})
	budget := registryclient.RetryPolicy{InitialInterval: 50 * time.Millisecond, MaxInterval: 400 * time.Millisecond, MaxElapsed: 2 * time.Second,
		Multiplier: 2, Jitter: 0.5, MaxAttempts: 5}
	c := s.startConsumer(func(_ *Config, d *Deps) { d.Retry = budget })
	s.waitGroupStable("registrar", 1)
	s.publish("up-a", "a", 200)
	s.waitProducts("a", 60, 10*time.Second)
	defer func() {
		if t.Failed() {
			st, err := s.breaker().Peek(context.Background())
			t.Logf("at the end: circuit %+v (%v), rows held %v, consumer's view %v", st, err, c.lanes.rowsBySeller(), c.circuitOpen())
		}
	}()

	s.sandbox.SetOutage(sandbox.Outage{All: true})
	down := time.Now()
	watch := s.breaker()
	var open circuit.Status
	testwait.For(t, 5*time.Second, "the circuit opens", func() bool {
		st, err := watch.Peek(context.Background())
		open = st
		return err == nil && st.State != circuit.Closed
	})
	openedAt := open.Now.Add(-open.OpenFor)
	t.Logf("the circuit opened %v after the API went down", openedAt.Sub(down).Round(time.Millisecond))
	s.publish("up-b", "b", 30)

	probeMin := circuitSettings().ProbeMin
	for time.Since(down) < 4*budget.MaxElapsed {
		if n := c.lanes.rowsBySeller()["b"]; n != 0 {
			t.Fatalf("the consumer read %d rows of seller b while the circuit was open, want 0 (they wait in Kafka)", n)
		}
		now, err := s.rdb.Time(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		// Slots taken before the circuit opened are given back when they
		// come, within a window; then only the row that goes for the probe
		// holds one.
		if n := futureSlots(t, s.rdb, "bulkreg:{s:a}:log", now); n > 1 && time.Since(openedAt) > s.window+s.margin {
			t.Errorf("%d throttle slots ahead held %v after the circuit opened, want at most the probe's", n, time.Since(openedAt).Round(time.Millisecond))
		}
		time.Sleep(50 * time.Millisecond)
	}
	report := s.sandbox.Outage()
	s.sandbox.SetOutage(sandbox.Outage{})
	up := time.Now()

	// Requests the API got once the circuit was open (calls already on the
	// way then land within a few ms): one probe at a time, at least
	// ProbeMin apart.
	var probes []time.Time
	for _, at := range report.RefusedAt {
		if at.After(openedAt.Add(probeMin / 2)) {
			probes = append(probes, at)
		}
	}
	for i := 1; i < len(probes); i++ {
		if gap := probes[i].Sub(probes[i-1]); gap < probeMin-20*time.Millisecond {
			t.Errorf("two requests %v apart while the circuit was open, want at least the probe interval %v", gap, probeMin)
		}
	}
	t.Logf("the API refused %d requests: %d before the circuit opened, %d probes in %v while open",
		report.Refused, report.Refused-len(probes), len(probes), up.Sub(openedAt).Round(time.Millisecond))

	testwait.For(t, 20*time.Second, "every row registered or dead-lettered", func() bool {
		return s.audit("a").Products+s.audit("b").Products+dlqLen(t, s.brokers, s.topic) >= 230
	})
	if n := dlqLen(t, s.brokers, s.topic); n != 0 {
		t.Errorf("%d rows dead-lettered, want 0: the outage is not the rows' failure", n)
	}
	s.checkCompliant("a", 200)
	s.checkCompliant("b", 30)
	if st, err := watch.Peek(context.Background()); err != nil || st.State != circuit.Closed {
		t.Errorf("after the outage the circuit is %v (%v), want closed", st.State, err)
	}
}
