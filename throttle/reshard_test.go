package throttle

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

// TestAReshardIsNotALoss: a live Redis Cluster reshard moves a busy seller's
// hash slot, its marker and log included, to another master three times
// while a throttle reserves for the seller every 20 ms. A migration moves
// every key whole, so nothing was lost: no reservation reports a loss or
// waits for a hold, the epoch stays, a slot granted before the last move
// still checks good after it, and the marker records the move.
func TestAReshardIsNotALoss(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	rdb := c.Client()
	ctx := context.Background()
	th := newThrottle(t, rdb, Policy{Limit: 200, Window: 2 * time.Second, Margin: 20 * time.Millisecond, MaxWait: 5 * time.Second})
	s := seller("reshard")
	first := reserve(t, th, s)
	if first.Lost || first.Epoch == "" {
		t.Fatalf("first reservation %+v, want an epoch and nothing lost", first)
	}
	slot := KeySlot(sellerPrefix(s))
	// Other keys of the slot, so the move takes a while and the
	// reservations meet it half done (ASK, TRYAGAIN).
	for i := range 20 {
		if err := rdb.Set(ctx, sellerPrefix(s)+"filler:"+strings.Repeat("x", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	var reserved, lost, held, failed int
	epochs := map[string]int{}
	var last Reservation
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			r, err := th.Reserve(ctx, s)
			mu.Lock()
			switch {
			case err != nil:
				failed++
			default:
				reserved++
				epochs[r.Epoch]++
				if r.Lost {
					lost++
				}
				if !r.HeldUntil.IsZero() {
					held++
				}
				last = r
			}
			mu.Unlock()
		}
	}()

	const moves = 3
	var before Reservation
	for i := range moves {
		from, err := c.Owner(ctx, slot)
		if err != nil {
			t.Fatal(err)
		}
		to := c.Nodes[(indexOf(c.Nodes, from)+1)%len(c.Nodes)]
		mu.Lock()
		before = last
		mu.Unlock()
		n, err := c.MigrateSlot(ctx, slot, to, testredis.MigrateOptions{Batch: 2, Pause: 50 * time.Millisecond})
		if err != nil {
			t.Fatalf("move %d of slot %d: %v", i+1, slot, err)
		}
		if n < 22 {
			t.Errorf("move %d moved %d keys, want the marker, the log and 20 others", i+1, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	<-done

	t.Logf("%d moves: %d reservations, %d lost, %d held, %d failed (TRYAGAIN while the slot was half moved), epochs %v", moves, reserved, lost, held, failed, epochs)
	if lost != 0 || held != 0 {
		t.Errorf("%d reservations reported a loss and %d waited for a hold over %d moves of the slot; want 0 and 0 (a reshard loses nothing)", lost, held, moves)
	}
	if len(epochs) != 1 || epochs[first.Epoch] == 0 {
		t.Errorf("epochs over the moves %v, want only the first's %s", epochs, first.Epoch)
	}
	if reserved < 10 {
		t.Errorf("only %d reservations answered around the moves, want the seller served between them", reserved)
	}
	if chk, err := th.Check(ctx, before); err != nil || !chk.Good || chk.Epoch != first.Epoch {
		t.Errorf("Check of a slot granted before the last move = %+v, %v; want good in epoch %s", chk, err, first.Epoch)
	}
	mk, err := th.markers.Read(ctx, rdb, sellerPrefix(s)+"log")
	if err != nil || !mk[0].Found || mk[0].Cause != CauseInit || mk[0].Moved.IsZero() || mk[0].Node == "" {
		t.Errorf("marker after the moves = %+v, %v; want cause init, its move recorded, its node named", mk, err)
	}
	owner, err := c.Owner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	if id := owner.Client().ClusterMyID(ctx).Val(); err == nil && mk[0].Node != id {
		t.Errorf("the marker names node %s, the slot's master is %s", mk[0].Node, id)
	}
}

func indexOf(nodes []*testredis.Server, n *testredis.Server) int {
	for i, m := range nodes {
		if m == n {
			return i
		}
	}
	return -1
}

// TestAClusterNodeRestartedFromDiskIsALoss: a Cluster master restarted
// from its append-only file keeps its node id and its markers but may miss
// the last writes: a loss, as on a single Redis.
func TestAClusterNodeRestartedFromDiskIsALoss(t *testing.T) {
	t.Parallel()
	c := testredis.StartCluster(t, 3, "--appendonly", "yes", "--appendfsync", "always")
	rdb := c.Client()
	ctx := context.Background()
	if _, err := Initialize(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	th := newThrottle(t, rdb, Policy{Limit: 5, Window: time.Second, Margin: 20 * time.Millisecond})
	s := seller("aof")
	before := reserve(t, th, s)
	owner, err := c.Owner(ctx, KeySlot(sellerPrefix(s)))
	if err != nil {
		t.Fatal(err)
	}
	owner.Restart()
	var after Reservation
	testwait.For(t, 15*time.Second, "Reserve answered after the restart", func() bool {
		after, err = th.Reserve(ctx, s)
		return err == nil
	})
	if !after.Lost || after.Epoch == before.Epoch {
		t.Errorf("the reservation after a restart from disk = %+v; want Lost and a new epoch (was %s)", after, before.Epoch)
	}
	mk, err := th.markers.Read(ctx, rdb, sellerPrefix(s)+"log")
	if err != nil || mk[0].Cause != CauseNewServer || !mk[0].Moved.IsZero() {
		t.Errorf("marker after the restart = %+v, %v; want cause %q, not moved", mk, err, CauseNewServer)
	}
}

// TestAClusterFailoverIsALoss: a replica promoted in place of its master
// (CLUSTER FAILOVER) holds the marker the master wrote; it is a failover,
// which may miss the last writes, not a move: a loss.
func TestAClusterFailoverIsALoss(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	rdb := c.Client()
	ctx := context.Background()
	th := newThrottle(t, rdb, Policy{Limit: 5, Window: time.Second, Margin: 20 * time.Millisecond})
	s := seller("failover")
	before := reserve(t, th, s)
	owner, err := c.Owner(ctx, KeySlot(sellerPrefix(s)))
	if err != nil {
		t.Fatal(err)
	}
	replica := c.AddReplica(ctx, owner)
	rc := replica.Client()
	if err := rc.Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER: %v", err)
	}
	testwait.For(t, 15*time.Second, "the replica promoted", func() bool {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:master")
	})
	var after Reservation
	testwait.For(t, 15*time.Second, "Reserve answered after the failover", func() bool {
		after, err = th.Reserve(ctx, s)
		return err == nil
	})
	if !after.Lost || after.Epoch == before.Epoch {
		t.Errorf("the reservation after a failover = %+v; want Lost and a new epoch (was %s)", after, before.Epoch)
	}
}

// TestAReshardBeforeAnyReservationIsNotALoss: a hash slot moved before any
// reservation in it since Initialize carries the marker Initialize wrote,
// which names its node too: the first reservation after the move finds no
// loss and no hold.
func TestAReshardBeforeAnyReservationIsNotALoss(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	rdb := c.Client()
	ctx := context.Background()
	th := newThrottle(t, rdb, Policy{Limit: 5, Window: time.Second, Margin: 20 * time.Millisecond})
	s := seller("untouched")
	slot := KeySlot(sellerPrefix(s))
	from, err := c.Owner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	to := c.Nodes[(indexOf(c.Nodes, from)+1)%len(c.Nodes)]
	if n, err := c.MigrateSlot(ctx, slot, to, testredis.MigrateOptions{}); err != nil || n != 1 {
		t.Fatalf("MigrateSlot = %d, %v; want the marker alone moved", n, err)
	}
	r := reserve(t, th, s)
	if r.Lost || !r.HeldUntil.IsZero() || !strings.HasSuffix(r.Epoch, "-init") {
		t.Errorf("the first reservation after the move = %+v; want no loss, no hold, the epoch Initialize began", r)
	}
}
