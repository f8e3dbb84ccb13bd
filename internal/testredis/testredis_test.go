package testredis

import (
	"context"
	"fmt"
	"testing"
)

func TestServerStopRestart(t *testing.T) {
	ctx := context.Background()
	s := Start(t)
	c := s.Client()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded on a stopped server")
	}
	s.Restart()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after restart: %v", err)
	}
	if n, _ := c.Exists(ctx, "k").Result(); n != 0 {
		t.Errorf("restarted server kept data; tests rely on an empty dataset")
	}
}

func TestClusterSpreadsKeys(t *testing.T) {
	ctx := context.Background()
	cl := StartCluster(t, 3)
	c := cl.Client()
	for i := range 50 {
		if err := c.Set(ctx, fmt.Sprintf("key-%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	used := 0
	for _, n := range cl.Nodes {
		if size, err := n.Client().DBSize(ctx).Result(); err == nil && size > 0 {
			used++
		}
	}
	if used != 3 {
		t.Errorf("50 keys landed on %d of 3 masters; the cluster is not sharding", used)
	}
}

// TestMigrateSlot: a slot moved with MigrateSlot takes its keys along, and
// the cluster client finds them on the new master.
func TestMigrateSlot(t *testing.T) {
	ctx := context.Background()
	cl := StartCluster(t, 3)
	c := cl.Client()
	for i := range 25 {
		if err := c.Set(ctx, fmt.Sprintf("{busy}:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	slot := int(c.ClusterKeySlot(ctx, "{busy}").Val())
	from, err := cl.Owner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	to := cl.Nodes[0]
	if to == from {
		to = cl.Nodes[1]
	}
	n, err := cl.MigrateSlot(ctx, slot, to, MigrateOptions{Batch: 7})
	if err != nil || n != 25 {
		t.Fatalf("MigrateSlot = %d, %v, want 25 keys moved", n, err)
	}
	if owner, err := cl.Owner(ctx, slot); err != nil || owner != to {
		t.Fatalf("slot %d served by %v (%v) after the move, want %s", slot, owner, err, to.Addr)
	}
	if size := from.Client().DBSize(ctx).Val(); size != 0 {
		t.Errorf("the old master keeps %d keys", size)
	}
	for i := range 25 {
		if v, err := c.Get(ctx, fmt.Sprintf("{busy}:%d", i)).Int(); err != nil || v != i {
			t.Errorf("key %d after the move = %d, %v", i, v, err)
		}
	}
}
