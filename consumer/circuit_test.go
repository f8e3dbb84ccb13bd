package consumer

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/deadletter"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/producer/upload"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

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

// TestAnOutageHoldsEachSellerCalling: the registration API answers 503 to
// everything for 4 s, twice a row's retry budget (5 attempts within 2 s), in
// the middle of two sellers' uploads; a third seller's rows are published
// during it. Each seller is held by its runner once a batch of its calls
// fails with none answered after them: no row spends its budget or is
// dead-lettered, and the dead API gets the batches that were out, each
// seller's first batch, and then at most one probe per seller per
// --seller-probe-min (or the fleet's probes, once the circuit opens for the
// sellers failing together). Afterwards every row is registered once, within the
// limit, and no seller is held.
func TestAnOutageHoldsEachSellerCalling(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 1, limit: 50, window: time.Second, margin: 50 * time.Millisecond, latency: 3 * time.Millisecond})
	budget := registryclient.RetryPolicy{InitialInterval: 50 * time.Millisecond, MaxInterval: 400 * time.Millisecond, MaxElapsed: 2 * time.Second,
		Multiplier: 2, Jitter: 0.5, MaxAttempts: 5}
	const probeMin, outage = 200 * time.Millisecond, 4 * time.Second
	c := s.startConsumer(func(cfg *Config, d *Deps) {
		d.Retry = budget
		cfg.SellerProbeMin, cfg.SellerProbeMax = probeMin, probeMin
	})
	s.waitGroupStable("registrar", 1)
	s.publish("up-a", "a", 200)
	s.publish("up-c", "c", 200)
	s.waitProducts("a", 60, 10*time.Second)
	s.waitProducts("c", 60, 10*time.Second)
	defer func() {
		if t.Failed() {
			st, err := s.breaker().Peek(context.Background())
			t.Logf("at the end: circuit %+v (%v), rows held %v", st, err, c.runners.rowsBySeller())
		}
	}()

	s.sandbox.SetOutage(sandbox.Outage{All: true})
	// Two sellers failing together with no one answered is the fleet's
	// outage: the circuit may open before both runners hold their sellers.
	testwait.For(t, 5*time.Second, "both sellers held, by their runners or by the fleet's circuit", func() bool {
		if testutil.ToFloat64(c.m.sellersHeld) == 2 {
			return true
		}
		st, err := s.breaker().Peek(context.Background())
		return err == nil && st.State != circuit.Closed
	})
	held := time.Now()
	before := s.sandbox.Outage().Refused
	s.publish("up-b", "b", 30)
	time.Sleep(outage)
	report := s.sandbox.Outage()
	s.sandbox.SetOutage(sandbox.Outage{})

	// After both were held: seller b's first batch (at most its 30 rows),
	// then at most one call per seller per probe interval.
	most := 30 + 3*int(outage/probeMin+1)
	if n := report.Refused - before; n > most {
		t.Errorf("the API got %d calls in the %v after both sellers were held, want at most %d: seller b's first batch and one probe per seller per %v", n, time.Since(held).Round(time.Millisecond), most, probeMin)
	}
	t.Logf("the API refused %d calls: %d before both sellers were held, %d after", report.Refused, before, report.Refused-before)

	testwait.For(t, 20*time.Second, "every row registered or dead-lettered", func() bool {
		return s.audit("a").Products+s.audit("b").Products+s.audit("c").Products+dlqLen(t, s.brokers, s.topic) >= 430
	})
	if n := dlqLen(t, s.brokers, s.topic); n != 0 {
		t.Errorf("%d rows dead-lettered, want 0: the outage is not the rows' failure", n)
	}
	s.checkCompliant("a", 200)
	s.checkCompliant("b", 30)
	s.checkCompliant("c", 200)
	if n := testutil.ToFloat64(c.m.sellersHeld); n != 0 {
		t.Errorf("%v sellers held after every row registered, want 0", n)
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
func (s *stack) startBehindSellerFault(attempts int, down []string, tweak func(*Config)) (*sellerFault, *circuit.Breaker, *Consumer) {
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
			t.Logf("at the end: circuit %+v (%v), rows held %v", st, err, c.runners.rowsBySeller())
		}
	})
	return fault, watch, c
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
			if off := testkafka.Committed(t, s.brokers, "registrar", s.topic, 1)[0]; off > 0 {
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
// and the refused seller is held by its runner like a seller the API fails:
// its rows spend no attempt (fewer calls than rows reach the API) until the
// hold limit, then every one is dead-lettered with the class misconfigured,
// which redrive sends again.
func TestOneSellersRefusalIsItsOwn(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 1, limit: 50, window: time.Second, margin: 50 * time.Millisecond, latency: 3 * time.Millisecond})
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
	const holdLimit = 2 * time.Second
	s.startConsumer(func(cfg *Config, d *Deps) {
		cfg.SellerProbeMin, cfg.SellerProbeMax, cfg.SellerHoldLimit = 100*time.Millisecond, 400*time.Millisecond, holdLimit
		cfg.SellerConcurrency = 5 // a batch of 5: the locked seller's first calls are a quarter of its rows
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
	published := time.Now()

	letters := readDLQ(t, s.brokers, s.topic, lockedRows)
	if took := time.Since(published); took < holdLimit {
		t.Errorf("the locked seller's rows were dead-lettered %v after they were published, before the hold limit %v", took.Round(time.Millisecond), holdLimit)
	}
	for _, l := range letters {
		var class string
		for _, h := range l.Headers {
			if h.Key == deadletter.HeaderErrorClass {
				class = string(h.Value)
			}
		}
		if string(l.Key) != "locked" || class != registryclient.Misconfigured.String() {
			t.Errorf("dead letter of seller %s: class %q, want the locked seller's, %q", l.Key, class, registryclient.Misconfigured)
		}
	}
	s.waitProducts("good", goodRows, 15*time.Second)
	s.checkCompliant("good", goodRows)
	mu.Lock()
	calls := 0
	for _, n := range refused {
		calls += n
	}
	mu.Unlock()
	if calls >= lockedRows {
		t.Errorf("the locked seller's rows were called %d times, want fewer than its %d rows: a held seller's rows spend no attempt", calls, lockedRows)
	}
	if st, err := s.breaker().Peek(context.Background()); err != nil || st.State != circuit.Closed || st.Opens != 0 {
		t.Errorf("the circuit is %v (%v), opened %d times; want closed, never opened: one seller refused is that seller's failure", st.State, err, st.Opens)
	}
}

func TestSharedDeadline(t *testing.T) {
	// A sixteenth of d (100 ms) is the stall the first checks can bear on
	// a loaded machine.
	const d = 1600 * time.Millisecond
	s := newSharedDeadline(d)
	first := s.get()
	dl, ok := first.Deadline()
	if left := time.Until(dl); !ok || left > d || left < d-d/16 {
		t.Fatalf("first context ends in %v (ok %v), want within [%v, %v]", left, ok, d-d/16, d)
	}
	if s.get() != first {
		t.Error("a second caller right after got a context of its own, want the shared one")
	}
	// Past a sixteenth of d the next caller gets a fresh one, and the one
	// handed out before still runs to its own deadline.
	time.Sleep(d/16 + 5*time.Millisecond) // past the stretch, by the clock: never returns early
	second := s.get()
	if second == first {
		t.Fatal("a caller after d/16 got the old context, which leaves it less than 15/16 of d")
	}
	if dl2, _ := second.Deadline(); time.Until(dl2) < d-d/16 {
		t.Errorf("the fresh context ends in %v, want at least %v", time.Until(dl2), d-d/16)
	}
	if first.Err() != nil {
		t.Errorf("the first context ended early: %v", first.Err())
	}
	select {
	case <-first.Done():
	case <-time.After(2 * d):
		t.Fatal("the first context did not end at its deadline")
	}
}
