package consumer

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
// (two sellers calling) for 4 s, twice a row's retry budget (5 attempts within 2 s: enough to
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
	// Two sellers calling when the API goes down: one seller's failures
	// alone never open the fleet's circuit (TestOneSellersFailuresAreItsOwn).
	s.publish("up-a", "a", 200)
	s.publish("up-c", "c", 200)
	s.waitProducts("a", 60, 10*time.Second)
	s.waitProducts("c", 60, 10*time.Second)
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
		if n := futureSlots(t, s.rdb, "bulkreg:{s:a}:log", now) + futureSlots(t, s.rdb, "bulkreg:{s:c}:log", now); n > 1 && time.Since(openedAt) > s.window+s.margin {
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
		return s.audit("a").Products+s.audit("b").Products+s.audit("c").Products+dlqLen(t, s.brokers, s.topic) >= 430
	})
	if n := dlqLen(t, s.brokers, s.topic); n != 0 {
		t.Errorf("%d rows dead-lettered, want 0: the outage is not the rows' failure", n)
	}
	s.checkCompliant("a", 200)
	s.checkCompliant("b", 30)
	s.checkCompliant("c", 200)
	if st, err := watch.Peek(context.Background()); err != nil || st.State != circuit.Closed {
		t.Errorf("after the outage the circuit is %v (%v), want closed", st.State, err)
	}
}

// sellerFault answers 503 to every registration of the sellers in down and
// passes everything else to the sandbox: one seller's persistent fault (its
// account broken at the API) while the API serves the others. It counts the
// calls it refused per Idempotency-Key.
type sellerFault struct {
	next http.Handler
	down map[string]bool

	mu      sync.Mutex
	refused map[string]int
}

func (f *sellerFault) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/") // v1 sellers <id> products
	if len(parts) == 4 && parts[1] == "sellers" && f.down[parts[2]] {
		f.mu.Lock()
		f.refused[r.Header.Get("Idempotency-Key")]++
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"code":"unavailable","message":"the seller's catalogue is unavailable"}}`)
		return
	}
	f.next.ServeHTTP(w, r)
}

func (f *sellerFault) calls() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.refused))
	for k, v := range f.refused {
		out[k] = v
	}
	return out
}

// TestOneSellersFailuresAreItsOwn (issue 26, finding 5): every call for one
// seller answers 503 while the API serves everybody else, and that seller is
// the only one calling at first. Its failures are its own: the fleet's
// circuit never opens, each of its rows spends its retry budget (4 attempts)
// and is dead-lettered, and a second seller's rows published 2 s later are
// read and registered meanwhile. Before, the breaker needed only as many
// failing sellers as were calling (one): it opened, the failing rows waited
// for the circuit without spending attempts, only they probed, and the
// consumer holding them read nothing more: the second seller was never served.
func TestOneSellersFailuresAreItsOwn(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 1, limit: 50, window: time.Second, margin: 50 * time.Millisecond, latency: 3 * time.Millisecond})
	fault := &sellerFault{next: s.api.Config.Handler, down: map[string]bool{"poison": true}, refused: map[string]int{}}
	api := httptest.NewServer(fault)
	t.Cleanup(api.Close)
	const attempts = 4
	budget := registryclient.RetryPolicy{InitialInterval: 50 * time.Millisecond, MaxInterval: 400 * time.Millisecond, MaxElapsed: 20 * time.Second,
		Multiplier: 2, Jitter: 0.5, MaxAttempts: attempts}
	c := s.startConsumer(func(_ *Config, d *Deps) {
		d.Retry = budget
		rc, err := registryclient.New(registryclient.Options{BaseURL: api.URL, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		d.Registry = rc
	})
	s.waitGroupStable("registrar", 1)
	watch := s.breaker()
	defer func() {
		if t.Failed() {
			st, err := watch.Peek(context.Background())
			t.Logf("at the end: circuit %+v (%v), rows held %v", st, err, c.lanes.rowsBySeller())
		}
	}()

	const poisonRows, goodRows = 40, 40
	s.publish("up-poison", "poison", poisonRows)
	// Enough failures for the old rule (20 calls, 5 rows, one seller calling).
	testwait.For(t, 10*time.Second, "the poison seller's first attempts failed", func() bool { return len(fault.calls()) >= 20 })
	time.Sleep(2 * time.Second)
	published := time.Now()
	s.publish("up-good", "good", goodRows)
	s.waitProducts("good", goodRows, 10*time.Second)
	t.Logf("the healthy seller's %d rows registered %v after they were published", goodRows, time.Since(published).Round(time.Millisecond))

	testwait.For(t, 20*time.Second, "every poison row dead-lettered", func() bool { return dlqLen(t, s.brokers, s.topic) >= poisonRows })
	if n := dlqLen(t, s.brokers, s.topic); n != poisonRows {
		t.Errorf("%d dead letters, want the %d poison rows", n, poisonRows)
	}
	calls := fault.calls()
	if len(calls) != poisonRows {
		t.Errorf("%d poison rows reached the API, want %d", len(calls), poisonRows)
	}
	for key, n := range calls {
		if n != attempts {
			t.Errorf("row %s was tried %d times, want its budget of %d", key, n, attempts)
		}
	}
	st, err := watch.Peek(context.Background())
	if err != nil || st.State != circuit.Closed || st.Opens != 0 || st.Probes != 0 {
		t.Errorf("the circuit is %v (%v), opened %d times, %d probes; want closed, never opened: one seller's failures are its own", st.State, err, st.Opens, st.Probes)
	}
	s.checkCompliant("good", goodRows)
}
