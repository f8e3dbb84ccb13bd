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

// readings answers a scripted sequence of seller readings.
type readings struct {
	Marketplace
	seq []circuit.SellerCalls
}

func (r *readings) Seller(context.Context, string) (circuit.SellerCalls, error) {
	c := r.seq[0]
	r.seq = r.seq[1:]
	return c, nil
}

// TestRememberFailing: a seller failing at its limit calls in bursts a
// limit window apart, and the circuit's window is empty between them; the
// failing verdict holds through such a gap, and leaves when an answered
// call comes or when nothing failed for a whole hold.
func TestRememberFailing(t *testing.T) {
	const hold = 61 * time.Second
	failing := circuit.SellerCalls{Failures: 40}
	none := circuit.SellerCalls{}
	answered := circuit.SellerCalls{Failures: 1, Answered: 5}
	few := circuit.SellerCalls{Failures: 2}
	type read struct {
		after time.Duration // since the run's start
		got   circuit.SellerCalls
		want  bool // the reading answered is failing
	}
	for _, tc := range []struct {
		name  string
		reads []read
	}{
		{"failing, then the gap between bursts, then the next burst", []read{
			{0, failing, true}, {20 * time.Second, none, true}, {55 * time.Second, few, true}, {61 * time.Second, failing, true}}},
		{"answered again: the verdict leaves at once", []read{
			{0, failing, true}, {5 * time.Second, answered, false}, {10 * time.Second, none, false}}},
		{"nothing failed for a whole hold", []read{
			{0, failing, true}, {hold - time.Second, none, true}, {hold, none, false}, {hold + time.Second, few, false}}},
		{"never failing: readings as they are", []read{
			{0, none, false}, {time.Second, few, false}, {2 * time.Second, answered, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &readings{}
			for _, r := range tc.reads {
				src.seq = append(src.seq, r.got)
			}
			m := RememberFailing(src, hold).(*rememberFailing)
			start := time.Now()
			for i, r := range tc.reads {
				m.now = func() time.Time { return start.Add(r.after) }
				c, err := m.Seller(context.Background(), "s")
				if err != nil {
					t.Fatal(err)
				}
				if c.Failing() != r.want {
					t.Errorf("read %d at +%v (window: %+v): answered %+v, failing %v; want failing %v", i, r.after, r.got, c, c.Failing(), r.want)
				}
			}
		})
	}
	if m := RememberFailing(nil, hold); m != nil {
		t.Errorf("RememberFailing(nil) = %v, want nil", m)
	}
}
