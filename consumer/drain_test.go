package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/internal/config"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testproxy"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/ledger"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// TestADrainKeepsItsBoundWhenRedisDoesNotAnswer: the consumer's Redis link
// goes dark (a black hole: no answer, no reset) right after a call, and the
// consumer is stopped (SIGTERM) while it tries to record the call. The
// drain must end within DrainTimeout + one heartbeat, however long a Redis
// read may wait, and the final commit must go out while the group still
// counts the member in (drain + 2 × heartbeat ≤ session): the rows finished
// before the black hole are committed, the one it caught is not. Unbounded,
// the writes in flight and the best-effort ones after them would run past
// the drain timeout by seconds, the session would end, and the broker would
// refuse the final commit.
func TestADrainKeepsItsBoundWhenRedisDoesNotAnswer(t *testing.T) {
	const topic, group = "rows", "drain-dark"
	brokers := testkafka.StartShortSessions(t, 1, topic, bulkreg.DLQTopic(topic))
	srv := startRedis(t)
	hole := testproxy.StartBlackhole(t, srv.Addr)
	rdb := config.Config{RedisAddrs: []string{hole.Addr}}.RedisClient()
	t.Cleanup(func() { rdb.Close() })

	cfg := testConfig(brokers, topic)
	cfg.Group = group
	cfg.Logger = testLogger(t)
	cfg.CommitInterval = time.Minute // the final commit is the only one
	cfg.CallTimeout = 500 * time.Millisecond
	th, err := throttle.New(rdb, cfg.ThrottlePolicy(10, time.Second, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := throttle.Initialize(context.Background(), srv.Client()); err != nil {
		t.Fatal(err)
	}
	status := uploadstatus.New(rdb, time.Hour)
	reg := hookRegistry{fakeRegistry: newFakeRegistry(nil), after: func(key string, _ int) {
		if key == "dark:3" {
			hole.Swallow(true)
		}
	}}
	stop := runConsumer(t, cfg, Deps{Throttle: th, Registry: reg, Status: status, Calls: compliance.NewRecorder(rdb, time.Hour), Ledger: ledger.New(rdb, ledger.Options{}), Circuit: newBreaker(t, rdb), Uploads: knownUploads{},
		Retry:     registryclientRetry{fixedRetry{interval: 20 * time.Millisecond, attempts: 4}},
		PingRedis: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }, RedisTime: timeOf(rdb)})
	publishRows(t, brokers, topic, "lit", "s", 2)
	testwait.For(t, 10*time.Second, "the first two rows recorded", func() bool {
		st, err := status.Get(context.Background(), "lit")
		return err == nil && len(st.Rows) == 2
	})
	testkafka.Produce(t, brokers, topic, rowMessage("dark", "s", 3)) // a SKU of its own (the ledger holds sku-1 registered)
	testwait.For(t, 10*time.Second, "the third row called", func() bool { calls, _ := reg.count(); return calls == 3 })
	time.Sleep(100 * time.Millisecond) // its writes are on the dark link now

	start := time.Now()
	stop()
	took := time.Since(start)
	if bound := cfg.DrainTimeout + cfg.HeartbeatInterval + 300*time.Millisecond; took > bound {
		t.Errorf("the consumer stopped %v after it was told to, want within the drain timeout + a heartbeat (%v)", took, bound)
	}
	if off := testkafka.Committed(t, brokers, group, topic, 1)[0]; off != 2 {
		t.Errorf("committed offset %d after the drain, want 2: the final commit (the two rows finished before the black hole) did not go out", off)
	}
}
