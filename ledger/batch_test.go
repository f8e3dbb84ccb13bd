package ledger

import (
	"context"
	"errors"
	"testing"

	"github.com/bulkreg/bulkreg/internal/testredis"
)

// TestClaimNDecidesInOrder: a batch of claims is decided as Claim one after
// the other: the first row of a SKU claims it, a second row of the same SKU
// waits, a SKU registered before answers Done, and a request the ledger
// cannot store gets its error without keeping the others from Redis.
func TestClaimNDecidesInOrder(t *testing.T) {
	rdb := testredis.Start(t).Client()
	l := New(rdb, Options{})
	ctx := context.Background()
	if _, err := l.Claim(ctx, "s", "done", "u0:1", "h", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Mark(ctx, "s", "done", "u0:1", "h", "P-1"); err != nil {
		t.Fatal(err)
	}
	got, err := l.ClaimN(ctx, "s", []ClaimRequest{
		{SKU: "a", Row: "u1:1", Hash: "h", From: "t/0/1"},
		{SKU: "a", Row: "u1:2", Hash: "h", From: "t/0/2"},
		{SKU: "", Row: "u1:3", Hash: "h"},
		{SKU: "done", Row: "u1:4", Hash: "h"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Verdict{Call, Wait, 0, Done}
	for i, g := range got {
		if i == 2 {
			if !errors.Is(g.Err, ErrInvalid) {
				t.Errorf("claim 2 (empty SKU): error %v, want ErrInvalid", g.Err)
			}
			continue
		}
		if g.Err != nil || g.Verdict != want[i] {
			t.Errorf("claim %d = %v (%v), want %v", i, g.Verdict, g.Err, want[i])
		}
	}
	if got[0].CallKey != "u1:1" || got[3].Entry.ProductID != "P-1" {
		t.Errorf("the first claim calls with %q, the registered SKU is %q; want u1:1 and P-1", got[0].CallKey, got[3].Entry.ProductID)
	}
	// The second row's claim waits until the first row's lease ends; the
	// first row claims again (a renewal) in the next batch.
	again, err := l.ClaimN(ctx, "s", []ClaimRequest{{SKU: "a", Row: "u1:1", Hash: "h"}})
	if err != nil || again[0].Verdict != Call {
		t.Errorf("the claimer's renewal = %+v (%v), want call", again, err)
	}
}
