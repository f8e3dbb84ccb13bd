package compliance

import (
	"context"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/throttle"
)

// TestReportSaysWhatItCannotVouchFor: after Redis lost its data the report
// names the period its history does not cover, per seller and for the list
// of sellers, instead of claiming compliance for it; a Redis that only
// changed process (a restart from disk, a failover) may miss the last
// writes, and says so too.
func TestReportSaysWhatItCannotVouchFor(t *testing.T) {
	ctx := context.Background()
	srv := testredis.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	rdb := srv.Client()
	if _, err := throttle.Initialize(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	th, err := throttle.New(rdb, throttle.Policy{Limit: 10, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(rdb, time.Hour)
	call := func(seller string) {
		t.Helper()
		r, err := th.Reserve(ctx, seller) // as a consumer does before each call
		if err != nil || !r.Admitted {
			t.Fatalf("reserve for %s: %+v, %v", seller, r, err)
		}
		if err := rec.Record(ctx, seller, Call{At: r.At, Status: 201, Class: "registered", Key: seller + ":1"}); err != nil {
			t.Fatal(err)
		}
	}
	report := func() Report {
		t.Helper()
		rep, err := rec.Report(ctx, throttle.Policy{Limit: 10, Window: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}

	call("a")
	if rep := report(); !rep.Complete || rep.SellersUncovered != nil || rep.Sellers[0].Uncovered != nil {
		t.Fatalf("report on an initialised Redis = %+v, want complete", rep)
	}

	// A restart from the append-only file: the same data, another process.
	srv.Restart()
	waitRedis(t, func() error { return rdb.Ping(ctx).Err() })
	call("a")
	rep := report()
	g := rep.Sellers[0].Uncovered
	if rep.Complete || g == nil || g.Cause != throttle.CauseNewServer || !g.From.Equal(rep.At.Add(-time.Hour)) || !g.To.After(g.From) {
		t.Errorf("report after a restart from disk = %+v, uncovered %+v; want seller a uncovered (new-server) from the period's start", rep, g)
	}

	// FLUSHALL (as a restart without persistence): everything is gone.
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if rep := report(); len(rep.Sellers) != 0 || rep.Complete || rep.SellersUncovered == nil || rep.SellersUncovered.Cause != CauseUnknown {
		t.Errorf("report right after the loss = %+v, want no sellers and the list of sellers not covered (no marker)", rep)
	}
	call("a") // the same recorder: a history that is new again lists its seller at once
	call("b")
	rep = report()
	for _, s := range rep.Sellers {
		if g := s.Uncovered; g == nil || g.Cause != throttle.CauseMissing || !g.To.After(rep.At.Add(-time.Minute)) || g.Reason == "" {
			t.Errorf("seller %s after the loss: uncovered %+v, want missing until the moment it was found", s.Seller, g)
		}
	}
	if len(rep.Sellers) != 2 || rep.Complete {
		t.Errorf("report after the loss = %+v, want sellers a and b, not complete", rep)
	}
}

func waitRedis(t *testing.T, ping func() error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for ping() != nil {
		if time.Now().After(deadline) {
			t.Fatal("Redis did not answer within 5 s of its restart")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
