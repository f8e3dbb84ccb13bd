package upload

import (
	"context"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/circuit/circuittest"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// tripSettings open the circuit after five failing rows of one seller.
// recoverCircuit closes the circuit with a successful probe.
func recoverCircuit(t *testing.T, b *circuit.Breaker) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Second)
	for {
		d, err := b.Allow(ctx)
		if err == nil && d.Probe {
			if _, err := b.Report(ctx, d, circuit.Call{Seller: "s", Row: "u:probe", Outcome: circuit.Success}); err != nil {
				t.Fatal(err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no probe given within 2 s: %+v, %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestView(t *testing.T) {
	srv := testredis.Start(t)
	b, err := circuit.New(srv.Client(), circuittest.Settings())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waiting := uploadstatus.Status{Upload: uploadstatus.Upload{Total: 10}, Registered: 4, Waiting: 6}
	done := uploadstatus.Status{Upload: uploadstatus.Upload{Total: 10}, Registered: 9, Failed: 1}

	for _, tc := range []struct {
		name         string
		prepare      func()
		st           uploadstatus.Status
		m            Marketplace
		market, note string
	}{
		{"no circuit configured", func() {}, waiting, nil, "", ""},
		{"closed", func() {}, waiting, b, MarketplaceAnswering, ""},
		{"open, rows waiting", func() { circuittest.Trip(t, b) }, waiting, b, MarketplaceNotAnswering, NotAnswering},
		{"open, nothing left to wait for", func() {}, done, b, MarketplaceNotAnswering, ""},
		{"closed again after a probe", func() { recoverCircuit(t, b) }, waiting, b, MarketplaceAnswering, ""},
		{"Redis down: unknown, the status still shown", func() { srv.Stop() }, waiting, b, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.prepare()
			v := View(ctx, tc.st, tc.m)
			if v.Marketplace != tc.market || v.Notice != tc.note || v.Waiting != tc.st.Waiting || v.Failed != tc.st.Failed {
				t.Errorf("view: marketplace %q, notice %q, %d waiting, %d failed; want %q, %q, %d, %d",
					v.Marketplace, v.Notice, v.Waiting, v.Failed, tc.market, tc.note, tc.st.Waiting, tc.st.Failed)
			}
		})
	}
}

// readings answers a scripted sequence of seller readings, the circuit
// closed.
type readings struct {
	seq []circuit.SellerCalls
}

func (r *readings) Peek(context.Context) (circuit.Status, error) {
	return circuit.Status{State: circuit.Closed}, nil
}

func (r *readings) Seller(context.Context, string) (circuit.SellerCalls, error) {
	c := r.seq[0]
	r.seq = r.seq[1:]
	return c, nil
}

// TestViewOfASellersCalls: with the circuit closed, a seller's page says
// the marketplace is failing its rows when its last calls failed, says an
// outage when other sellers' last calls fail too (before the circuit opens
// for them, and never "failing" first), and says nothing once a call of
// the seller is answered. A streak quiet for a whole hold (HoldFailing)
// belongs to rows that are gone; the others' silence says the failing is
// the seller's own only once the streak lasted a hold.
func TestViewOfASellersCalls(t *testing.T) {
	const hold = 61 * time.Second
	now := time.Now()
	st := uploadstatus.Status{Upload: uploadstatus.Upload{SellerID: "s", Total: 10}, Waiting: 6}
	finished := uploadstatus.Status{Upload: uploadstatus.Upload{SellerID: "s", Total: 10}, Registered: 10}
	// a streak of n failures that began a hold before its last, quiet ago
	streak := func(n int, quiet time.Duration) circuit.SellerCalls {
		return circuit.SellerCalls{Failures: n, Streak: n, FirstFailure: now.Add(-quiet - hold), LastFailure: now.Add(-quiet), Now: now}
	}
	young := streak(3, 0)
	young.FirstFailure = now.Add(-hold / 2)
	with := func(c circuit.SellerCalls, failing, answered, calling int) circuit.SellerCalls {
		c.OthersFailing, c.OthersAnswered, c.OthersCalling = failing, answered, calling
		return c
	}
	for _, tc := range []struct {
		name         string
		st           uploadstatus.Status
		got          circuit.SellerCalls
		market, note string
	}{
		{"nothing failed", st, circuit.SellerCalls{Answered: 9, Now: now}, MarketplaceAnswering, ""},
		{"three failures in a row, nobody else calling for a hold", st, streak(3, 0), MarketplaceFailing, Failing},
		{"nobody else calling for less than a hold: others may be between their bursts", st, young, MarketplaceAnswering, ""},
		{"a young streak, another seller answered since", st, with(young, 0, 1, 1), MarketplaceFailing, Failing},
		{"a young streak, others fail with it: an outage", st, with(young, 1, 0, 1), MarketplaceNotAnswering, NotAnswering},
		{"three failures in a row, another seller answered since", st, with(streak(3, 0), 0, 1, 1), MarketplaceFailing, Failing},
		{"others call but have not answered or failed since: not yet told", st, with(streak(3, 0), 0, 0, 2), MarketplaceAnswering, ""},
		{"two failures in a row are not yet failing", st, streak(2, 0), MarketplaceAnswering, ""},
		{"a streak among many answers: random errors", st, circuit.SellerCalls{Failures: 3, Answered: 30, Streak: 3, LastFailure: now, Now: now}, MarketplaceAnswering, ""},
		{"answered again: the streak ended, the window's failures stay", st, circuit.SellerCalls{Failures: 40, Answered: 1, Now: now}, MarketplaceAnswering, ""},
		{"between bursts: the window empty, the streak kept", st, circuit.SellerCalls{Streak: 40, LastFailure: now.Add(-50 * time.Second), Now: now}, MarketplaceFailing, Failing},
		{"a streak quiet for a whole hold", st, streak(40, hold), MarketplaceAnswering, ""},
		{"others fail with it, nobody answered: an outage, not its own", st, with(streak(3, 0), 1, 0, 1), MarketplaceNotAnswering, NotAnswering},
		{"one other fails, another is answered: its own", st, with(streak(3, 0), 1, 1, 2), MarketplaceFailing, Failing},
		{"no row waits", finished, streak(3, 0), MarketplaceAnswering, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := HoldFailing(&readings{seq: []circuit.SellerCalls{tc.got}}, hold)
			if v := View(context.Background(), tc.st, m); v.Marketplace != tc.market || v.Notice != tc.note {
				t.Errorf("reading %+v: marketplace %q, notice %q; want %q, %q", tc.got, v.Marketplace, v.Notice, tc.market, tc.note)
			}
		})
	}
	if m := HoldFailing(nil, hold); m != nil {
		t.Errorf("HoldFailing(nil) = %v, want nil", m)
	}
}
