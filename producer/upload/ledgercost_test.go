package upload

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/ledger"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// knownLedger answers every SKU asked as registered with the hash given.
type knownLedger struct{ hash func(sku string) string }

func (l knownLedger) Lookup(_ context.Context, _ string, skus []string) (map[string]ledger.Entry, error) {
	out := make(map[string]ledger.Entry, len(skus))
	for i, sku := range skus {
		out[sku] = ledger.Entry{State: ledger.Registered, Hash: l.hash(sku), Row: fmt.Sprintf("0000000000000001:%d", i+2), ProductID: "P-" + sku}
	}
	return out, nil
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A re-upload of a file whose every row the ledger knows with the same
// content costs one content hash a row: the text as typed (AsTyped) and the
// NFD form are built only for a row whose hash differs. The file is 7.9 MiB
// of text that takes the normalizer's slow path (A and U+030A, composing to
// Å): normalising it again would cost much of the upload's CPU ceiling and
// 8 MiB of copies.
// Allocations (a figure the load of the machine does not change) and CPU
// time are asserted.
func TestLedgerOfAKnownFileDoesNotNormaliseAgain(t *testing.T) {
	sheet := composableFile(t)
	bySKU := map[string]string{}
	for _, r := range sheet.Rows {
		bySKU[r.Product.SellerSKU] = r.Product.ContentHash()
	}
	u := &Uploader{Ledger: knownLedger{hash: func(sku string) string { return bySKU[sku] }}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c0 := processCPU()
	known, err := u.checkLedger(context.Background(), "up-1", "seller-1", sheet)
	c1 := processCPU()
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("checkLedger of %d known rows: %v CPU, %d KiB allocated", len(known), c1-c0, alloc>>10)
	if len(known) != 500 {
		t.Fatalf("%d rows known, want 500", len(known))
	}
	for _, r := range sheet.Rows {
		if !r.Valid() || known[r.Number].State != uploadstatus.AlreadyRegistered {
			t.Fatalf("row %d: %v, %+v; want it already registered", r.Number, r.Problems, known[r.Number])
		}
	}
	// One hash a row allocates about 6.5 MiB here (each row's JSON grown
	// to 16 KiB); normalising again would add 8 MiB of copies and a second
	// hash.
	if alloc > 10<<20 {
		t.Errorf("checkLedger allocated %d KiB, want at most 10 MiB (one hash a row, no copy of the text)", alloc>>10)
	}
	// CPU time, not wall time, with a wide margin over what it costs;
	// normalising again would cost more than the bound.
	// The process's CPU, the garbage collector's and other tests' with it:
	// the bound sits between what the budget lets it spend and what
	// decomposing every row costs, about twice as much.
	if c1-c0 > 450*time.Millisecond {
		t.Errorf("checkLedger took %v of CPU, want at most 450 ms", c1-c0)
	}
}

// composableFile is 500 valid rows, 7.9 MiB of text that takes the
// normalizer's slow path (A and U+030A, composing to Å).
func composableFile(t *testing.T) *excel.Sheet {
	t.Helper()
	unit := "A\u030a"
	var b strings.Builder
	b.WriteString("seller_sku,name,category_code,price,stock,brand,image_url,description,shipping_fee\n")
	per := 79 * (1 << 20) / 10 / 500
	for i := range 500 {
		sku := fmt.Sprintf("S%d-%s", i, strings.Repeat(unit, 20))
		name, brand := strings.Repeat(unit, 60), strings.Repeat(unit, 30)
		desc := strings.Repeat(unit, (per-len(sku)-len(name)-len(brand)-60)/len(unit))
		fmt.Fprintf(&b, "%s,%s,CAT-1,1000,1,%s,,%s,0\n", sku, name, brand, desc)
	}
	sheet, err := excel.NewParser(excel.Options{}).ParseBytes(context.Background(), []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if sheet.Valid() != 500 {
		t.Fatalf("%d valid rows, want 500", sheet.Valid())
	}
	return sheet
}

// A re-upload of the same 7.9 MiB of composable text whose every row the
// ledger holds with other content: each row's hash differs, so its text as
// typed and its NFD form are compared too. Decomposing all of it, on top
// of the parse, would go past the ceiling. The upload decomposes at most
// nfdBudget bytes; every row is still other content.
func TestLedgerOfAChangedFileDecomposesWithinItsBudget(t *testing.T) {
	sheet := composableFile(t)
	u := &Uploader{Ledger: knownLedger{hash: func(sku string) string { return "another-content-" + sku }}}
	c0 := processCPU()
	known, err := u.checkLedger(context.Background(), "up-1", "seller-1", sheet)
	c1 := processCPU()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("checkLedger of 500 rows of other content: %v CPU", c1-c0)
	if len(known) != 0 {
		t.Fatalf("%d rows known, want none", len(known))
	}
	for _, r := range sheet.Rows {
		if len(r.Problems) == 0 || r.Problems[len(r.Problems)-1].Code != CodeRegisteredOtherContent {
			t.Fatalf("row %d: %v; want it refused as other content", r.Number, r.Problems)
		}
	}
	// The process's CPU, the garbage collector's and other tests' with it:
	// the bound sits between what the budget lets it spend and what
	// decomposing every row costs, about twice as much.
	if c1-c0 > 450*time.Millisecond {
		t.Errorf("checkLedger took %v of CPU, want at most 450 ms", c1-c0)
	}
}
