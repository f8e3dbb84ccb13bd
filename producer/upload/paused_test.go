package upload

import (
	"context"
	"testing"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/circuit/circuittest"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// TestPausedView: while the consumers' circuit is held
// open because the API refused bulkreg itself, the seller reads that
// registration is paused (not that the marketplace is down, not that rows
// failed), and the page says answering again once a probe closes it.
func TestPausedView(t *testing.T) {
	b, err := circuit.New(testredis.Start(t).Client(), circuittest.Settings())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waiting := uploadstatus.Status{Upload: uploadstatus.Upload{Total: 10}, Registered: 4, Waiting: 6}
	d, err := b.Allow(ctx)
	if err != nil || !d.Allowed {
		t.Fatalf("Allow: %+v, %v", d, err)
	}
	if _, err := b.Report(ctx, d, circuit.Call{Seller: "s", Row: "u:1", Outcome: circuit.Refused}); err != nil {
		t.Fatal(err)
	}
	v := View(ctx, waiting, b)
	if v.Marketplace != MarketplaceMisconfigured || v.Notice != Paused || v.Failed != 0 || v.Waiting != 6 {
		t.Errorf("held open for a 401: marketplace %q, notice %q, %d failed, %d waiting; want %q, %q, 0, 6",
			v.Marketplace, v.Notice, v.Failed, v.Waiting, MarketplaceMisconfigured, Paused)
	}
	done := uploadstatus.Status{Upload: uploadstatus.Upload{Total: 10}, Registered: 10}
	if v := View(ctx, done, b); v.Marketplace != MarketplaceMisconfigured || v.Notice != "" {
		t.Errorf("nothing left to wait for: marketplace %q, notice %q; want %q and no notice", v.Marketplace, v.Notice, MarketplaceMisconfigured)
	}
	recoverCircuit(t, b)
	if v := View(ctx, waiting, b); v.Marketplace != MarketplaceAnswering || v.Notice != "" {
		t.Errorf("after a probe registered: marketplace %q, notice %q; want answering, none", v.Marketplace, v.Notice)
	}
	circuittest.Trip(t, b)
	if v := View(ctx, waiting, b); v.Marketplace != MarketplaceNotAnswering || v.Notice != NotAnswering {
		t.Errorf("an outage: marketplace %q, notice %q; want the outage's", v.Marketplace, v.Notice)
	}
}
