package consumer

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/internal/config"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testproxy"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/ledger"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// The tests in this file lose the throttle's state in Redis while a
// seller's upload is being registered: a Redis restarted empty, a Sentinel
// failover to the replica, a Redis Cluster master flushed. Each consumer
// has its own connections, opened the way the commands open them
// (config.RedisClient), so each sees the loss on its own.

// startRedis runs a redis-server initialised for the throttle, as an
// operator initialises a new Redis (producer redis-init): its first
// reservations are not held as after a loss.
func startRedis(t *testing.T, extraArgs ...string) *testredis.Server {
	t.Helper()
	srv := testredis.Start(t, extraArgs...)
	if _, err := throttle.Initialize(context.Background(), srv.Client()); err != nil {
		t.Fatal(err)
	}
	return srv
}

// lossStack is one such test's world: the broker, the sandbox API and a Redis
// of some topology, reached through redisConfig.
type lossStack struct {
	*stack
	redisConfig config.Config
	admin       redis.UniversalClient
}

const (
	lossLimit  = 100
	lossMargin = 50 * time.Millisecond
)

// newLossStack: limit 100 per window. After a loss found at T the seller's
// next slot is at T + W + 2 × margin + 2 × the call timeout, and a loss in
// the middle of the second window leaves four windows of rows: the last
// registration comes at 4 W′ + W + 2 × margin + 2 × the call timeout + (the
// loss to its discovery) after the first, within the lower bound (4 W′) + 2
// windows as long as the discovery takes less than W − 2 × margin − 2 × the
// call timeout. A restart makes go-redis wait up to a second before it dials
// again, a failover longer: those tests use 3 s windows.
// lossCallTimeout is the registry client's timeout in these tests: the
// sandbox answers in milliseconds.
const lossCallTimeout = 250 * time.Millisecond

func newLossStack(t *testing.T, redisConfig config.Config, window time.Duration) *lossStack {
	t.Helper()
	s := &stack{t: t, topic: bulkreg.DefaultTopic, limit: lossLimit, window: window, margin: lossMargin, calls: &callLog{byKey: map[string]int{}}}
	s.brokers = testkafka.StartShortSessions(t, 4, s.topic, bulkreg.DLQTopic(s.topic))
	sb, err := sandbox.New(sandbox.Options{Limit: lossLimit, Window: window, Policy: "sliding", Latency: 5 * time.Millisecond, Jitter: 2 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	s.sandbox = sb
	s.api = httptest.NewServer(s.calls.wrap(sb))
	t.Cleanup(s.api.Close)
	ls := &lossStack{stack: s, redisConfig: redisConfig, admin: redisConfig.RedisClient()}
	t.Cleanup(func() { ls.admin.Close() })
	return ls
}

// startConsumer runs one consumer with its own Redis connections until the
// test ends.
func (s *lossStack) startConsumer() {
	s.t.Helper()
	rdb := s.redisConfig.RedisClient()
	s.t.Cleanup(func() { rdb.Close() })
	cfg := s.config()
	// The client's: the hold after a loss covers calls counted two of it
	// after they start (newLossStack).
	cfg.CallTimeout = lossCallTimeout
	th, err := throttle.New(rdb, cfg.ThrottlePolicy(s.limit, s.window, s.margin))
	if err != nil {
		s.t.Fatal(err)
	}
	rc, err := registryclient.New(registryclient.Options{BaseURL: s.api.URL, Timeout: cfg.CallTimeout})
	if err != nil {
		s.t.Fatal(err)
	}
	runConsumer(s.t, cfg, Deps{Throttle: th, Registry: rc, Status: uploadstatus.New(rdb, time.Hour),
		Calls: compliance.NewRecorder(rdb, time.Hour), Ledger: ledger.New(rdb, ledger.Options{}), Circuit: newBreaker(s.t, rdb), Uploads: knownUploads{}, Retry: s.retryPolicy(),
		PingRedis: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }, RedisTime: timeOf(rdb), Registerer: prometheus.NewRegistry()})
}

// run registers 500 rows of one seller with 4 consumers, calls lose once
// the seller has `after` products, and checks the promise: every row
// registered once, no 429, the last registration within the lower bound + 2
// windows.
func (s *lossStack) run(seller string, after int, lose func()) (lostAt time.Time) {
	s.t.Helper()
	for range 4 {
		s.startConsumer()
	}
	s.waitGroupStable("registrar", 4)
	s.publish("up-"+seller, seller, 500)
	s.waitProducts(seller, after, 20*time.Second)
	lostAt = time.Now()
	lose()
	s.t.Logf("Redis lost its data %v after the first registration, at %d products", lostAt.Sub(s.audit(seller).First), s.audit(seller).Products)
	defer func() { s.t.Logf("batches: %v", batches(s.sandbox.AcceptedTimes(seller))) }()
	s.waitProducts(seller, 500, 40*time.Second)
	time.Sleep(200 * time.Millisecond) // a 429 answered just now would show
	a := s.audit(seller)
	lower := 4 * (s.window + s.margin)
	took := a.Last.Sub(a.First)
	s.t.Logf("500 rows: %d products, %d accepted, %d 429s, %d replays, max %d in a window; first to last %v, lower bound %v",
		a.Products, a.Accepted, a.RateLimited, a.Replays, a.MaxInWindow, took, lower)
	s.checkCompliant(seller, 500)
	if bound := lower + 2*s.window; took > bound {
		s.t.Errorf("the last registration came %v after the first, want ≤ %v (lower bound + 2 windows)", took, bound)
	}
	return lostAt
}

// TestRedisRestartedEmpty: Redis is SIGKILLed after 150 of 500 rows and
// restarted empty on the same port. A throttle that took the empty log at
// its word would admit a window at once, and the API would answer 429s
// here. The compliance report then names the period its history does not
// cover.
func TestRedisRestartedEmpty(t *testing.T) {
	srv := startRedis(t)
	s := newLossStack(t, config.Config{RedisAddrs: []string{srv.Addr}}, 3*time.Second)
	lostAt := s.run("seller-a", 150, func() { srv.Restart() })

	rep, err := compliance.NewRecorder(s.admin, time.Hour).Report(context.Background(), throttle.Policy{Limit: s.limit, Window: s.window})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sellers) != 1 {
		t.Fatalf("compliance report %+v, want seller-a", rep)
	}
	sr := rep.Sellers[0]
	g := sr.Uncovered
	t.Logf("compliance after the loss: %d calls in the history, uncovered %+v", sr.Calls, g)
	if g == nil || g.Cause != throttle.CauseMissing || !g.From.Equal(rep.At.Add(-time.Hour)) ||
		g.To.Before(lostAt) || g.To.After(lostAt.Add(5*time.Second)) || rep.Complete {
		t.Errorf("compliance report after the loss at %v: seller %+v, complete %v; want the hour before the loss was found (%s) named as not covered",
			lostAt, sr, rep.Complete, throttle.CauseMissing)
	}
	if sr.Accepted >= 500 || sr.Exceeded {
		t.Errorf("the history after the loss holds %d accepted calls (exceeded %v), want fewer than 500: the calls before the loss are gone", sr.Accepted, sr.Exceeded)
	}
}

// TestSentinelFailover: a primary, a replica and three sentinels; the
// replica's link to the primary stalls (it receives nothing of the run),
// then the primary is SIGKILLed mid-run and the replica promoted: the usual
// failover to a replica that missed the last writes, at its worst. The
// replica holds the throttle's markers as replicated before, naming the old
// primary's process, and the throttle holds the seller.
func TestSentinelFailover(t *testing.T) {
	var link *replicationCutter
	sent := testredis.StartSentinelWith(t, testredis.SentinelOptions{DownAfter: 500 * time.Millisecond,
		Front: func(primary string) string { link = startReplicationCutter(t, primary); return link.addr() }})
	rc := config.Config{RedisAddrs: sent.SentinelAddrs(), RedisSentinelMaster: sent.MasterName}
	s := newLossStack(t, rc, 3*time.Second)
	if _, err := throttle.Initialize(context.Background(), s.admin); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the replica holding the markers", func() bool {
		c := sent.Replicas[0].Client()
		return c.Exists(context.Background(), throttle.NewMarkers().OfSeller("seller-b")).Val() == 1
	})
	link.cut()
	s.run("seller-b", 150, func() {
		sent.Primary.Stop()
		testwait.For(t, 20*time.Second, "a sentinel naming the replica as the primary", func() bool {
			addr, err := sent.MasterAddr(context.Background())
			return err == nil && addr == sent.Replicas[0].Addr
		})
	})
	mk, err := throttle.NewMarkers().Read(context.Background(), s.admin, "bulkreg:{s:seller-b}:log")
	if err != nil || mk[0].Cause != throttle.CauseNewServer {
		t.Errorf("marker of seller-b's hash slot after the failover = %+v, %v; want cause %s", mk, err, throttle.CauseNewServer)
	}
}

// replicationCutter is a TCP proxy in front of a Redis primary. Once cut,
// it stops passing the primary's replication stream to its replica (the
// connection that asked for PSYNC or SYNC) and keeps that connection open,
// so the replica neither receives the writes nor knows it is behind; every
// other connection still passes.
type replicationCutter struct {
	address string
	cutOff  atomic.Bool
}

func startReplicationCutter(t testing.TB, target string) *replicationCutter {
	t.Helper()
	p := &replicationCutter{}
	p.address = testproxy.Start(t, target, p.serve)
	return p
}

func (p *replicationCutter) addr() string { return p.address }
func (p *replicationCutter) cut()         { p.cutOff.Store(true) }

func (p *replicationCutter) serve(client, server net.Conn) {
	var replication atomic.Bool
	go func() {
		defer server.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if up := bytes.ToUpper(buf[:n]); bytes.Contains(up, []byte("PSYNC")) || bytes.Contains(up, []byte("\r\nSYNC\r\n")) {
					replication.Store(true)
				}
				if _, werr := server.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && !(replication.Load() && p.cutOff.Load()) {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestClusterMasterFlushed: a 3-master Redis Cluster; the master that holds
// the seller's keys is flushed mid-run. Only its hash slots lose their
// data, and the throttle holds only their sellers.
func TestClusterMasterFlushed(t *testing.T) {
	c := testredis.StartCluster(t, 3)
	s := newLossStack(t, config.Config{RedisAddrs: c.Addrs()}, 2*time.Second)
	ctx := context.Background()
	if _, err := throttle.Initialize(ctx, s.admin); err != nil {
		t.Fatal(err)
	}
	node, err := s.admin.(*redis.ClusterClient).MasterForKey(ctx, "bulkreg:{s:seller-c}:log")
	if err != nil {
		t.Fatal(err)
	}
	s.run("seller-c", 150, func() {
		if err := node.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("flushed master %s", node.Options().Addr)
}

func batches(times []time.Time) []string {
	var out []string
	for i, at := range times {
		if i == 0 || at.Sub(times[i-1]) > 200*time.Millisecond {
			out = append(out, fmt.Sprintf("%d@%v", i, at.Sub(times[0]).Round(time.Millisecond)))
		}
	}
	return out
}
