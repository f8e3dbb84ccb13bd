package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

var testQuota = quota{Limit: 100, Window: 60*time.Second + 250*time.Millisecond}

// fixed is an autoscaler pinned at n replicas.
func fixed(n int) autoscaler {
	return autoscaler{Min: n, Max: n, Threshold: 1000, PollingInterval: 15 * time.Second, DownWindow: 120 * time.Second, DownPods: math.MaxInt32, DownPeriod: 15 * time.Second, Tolerance: 0.1}
}

// TestQuotaHolds checks the model keeps the API's contract and its pace:
// no seller gets more than the limit in any trailing window, and 500 rows
// take at least four windows after the first call (the throttle's lower
// bound) but not much more when the consumers have room.
func TestQuotaHolds(t *testing.T) {
	uploads := burst(1, 50, 500, 20, 100, 30*time.Second)
	f := fleet{Partitions: 12, CallsPerSecond: 256, StartDelay: 10 * time.Second, RebalancePause: 3 * time.Second}
	for _, sig := range []signal{lagSignal, sendableSignal} {
		// A fixed fleet: a rebalance would pause the sellers and move the
		// bound by its length.
		a := fixed(2)
		o := simulate(testQuota, a, f, uploads, sig, 100*time.Millisecond, time.Hour)
		if o.Left != 0 {
			t.Fatalf("%s: %d rows left", sig, o.Left)
		}
		for seller, calls := range o.Calls {
			for i := testQuota.Limit; i < len(calls); i++ {
				if gap := calls[i] - calls[i-testQuota.Limit]; gap < testQuota.Window.Seconds()-1e-9 {
					t.Fatalf("%s: %s made %d calls within %.2f s", sig, seller, testQuota.Limit+1, gap)
				}
			}
		}
		big := o.Calls["seller-000"]
		if len(big) != 500 {
			t.Fatalf("%s: seller-000 made %d calls, want 500", sig, len(big))
		}
		span, bound := big[len(big)-1]-big[0], 4*testQuota.Window.Seconds()
		if span < bound || span > bound+1 {
			t.Fatalf("%s: 500 rows took %.1f s after the first call; the lower bound is %.1f s", sig, span, bound)
		}
	}
}

// TestSignals checks both signals on a burst small enough to count by hand:
// one partition, A's 250 rows published before B's 50.
func TestSignals(t *testing.T) {
	uploads := []upload{{Seller: "a", Rows: 250, At: 0}, {Seller: "b", Rows: 50, At: time.Second}}
	f := fleet{Partitions: 1, CallsPerSecond: 1000, StartDelay: time.Second}
	for _, tc := range []struct {
		sig  signal
		want float64
	}{
		// A sent its first 100, B all 50: the commit point stays at A's
		// 101st row, so B's finished rows still count as lag.
		{lagSignal, 250 + 50 - 100},
		// A may send 100 more within a window, B nothing.
		{sendableSignal, 100},
	} {
		o := simulate(testQuota, fixed(1), f, uploads, tc.sig, 100*time.Millisecond, time.Hour)
		if got := o.Timeline[1].Signal; o.Timeline[1].T != 15 || got != tc.want {
			t.Errorf("%s at %.0f s = %v, want %v at 15 s", tc.sig, o.Timeline[1].T, got, tc.want)
		}
	}
}

// TestPartitionOfMatchesProducer: the model puts a seller's rows on the
// partition the producer's balancer (kafka-go's Hash) does.
func TestPartitionOfMatchesProducer(t *testing.T) {
	partitions := make([]int, 12)
	for i := range partitions {
		partitions[i] = i
	}
	for _, u := range burst(7, 200, 500, 20, 100, time.Minute) {
		want := (&kafka.Hash{}).Balance(kafka.Message{Key: []byte(u.Seller)}, partitions...)
		if got := partitionOf(u.Seller, 12); got != want {
			t.Fatalf("%s: partition %d, kafka-go says %d", u.Seller, got, want)
		}
	}
}

// TestRangeOf: every partition has exactly one owner, and owners differ by
// at most one partition, for every group size up to the partition count.
func TestRangeOf(t *testing.T) {
	for n := 1; n <= 12; n++ {
		owners := make([]int, 12)
		sizes := map[int]bool{}
		for m := range n {
			lo, hi := rangeOf(m, n, 12)
			sizes[hi-lo] = true
			for p := lo; p < hi; p++ {
				owners[p]++
			}
		}
		for p, c := range owners {
			if c != 1 {
				t.Fatalf("%d members: partition %d has %d owners", n, p, c)
			}
		}
		if len(sizes) > 2 {
			t.Fatalf("%d members: shares of %v partitions", n, sizes)
		}
	}
}

// TestShippedScalerSavesConsumers replays the scenarios docs/production.md quotes through the
// shipped ScaledObject: the backlog rule never uses more consumer-minutes
// than the lag rule, finishes at the same time, and uses fewer where the
// rules differ (the consumers are the bottleneck, or large uploads wait for
// their quota).
func TestShippedScalerSavesConsumers(t *testing.T) {
	s, err := load(filepath.Join("..", productionOverlay))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range compareAll(s, 500*time.Millisecond, s.conns, 1, 10*time.Second, 3*time.Second) {
		t.Logf("%s: lag rule %.1f consumer-minutes (peak %d), backlog rule %.1f (peak %d), finish %.1f s / %.1f s",
			c.Name, c.Lag.ConsumerMinutes, c.Lag.PeakReplicas, c.Backlog.ConsumerMinutes, c.Backlog.PeakReplicas, c.Lag.FinishS, c.Backlog.FinishS)
		if c.Lag.Left+c.Backlog.Left != 0 {
			t.Fatalf("%s: rows left", c.Name)
		}
		if math.Abs(c.FinishDeltaS) > 1 {
			t.Errorf("%s: the backlog rule finished %.1f s after the lag rule", c.Name, c.FinishDeltaS)
		}
		if c.SavedConsumerMinutes < 0 {
			t.Errorf("%s: the backlog rule used %.1f more consumer-minutes", c.Name, -c.SavedConsumerMinutes)
		}
		if c.Name != "issue-burst" && c.SavedConsumerMinutes <= 0 {
			t.Errorf("%s: the backlog rule saved nothing", c.Name)
		}
	}
}

// TestShippedOverlayFromTheModule: run without -overlay inside the deploy
// module (go test runs in deploy/scaling), the model replays the
// production overlay beside it.
func TestShippedOverlayFromTheModule(t *testing.T) {
	got, err := shippedOverlay()
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Abs(filepath.Join("..", productionOverlay))
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("shippedOverlay() = %s, want %s", got, want)
	}
	if _, err := os.Stat(filepath.Join(got, "kustomization.yaml")); err != nil {
		t.Error(err)
	}
}
