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
