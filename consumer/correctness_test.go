package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/internal/config"
	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testproxy"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/ledger"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// The tests in this file hold the consumer to its correctness rules: no row
// finished without its outcome, no member evicted mid-drain, no retry
// budget used up by waiting, no call made late after a slow Redis answer,
// and no slot used after the Redis that granted it lost it.

// runConsumer builds one consumer and runs it until the returned stop is
// called (or the test ends); stop waits for Run to return.
func runConsumer(t *testing.T, cfg Config, deps Deps) (stop func()) {
	t.Helper()
	if deps.Registerer == nil {
		deps.Registerer = prometheus.NewRegistry()
	}
	c, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return run(t, c)
}

// run runs c until the returned stop is called or the test ends; stop
// waits for Run to return, at most the drain timeout + 10 s.
func run(t testing.TB, c *Consumer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(c.cfg.DrainTimeout + 10*time.Second):
				t.Error("a consumer did not stop within the drain timeout + 10 s")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// publishRows sends rows 1..n of one upload, keyed by seller.
func publishRows(t *testing.T, brokers []string, topic, upload, seller string, n int) {
	t.Helper()
	var msgs []kafka.Message
	for i := 1; i <= n; i++ {
		m := bulkreg.NewMessage(upload, seller, i, bulkreg.Product{SellerSKU: fmt.Sprint("sku-", i), Name: "n", CategoryCode: "c", Price: 1000, Stock: 1}, time.Now())
		v, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(seller), Value: v})
	}
	testkafka.Produce(t, brokers, topic, msgs...)
}

// hookRegistry is a fakeRegistry that runs after(key, n) once the n-th call
// of key was answered by the API and before the consumer sees the answer.
type hookRegistry struct {
	*fakeRegistry
	after func(key string, n int)
}

func (h hookRegistry) Register(ctx context.Context, seller, key string, p bulkreg.Product) registryclient.Result {
	res := h.fakeRegistry.Register(ctx, seller, key, p)
	h.fakeRegistry.mu.Lock()
	n := h.fakeRegistry.calls[key]
	h.fakeRegistry.mu.Unlock()
	if h.after != nil {
		h.after(key, n)
	}
	return res
}

// TestARowIsFinishedOnlyOnceRecorded: the API registers the row (201), then
// Redis stops taking the consumer's writes: it stopped (the writes retry
// until the drain ends and the last one runs on a cancelled context), it
// became a replica (READONLY) or it is out of memory under noeviction
// (OOM). The row must stay unfinished (its offset is not committed) and,
// once Redis takes writes again, the next consumer reads it again, the API
// answers it as a replay and its result is recorded.
func TestARowIsFinishedOnlyOnceRecorded(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		breakRedis, fixRedis func(t *testing.T, srv *testredis.Server, admin *redis.Client)
	}{
		{name: "context.Canceled after Redis stopped",
			breakRedis: func(t *testing.T, srv *testredis.Server, _ *redis.Client) { srv.Stop() },
			fixRedis:   func(t *testing.T, srv *testredis.Server, _ *redis.Client) { srv.Restart() }},
		{name: "READONLY from a replica",
			breakRedis: func(t *testing.T, srv *testredis.Server, admin *redis.Client) {
				master := testredis.Start(t)
				if err := admin.Do(context.Background(), "REPLICAOF", "127.0.0.1", master.Port).Err(); err != nil {
					t.Fatal(err)
				}
			},
			fixRedis: func(t *testing.T, srv *testredis.Server, admin *redis.Client) {
				if err := admin.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "OOM under noeviction",
			breakRedis: func(t *testing.T, srv *testredis.Server, admin *redis.Client) {
				if err := admin.ConfigSet(context.Background(), "maxmemory-policy", "noeviction").Err(); err != nil {
					t.Fatal(err)
				}
				if err := admin.ConfigSet(context.Background(), "maxmemory", "1").Err(); err != nil {
					t.Fatal(err)
				}
			},
			fixRedis: func(t *testing.T, srv *testredis.Server, admin *redis.Client) {
				if err := admin.ConfigSet(context.Background(), "maxmemory", "0").Err(); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const topic, group = "rows", "recorded"
			brokers := testkafka.StartShortSessions(t, 1, topic, bulkreg.DLQTopic(topic))
			srv := startRedis(t)
			admin := srv.Client()
			rdb := config.Config{RedisAddrs: []string{srv.Addr}}.RedisClient()
			t.Cleanup(func() { rdb.Close() })
			// Calls counted up to two of the consumer's timeouts (500 ms)
			// after they start: a call whose settle Redis did not take holds
			// the seller a second.
			th, err := throttle.New(rdb, throttle.Policy{Limit: 10, Window: time.Second, Margin: 50 * time.Millisecond, CallTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			status := uploadstatus.New(rdb, time.Hour)
			var broken atomic.Bool
			reg := hookRegistry{fakeRegistry: newFakeRegistry(nil), after: func(key string, n int) {
				if n == 1 {
					tc.breakRedis(t, srv, admin)
					broken.Store(true)
				}
			}}
			cfg := testConfig(brokers, topic)
			cfg.Group = group
			cfg.MaxLateness = 0 // half the throttle's margin: the most its hold after a loss covers
			cfg.CallTimeout = 500 * time.Millisecond
			cfg.RedisProbeInterval = 50 * time.Millisecond
			cfg.RedisRetryMin, cfg.RedisRetryMax = 20*time.Millisecond, 100*time.Millisecond
			cfg.Logger = testLogger(t)
			deps := Deps{Throttle: th, Registry: reg, Status: status, Calls: compliance.NewRecorder(rdb, time.Hour), Ledger: ledger.New(rdb, ledger.Options{}), Circuit: newBreaker(t, rdb), Uploads: knownUploads{},
				Retry:     registryclientRetry{fixedRetry{interval: 20 * time.Millisecond, attempts: 4}},
				PingRedis: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }, RedisTime: timeOf(rdb)}
			stop := runConsumer(t, cfg, deps)
			publishRows(t, brokers, topic, "u", "s", 1)
			testwait.For(t, 10*time.Second, "the row called and Redis broken", broken.Load)
			time.Sleep(5 * cfg.CommitInterval) // a finished row would be committed by now
			stop()                             // a rebalance or SIGTERM: the drain runs out while Redis refuses
			if off := testkafka.Committed(t, brokers, group, topic, 1)[0]; off > 0 {
				t.Errorf("committed offset %d after the drain, want ≤ 0: the row was finished without its result", off)
			}

			tc.fixRedis(t, srv, admin)
			testwait.For(t, 10*time.Second, "Redis takes writes again", func() bool {
				return rdb.Set(context.Background(), "probe", "1", time.Second).Err() == nil
			})
			runConsumer(t, cfg, deps)
			testwait.For(t, 15*time.Second, "the row read again and recorded", func() bool {
				st, err := status.Get(context.Background(), "u")
				return err == nil && len(st.Rows) == 1
			})
			st, err := status.Get(context.Background(), "u")
			if err != nil {
				t.Fatal(err)
			}
			if r := st.Rows[0]; r.State != uploadstatus.Registered || r.ProductID != "p-u:1" {
				t.Errorf("row 1 recorded as %+v, want registered with the product p-u:1", r)
			}
			calls, products := reg.count()
			if calls != 2 || products != 1 {
				t.Errorf("%d calls and %d products at the API, want 2 calls (201, then a 200 replay) and 1 product", calls, products)
			}
			testwait.For(t, 5*time.Second, "the row committed", func() bool { return testkafka.Committed(t, brokers, group, topic, 1)[0] == 1 })
		})
	}
}

// TestADrainCannotOutliveTheSession: heartbeats stop while a member drains,
// so a drain longer than the session allows gets the member evicted and its
// partitions given to another member, which then calls a row whose first
// call is still in progress. Such settings are refused at start, naming
// both flags; with the longest drain the session allows, a member joining
// while a slow call is in progress never calls that row at the same time.
func TestADrainCannotOutliveTheSession(t *testing.T) {
	if err := DefaultConfig().withBrokers().Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	const topic, group = "rows", "drain"
	brokers := testkafka.StartShortSessions(t, 1, topic, bulkreg.DLQTopic(topic))
	reg := &overlapRegistry{first: 3 * time.Second, calls: map[string]int{}, inFlight: map[string]int{}}
	rdb := testredis.Start(t).Client()
	th := newMemThrottle(100, time.Second)
	th.steps = redisSteps(rdb)
	deps := Deps{Throttle: th, Registry: reg, Status: &memStatus{rows: map[string]uploadstatus.RowResult{}},
		Calls: &memCalls{steps: redisSteps(rdb)}, Ledger: ledger.New(rdb, ledger.Options{}), Circuit: newBreaker(t, rdb), Uploads: knownUploads{}, Retry: registryclientRetry{fixedRetry{interval: 20 * time.Millisecond, attempts: 4}},
		PingRedis: func(context.Context) error { return nil }, RedisTime: timeOf(rdb)}
	cfg := testConfig(brokers, topic)
	cfg.Group = group
	cfg.Logger = testLogger(t)
	cfg.SessionTimeout, cfg.HeartbeatInterval, cfg.RebalanceTimeout = time.Second, 200*time.Millisecond, 8*time.Second
	cfg.DrainTimeout = 4 * time.Second // the reproduction: 1 s session, 4 s drain
	// The call cut by the drain has no answer: the API may count it up to
	// two call timeouts after it started, and with the default 10 s timeout
	// past this 1 s window the seller would be held 21 s (blockPastTheCap).
	cfg.CallTimeout = time.Second
	if _, err := New(cfg, deps); err == nil {
		t.Errorf("a %v drain under a %v session was accepted", cfg.DrainTimeout, cfg.SessionTimeout)
	} else {
		if msg := err.Error(); !strings.Contains(msg, "--drain-timeout") || !strings.Contains(msg, "--session-timeout") {
			t.Errorf("the refusal %q does not name --drain-timeout and --session-timeout", msg)
		}
		cfg.DrainTimeout = MaxDrainTimeout(cfg.SessionTimeout, cfg.HeartbeatInterval)
	}
	runConsumer(t, cfg, deps)
	testkafka.WaitGroupStable(t, brokers, group, 1, 20*time.Second)
	publishRows(t, brokers, topic, "u", "s", 1)
	testwait.For(t, 5*time.Second, "the first call in progress", func() bool { return reg.started.Load() == 1 })
	runConsumer(t, cfg, deps) // a second member joins: a rebalance while the call is in progress
	testwait.For(t, 20*time.Second, "the row registered", func() bool { return reg.products.Load() >= 1 })
	time.Sleep(reg.first) // any call still in progress ends
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.overlaps > 0 {
		t.Errorf("a row was called by two members at once %d times: a member was evicted while its call was in progress", reg.overlaps)
	}
	t.Logf("%d calls of the row", reg.calls["u:1"])
}

func (c Config) withBrokers() Config {
	c.Brokers = []string{"localhost:9092"}
	return c
}

// overlapRegistry counts calls of one key in progress at the same time. The
// first call of a key takes `first` (or until its context ends), later ones
// answer at once.
type overlapRegistry struct {
	first    time.Duration
	started  atomic.Int64
	products atomic.Int64

	mu       sync.Mutex
	calls    map[string]int
	inFlight map[string]int
	overlaps int
}

// Warm opens nothing: the fake has no connections.
func (o *overlapRegistry) Warm(context.Context, int) int { return 0 }

func (o *overlapRegistry) Register(ctx context.Context, seller, key string, p bulkreg.Product) registryclient.Result {
	o.started.Add(1)
	o.mu.Lock()
	o.calls[key]++
	n := o.calls[key]
	o.inFlight[key]++
	if o.inFlight[key] > 1 {
		o.overlaps++
	}
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.inFlight[key]--
		o.mu.Unlock()
	}()
	if n == 1 {
		select {
		case <-time.After(o.first):
		case <-ctx.Done():
			return registryclient.Result{Class: registryclient.Transient, Err: fmt.Errorf("the call was cancelled: %w", ctx.Err())}
		}
	}
	if o.products.Add(1) > 1 {
		return registryclient.Result{Class: registryclient.Replayed, Status: 200, ProductID: "p-" + key}
	}
	return registryclient.Result{Class: registryclient.Registered, Status: 201, ProductID: "p-" + key}
}

// TestWaitingDoesNotUseUpTheRetryBudget: rows that waited for their slots
// longer than the retry policy's time limit still get their retries after a
// transient failure.
func TestWaitingDoesNotUseUpTheRetryBudget(t *testing.T) {
	script := func(key string, n int) registryclient.Result {
		if key != "u:1" && n == 1 {
			return registryclient.Result{Class: registryclient.Transient, Status: 503, Err: errors.New("the registration API answered 503")}
		}
		return registryclient.Result{Class: registryclient.Registered, Status: 201}
	}
	f := newFixture(t, 1, script)
	f.throttle = f.newThrottle(1, 600*time.Millisecond) // row 2 waits 0.6 s for its slot, row 3 1.2 s
	f.retry = registryclient.RetryPolicy{InitialInterval: 20 * time.Millisecond, MaxInterval: 50 * time.Millisecond,
		MaxElapsed: 300 * time.Millisecond, Multiplier: 2, MaxAttempts: 4}
	f.start()
	f.publish("u", "s", 3)
	testwait.For(t, 10*time.Second, "3 rows recorded", func() bool { return len(f.status.snapshot()) == 3 })
	rows := f.status.snapshot()
	for _, k := range []string{"u:2", "u:3"} {
		if r := rows[k]; r.State != uploadstatus.Registered || r.Attempts != 2 {
			t.Errorf("row %s = %+v, want registered after 2 attempts: it waited longer than the retry time limit (300ms) for its slot, which is not a failure", k, r)
		}
	}
}

// delayProxy forwards TCP to a Redis and, while delay is set, holds each
// answer that long before passing it on (a retransmit, a stalled host).
type delayProxy struct {
	address string
	delay   atomic.Int64 // time.Duration
}

func startDelayProxy(t *testing.T, target string) *delayProxy {
	t.Helper()
	p := &delayProxy{}
	p.address = testproxy.Start(t, target, p.serve)
	return p
}

func (p *delayProxy) serve(client, server net.Conn) {
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if _, werr := server.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				server.Close()
				return
			}
		}
	}()
	type chunk struct {
		b  []byte
		at time.Time
	}
	answers := make(chan chunk, 1024)
	go func() {
		defer close(answers)
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				answers <- chunk{b: slices.Clone(buf[:n]), at: time.Now().Add(time.Duration(p.delay.Load()))}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range answers {
		time.Sleep(time.Until(c.at))
		if _, err := client.Write(c.b); err != nil {
			return
		}
	}
}

// recordingThrottle is a real throttle that remembers the slots it granted
// and the ones given back.
type recordingThrottle struct {
	*throttle.Throttle
	mu       sync.Mutex
	granted  []throttle.Reservation
	released map[string]bool
}

func (r *recordingThrottle) Release(ctx context.Context, res throttle.Reservation) error {
	r.mu.Lock()
	r.released[res.ID] = true
	r.mu.Unlock()
	return r.Throttle.Release(ctx, res)
}

func (r *recordingThrottle) ReserveN(ctx context.Context, seller string, n int, before ...scriptbatch.Step) ([]throttle.Reservation, error) {
	rs, err := r.Throttle.ReserveN(ctx, seller, n, before...)
	r.mu.Lock()
	for _, res := range rs {
		if res.Admitted {
			r.granted = append(r.granted, res)
		}
	}
	r.mu.Unlock()
	return rs, err
}

func (r *recordingThrottle) ReleaseN(ctx context.Context, seller string, rs []throttle.Reservation) error {
	r.mu.Lock()
	for _, res := range rs {
		r.released[res.ID] = true
	}
	r.mu.Unlock()
	return r.Throttle.ReleaseN(ctx, seller, rs)
}

// ReleaseStep gives the slot back in the batch's write.
func (r *recordingThrottle) ReleaseStep(res throttle.Reservation) (scriptbatch.Step, bool) {
	r.mu.Lock()
	r.released[res.ID] = true
	r.mu.Unlock()
	return r.Throttle.ReleaseStep(res)
}

// kept is every slot granted and not given back.
func (r *recordingThrottle) kept() []throttle.Reservation {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []throttle.Reservation
	for _, g := range r.granted {
		if !r.released[g.ID] {
			out = append(out, g)
		}
	}
	return out
}

// TestALateRedisAnswerTakesANewSlot: Redis's answers come 300 ms after the
// script ran, more than the lateness allows. A call at arrival + wait would
// be 300 ms after its slot; instead the slot is given back and the row
// calls, once answers are prompt again, within the lateness of the slot it
// kept.
func TestALateRedisAnswerTakesANewSlot(t *testing.T) {
	const lateness, delay = 100 * time.Millisecond, 300 * time.Millisecond
	srv := startRedis(t)
	proxy := startDelayProxy(t, srv.Addr)
	rdb := config.Config{RedisAddrs: []string{proxy.address}}.RedisClient()
	t.Cleanup(func() { rdb.Close() })
	direct := srv.Client() // the probe's own connection is not the slow one
	th, err := throttle.New(rdb, throttle.Policy{Limit: 10, Window: time.Second, Margin: 2 * lateness, CallTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rt := &recordingThrottle{Throttle: th, released: map[string]bool{}}
	f := newFixture(t, 1, nil)
	f.calls.steps = redisSteps(rdb) // the throttle's settles and releases
	f.cfg.MaxLateness = lateness
	reg := prometheus.NewRegistry()
	runConsumer(t, f.cfg, Deps{Throttle: rt, Registry: f.registry, Status: f.status, Calls: f.calls, Ledger: ledger.New(rdb, ledger.Options{}), Circuit: newBreaker(t, rdb), Uploads: knownUploads{},
		Retry: registryclientRetry{fixedRetry{interval: 20 * time.Millisecond, attempts: 4}}, Registerer: reg,
		PingRedis: func(ctx context.Context) error { return direct.Ping(ctx).Err() }, RedisTime: timeOf(direct)})
	proxy.delay.Store(int64(delay))
	f.publish("u", "s", 1)
	testwait.For(t, 10*time.Second, "a slot granted", func() bool { rt.mu.Lock(); defer rt.mu.Unlock(); return len(rt.granted) > 0 })
	time.Sleep(time.Second)
	proxy.delay.Store(0)
	testwait.For(t, 10*time.Second, "the row registered", func() bool { return f.registeredCount("u") == 1 })
	kept := rt.kept()
	f.registry.mu.Lock()
	calls := slices.Clone(f.registry.callTimes)
	f.registry.mu.Unlock()
	if len(kept) != 1 || len(calls) != 1 {
		t.Fatalf("%d slots kept and %d calls, want 1 each", len(kept), len(calls))
	}
	late := calls[0].Sub(kept[0].At)
	t.Logf("%d slots granted, the call started %v after the slot it kept", len(rt.granted), late)
	if late > lateness+20*time.Millisecond {
		t.Errorf("the call started %v after its slot, want within the %v lateness: a slow answer hid the lateness", late, lateness)
	}
	missed := gathered(t, reg, "bulkreg_consumer_slots_missed_total")
	if missed < 1 {
		t.Errorf("no slot was given back while Redis answered %v late", delay)
	}
	// Every call about to start is measured, the ones not made too.
	if n := gathered(t, reg, "bulkreg_consumer_call_lateness_seconds"); n != missed+1 {
		t.Errorf("%v lateness observations, want %v (each missed slot and the call made)", n, missed+1)
	}
}

// TestASlotDoesNotOutliveARedisRestart: a row holds a slot one window
// ahead; Redis restarts empty on the same port and another consumer takes
// the seller's whole limit in the new Redis. At its old slot the row must
// not call (the API would count L+1 calls in one window): its slot belongs
// to an epoch that is gone, and it takes a new one.
func TestASlotDoesNotOutliveARedisRestart(t *testing.T) {
	const limit, window, margin = 2, 2 * time.Second, 50 * time.Millisecond
	srv := startRedis(t)
	rdb := config.Config{RedisAddrs: []string{srv.Addr}}.RedisClient()
	t.Cleanup(func() { rdb.Close() })
	// calls counted up to two 100 ms timeouts after they start
	policy := throttle.Policy{Limit: limit, Window: window, Margin: margin, CallTimeout: 200 * time.Millisecond}
	th, err := throttle.New(rdb, policy)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, 1, nil)
	f.cfg.MaxLateness = 0           // half the throttle's margin: the most its hold after a loss covers
	f.calls.steps = redisSteps(rdb) // the throttle's settles and releases
	f.cfg.CallTimeout = 100 * time.Millisecond
	reg := prometheus.NewRegistry()
	runConsumer(t, f.cfg, Deps{Throttle: th, Registry: f.registry, Status: f.status, Calls: f.calls, Ledger: ledger.New(rdb, ledger.Options{}), Circuit: newBreaker(t, rdb), Uploads: knownUploads{},
		Retry: registryclientRetry{fixedRetry{interval: 20 * time.Millisecond, attempts: 4}}, Registerer: reg,
		PingRedis: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }, RedisTime: timeOf(rdb)})
	f.publish("u", "s", limit+1)
	testwait.For(t, 10*time.Second, "the first window's rows registered", func() bool { return f.registeredCount("u") == limit })
	// The runner books the last row's slot once the first window's calls
	// are settled: the test is about a slot booked before the restart.
	testwait.For(t, 5*time.Second, "the last row's slot booked", func() bool {
		return rdb.ZCard(context.Background(), "bulkreg:{s:s}:log").Val() == limit+1
	})
	// Restart returns once the new Redis answers, and the other
	// consumer asks at once: the row's old slot is most of a window
	// away, so it asks the new Redis after the other consumer (a sleep
	// here would let a loaded machine reach the row's slot first, and
	// the row would take one of the limit's slots the test gives the
	// other consumer).
	srv.Restart()
	restarted := time.Now()
	other, err := throttle.New(config.Config{RedisAddrs: []string{srv.Addr}}.RedisClient(), policy)
	if err != nil {
		t.Fatal(err)
	}
	// The new Redis holds the seller one window (the throttle's hold
	// after a loss) from whoever asks first. Which asks first, the
	// other consumer or the row finding its slot gone, is a race (under
	// load the row can win it): either way the new Redis's slots, the
	// other's and the row's call, must never put more than the limit in
	// one window. A row calling at its old slot would be a third in the
	// window of the other's two.
	// When the row won, the other's second slot is a window further on,
	// past what the throttle books ahead: it asks again then, as a
	// consumer does.
	var slots []time.Time
	for i := range limit {
		r, err := other.Reserve(context.Background(), "s")
		for err == nil && !r.Admitted && time.Since(restarted) < 10*time.Second {
			time.Sleep(r.Wait)
			r, err = other.Reserve(context.Background(), "s")
		}
		// The hold, then the window after the row's call, counted from its
		// latest count (its send + CallTimeout), a busy machine's delays
		// beside.
		if err != nil || !r.Admitted || r.At.Sub(restarted) > 2*(policy.Window+policy.Margin)+policy.CallTimeout+500*time.Millisecond {
			t.Fatalf("the other consumer's reservation %d: %+v, %v; want a slot by a window after the hold's end", i, r, err)
		}
		slots = append(slots, r.At)
	}
	testwait.For(t, 10*time.Second, "the last row registered", func() bool { return f.registeredCount("u") == limit+1 })
	f.registry.mu.Lock()
	last := f.registry.callTimes[len(f.registry.callTimes)-1]
	f.registry.mu.Unlock()
	all := append(slices.Clone(slots), last)
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	for i, from := range all {
		n := 0
		for _, at := range all[i:] {
			if at.Before(from.Add(window)) {
				n++
			}
		}
		if n > limit {
			t.Errorf("%d calls in the window from %v (the other consumer's slots %v, the last row's call %v): it used a slot granted before the restart",
				n, from.Format("15:04:05.000"), slots, last.Format("15:04:05.000"))
		}
	}
	if stale := gathered(t, reg, "bulkreg_consumer_slots_stale_total"); stale < 1 {
		t.Errorf("stale slots metric %v, want ≥ 1", stale)
	}
}

// TestConnectionsStayWarmBetweenWindows: the API closes connections idle
// for 500 ms; the seller's second window starts 1 s after the first (its
// calls about 0.9 s after the first window's ended). The idle timeout is
// five keep-warm intervals, so that a loaded machine (CI runs packages side
// by side) delaying a warming request does not let the server close a
// connection: three intervals (300 ms) are too few with a soak running
// beside the test. With KeepWarm, the second window's calls find their
// connections open; without it, they connect first.
func TestConnectionsStayWarmBetweenWindows(t *testing.T) {
	for _, tc := range []struct {
		name     string
		keepWarm time.Duration
	}{{"kept warm", 100 * time.Millisecond}, {"not kept warm", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			// A connection counts for the call that opened it: its first
			// request is a POST. One a warming request opened (a GET, when
			// the server had closed an idle one) is keep-warm doing its job.
			var mu sync.Mutex
			var opened []time.Time
			var firstCall time.Time
			warms := 0 // warming requests
			var lastWarm time.Time
			seen := map[string]bool{}
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				if firstCall.IsZero() && r.Method == http.MethodPost {
					firstCall = time.Now()
				}
				if !seen[r.RemoteAddr] {
					seen[r.RemoteAddr] = true
					if r.Method == http.MethodPost {
						opened = append(opened, time.Now())
					}
				}
				if r.Method != http.MethodPost {
					warms++
					lastWarm = time.Now()
				}
				mu.Unlock()
				if r.Method != http.MethodPost {
					w.WriteHeader(http.StatusNotFound)
					return
				}
				time.Sleep(50 * time.Millisecond) // the window's calls overlap: each needs its own connection
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{"product_id":"p","seller_sku":"x"}`))
			}))
			srv.Config.IdleTimeout = 500 * time.Millisecond
			srv.Start()
			t.Cleanup(srv.Close)
			rc, err := registryclient.New(registryclient.Options{BaseURL: srv.URL, MaxConnsPerHost: 16})
			if err != nil {
				t.Fatal(err)
			}
			f := newFixture(t, 1, nil)
			f.throttle = f.newThrottle(5, time.Second)
			f.cfg.KeepWarm = tc.keepWarm
			f.cfg.MaxLateness = time.Second // this test counts connections, not lateness
			runConsumer(t, f.cfg, Deps{Throttle: f.throttle, Registry: rc, Status: f.status, Calls: f.calls, Ledger: f.ledger, Circuit: newBreaker(t, f.rdb), Uploads: knownUploads{},
				Retry: registryclientRetry{fixedRetry{interval: 20 * time.Millisecond, attempts: 4}}, PingRedis: func(context.Context) error { return nil }, RedisTime: timeOf(f.rdb)})
			f.publish("u", "s", 10)
			testwait.For(t, 10*time.Second, "10 rows registered", func() bool { return f.registeredCount("u") == 10 })
			mu.Lock()
			// The windows are told apart from the first call, not from the
			// publish: a consumer slow to start (a loaded machine) can put
			// the first window's calls past 700 ms after the publish.
			second := 0
			for _, at := range opened {
				if at.Sub(firstCall) > 700*time.Millisecond {
					second++
				}
			}
			total := len(opened)
			mu.Unlock()
			t.Logf("%d connections opened by calls, %d of them by the second window's", total, second)
			// At most 3 of the 5: on a loaded machine (a clean-clone make
			// test runs packages side by side) a warming request slower
			// than the keep-warm interval gives its connection up, and
			// beside a soak that can be 3 of them; a bound of 2 is too
			// tight there. Without keep-warm all 5 reconnect.
			if tc.keepWarm > 0 && second > 3 {
				t.Errorf("the second window's calls opened %d connections, want them kept open from the first", second)
			}
			if tc.keepWarm == 0 && second < 4 {
				t.Errorf("without keep-warm the second window opened only %d connections: the server's idle timeout did not bite, so the test shows nothing", second)
			}
			if tc.keepWarm == 0 {
				return
			}
			// With every row finished there is nothing to keep warm for:
			// warming stops (a request already on its way may still
			// land), and then none comes for ten keep-warm intervals.
			testwait.For(t, 10*time.Second, "warming requests stop once every row is finished", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return time.Since(lastWarm) > 3*tc.keepWarm
			})
			mu.Lock()
			before := warms
			mu.Unlock()
			time.Sleep(10 * tc.keepWarm) // the span over which none may come
			mu.Lock()
			after := warms
			mu.Unlock()
			if after != before {
				t.Errorf("%d warming requests with no row left to call", after-before)
			}
		})
	}
}
