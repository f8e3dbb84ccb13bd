package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/deadletter"
	"github.com/bulkreg/bulkreg/internal/redisfail"
	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/ledger"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// The tests in this file run the whole consumer against the embedded broker
// with in-memory stand-ins for the throttle, the registry and the recorders,
// so each outcome of the pipeline is checked alone and fast. The tests with
// the real throttle, Redis and the sandbox are in integration_test.go.

// memThrottle is an in-memory sliding log: limit slots per window.
type memThrottle struct {
	limit  int
	window time.Duration
	down   atomic.Bool

	reserves     atomic.Int64 // slots asked for
	reservesDown atomic.Int64 // ReserveN calls refused while down
	settles      atomic.Int64 // Settle calls
	// steps runs the steps a batch asks to run before its slots (a real
	// ledger's claims); nil: a batch with steps is refused.
	steps stepRunner

	mu       sync.Mutex
	slots    map[string][]time.Time
	blocked  map[string]time.Time
	blocks   int
	released int

	globalBlocks int       // BlockGlobal calls
	blockedAll   time.Time // no seller's slot before this (BlockGlobal)
}

func newMemThrottle(limit int, window time.Duration) *memThrottle {
	return &memThrottle{limit: limit, window: window, slots: map[string][]time.Time{}, blocked: map[string]time.Time{}}
}

// stepRunner runs a batch's script steps in a fake store's stead: a test
// whose fakes meet a real ledger runs them on that ledger's Redis.
type stepRunner func(ctx context.Context, steps []scriptbatch.Step) error

func (r stepRunner) run(ctx context.Context, steps []scriptbatch.Step) error {
	if len(steps) == 0 {
		return nil
	}
	if r == nil {
		return fmt.Errorf("a fake store cannot run %d script steps without Redis (set its steps)", len(steps))
	}
	return r(ctx, steps)
}

// redisSteps runs steps on rdb, as the real stores' scripts do.
func redisSteps(rdb redis.Scripter) stepRunner {
	batch := scriptbatch.New()
	return func(ctx context.Context, steps []scriptbatch.Step) error { return batch.Run(ctx, rdb, steps...) }
}

// ReserveN takes n slots one after the other, after the steps before.
func (m *memThrottle) ReserveN(ctx context.Context, seller string, n int, before ...scriptbatch.Step) ([]throttle.Reservation, error) {
	if m.down.Load() {
		m.reservesDown.Add(1)
		return nil, fmt.Errorf("reserve: %w", throttle.ErrUnavailable)
	}
	if err := m.steps.run(ctx, before); err != nil {
		return nil, err
	}
	rs := make([]throttle.Reservation, n)
	for i := range rs {
		rs[i] = m.reserve(seller)
	}
	return rs, nil
}

func (m *memThrottle) reserve(seller string) throttle.Reservation {
	m.reserves.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	at := now
	if b := m.blocked[seller]; b.After(at) {
		at = b
	}
	if m.blockedAll.After(at) {
		at = m.blockedAll
	}
	s := m.slots[seller]
	if len(s) >= m.limit {
		if t := s[len(s)-m.limit].Add(m.window); t.After(at) {
			at = t
		}
	}
	s = append(s, at)
	slices.SortFunc(s, func(a, b time.Time) int { return a.Compare(b) })
	m.slots[seller] = s
	in := 0 // the slots in the window ending at this one, as the throttle counts them
	for _, t := range s {
		if !t.After(at) && at.Sub(t) < m.window {
			in++
		}
	}
	// Room is the window's places left, as the throttle reports them.
	return throttle.Reservation{Seller: seller, Admitted: true, At: at, Wait: at.Sub(now), ID: strconv.FormatInt(at.UnixNano(), 10), Epoch: "1", InWindow: in, Room: max(0, m.limit-in)}
}

func (m *memThrottle) Policy() throttle.Policy {
	// calls counted up to an hour after they start: more than any test's timeout
	return throttle.Policy{Kind: throttle.Sliding, Limit: m.limit, Window: m.window, CallTimeout: time.Hour}
}

// CheckN accepts a slot while it is in the log: the in-memory log never
// loses its state.
func (m *memThrottle) CheckN(ctx context.Context, seller string, rs []throttle.Reservation) ([]throttle.SlotCheck, error) {
	if m.down.Load() {
		return nil, fmt.Errorf("check: %w", throttle.ErrUnavailable)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]throttle.SlotCheck, len(rs))
	for i, r := range rs {
		held := slices.ContainsFunc(m.slots[r.Seller], func(t time.Time) bool { return t.Equal(r.At) })
		out[i] = throttle.SlotCheck{Good: held, Epoch: "1", Now: time.Now()}
	}
	return out, nil
}

// SettleStep and ReleaseStep have no part in a batch's script: the
// consumer settles and gives back each slot on its own.
func (m *memThrottle) SettleStep(string, []throttle.Settled) []scriptbatch.Step {
	return nil
}

func (m *memThrottle) ReleaseStep(throttle.Reservation) (scriptbatch.Step, bool) {
	return scriptbatch.Step{}, false
}

func (m *memThrottle) ReleaseN(ctx context.Context, seller string, rs []throttle.Reservation) error {
	for _, r := range rs {
		if err := m.Release(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// Settle counts: slots are named by their time here, so they keep it.
func (m *memThrottle) Settle(ctx context.Context, r throttle.Reservation, at time.Time) error {
	m.settles.Add(1)
	return nil
}

func (m *memThrottle) Release(ctx context.Context, r throttle.Reservation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.slots[r.Seller]
	if i := slices.IndexFunc(s, func(t time.Time) bool { return t.Equal(r.At) }); i >= 0 {
		m.slots[r.Seller] = slices.Delete(s, i, i+1)
		m.released++
	}
	return nil
}

// BlockGlobal blocks every seller, as an app-wide 429 does.
func (m *memThrottle) BlockGlobal(ctx context.Context, d time.Duration) error {
	if m.down.Load() {
		return throttle.ErrUnavailable
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.globalBlocks++
	m.blockedAll = time.Now().Add(d)
	return nil
}

func (m *memThrottle) Block(ctx context.Context, seller string, d time.Duration) error {
	if m.down.Load() {
		return throttle.ErrUnavailable
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.blocked[seller] = time.Now().Add(d)
	m.blocks++
	return nil
}

// fakeRegistry answers by a script per idempotency key: the n-th call of a
// key gets script(key, n); registered keys answer 200 afterwards.
type fakeRegistry struct {
	script  func(key string, n int) registryclient.Result
	latency time.Duration // each call takes this long, outside the lock
	started atomic.Int64  // calls begun, answered or not

	mu        sync.Mutex
	calls     map[string]int
	products  map[string]string
	callTimes []time.Time
}

func newFakeRegistry(script func(key string, n int) registryclient.Result) *fakeRegistry {
	return &fakeRegistry{script: script, calls: map[string]int{}, products: map[string]string{}}
}

// Warm opens nothing: the fake has no connections.
func (f *fakeRegistry) Warm(context.Context, int) int { return 0 }

func (f *fakeRegistry) Register(ctx context.Context, seller, key string, p bulkreg.Product) registryclient.Result {
	began := time.Now()
	f.started.Add(1)
	time.Sleep(f.latency)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[key]++
	f.callTimes = append(f.callTimes, began)
	if id, ok := f.products[key]; ok {
		return registryclient.Result{Class: registryclient.Replayed, Status: 200, ProductID: id}
	}
	res := registryclient.Result{Class: registryclient.Registered, Status: 201}
	if f.script != nil {
		res = f.script(key, f.calls[key])
	}
	if res.Class == registryclient.Registered {
		res.ProductID = "p-" + key
		f.products[key] = res.ProductID
	}
	return res
}

func (f *fakeRegistry) count() (calls, products int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.calls {
		calls += n
	}
	return calls, len(f.products)
}

type memStatus struct {
	mu   sync.Mutex
	rows map[string]uploadstatus.RowResult // upload:row
}

func (s *memStatus) RecordRow(ctx context.Context, upload string, r uploadstatus.RowResult) error {
	return s.RecordRows(ctx, upload, []uploadstatus.RowResult{r})
}

func (s *memStatus) RecordRows(ctx context.Context, upload string, rs []uploadstatus.RowResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs {
		k := upload + ":" + strconv.Itoa(r.Row)
		if old, ok := s.rows[k]; ok && old.State == "registered" {
			continue
		}
		s.rows[k] = r
	}
	return nil
}

func (s *memStatus) snapshot() map[string]uploadstatus.RowResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps(s.rows)
}

func maps[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

type memCalls struct {
	// steps runs the steps after the calls (a real ledger's marks); nil: a
	// batch with steps is refused.
	steps stepRunner

	mu    sync.Mutex
	calls []compliance.Call
}

func (c *memCalls) RecordAll(ctx context.Context, seller string, calls []compliance.Call, steps ...scriptbatch.Step) error {
	if err := c.steps.run(ctx, steps); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, calls...)
	return nil
}

type fixedRetry struct {
	interval time.Duration
	attempts int
}

type countingBackOff struct {
	p fixedRetry
	n int
}

func (b *countingBackOff) NextBackOff() time.Duration {
	b.n++
	if b.n >= b.p.attempts {
		return -1 // backoff.Stop
	}
	return b.p.interval
}
func (b *countingBackOff) Reset() { b.n = 0 }

type fixture struct {
	t        *testing.T
	brokers  []string
	topic    string
	cfg      Config
	throttle *memThrottle
	registry *fakeRegistry
	status   *memStatus
	calls    *memCalls
	rdb      *redis.Client
	ledger   *ledger.Ledger
	reg      *prometheus.Registry
	pingErr  atomic.Pointer[error]
	dlqW     DeadLetterWriter // nil: the embedded broker's dead-letter topic
	retry    BackOffPolicy    // nil: 4 attempts 20 ms apart
}

func newFixture(t *testing.T, partitions int32, script func(string, int) registryclient.Result) *fixture {
	topic := "rows"
	brokers := testkafka.StartShortSessions(t, partitions, topic, bulkreg.DLQTopic(topic))
	f := &fixture{t: t, brokers: brokers, topic: topic, cfg: testConfig(brokers, topic),
		throttle: newMemThrottle(1000, time.Second), registry: newFakeRegistry(script),
		status: &memStatus{rows: map[string]uploadstatus.RowResult{}}, calls: &memCalls{}}
	// The SKU ledger is the real one, on a redis-server of the test's own;
	// its claims and marks run as steps of the fakes' batches.
	f.rdb = testredis.Start(t).Client()
	t.Cleanup(func() { f.rdb.Close() })
	f.ledger = ledger.New(f.rdb, ledger.Options{})
	f.throttle.steps, f.calls.steps = redisSteps(f.rdb), redisSteps(f.rdb)
	f.cfg.RedisProbeInterval = 50 * time.Millisecond
	f.cfg.RedisRetryMin = 20 * time.Millisecond
	f.cfg.RedisRetryMax = 100 * time.Millisecond
	f.cfg.Logger = testLogger(t)
	return f
}

// knownUploads finds every upload: the tests publish rows without creating
// their uploads (the door's own tests use the real store).
type knownUploads struct{}

func (knownUploads) Presence(context.Context, uploadstatus.PresenceQuery) (uploadstatus.Presence, error) {
	return uploadstatus.UploadFound, nil
}

// newThrottle is an in-memory throttle of limit per window that runs the
// fixture ledger's steps.
func (f *fixture) newThrottle(limit int, window time.Duration) *memThrottle {
	m := newMemThrottle(limit, window)
	m.steps = redisSteps(f.rdb)
	return m
}

// deps are the fixture's dependencies: its in-memory stores and registry,
// its SKU ledger, a retry budget of 4 attempts 20 ms apart, and a Redis
// that always answers.
func (f *fixture) deps() Deps {
	return Deps{Throttle: f.throttle, Registry: f.registry, Status: f.status, Calls: f.calls, Ledger: f.ledger, Circuit: newBreaker(f.t, f.rdb), Uploads: knownUploads{},
		Retry: registryclientRetry{fixedRetry{interval: 20 * time.Millisecond, attempts: 4}}, PingRedis: func(context.Context) error { return nil }, RedisTime: timeOf(f.rdb)}
}

// start runs one consumer until the test ends.
func (f *fixture) start() *Consumer {
	f.reg = prometheus.NewRegistry()
	retry := f.retry
	if retry == nil {
		retry = registryclientRetry{fixedRetry{interval: 20 * time.Millisecond, attempts: 4}}
	}
	c, err := New(f.cfg, Deps{Throttle: f.throttle, Registry: f.registry, Status: f.status, Calls: f.calls, Ledger: f.ledger, Circuit: newBreaker(f.t, f.rdb), Uploads: knownUploads{},
		Retry: retry, RedisTime: timeOf(f.rdb),
		PingRedis: func(context.Context) error {
			if p := f.pingErr.Load(); p != nil {
				return *p
			}
			return nil
		},
		DeadLetters: f.dlqW,
		Registerer:  f.reg})
	if err != nil {
		f.t.Fatal(err)
	}
	run(f.t, c)
	return c
}

type registryclientRetry struct{ p fixedRetry }

func (r registryclientRetry) NewBackOff() backoff.BackOff { return &countingBackOff{p: r.p} }

func (f *fixture) publish(upload, seller string, rows int) {
	var msgs []kafka.Message
	for i := 1; i <= rows; i++ {
		msgs = append(msgs, rowMessage(upload, seller, i))
	}
	testkafka.Produce(f.t, f.brokers, f.topic, msgs...)
}

// rowMessage is row i of a test upload: SKU sku-i.
func rowMessage(upload, seller string, i int) kafka.Message {
	m := bulkreg.NewMessage(upload, seller, i, bulkreg.Product{SellerSKU: fmt.Sprint("sku-", i), Name: "n", CategoryCode: "c", Price: 1000, Stock: 1}, time.Now())
	v, _ := json.Marshal(m)
	return kafka.Message{Key: []byte(seller), Value: v}
}

func (f *fixture) dlq(n int) []kafka.Message { return readDLQ(f.t, f.brokers, f.topic, n) }

// readDLQ reads n dead letters from every partition of the DLQ topic.
func readDLQ(t testing.TB, brokers []string, topic string, n int) []kafka.Message {
	t.Helper()
	conn, err := kafka.Dial("tcp", brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	parts, err := conn.ReadPartitions(bulkreg.DLQTopic(topic))
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var out []kafka.Message
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: p.Topic, Partition: p.ID, MaxWait: 100 * time.Millisecond})
			defer r.Close()
			for {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				out = append(out, m)
				if len(out) >= n {
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(out) < n {
		t.Fatalf("read %d dead letters within 10 s, want %d", len(out), n)
	}
	return out
}

func header(m kafka.Message, k string) string {
	for _, h := range m.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

func TestOutcomes(t *testing.T) {
	// keys: row 2 is invalid, row 3 gets a 429 then 201, row 4 gets 503 twice
	// then 201, row 5 gets 503 forever.
	script := func(key string, n int) registryclient.Result {
		switch {
		case key == "u1:2":
			return registryclient.Result{Class: registryclient.Permanent, Status: 422, Code: "invalid_price", Field: "price", Message: "price must be > 0", Err: errors.New("422")}
		case key == "u1:3" && n == 1:
			return registryclient.Result{Class: registryclient.RateLimited, Status: http.StatusTooManyRequests, RetryAfter: 200 * time.Millisecond, Err: errors.New("429")}
		case key == "u1:4" && n <= 2, key == "u1:5":
			return registryclient.Result{Class: registryclient.Transient, Status: 503, Err: errors.New("the registration API answered 503")}
		}
		return registryclient.Result{Class: registryclient.Registered, Status: 201}
	}
	f := newFixture(t, 2, script)
	f.start()
	f.publish("u1", "s1", 6)
	testkafka.Produce(t, f.brokers, f.topic, kafka.Message{Key: []byte("s1"), Value: []byte("{not json")})

	testwait.For(t, 10*time.Second, "6 rows recorded", func() bool { return len(f.status.snapshot()) == 6 })
	rows := f.status.snapshot()
	for _, r := range []int{1, 3, 4, 6} {
		if got := rows["u1:"+strconv.Itoa(r)]; got.State != "registered" || got.ProductID == "" {
			t.Errorf("row %d = %+v, want registered with a product id", r, got)
		}
	}
	if got := rows["u1:2"]; got.State != "failed" || got.Code != "invalid_price" || got.Field != "price" || got.Reason == "" || got.Attempts != 1 {
		t.Errorf("row 2 = %+v, want failed with the API's code, field and reason after 1 attempt", got)
	}
	if got := rows["u1:4"]; got.Attempts != 3 {
		t.Errorf("row 4 took %d attempts, want 3 (two 503s then 201)", got.Attempts)
	}
	if got := rows["u1:5"]; got.State != "failed" || got.Attempts != 4 || got.Code != "transient" {
		t.Errorf("row 5 = %+v, want failed as transient after 4 attempts (the retry policy's limit)", got)
	}
	// Settled at their answers: the calls the API may have counted (201s
	// and 503s: rows 1, 3, 6 once, row 4 three times, row 5 four), not the
	// 422 or the 429.
	if got := f.throttle.settles.Load(); got != 10 {
		t.Errorf("%d slots settled at their answers, want 10 (every counted call, no refusal)", got)
	}
	if f.throttle.blocks != 1 {
		t.Errorf("the throttle was blocked %d times, want 1 (one 429)", f.throttle.blocks)
	}
	dl := f.dlq(2)
	byClass := map[string]kafka.Message{}
	for _, m := range dl {
		byClass[header(m, deadletter.HeaderErrorClass)] = m
	}
	poison, ok := byClass[deadletter.ClassBadMessage]
	if !ok || string(poison.Value) != "{not json" || header(poison, deadletter.HeaderAttempts) != "0" {
		t.Errorf("poison dead letter = %+v, want the original value with class %s and 0 attempts", poison, deadletter.ClassBadMessage)
	}
	failed, ok := byClass["transient"]
	if !ok {
		t.Fatalf("no transient dead letter among %d", len(dl))
	}
	m5, _ := bulkreg.DecodeMessage(failed.Value)
	if m5.Row != 5 || header(failed, deadletter.HeaderAttempts) != "4" || header(failed, deadletter.HeaderTopic) != f.topic ||
		header(failed, deadletter.HeaderPartition) == "" || header(failed, deadletter.HeaderOffset) == "" || header(failed, deadletter.HeaderErrorMessage) == "" {
		t.Errorf("transient dead letter: row %d headers %v, want row 5, 4 attempts, topic, partition, offset, message", m5.Row, failed.Headers)
	}
	if _, err := time.Parse(time.RFC3339Nano, header(failed, deadletter.HeaderFirstFailure)); err != nil {
		t.Errorf("first failure header %q is not a time: %v", header(failed, deadletter.HeaderFirstFailure), err)
	}
	// Every call is in the compliance history: 6 rows, +1 for the 429, +2 and +3 for the 503s.
	f.calls.mu.Lock()
	ncalls := len(f.calls.calls)
	f.calls.mu.Unlock()
	if ncalls != 6+1+2+3 {
		t.Errorf("compliance history holds %d calls, want 12", ncalls)
	}
	// No metric carries a seller label: sellers are unbounded.
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "seller" || l.GetValue() == "s1" {
					t.Errorf("metric %s has a per-seller label %s=%s", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
	// Every series the operators watch is exported.
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	for _, name := range []string{"bulkreg_consumer_rows_total", "bulkreg_consumer_throttle_wait_seconds",
		"bulkreg_consumer_registry_latency_seconds", "bulkreg_consumer_rate_limited_total", "bulkreg_consumer_rows_in_flight",
		"bulkreg_consumer_rows_waiting", "bulkreg_consumer_active_sellers", "bulkreg_consumer_oldest_unfinished_row_age_seconds",
		"bulkreg_consumer_commits_total", "bulkreg_consumer_rebalances_total", "bulkreg_consumer_dlq_writes_total"} {
		if !have[name] {
			t.Errorf("metric %s is not exported", name)
		}
	}
	if got := gathered(t, f.reg, "bulkreg_consumer_dlq_writes_total"); got != 2 {
		t.Errorf("DLQ writes metric %v, want 2", got)
	}
	if got := gathered(t, f.reg, "bulkreg_consumer_rate_limited_total"); got != 1 {
		t.Errorf("rate-limited metric %v, want 1", got)
	}
	// Everything was finished, so the commits reach the end of each partition.
	testwait.For(t, 5*time.Second, "offsets committed to the end", func() bool {
		sum := int64(0)
		for _, off := range testkafka.Committed(t, f.brokers, f.cfg.Group, f.topic, 2) {
			if off > 0 {
				sum += off
			}
		}
		return sum == 7
	})
}

// gathered sums the values of a metric family.
func gathered(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}

func (f *fixture) registeredCount(upload string) int {
	n := 0
	for k, r := range f.status.snapshot() {
		if r.State == "registered" && len(k) > len(upload) && k[:len(upload)+1] == upload+":" {
			n++
		}
	}
	return n
}

// TestNoHeadOfLineBlocking: seller b's rows, read right behind seller a's
// on the same partition, do not wait for a's window.
func TestNoHeadOfLineBlocking(t *testing.T) {
	f := newFixture(t, 1, nil)
	f.throttle = f.newThrottle(20, time.Second)
	f.cfg.SellerConcurrency = 20
	f.start()
	f.publish("ua", "a", 200) // 10 windows of a's limit
	f.publish("ub", "b", 10)
	start := time.Now()
	testwait.For(t, 2*time.Second, "seller b's 10 rows registered", func() bool { return f.registeredCount("ub") == 10 })
	t.Logf("seller b done %v after publishing, seller a has %d of 200", time.Since(start), f.registeredCount("ua"))
	if got := f.registeredCount("ua"); got >= 200 {
		t.Errorf("seller a finished too (%d rows): the test did not show b overtaking a", got)
	}
}

// TestRedisDownNoCalls: while Redis does not answer no registry call is
// made; after it answers again every row is registered.
func TestRedisDownNoCalls(t *testing.T) {
	f := newFixture(t, 1, nil)
	f.throttle = f.newThrottle(10, 300*time.Millisecond)
	f.cfg.SellerConcurrency = 10
	f.start()
	f.publish("u", "s", 60)
	testwait.For(t, 5*time.Second, "some rows registered", func() bool { return f.registeredCount("u") >= 5 })
	downErr := errors.New("dial tcp: connection refused")
	f.pingErr.Store(&downErr)
	f.throttle.down.Store(true)
	time.Sleep(f.cfg.RedisProbeInterval * 3) // the gate notices within one probe
	calls0, _ := f.registry.count()
	time.Sleep(time.Second)
	calls1, _ := f.registry.count()
	asked := f.throttle.reservesDown.Load()
	f.throttle.down.Store(false)
	f.pingErr.Store(nil)
	if calls1 != calls0 {
		t.Errorf("%d registry calls while Redis was down", calls1-calls0)
	}
	// The rows wait for the probe to see Redis back instead of each asking
	// again in a loop: about one refused reservation per row of the lane.
	// A loop with only the backoff would ask ~15 times per row in this second.
	t.Logf("reservations refused while Redis was down: %d (seller concurrency %d)", asked, f.cfg.SellerConcurrency)
	if max := int64(2 * f.cfg.SellerConcurrency); asked > max {
		t.Errorf("%d reservations tried while Redis was down, want ≤ %d: rows poll Redis instead of waiting with backoff", asked, max)
	}
	testwait.For(t, 10*time.Second, "all 60 rows registered after Redis came back", func() bool { return f.registeredCount("u") == 60 })
	if got := gathered(t, f.reg, "bulkreg_consumer_redis_unavailable_total"); got < 1 {
		t.Errorf("redis unavailable metric %v, want ≥ 1", got)
	}
}

// TestShutdownGivesSlotsBack: at shutdown rows waiting for a slot give it
// back, calls in flight finish and are recorded before Run returns, the
// consumer stops within the drain bound, and the commit stops at the lowest
// unfinished row.
func TestShutdownGivesSlotsBack(t *testing.T) {
	const latency = 400 * time.Millisecond
	f := newFixture(t, 1, nil)
	f.throttle = f.newThrottle(5, 10*time.Second) // 5 now, the rest 10 s away
	f.registry.latency = latency
	f.cfg.SellerConcurrency = 20
	c, err := New(f.cfg, f.deps())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	f.publish("u", "s", 20)
	// Calls in progress (at most the 5 due now), the other rows wait for
	// their slots. The runner's batch holds slots (the rows of the first
	// fetch, up to 5), its other rows wait without: a batch is booked after
	// the one before, though a part of a window due now may still start
	// before the shutdown, so the calls in progress are counted when Run
	// has returned.
	testwait.For(t, 5*time.Second, "calls in progress, the other rows waiting", func() bool {
		f.throttle.mu.Lock()
		defer f.throttle.mu.Unlock()
		n := int(f.registry.started.Load())
		return n > 0 && len(f.throttle.slots["s"]) == n && c.runners.rowsBySeller()["s"] == 20
	})
	if n := f.registeredCount("u"); n != 0 {
		t.Fatalf("%d rows already recorded; the test must stop the consumer while the calls are in progress", n)
	}
	stopped := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(f.cfg.DrainTimeout + 2*time.Second):
		t.Fatalf("consumer did not stop within the drain timeout (%v) + 2 s of its context ending", f.cfg.DrainTimeout)
	}
	took := time.Since(stopped)
	inFlight := int(f.registry.started.Load())
	t.Logf("stopped in %v with %d calls of %v in progress", took, inFlight, latency)
	// Run returned only after the calls in progress were answered and recorded.
	if n := f.registeredCount("u"); n != inFlight {
		t.Errorf("%d rows recorded registered when Run returned, want the %d whose calls were in progress", n, inFlight)
	}
	if took > latency+time.Second {
		t.Errorf("stopping took %v, want about the %v left of the calls in progress", took, latency)
	}
	f.throttle.mu.Lock()
	left, released := len(f.throttle.slots["s"]), f.throttle.released
	f.throttle.mu.Unlock()
	if left != inFlight || released != 0 {
		t.Errorf("after shutdown the throttle holds %d slots (%d released), want the %d used and none released: the rows without a call held no slot", left, released, inFlight)
	}
	// Which 5 of the first 15 rows got the free slots is up to the race for
	// them; the commit must stop right below the lowest one that did not.
	rows := f.status.snapshot()
	want := int64(0)
	for rows["u:"+strconv.FormatInt(want+1, 10)].State == "registered" {
		want++
	}
	if off := testkafka.Committed(t, f.brokers, f.cfg.Group, f.topic, 1)[0]; off != want {
		t.Errorf("committed offset %d, want %d (the lowest unfinished row)", off, want)
	}
}

// TestInFlightCapPausesReading: reading stops at the per-partition cap and
// at the cap over all partitions. Every row read takes a slot, so the slots
// the throttle holds count the rows read: used ones plus the cap.
func TestInFlightCapPausesReading(t *testing.T) {
	for _, tc := range []struct {
		name                string
		partitions          int32
		sellers             []string // "a" and "b" hash to partitions 0 and 1 of 2
		perPartition, total int
	}{
		{name: "per partition", partitions: 1, sellers: []string{"s"}, perPartition: 30, total: 1000},
		{name: "over all partitions", partitions: 2, sellers: []string{"a", "b"}, perPartition: 100, total: 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.partitions, nil)
			f.throttle = f.newThrottle(10, time.Minute) // 10 calls per seller, then everything waits
			f.cfg.MaxInFlightPerPartition = tc.perPartition
			f.cfg.MaxInFlight = tc.total
			f.cfg.SellerConcurrency = 100
			c := f.start()
			for _, s := range tc.sellers {
				f.publish("u"+s, s, 100)
			}
			capped := min(tc.total, int(tc.partitions)*tc.perPartition)
			testwait.For(t, 5*time.Second, "rows in flight at the cap", func() bool {
				return gathered(t, f.reg, "bulkreg_consumer_rows_in_flight") == float64(capped)
			})
			time.Sleep(300 * time.Millisecond) // reading would go on here if it did not pause
			if got := gathered(t, f.reg, "bulkreg_consumer_rows_in_flight"); got != float64(capped) {
				t.Errorf("rows in flight %v, want the cap (%d)", got, capped)
			}
			// A row read is either finished (registered, its slot used) or in
			// flight (holding a slot a minute ahead).
			used := 0
			for _, s := range tc.sellers {
				used += f.registeredCount("u" + s)
			}
			// The runners hold the rows in flight; only a batch's rows
			// hold slots.
			held := 0
			for _, n := range c.runners.rowsBySeller() {
				held += n
			}
			if held != capped || used > 10*len(tc.sellers) {
				t.Errorf("the runners hold %d rows (%d used), want the %d at the cap: reading did not pause", held, used, capped)
			}
		})
	}
}

// TestRebalanceLosesNothing: a second member joins mid-run and the first
// leaves later; every row ends registered exactly once at the registry.
func TestRebalanceLosesNothing(t *testing.T) {
	f := newFixture(t, 4, nil)
	f.throttle = f.newThrottle(20, 500*time.Millisecond)
	f.cfg.SellerConcurrency = 20
	for s := range 6 {
		f.publish(fmt.Sprint("u", s), fmt.Sprint("s", s), 60)
	}
	stopFirst := make(chan struct{})
	first, err := New(f.cfg, f.deps())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	go func() { <-stopFirst; cancel() }()
	testwait.For(t, 5*time.Second, "100 rows registered", func() bool { _, p := f.registry.count(); return p >= 100 })
	f.start() // the second member joins: a rebalance
	testwait.For(t, 5*time.Second, "200 rows registered", func() bool { _, p := f.registry.count(); return p >= 200 })
	close(stopFirst) // the first leaves: another rebalance
	<-done
	testwait.For(t, 15*time.Second, "all 360 rows registered", func() bool { return len(f.status.snapshot()) == 360 })
	calls, products := f.registry.count()
	if products != 360 {
		t.Errorf("%d products at the registry, want 360", products)
	}
	t.Logf("%d calls for 360 rows (replays after rebalances: %d)", calls, calls-360)
	if got := gathered(t, f.reg, "bulkreg_consumer_rebalances_total"); got < 2 {
		t.Errorf("the second member saw %v generations, want ≥ 2", got)
	}
}

// TestUnavailable: the consumer stops calling on one typed error from every
// package that talks to Redis, never on an error's text
// (internal/redisfail tells the cases apart).
func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("reserve: %w", throttle.ErrUnavailable), true},
		{fmt.Errorf("record: %w", redisfail.Wrap(syscallErr())), true},
		{fmt.Errorf("record: %w", redisfail.Wrap(redis.ErrPoolTimeout)), true},
		{fmt.Errorf("circuit: %w", circuit.ErrUnavailable), true},
		{errors.New("LOADING Redis is loading the dataset in memory"), false}, // text is not a type
		{errors.New("upload u1 is unknown"), false},
		{errors.New("ERR Error running script: bad argument"), false},
	} {
		if got := unavailable(tc.err); got != tc.want {
			t.Errorf("unavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func syscallErr() error {
	_, err := net.Dial("tcp", "127.0.0.1:1")
	return err
}

// TestRowsDueAtOnceTakeOnlySlotsTheyCanCall: a whole window's rows could
// fall due at once, far more than MaxConcurrentCalls can call within
// MaxLateness. A row asks for a slot only with one of MaxConcurrentCalls
// tokens for slots due now, so few take a slot they cannot call on time
// (without the tokens 83 – 110 of the 100 rows' slots are missed, and their
// rows take new ones after a backoff), every row is registered, and no call
// starts later than MaxLateness after its slot.
func TestRowsDueAtOnceTakeOnlySlotsTheyCanCall(t *testing.T) {
	const (
		rows     = 100
		limit    = 20
		window   = 400 * time.Millisecond
		lateness = 30 * time.Millisecond
		latency  = 20 * time.Millisecond
	)
	f := newFixture(t, 1, nil)
	f.throttle = f.newThrottle(limit, window)
	f.registry.latency = latency
	f.cfg.SellerConcurrency = limit // a whole window's rows would be due at once
	f.cfg.MaxConcurrentCalls = 2    // 2 calls per 20 ms: ~3 of them fit in the lateness
	f.cfg.MaxLateness = lateness
	f.start()
	start := time.Now()
	f.publish("u", "s", rows)
	testwait.For(t, 20*time.Second, "every row registered", func() bool { return f.registeredCount("u") == rows })
	took := time.Since(start)
	// Without the tokens 83 – 110 slots are missed (a row can miss more
	// than one). With them none is on an idle machine; on a loaded one the
	// fake API's 20 ms calls take longer than the tokens assume and up to
	// about a quarter are, so the bound is a third: it still tells the
	// tokens from their absence.
	if missed := gathered(t, f.reg, "bulkreg_consumer_slots_missed_total"); missed > rows/3 {
		t.Errorf("%v slots missed, want at most %d: rows took slots due now that no call could take", missed, rows/3)
	}
	// Every call was a 201, so the throttle kept exactly one slot per call and
	// dropped the missed ones. If each call started within the lateness of
	// its own slot, the k-th call (by time) also starts within it of the k-th
	// slot, so the sorted lists are compared.
	f.throttle.mu.Lock()
	slots := slices.Clone(f.throttle.slots["s"])
	f.throttle.mu.Unlock()
	f.registry.mu.Lock()
	calls := slices.Clone(f.registry.callTimes)
	f.registry.mu.Unlock()
	slices.SortFunc(calls, func(a, b time.Time) int { return a.Compare(b) })
	if len(slots) != rows || len(calls) != rows {
		t.Fatalf("%d slots kept and %d calls made, want %d each (one per row)", len(slots), len(calls), rows)
	}
	var worst time.Duration
	for i := range calls {
		late := calls[i].Sub(slots[i])
		worst = max(worst, late)
		// The slack covers the moment between the lateness check and the call.
		if late < -time.Millisecond || late > lateness+10*time.Millisecond {
			t.Errorf("call %d started %v after its slot, want within 0..%v", i, late, lateness)
		}
	}
	// 2 calls per 20 ms make a window's 20 calls take 200 ms, and each
	// window's slots follow the first one's. A missed slot's row books again
	// a window on, so the misses allowed above may cost one more window.
	lower := time.Duration(rows/limit-1)*window + time.Duration(limit/2)*latency
	if took > lower+2*window {
		t.Errorf("%d rows took %v, want within two windows of %v", rows, took, lower)
	}
	t.Logf("%d rows in %v (lower bound %v), latest call %v after its slot", rows, took, lower, worst)
}

// flakyDLQ refuses dead letters while failing is set, like a broker that is
// not reachable.
type flakyDLQ struct {
	failing  atomic.Bool
	attempts atomic.Int64
	mu       sync.Mutex
	written  []deadletter.Row
}

func (d *flakyDLQ) WriteDeadLetter(ctx context.Context, dl deadletter.Row) error {
	d.attempts.Add(1)
	if d.failing.Load() {
		return errors.New("write to dead-letter topic: the broker did not acknowledge")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.written = append(d.written, dl)
	return nil
}

// TestDeadLetterAckedBeforeFinished: a row bound for the dead-letter topic
// counts as finished (and its offset as committable) only once the write is
// acknowledged. While the writer fails, the commit stays below the row and
// the row has no result; once it succeeds, both move on.
func TestDeadLetterAckedBeforeFinished(t *testing.T) {
	script := func(key string, n int) registryclient.Result {
		if key == "u:1" {
			return registryclient.Result{Class: registryclient.Transient, Status: 503, Err: errors.New("the registration API answered 503")}
		}
		return registryclient.Result{Class: registryclient.Registered, Status: 201}
	}
	f := newFixture(t, 1, script)
	dlq := &flakyDLQ{}
	dlq.failing.Store(true)
	f.dlqW = dlq
	f.start()
	testkafka.Produce(t, f.brokers, f.topic, kafka.Message{Key: []byte("s"), Value: []byte("{not json")}) // offset 0
	f.publish("u", "s", 5)                                                                                // offsets 1-5; row 1 always 503
	testwait.For(t, 5*time.Second, "rows 2-5 registered", func() bool { return f.registeredCount("u") == 4 })
	testwait.For(t, 5*time.Second, "both dead letters refused more than once", func() bool { return dlq.attempts.Load() >= 4 })
	time.Sleep(3 * f.cfg.CommitInterval)
	if off := testkafka.Committed(t, f.brokers, f.cfg.Group, f.topic, 1)[0]; off > 0 {
		t.Errorf("committed offset %d while the dead-letter writes fail, want ≤ 0 (the undecodable message at 0 is not finished)", off)
	}
	if r, ok := f.status.snapshot()["u:1"]; ok {
		t.Errorf("row 1 recorded as %+v before its dead letter was written", r)
	}
	if got := gathered(t, f.reg, "bulkreg_consumer_dlq_writes_total"); got != 0 {
		t.Errorf("DLQ writes metric %v while every write failed, want 0", got)
	}
	dlq.failing.Store(false)
	testwait.For(t, 5*time.Second, "offsets committed past both dead letters", func() bool {
		return testkafka.Committed(t, f.brokers, f.cfg.Group, f.topic, 1)[0] == 6
	})
	if r := f.status.snapshot()["u:1"]; r.State != "failed" || r.Attempts != 4 {
		t.Errorf("row 1 = %+v, want failed after 4 attempts once its dead letter was written", r)
	}
	dlq.mu.Lock()
	defer dlq.mu.Unlock()
	if len(dlq.written) != 2 {
		t.Fatalf("%d dead letters written, want 2 (the undecodable message and row 1)", len(dlq.written))
	}
	t.Logf("dead-letter write attempts: %d for 2 dead letters", dlq.attempts.Load())
}
