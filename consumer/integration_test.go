package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/deadletter"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/ledger"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// The tests in this file run the consumer with its real parts: redis-server,
// the throttle's scripts, the registry client, the sandbox registration API
// (in this process, over HTTP) and the embedded Kafka broker. The crash tests
// run cmd/consumer as separate processes so they can be killed with SIGKILL.

// stack is one test's world.
type stack struct {
	t       *testing.T
	topic   string
	brokers []string
	redis   *testredis.Server
	rdb     *redis.Client
	sandbox *sandbox.Server
	api     *httptest.Server
	calls   *callLog
	limit   int
	window  time.Duration
	margin  time.Duration
	global  throttle.Global
	started []*Consumer
}

type stackOptions struct {
	partitions int32
	limit      int
	window     time.Duration
	margin     time.Duration
	latency    time.Duration
	jitter     time.Duration
	failRate   float64
	global     throttle.Global // the API's app-wide limit, enforced by the sandbox and kept by the throttle
}

// callLog records every request the registration API receives, whatever
// its answer, by arrival time.
type callLog struct {
	mu    sync.Mutex
	times []time.Time
	byKey map[string]int
}

func (l *callLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.times = append(l.times, time.Now())
		l.byKey[r.Header.Get("Idempotency-Key")]++
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *callLog) between(from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, t := range l.times {
		if t.After(from) && t.Before(to) {
			n++
		}
	}
	return n
}

func (l *callLog) maxPerKey() (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	best, n := "", 0
	for k, c := range l.byKey {
		if c > n {
			best, n = k, c
		}
	}
	return best, n
}

func newStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	s := &stack{t: t, topic: bulkreg.DefaultTopic, limit: o.limit, window: o.window, margin: o.margin, global: o.global, calls: &callLog{byKey: map[string]int{}}}
	s.brokers = testkafka.StartShortSessions(t, o.partitions, s.topic, bulkreg.DLQTopic(s.topic))
	s.redis = startRedis(t)
	s.rdb = s.redis.Client()
	sb, err := sandbox.New(sandbox.Options{Limit: o.limit, Window: o.window, Policy: "sliding", GlobalLimit: o.global.Limit, GlobalWindow: o.global.Window,
		Latency: o.latency, Jitter: o.jitter, FailRate: o.failRate, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	s.sandbox = sb
	s.api = httptest.NewServer(s.calls.wrap(sb))
	t.Cleanup(s.api.Close)
	return s
}

func (s *stack) retryPolicy() registryclient.RetryPolicy {
	return registryclient.RetryPolicy{InitialInterval: 20 * time.Millisecond, MaxInterval: 200 * time.Millisecond, MaxElapsed: 10 * time.Second,
		Multiplier: 2, Jitter: 0.5, MaxAttempts: 6}
}

// circuitSettings are the circuit breaker's, shrunk like the windows: the
// defaults' shape, a 2 s window, probes every 200 ms to 1 s. The lease
// exceeds the registry client's 2 s timeout.
func circuitSettings() circuit.Settings {
	return circuit.Settings{Window: 2 * time.Second, ProbeMin: 200 * time.Millisecond, ProbeMax: time.Second, ProbeLease: 3 * time.Second}
}

// breaker is one consumer's handle on the fleet's circuit, as each process has its own.
func (s *stack) breaker() *circuit.Breaker { return newBreaker(s.t, s.rdb) }

// newBreaker is a consumer's handle on the fleet's circuit in rdb, with the
// tests' short windows.
func newBreaker(t testing.TB, rdb redis.UniversalClient) *circuit.Breaker {
	t.Helper()
	b, err := circuit.New(rdb, circuitSettings())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (s *stack) config() Config {
	cfg := testConfig(s.brokers, s.topic)
	cfg.Group = "registrar"
	cfg.SellerConcurrency = s.limit
	cfg.MaxLateness = s.margin / 2
	cfg.RedisProbeInterval = 100 * time.Millisecond
	cfg.RedisRetryMin = 50 * time.Millisecond
	cfg.RedisRetryMax = 300 * time.Millisecond
	cfg.Logger = testLogger(s.t)
	return cfg
}

// startConsumer runs a consumer in this process until the test ends; opts
// change its settings or parts before it starts.
func (s *stack) startConsumer(opts ...func(*Config, *Deps)) *Consumer {
	s.t.Helper()
	rc, err := registryclient.New(registryclient.Options{BaseURL: s.api.URL, Timeout: 2 * time.Second})
	if err != nil {
		s.t.Fatal(err)
	}
	cfg, deps := s.config(), Deps{Registry: rc, Status: uploadstatus.New(s.rdb, time.Hour),
		Calls: compliance.NewRecorder(s.rdb, time.Hour), Ledger: ledger.New(s.rdb, ledger.Options{}), Retry: s.retryPolicy(), Circuit: s.breaker(), Uploads: knownUploads{},
		PingRedis: func(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }, RedisTime: timeOf(s.rdb), Registerer: prometheus.NewRegistry()}
	cfg.CallTimeout = 2 * time.Second // the client's
	for _, o := range opts {
		o(&cfg, &deps)
	}
	if deps.Throttle == nil {
		// as cmd/consumer makes it: the log's latest counts cover the calls
		p := cfg.ThrottlePolicy(s.limit, s.window, s.margin)
		p.Global = s.global
		th, err := throttle.New(s.rdb, p)
		if err != nil {
			s.t.Fatal(err)
		}
		deps.Throttle = th
	}
	c, err := New(cfg, deps)
	if err != nil {
		s.t.Fatal(err)
	}
	s.started = append(s.started, c)
	run(s.t, c)
	return c
}

// publish sends rows 1..n of one upload, keyed by seller.
func (s *stack) publish(upload, seller string, n int) {
	s.t.Helper()
	msgs := make([]kafka.Message, 0, n)
	for i := 1; i <= n; i++ {
		p := bulkreg.Product{SellerSKU: fmt.Sprintf("%s-%d", upload, i), Name: "상품 " + fmt.Sprint(i), CategoryCode: "50000001", Price: 12000, Stock: 10}
		v, err := json.Marshal(bulkreg.NewMessage(upload, seller, i, p, time.Now()))
		if err != nil {
			s.t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(seller), Value: v})
	}
	testkafka.Produce(s.t, s.brokers, s.topic, msgs...)
}

func (s *stack) audit(seller string) sandbox.SellerAudit { return s.sandbox.Audit().Sellers[seller] }

// waitGroupStable waits until the group has n members and is stable.
func (s *stack) waitGroupStable(group string, n int) {
	s.t.Helper()
	testkafka.WaitGroupStable(s.t, s.brokers, group, n, 20*time.Second)
}

func (s *stack) waitProducts(seller string, n int, within time.Duration) {
	s.t.Helper()
	testwait.For(s.t, within, fmt.Sprintf("%d products of seller %s at the sandbox", n, seller), func() bool { return s.audit(seller).Products >= n })
}

// checkCompliant asserts the sandbox's and the compliance report's view of
// one seller: n products, no 429, never more than the limit in a window.
func (s *stack) checkCompliant(seller string, n int) {
	s.t.Helper()
	a := s.audit(seller)
	if a.Products != n || a.Accepted != n {
		s.t.Errorf("seller %s: %d products, %d accepted at the sandbox, want %d each (one product per row)", seller, a.Products, a.Accepted, n)
	}
	if a.RateLimited != 0 {
		s.t.Errorf("seller %s: the sandbox answered %d 429s, want 0", seller, a.RateLimited)
	}
	if a.MaxInWindow > s.limit {
		s.t.Errorf("seller %s: %d registrations in one window at the sandbox, limit %d", seller, a.MaxInWindow, s.limit)
	}
}

// TestPacedOneSeller: 500 rows of one seller, 4 consumers, limit 100 per
// 3 s, margin 50 ms: every row registered once, no 429, never more than 100
// in a window, and the last registration within 1.05 × the lower bound.
func TestPacedOneSeller(t *testing.T) {
	const latency = 5 * time.Millisecond
	s := newStack(t, stackOptions{partitions: 4, limit: 100, window: 3 * time.Second, margin: 50 * time.Millisecond, latency: latency, jitter: 2 * time.Millisecond})
	for range 4 {
		s.startConsumer()
	}
	s.waitGroupStable("registrar", 4)
	s.publish("up-1", "seller-1", 500)
	s.waitProducts("seller-1", 500, 40*time.Second)
	s.checkCompliant("seller-1", 500)
	a := s.audit("seller-1")
	lower := 4 * (s.window + s.margin)
	took := a.Last.Sub(a.First)
	t.Logf("500 rows: first to last %v, lower bound %v, ratio %.3f, replays %d", took, lower, float64(took)/float64(lower), a.Replays)
	// A slot a consumer could not call on time (the cores saturated by the
	// packages testing beside this one) is given back, and its row's new slot
	// is in the next window: pacing is then one window longer, never faster.
	// Only then is that window allowed; the invariant above stays strict.
	var missed float64
	for _, c := range s.started {
		missed += testutil.ToFloat64(c.m.late) + testutil.ToFloat64(c.m.stale)
	}
	limit := time.Duration(1.05*float64(lower)) + latency + 2*time.Millisecond
	if missed > 0 {
		t.Logf("%v slots missed under load: one more window allowed", missed)
		limit += s.window + s.margin
	}
	if took > limit {
		t.Errorf("the last registration came %v after the first, want ≤ %v (1.05 × lower bound + latency, + a window when slots were missed: %v)", took, limit, missed)
	}
	// The compliance report agrees: every call recorded, none over the limit.
	rep, err := compliance.NewRecorder(s.rdb, time.Hour).Report(context.Background(), throttle.Policy{Limit: s.limit, Window: s.window})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sellers) != 1 || rep.Sellers[0].Accepted != 500 || rep.Sellers[0].Exceeded || rep.Sellers[0].RateLimited != 0 {
		t.Errorf("compliance report %+v, want seller-1 with 500 accepted, none rate-limited, not exceeded", rep.Sellers)
	}
	st, err := uploadstatus.New(s.rdb, time.Hour).Get(context.Background(), "up-1")
	if err == nil && st.Registered != 500 {
		t.Errorf("upload status: %d registered, want 500", st.Registered)
	}
}

// TestFairnessSamePartition: seller B's 10 rows published after seller A's
// 500 on the same partition finish within 2 s while A is still paced.
func TestFairnessSamePartition(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 1, limit: 100, window: 3 * time.Second, margin: 50 * time.Millisecond, latency: 5 * time.Millisecond})
	s.startConsumer()
	s.startConsumer()
	s.waitGroupStable("registrar", 2)
	s.publish("up-a", "seller-a", 500)
	s.waitProducts("seller-a", 100, 10*time.Second) // A has used its first window
	published := time.Now()
	s.publish("up-b", "seller-b", 10)
	s.waitProducts("seller-b", 10, 2*time.Second)
	t.Logf("seller B's 10 rows done %v after publishing; seller A at %d of 500", time.Since(published), s.audit("seller-a").Products)
	if a := s.audit("seller-a").Products; a >= 500 {
		t.Errorf("seller A already finished (%d): B did not have to overtake it", a)
	}
	s.checkCompliant("seller-b", 10)
}

// TestRedisDownMidRun: Redis stopped for 5 s; no registry call while it is
// down; every row registered after it is back.
func TestRedisDownMidRun(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 2, limit: 20, window: time.Second, margin: 50 * time.Millisecond, latency: 5 * time.Millisecond})
	s.startConsumer()
	s.startConsumer()
	s.waitGroupStable("registrar", 2)
	sellers := []string{"r1", "r2", "r3"}
	for _, seller := range sellers {
		s.publish("up-"+seller, seller, 100)
	}
	testwait.For(t, 10*time.Second, "40 products", func() bool {
		n := 0
		for _, seller := range sellers {
			n += s.audit(seller).Products
		}
		return n >= 40
	})
	s.redis.Stop()
	stopped := time.Now()
	time.Sleep(5 * time.Second)
	restarted := time.Now()
	s.redis.Restart()
	// A call already sent may land just after the stop; after one probe
	// interval (and the sandbox's latency) the consumers know.
	grace := s.config().RedisProbeInterval + 200*time.Millisecond
	if n := s.calls.between(stopped.Add(grace), restarted); n != 0 {
		t.Errorf("%d registry calls while Redis was down (from %v after the stop)", n, grace)
	}
	for _, seller := range sellers {
		s.waitProducts(seller, 100, 20*time.Second)
		a := s.audit(seller)
		if a.Products != 100 || a.RateLimited != 0 || a.MaxInWindow > s.limit {
			t.Errorf("seller %s: %+v, want 100 products, no 429, ≤ %d in a window", seller, a, s.limit)
		}
	}
}

// TestTransientFailuresAndPoison: 10% of calls answer 503 (with jitter);
// every row is registered with a bounded number of attempts, and a poison
// message lands in the DLQ without stopping consumption.
func TestTransientFailuresAndPoison(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 2, limit: 100, window: time.Second, margin: 50 * time.Millisecond,
		latency: 3 * time.Millisecond, jitter: 5 * time.Millisecond, failRate: 0.1})
	s.startConsumer()
	s.startConsumer()
	s.waitGroupStable("registrar", 2)
	s.publish("up-x", "x", 100)
	testkafka.Produce(t, s.brokers, s.topic, kafka.Message{Key: []byte("x"), Value: []byte(`{"v":1,"upload_id":"up-x","row":0}`)})
	s.publish("up-y", "y", 100)
	s.waitProducts("x", 100, 20*time.Second)
	s.waitProducts("y", 100, 20*time.Second)
	for _, seller := range []string{"x", "y"} {
		s.checkCompliant(seller, 100)
	}
	key, n := s.calls.maxPerKey()
	if max := s.retryPolicy().MaxAttempts; n > max {
		t.Errorf("row %s was called %d times, the retry policy allows %d", key, n, max)
	}
	t.Logf("most calls for one row: %d (%s)", n, key)
	dl := readDLQ(t, s.brokers, s.topic, 1)
	if got := header(dl[0], deadletter.HeaderErrorClass); got != deadletter.ClassBadMessage || !strings.Contains(string(dl[0].Value), `"row":0`) {
		t.Errorf("dead letter class %q value %s, want the poison message as %s", got, dl[0].Value, deadletter.ClassBadMessage)
	}
}

// consumerBin is cmd/consumer, built once for the crash tests.
var consumerBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "bulkreg-consumer-test-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "consumer")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/bulkreg/bulkreg/cmd/consumer").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/consumer: %v\n%s", err, out)
	}
	return bin, nil
})

// proc is one cmd/consumer process.
type proc struct {
	cmd *exec.Cmd
	log string
}

// startProcess runs cmd/consumer; settings are "NAME=value" (without the
// BULKREG_ prefix) that replace the defaults below.
func (s *stack) startProcess(name string, settings ...string) *proc {
	s.t.Helper()
	bin, err := consumerBin()
	if err != nil {
		s.t.Fatal(err)
	}
	logPath := filepath.Join(s.t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(bin)
	env := map[string]string{
		"KAFKA_BROKERS": strings.Join(s.brokers, ","), "TOPIC": s.topic, "GROUP": "registrar",
		"REDIS_ADDRS": s.redis.Addr, "REGISTRY_URL": s.api.URL,
		"LIMIT": fmt.Sprint(s.limit), "WINDOW": s.window.String(), "MARGIN": s.margin.String(),
		"SESSION_TIMEOUT": "2s", "HEARTBEAT_INTERVAL": "200ms", "REBALANCE_TIMEOUT": "5s", "COMMIT_INTERVAL": "200ms",
		"DRAIN_TIMEOUT": "1500ms", "SHUTDOWN_TIMEOUT": "5s", "METRICS_ADDR": "127.0.0.1:0",
		"REDIS_PROBE_INTERVAL": "100ms", "REGISTRY_TIMEOUT": "2s", "RETRY_INITIAL": "20ms", "RETRY_MAX_INTERVAL": "200ms",
		"RETRY_MAX_ATTEMPTS": "6", "RETRY_MAX_ELAPSED": "10s", "LOG_LEVEL": "info",
		"CIRCUIT_WINDOW": "2s", "CIRCUIT_PROBE_MIN": "200ms", "CIRCUIT_PROBE_MAX": "1s", "CIRCUIT_PROBE_LEASE": "3s",
	}
	for _, kv := range settings {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, "BULKREG_"+k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	p := &proc{cmd: cmd, log: logPath}
	s.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		if s.t.Failed() {
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			s.t.Logf("last lines of %s:\n%s", name, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	})
	return p
}

func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// resumedWithin checks that every seller unfinished at `from` got a
// registration within bound after it, and returns the longest such wait.
func (s *stack) resumedWithin(sellers []string, want map[string]int, from time.Time, bound time.Duration) time.Duration {
	s.t.Helper()
	var slowest time.Duration
	for _, seller := range sellers {
		times := s.sandbox.AcceptedTimes(seller)
		if len(times) >= want[seller] && !times[len(times)-1].After(from) {
			continue // finished before
		}
		i := slices.IndexFunc(times, func(t time.Time) bool { return t.After(from) })
		if i < 0 {
			s.t.Errorf("seller %s: no registration after %v", seller, from)
			continue
		}
		gap := times[i].Sub(from)
		slowest = max(slowest, gap)
		if gap > bound {
			s.t.Errorf("seller %s: work resumed %v after the crash, want ≤ %v (the dead calls' hold, deadCallsHold)", seller, gap, bound)
		} else {
			s.t.Logf("seller %s resumed %v after the crash", seller, gap)
		}
	}
	return slowest
}

// TestCrashOneConsumer: one of three consumer processes is killed with
// SIGKILL mid-run; every row is registered once, no 429, and its
// partitions' work resumes within the session timeout plus one window.
func TestCrashOneConsumer(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{partitions: 6, limit: 50, window: 2 * time.Second, margin: crashMargin, latency: 5 * time.Millisecond})
	// One seller on each partition, so whichever two partitions the killed
	// process owned, the resumption bound below is checked on its sellers.
	sellers := []string{"a", "n", "c", "b", "g", "f"}
	s.requireOnePerPartition(sellers, 6)
	procs := []*proc{s.startProcess("c1"), s.startProcess("c2"), s.startProcess("c3")}
	s.waitGroupStable("registrar", 3)
	want := map[string]int{}
	for _, seller := range sellers {
		want[seller] = 200
		s.publish("up-"+seller, seller, 200)
	}
	testwait.For(t, 10*time.Second, "every seller started", func() bool {
		for _, seller := range sellers {
			if s.audit(seller).Products < 50 {
				return false
			}
		}
		return true
	})
	procs[0].kill()
	killed := time.Now()
	for _, seller := range sellers {
		s.waitProducts(seller, want[seller], 40*time.Second)
	}
	for _, seller := range sellers {
		s.checkCompliant(seller, want[seller])
	}
	// The killed process's sellers wait for the session timeout, then for the
	// calls it reserved and never made: deadCallsHold. With a seller on every
	// partition and each of the three members owning two, the killed
	// process's sellers are among those checked.
	bound := s.deadCallsHold() + time.Second
	t.Logf("slowest resumption %v, bound %v", s.resumedWithin(sellers, want, killed, bound), bound)
}

// deadCallsHold is how long after a consumer process dies its sellers may
// wait for their next slot, with startProcess's settings: its reservations
// are at most Policy.MaxWait (the session timeout) ahead, each holds the
// seller's log at its latest possible count, the slot + SendWithin +
// CallTimeout (the throttle's invariant: the dead process may have sent the
// call and the API may count it that late), and the next slot is a window
// plus the margin after those. The rebalance (the session timeout) runs
// meanwhile.
func (s *stack) deadCallsHold() time.Duration {
	p := Config{SessionTimeout: 2 * time.Second, CallTimeout: 2 * time.Second}.ThrottlePolicy(s.limit, s.window, s.margin)
	return p.MaxWait + p.SendWithin + p.CallTimeout + s.window + s.margin
}

// crashMargin is the throttle margin of the tests that run cmd/consumer
// processes. Up to seven of them share the cores with the broker, Redis and
// the sandbox, and their calls' delay between slot and API spreads wider than
// the 50 ms of the pacing tests; these tests are about crashes, and the
// production margin is 250 ms.
const crashMargin = 150 * time.Millisecond

// requireOnePerPartition fails the test unless the sellers' keys land on
// distinct partitions covering all n, as the producer's hash balancer puts them.
func (s *stack) requireOnePerPartition(sellers []string, n int) {
	s.t.Helper()
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	seen := map[int]string{}
	for _, seller := range sellers {
		p := (&kafka.Hash{}).Balance(kafka.Message{Key: []byte(seller)}, parts...)
		if other, ok := seen[p]; ok {
			s.t.Fatalf("sellers %s and %s share partition %d; pick keys that cover every partition", other, seller, p)
		}
		seen[p] = seller
	}
	if len(seen) != n {
		s.t.Fatalf("sellers cover %d of %d partitions", len(seen), n)
	}
}

// TestCrashAllConsumers: every consumer killed with SIGKILL at once while
// big and small uploads share partitions (rows finish out of offset order);
// new consumers start 2 s later and finish everything, one product per row.
func TestCrashAllConsumers(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{partitions: 2, limit: 50, window: 2 * time.Second, margin: crashMargin, latency: 5 * time.Millisecond})
	procs := []*proc{s.startProcess("c1"), s.startProcess("c2")}
	s.waitGroupStable("registrar", 2)
	sellers := []string{"big1", "big2", "small1", "small2", "small3", "small4"}
	want := map[string]int{"big1": 250, "big2": 250, "small1": 30, "small2": 30, "small3": 30, "small4": 30}
	for _, seller := range sellers {
		s.publish("up-"+seller, seller, want[seller])
	}
	testwait.For(t, 10*time.Second, "the small uploads done and the big ones under way", func() bool {
		for _, seller := range sellers {
			if s.audit(seller).Products < min(want[seller], 60) {
				return false
			}
		}
		return true
	})
	for _, p := range procs {
		p.kill()
	}
	killed := time.Now()
	time.Sleep(2 * time.Second)
	// Debug logs name every row a consumer finishes, so rows read again
	// show even when the SKU ledger answers them without an API call.
	c3, c4 := s.startProcess("c3", "LOG_LEVEL=debug"), s.startProcess("c4", "LOG_LEVEL=debug")
	for _, seller := range sellers {
		s.waitProducts(seller, want[seller], 40*time.Second)
	}
	for _, seller := range sellers {
		s.checkCompliant(seller, want[seller])
	}
	s.resumedWithin(sellers, want, killed, s.deadCallsHold()+time.Second)
	// Each partition holds a big upload, then small ones ("big1", "small2",
	// "small4" on 0; the others on 1). The small ones were finished before the
	// kill, but the commit could not pass the big upload's unfinished rows
	// below them: the commit named them in its metadata (internal/kafkagroup/offsets.go), and
	// the new consumers pass over them when they read them again. That they
	// do is proof that rows finished out of offset order and nothing past the
	// lowest unfinished row was committed. A row finished after the last
	// commit before the kill is handled again (the SKU ledger answers it as
	// registered by its own row, without calling the API).
	var logs strings.Builder
	for _, p := range []*proc{c3, c4} {
		b, _ := os.ReadFile(p.log)
		logs.Write(b)
	}
	passed := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"consumer: rows finished before this assignment (kept by this member or named by the last commit) are passed over, not handled again"`) {
			passed++
		}
	}
	if passed == 0 {
		t.Errorf("the new consumers passed over no finished rows; want the small uploads' rows, finished above the big uploads' unfinished ones, named by the commit")
	}
	for _, seller := range []string{"small1", "small2", "small3", "small4"} {
		again := 0
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, `"msg":"row done"`) && strings.Contains(line, `"seller":"`+seller+`"`) {
				again++
			}
		}
		t.Logf("seller %s: %d rows handled again after the restart, %d API replays", seller, again, s.audit(seller).Replays)
	}
	t.Logf("everything registered %v after the kill", time.Since(killed))
}

// TestGracefulShutdown: SIGTERM stops a consumer process within its
// shutdown timeout with exit status 0, its waiting rows' slots given back;
// a new process finishes the upload, one product per row.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{partitions: 1, limit: 20, window: 2 * time.Second, margin: crashMargin, latency: 5 * time.Millisecond})
	p := s.startProcess("c1")
	s.waitGroupStable("registrar", 1)
	s.publish("up-g", "g", 100)
	s.waitProducts("g", 20, 10*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("consumer exited with %v after SIGTERM, want status 0", err)
		}
		t.Logf("consumer stopped %v after SIGTERM", time.Since(stopped))
	case <-time.After(6 * time.Second):
		t.Fatal("consumer still running 6 s after SIGTERM (shutdown timeout 5 s)")
	}
	// Only slots of calls made remain: the log holds no future reservation.
	now, err := s.rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if future := futureSlots(t, s.rdb, "bulkreg:{s:g}:log", now.Add(100*time.Millisecond)); future != 0 {
		t.Errorf("%d reserved slots in the future after the shutdown, want 0 (given back)", future)
	}
	s.startProcess("c2")
	s.waitProducts("g", 100, 20*time.Second)
	s.checkCompliant("g", 100)
}

// futureSlots counts slots after t in a throttle log, whatever unit (µs or
// ms since the epoch) its scores use.
func futureSlots(t *testing.T, rdb *redis.Client, key string, after time.Time) int {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(context.Background(), key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, z := range zs {
		var at time.Time
		switch {
		case z.Score > 1e17:
			at = time.Unix(0, int64(z.Score))
		case z.Score > 1e14:
			at = time.UnixMicro(int64(z.Score))
		default:
			at = time.UnixMilli(int64(z.Score))
		}
		if at.After(after) {
			n++
		}
	}
	return n
}
