package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/producer/upload"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/uploadstatus"
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

// TestOutageHoldsRowsInKafka: the registration API answers 503 to
// everything (two sellers calling) for 4 s, twice a row's retry budget (5
// attempts within 2 s: enough to outlast the circuit's opening on a busy
// machine, which can take up to 1.1 s, far too little for the outage), in
// the middle of an upload. While the circuit is open the consumer reads no
// new row (a second seller's rows published meanwhile stay in Kafka), holds
// at most the probe's throttle slot, and calls the API at most once per
// probe interval. Afterwards every row is registered once and none was
// dead-lettered.
func TestOutageHoldsRowsInKafka(t *testing.T) {
	// The lanes path's rule: the runner path holds a seller whose calls all fail (TestRunnerHoldsASellerTheAPIFails).
	s := newStack(t, stackOptions{rowPath: RowPathLanes, partitions: 1, limit: 50, window: time.Second, margin: 50 * time.Millisecond, latency: 3 * time.Millisecond})
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
	return maps(f.refused) // pipeline_test.go
}

// startBehindSellerFault starts one consumer whose calls go through a
// sellerFault answering 503 to every call of the down sellers, each row
// with a retry budget of attempts, and waits for it to join; when the test
// fails, the circuit's state and the rows held are logged.
func (s *stack) startBehindSellerFault(attempts int, down []string, tweak func(*Config)) (*sellerFault, *circuit.Breaker) {
	t := s.t
	t.Helper()
	fault := &sellerFault{next: s.api.Config.Handler, down: map[string]bool{}, refused: map[string]int{}}
	for _, seller := range down {
		fault.down[seller] = true
	}
	api := httptest.NewServer(fault)
	t.Cleanup(api.Close)
	c := s.startConsumer(func(cfg *Config, d *Deps) {
		if tweak != nil {
			tweak(cfg)
		}
		d.Retry = registryclient.RetryPolicy{InitialInterval: 50 * time.Millisecond, MaxInterval: 400 * time.Millisecond, MaxElapsed: 20 * time.Second,
			Multiplier: 2, Jitter: 0.5, MaxAttempts: attempts}
		rc, err := registryclient.New(registryclient.Options{BaseURL: api.URL, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		d.Registry = rc
	})
	s.waitGroupStable("registrar", 1)
	watch := s.breaker()
	t.Cleanup(func() {
		if t.Failed() {
			st, err := watch.Peek(context.Background())
			t.Logf("at the end: circuit %+v (%v), rows held %v", st, err, c.lanes.rowsBySeller())
		}
	})
	return fault, watch
}

// checkBudgetsSpent fails the test unless rows rows of the down sellers
// reached the API and each was tried its whole budget of attempts.
func (f *sellerFault) checkBudgetsSpent(t *testing.T, rows, attempts int) {
	t.Helper()
	calls := f.calls()
	if len(calls) != rows {
		t.Errorf("%d rows of the failing sellers reached the API, want %d", len(calls), rows)
	}
	for key, n := range calls {
		if n != attempts {
			t.Errorf("row %s was tried %d times, want its budget of %d", key, n, attempts)
		}
	}
}

// TestOneSellersFailuresAreItsOwn: every call for one seller answers 503
// while the API serves everybody else, and that seller is the only one
// calling at first. Its failures are its own: the fleet's circuit never
// opens, each of its rows spends its retry budget (4 attempts) and is
// dead-lettered, and a second seller's rows published 2 s later are read
// and registered meanwhile. A breaker that needed only as many failing
// sellers as were calling (one) would open: the failing rows would wait for
// the circuit without spending attempts, only they would probe, and the
// consumer holding them would read nothing more: the second seller would
// never be served.
func TestOneSellersFailuresAreItsOwn(t *testing.T) {
	// The lanes path's rule: the runner path holds a seller whose calls all fail (TestRunnerHoldsASellerTheAPIFails).
	s := newStack(t, stackOptions{rowPath: RowPathLanes, partitions: 1, limit: 50, window: time.Second, margin: 50 * time.Millisecond, latency: 3 * time.Millisecond})
	const attempts = 4
	fault, watch := s.startBehindSellerFault(attempts, []string{"poison"}, nil)

	const poisonRows, goodRows = 40, 40
	s.publish("up-poison", "poison", poisonRows)
	// Enough failures to open a breaker that counted only the sellers
	// calling (20 calls, 5 rows, one seller calling).
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
	fault.checkBudgetsSpent(t, poisonRows, attempts)
	st, err := watch.Peek(context.Background())
	if err != nil || st.State != circuit.Closed || st.Opens != 0 || st.Probes != 0 {
		t.Errorf("the circuit is %v (%v), opened %d times, %d probes; want closed, never opened: one seller's failures are its own", st.State, err, st.Opens, st.Probes)
	}
	s.checkCompliant("good", goodRows)
}

// TestASickSellersProbesAreItsOwn: the fleet's circuit is open after an
// outage, and the only rows waiting are those of a seller the circuit knows
// to be sick (its calls failed while another seller's were answered); the
// API still answers 503 to that seller alone. Its rows go for the probes,
// and each failed probe is its seller's own failure: every row spends its
// budget of 3 attempts and is dead-lettered. Then a healthy seller's rows
// are read, one of them probes, the circuit closes and all are registered.
// Were a failed probe the outage's whoever made it, the sick seller's rows
// would probe for ever without spending an attempt, and the circuit would
// stay open.
func TestASickSellersProbesAreItsOwn(t *testing.T) {
	// The lanes path's rule: the runner path holds a seller whose calls all fail (TestRunnerHoldsASellerTheAPIFails).
	s := newStack(t, stackOptions{rowPath: RowPathLanes, partitions: 1, limit: 50, window: time.Second, margin: 50 * time.Millisecond, latency: 3 * time.Millisecond})
	ctx := context.Background()
	// Other consumers' reports: "good" answered while "poison" fails (it is
	// sick), then, good's calls out of the window, sellers d and e fail with
	// it: an outage opens the circuit.
	watch := s.breaker()
	report := func(seller, row string, o circuit.Outcome) circuit.Status {
		t.Helper()
		d, err := watch.Allow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			return circuit.Status{State: d.State}
		}
		st, err := watch.Report(ctx, d, circuit.Call{Seller: seller, Row: row, Outcome: o})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	// poison's failures begin first: good's answers, a bucket later, prove
	// the API up while poison fails.
	if st := report("poison", "poison:first", circuit.Failure); st.State != circuit.Closed {
		t.Fatal("the circuit opened on a lone seller's first failure")
	}
	cs := circuitSettings()
	time.Sleep(cs.Window / time.Duration(cmp.Or(cs.Buckets, circuit.DefaultSettings().Buckets)))
	for i := range 6 {
		report("good", fmt.Sprintf("good:%d", i), circuit.Success)
	}
	for i := range 10 {
		if st := report("poison", fmt.Sprintf("poison:%d", i), circuit.Failure); st.State != circuit.Closed {
			t.Fatalf("the circuit opened on a lone seller's failure %d beside a healthy seller", i)
		}
	}
	testwait.For(t, 2*circuitSettings().Window, "good's answered calls leave the window", func() bool {
		c, err := watch.Seller(ctx, "good")
		return err == nil && c.Failures == 0 && c.Answered == 0
	})
	for i := 0; ; i++ {
		if i == 60 {
			t.Fatal("60 failures of sellers d and e did not open the circuit")
		}
		seller := []string{"d", "e"}[i%2]
		if st := report(seller, fmt.Sprintf("%s:%d", seller, i), circuit.Failure); st.State != circuit.Closed {
			break
		}
	}

	const attempts, poisonRows, goodRows = 3, 5, 20
	fault, _ := s.startBehindSellerFault(attempts, []string{"poison"}, nil)
	s.publish("up-poison", "poison", poisonRows)
	testwait.For(t, 20*time.Second, "every row of the sick seller dead-lettered", func() bool { return dlqLen(t, s.brokers, s.topic) >= poisonRows })
	fault.checkBudgetsSpent(t, poisonRows, attempts)

	published := time.Now()
	s.publish("up-good", "good", goodRows)
	s.waitProducts("good", goodRows, 10*time.Second)
	t.Logf("the healthy seller's %d rows registered %v after they were published", goodRows, time.Since(published).Round(time.Millisecond))
	s.checkCompliant("good", goodRows)
	if n := dlqLen(t, s.brokers, s.topic); n != poisonRows {
		t.Errorf("%d dead letters, want the sick seller's %d rows", n, poisonRows)
	}
	if st, err := watch.Peek(ctx); err != nil || st.State != circuit.Closed {
		t.Errorf("at the end the circuit is %v (%v), want closed: a healthy seller's probe was answered", st.State, err)
	}
}

// refusingGate stands before the sandbox as the registration API: while
// refusing, it answers every registration the way a misconfigured bulkreg
// is answered (refuse), and counts those answers; otherwise it passes the
// request on, through fix (the operator's fix: a URL rewritten, a
// credential replaced).
type refusingGate struct {
	next    http.Handler
	refuse  http.HandlerFunc
	fix     func(r *http.Request)
	mu      sync.Mutex
	closed  bool // the fault is fixed
	refused []time.Time
}

func (g *refusingGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	fixed := g.closed
	if !fixed {
		g.refused = append(g.refused, time.Now())
	}
	g.mu.Unlock()
	if !fixed {
		g.refuse(w, r)
		return
	}
	g.fix(r)
	g.next.ServeHTTP(w, r)
}

func (g *refusingGate) repair() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
}

func (g *refusingGate) refusals() []time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]time.Time(nil), g.refused...)
}

// TestRefusalOfBulkregHoldsEveryRow: the registration API refuses bulkreg
// itself, the rows being fine: a credential rotated at the API (401) or a
// registry URL with a wrong path (the sandbox's own "404 page not found",
// not the contract's JSON). No row fails, none is dead-lettered, no offset
// is committed past them; the fleet's circuit is held open as misconfigured
// (the gauge the alert watches says 1, the seller's view says registration
// is paused) and only probes reach the API. Once the fault is fixed every
// row is registered, each once. Were every code >= 400 Permanent, all 60
// rows would fail and be committed.
func TestRefusalOfBulkregHoldsEveryRow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		path   string // appended to the gate's URL: the registry URL bulkreg is given
		refuse func(next http.Handler) http.HandlerFunc
		fix    func(r *http.Request)
	}{
		{"a rotated credential (401)", "", func(http.Handler) http.HandlerFunc {
			return func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"error":{"code":"unauthorized","message":"the API key was revoked"}}`)
			}
		}, func(*http.Request) {}},
		{"a wrong path in the registry URL (404 page)", "/api/v2", func(next http.Handler) http.HandlerFunc {
			return next.ServeHTTP // the sandbox knows no /api/v2/v1/sellers/…: its mux answers "404 page not found"
		}, func(r *http.Request) { r.URL.Path = strings.TrimPrefix(r.URL.Path, "/api/v2") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, stackOptions{partitions: 1, limit: 50, window: time.Second, margin: 50 * time.Millisecond, latency: 3 * time.Millisecond})
			sb := s.api.Config.Handler
			gate := &refusingGate{next: sb, refuse: tc.refuse(sb), fix: tc.fix}
			api := httptest.NewServer(gate)
			t.Cleanup(api.Close)
			reg := prometheus.NewRegistry()
			s.startConsumer(func(_ *Config, d *Deps) {
				rc, err := registryclient.New(registryclient.Options{BaseURL: api.URL + tc.path, Timeout: 2 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				d.Registry, d.Registerer = rc, reg
			})
			s.waitGroupStable("registrar", 1)
			const rows = 30
			s.publish("up-a", "a", rows)
			s.publish("up-b", "b", rows)

			watch := s.breaker()
			var held circuit.Status
			testwait.For(t, 10*time.Second, "the circuit held open as misconfigured, or rows failed", func() bool {
				st, err := watch.Peek(context.Background())
				held = st
				return err == nil && st.State != circuit.Closed && st.Reason == circuit.Misconfigured ||
					counterValue(t, reg, "bulkreg_consumer_rows_total", "failed") > 0
			})
			if held.State == circuit.Closed || held.Reason != circuit.Misconfigured {
				t.Errorf("the circuit is %v (reason %q) while the API refuses bulkreg, want held open, misconfigured", held.State, held.Reason)
			}
			openedAt := held.Now.Add(-held.OpenFor)
			time.Sleep(3 * time.Second) // the fault lasts; the fleet waits
			if v := gaugeValue(t, reg, circuit.MetricMisconfigured); v != 1 {
				t.Errorf("%s = %v while the API refuses bulkreg, want 1 (the alert's input)", circuit.MetricMisconfigured, v)
			}
			if v := counterValue(t, reg, "bulkreg_consumer_registry_calls_total", "misconfigured"); v < 1 {
				t.Errorf("bulkreg_consumer_registry_calls_total{class=misconfigured} = %v, want ≥ 1", v)
			}
			view := upload.View(context.Background(), uploadstatus.Status{Upload: uploadstatus.Upload{Total: rows}, Waiting: rows}, watch)
			if view.Marketplace != upload.MarketplaceMisconfigured || view.Notice != upload.Paused {
				t.Errorf("the seller's view: marketplace %q, notice %q; want %q, %q", view.Marketplace, view.Notice, upload.MarketplaceMisconfigured, upload.Paused)
			}
			if n := counterValue(t, reg, "bulkreg_consumer_rows_total", "failed"); n != 0 {
				t.Errorf("%v rows failed while the API refused bulkreg, want 0", n)
			}
			if n := dlqLen(t, s.brokers, s.topic); n != 0 {
				t.Errorf("%d rows dead-lettered while the API refused bulkreg, want 0", n)
			}
			if off := committedOffsets(t, s.brokers, "registrar", s.topic, 1)[0]; off > 0 {
				t.Errorf("offset %d committed while no row was registered, want none past the first row", off)
			}
			during := watch
			st, _ := during.Peek(context.Background())
			var late int
			for _, at := range gate.refusals() {
				if at.After(openedAt.Add(100 * time.Millisecond)) {
					late++
				}
			}
			if int64(late) > st.Probes {
				t.Errorf("%d requests reached the API after the circuit was held open, %d probes were given: want only probes", late, st.Probes)
			}
			t.Logf("the API refused %d requests; %d probes while held %v", len(gate.refusals()), st.Probes, time.Since(openedAt).Round(time.Millisecond))

			gate.repair()
			fixed := time.Now()
			s.waitProducts("a", rows, 15*time.Second)
			s.waitProducts("b", rows, 15*time.Second)
			t.Logf("every row registered %v after the fix", time.Since(fixed).Round(time.Millisecond))
			s.checkCompliant("a", rows)
			s.checkCompliant("b", rows)
			if n := counterValue(t, reg, "bulkreg_consumer_rows_total", "failed"); n != 0 {
				t.Errorf("%v rows failed, want 0", n)
			}
			if n := dlqLen(t, s.brokers, s.topic); n != 0 {
				t.Errorf("%d rows dead-lettered, want 0", n)
			}
			if st, err := watch.Peek(context.Background()); err != nil || st.State != circuit.Closed {
				t.Errorf("after the fix the circuit is %v (%v), want closed", st.State, err)
			}
			if v := gaugeValue(t, reg, circuit.MetricMisconfigured); v != 0 {
				t.Errorf("%s = %v after the fix, want 0", circuit.MetricMisconfigured, v)
			}
		})
	}
}

// gaugeValue reads an unlabelled gauge from reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// counterValue reads the series of a counter vector whose one label has value.
func counterValue(t *testing.T, reg *prometheus.Registry, name, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s{…=%q}", name, value)
	return 0
}

// TestRefusalWithoutACircuitWaits: with no circuit breaker configured, a
// refusal of bulkreg itself still fails no row: the row asks again after a
// growing wait (the Redis retry bounds) and spends no attempt. Each row here
// is refused 5 times (more than its budget of 4 attempts), then registered.
func TestRefusalWithoutACircuitWaits(t *testing.T) {
	const refusals, rows = 5, 10
	f := newFixture(t, 1, func(key string, n int) registryclient.Result {
		if n <= refusals {
			return registryclient.Result{Class: registryclient.Misconfigured, Status: http.StatusUnauthorized, Err: errors.New("the API key was revoked")}
		}
		return registryclient.Result{Class: registryclient.Registered, Status: http.StatusCreated}
	})
	f.start()
	f.publish("u", "s", rows)
	testwait.For(t, 15*time.Second, "every row registered", func() bool { return f.registeredCount("u") == rows })
	for k, r := range f.status.snapshot() {
		if r.State != "registered" || r.Attempts != 1 {
			t.Errorf("row %s: %s after %d attempts, want registered after 1 (refusals of bulkreg are not the row's attempts)", k, r.State, r.Attempts)
		}
	}
	if n := counterValue(t, f.reg, "bulkreg_consumer_rows_total", "failed") + counterValue(t, f.reg, "bulkreg_consumer_rows_total", "dead_lettered"); n != 0 {
		t.Errorf("%v rows failed or dead-lettered, want 0", n)
	}
	if v := counterValue(t, f.reg, "bulkreg_consumer_registry_calls_total", "misconfigured"); v != refusals*rows {
		t.Errorf("bulkreg_consumer_registry_calls_total{class=misconfigured} = %v, want %d", v, refusals*rows)
	}
}

// TestOneSellersRefusalIsItsOwn: the API answers 403 to one seller's calls
// only (it revoked the app's access for that seller) while it registers
// another seller's rows. That refusal is the seller's own, not bulkreg's:
// the fleet's circuit never opens, the other seller's rows all register,
// and the refused seller's rows spend their budget (4 attempts) and are
// dead-lettered with the class misconfigured, which redrive sends again.
func TestOneSellersRefusalIsItsOwn(t *testing.T) {
	// The lanes path's rule: the runner path holds a seller whose calls all fail (TestRunnerHoldsASellerTheAPIFails).
	s := newStack(t, stackOptions{rowPath: RowPathLanes, partitions: 1, limit: 50, window: time.Second, margin: 50 * time.Millisecond, latency: 3 * time.Millisecond})
	sb := s.api.Config.Handler
	var mu sync.Mutex
	refused := map[string]int{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/sellers/locked/") {
			mu.Lock()
			refused[r.Header.Get("Idempotency-Key")]++
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":{"code":"seller_access_revoked","message":"the seller revoked this application's access"}}`)
			return
		}
		sb.ServeHTTP(w, r)
	}))
	t.Cleanup(api.Close)
	const attempts = 4
	s.startConsumer(func(_ *Config, d *Deps) {
		d.Retry = registryclient.RetryPolicy{InitialInterval: 50 * time.Millisecond, MaxInterval: 200 * time.Millisecond, MaxElapsed: 20 * time.Second,
			Multiplier: 2, Jitter: 0.5, MaxAttempts: attempts}
		rc, err := registryclient.New(registryclient.Options{BaseURL: api.URL, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		d.Registry = rc
	})
	s.waitGroupStable("registrar", 1)
	const goodRows, lockedRows = 150, 20
	s.publish("up-good", "good", goodRows)
	// The window must hold the other seller's answers when the first
	// refusal comes (they reach Redis in batches, up to TrustClosed/2
	// late); a refusal with no other seller answered is bulkreg's.
	_, win := s.breaker().Keys()
	testwait.For(t, 10*time.Second, "the window holds seller good's answers", func() bool {
		for k, v := range s.rdb.HGetAll(context.Background(), win).Val() {
			if strings.HasSuffix(k, ":ok") && strings.Contains(v, "good") {
				return true
			}
		}
		return false
	})
	s.publish("up-locked", "locked", lockedRows)

	letters := readDLQ(t, s.brokers, s.topic, lockedRows)
	for _, l := range letters {
		var class, tries string
		for _, h := range l.Headers {
			switch h.Key {
			case HeaderErrorClass:
				class = string(h.Value)
			case HeaderAttempts:
				tries = string(h.Value)
			}
		}
		if string(l.Key) != "locked" || class != registryclient.Misconfigured.String() || tries != fmt.Sprint(attempts) {
			t.Errorf("dead letter of seller %s: class %q after %s attempts, want the locked seller's, %q after %d", l.Key, class, tries, registryclient.Misconfigured, attempts)
		}
	}
	s.waitProducts("good", goodRows, 15*time.Second)
	s.checkCompliant("good", goodRows)
	mu.Lock()
	for key, n := range refused {
		if n != attempts {
			t.Errorf("row %s was refused %d times, want its budget of %d", key, n, attempts)
		}
	}
	mu.Unlock()
	if st, err := s.breaker().Peek(context.Background()); err != nil || st.State != circuit.Closed || st.Opens != 0 {
		t.Errorf("the circuit is %v (%v), opened %d times; want closed, never opened: one seller refused is that seller's failure", st.State, err, st.Opens)
	}
}
