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
