package uploadstatus

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
)

// TestPublishedRows: the rows marked published read back exactly, across
// byte boundaries, and marking is the heartbeat of a publishing upload only.
func TestPublishedRows(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	s := New(rdb, time.Hour)
	if rows, err := s.PublishedRows(ctx, "none"); err != nil || rows != nil {
		t.Errorf("rows of an unknown upload: %v %v", rows, err)
	}
	if _, err := s.Create(ctx, newUpload("p", 600)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mark []int
		want []int
	}{
		{[]int{2}, []int{2}},
		{[]int{7, 8, 9}, []int{2, 7, 8, 9}},
		{[]int{501, 2, 15, 16}, []int{2, 7, 8, 9, 15, 16, 501}},
	} {
		before := rdb.HGet(ctx, key("p", "meta"), "state_at").Val()
		time.Sleep(2 * time.Millisecond)
		n, err := s.MarkPublished(ctx, "p", c.mark)
		if err != nil || n != len(c.want) {
			t.Fatalf("MarkPublished(%v) = %d %v, want %d", c.mark, n, err, len(c.want))
		}
		if got, err := s.PublishedRows(ctx, "p"); err != nil || !slices.Equal(got, c.want) {
			t.Errorf("after marking %v: rows %v %v, want %v", c.mark, got, err, c.want)
		}
		if after := rdb.HGet(ctx, key("p", "meta"), "state_at").Val(); after == before {
			t.Errorf("marking %v did not move a publishing upload's state time", c.mark)
		}
		if ttl := rdb.PTTL(ctx, key("p", "published")).Val(); ttl <= 0 || ttl > time.Hour {
			t.Errorf("the published rows expire in %v, want within the retention", ttl)
		}
	}
	if err := s.SetState(ctx, "p", Published, ""); err != nil {
		t.Fatal(err)
	}
	before := rdb.HGet(ctx, key("p", "meta"), "state_at").Val()
	time.Sleep(2 * time.Millisecond)
	if _, err := s.MarkPublished(ctx, "p", []int{3}); err != nil {
		t.Fatal(err)
	}
	if after := rdb.HGet(ctx, key("p", "meta"), "state_at").Val(); after != before {
		t.Error("marking rows of a published upload moved its state time")
	}
	// A published upload is never taken over, however old its state.
	if ok, found, err := s.BeginPublish(ctx, "p", time.Millisecond); ok || found != Published || err != nil {
		t.Errorf("BeginPublish of a published upload past the stale age = %v %q %v, want refused", ok, found, err)
	}
}
