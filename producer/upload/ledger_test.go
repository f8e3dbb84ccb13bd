package upload

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/ledger"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// products parses data as the producer does and returns each row's product by SKU.
func products(t *testing.T, data []byte) map[string]bulkreg.Product {
	t.Helper()
	sheet, err := excel.NewParser(excel.Options{}).Parse(context.Background(), bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bulkreg.Product{}
	for _, r := range sheet.Rows {
		out[r.Product.SellerSKU] = r.Product
	}
	return out
}

// TestLedgerDecidesWhatIsPublished: an upload of six rows whose SKUs the
// ledger knows in every way. Only the unknown and the in-flight SKUs are
// published; the rest are recorded without a message.
func TestLedgerDecidesWhatIsPublished(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil, WriterOptions{})
	ld := ledger.New(testredis.Start(t).Client(), ledger.Options{})
	e.up.Ledger = ld
	data := xlsx(t, "ledger", validRows(6)...)
	id := UploadID("seller-1", sha(data))
	ps := products(t, data)
	mark := func(sku, row, hash, pid string) {
		t.Helper()
		if _, err := ld.Mark(ctx, "seller-1", sku, row, hash, pid); err != nil {
			t.Fatal(err)
		}
	}
	// SKU-001, 002: registered before, same content, by another upload.
	mark("SKU-001", "0000000000000001:2", ps["SKU-001"].ContentHash(), "P-1")
	mark("SKU-002", "0000000000000001:3", ps["SKU-002"].ContentHash(), "P-2")
	// SKU-003: registered by this very upload's row 4 (a publish that failed part way).
	mark("SKU-003", bulkreg.IdempotencyKey(id, 4), ps["SKU-003"].ContentHash(), "P-3")
	// SKU-004: registered with other content.
	other := ps["SKU-004"]
	other.Price++
	mark("SKU-004", "0000000000000001:5", other.ContentHash(), "P-4")
	// SKU-005: claimed by a row in flight: published, the consumers decide.
	if _, err := ld.Claim(ctx, "seller-1", "SKU-005", "0000000000000002:6", ps["SKU-005"].ContentHash(), ""); err != nil {
		t.Fatal(err)
	}
	// Another seller's registration of SKU-006 is not this seller's.
	if _, err := ld.Mark(ctx, "seller-2", "SKU-006", "0000000000000003:7", ps["SKU-006"].ContentHash(), "P-6"); err != nil {
		t.Fatal(err)
	}

	res, err := e.up.Upload(ctx, Request{SellerID: "seller-1", FileName: "f.xlsx", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if res.Published != 2 || res.AlreadyRegistered != 3 || res.Invalid != 1 {
		t.Fatalf("result: %d published, %d already registered, %d invalid; want 2, 3, 1", res.Published, res.AlreadyRegistered, res.Invalid)
	}
	var problem excel.Problem
	for _, r := range res.Sheet.Rows {
		if r.Number == 5 && len(r.Problems) == 1 {
			problem = r.Problems[0]
		}
	}
	if problem.Cell != "A5" || problem.Code != CodeRegisteredOtherContent ||
		problem.Error() != `A5: seller_sku "SKU-004" is already registered as P-4; bulk registration does not change existing products` {
		t.Errorf("row 5's problem = %+v (%q), want one on A5 naming P-4", problem, problem.Error())
	}
	msgs := consume(t, e.brokers)
	var skus []string
	for _, m := range msgs {
		dm, err := bulkreg.DecodeRecord([]byte(*m.Key), []byte(m.Payload))
		if err != nil {
			t.Fatal(err)
		}
		skus = append(skus, dm.Product.SellerSKU)
	}
	if len(skus) != 2 || !strings.Contains(strings.Join(skus, ","), "SKU-005") || !strings.Contains(strings.Join(skus, ","), "SKU-006") {
		t.Errorf("published %v, want SKU-005 and SKU-006 only", skus)
	}
	st, err := e.store.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.OtherContent != 1 {
		t.Errorf("status: %d rows registered with other content, want 1 (row 5)", st.OtherContent)
	}
	if st.Registered != 1 || st.AlreadyRegistered != 2 || st.Failed != 1 || st.Waiting != 2 || st.Valid != 2 {
		t.Errorf("status: %d registered, %d already, %d failed, %d waiting, %d valid; want 1, 2, 1, 2, 2",
			st.Registered, st.AlreadyRegistered, st.Failed, st.Waiting, st.Valid)
	}
	want := map[int]struct{ state, product, reason string }{
		2: {uploadstatus.AlreadyRegistered, "P-1", "already registered as P-1 by upload 0000000000000001 row 2 on "},
		3: {uploadstatus.AlreadyRegistered, "P-2", "already registered as P-2"},
		4: {uploadstatus.Registered, "P-3", ""},
		5: {uploadstatus.Failed, "", "A5: seller_sku"},
	}
	for _, r := range st.Rows {
		w := want[r.Row]
		if r.State != w.state || r.ProductID != w.product || !strings.HasPrefix(r.Reason, w.reason) {
			t.Errorf("row %d = %s %q %q, want %s %q with a reason starting %q", r.Row, r.State, r.ProductID, r.Reason, w.state, w.product, w.reason)
		}
	}

	// The report shows the outcome and the existing product; --failed-only
	// leaves the already registered rows out.
	cells, err := e.store.Cells(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rows := ReportRows(st, cells)
	for _, failedOnly := range []bool{false, true} {
		var buf bytes.Buffer
		if err := excel.WriteReport(&buf, st.Header, rows, failedOnly); err != nil {
			t.Fatal(err)
		}
		f, err := excelize.OpenReader(&buf)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.GetRows(excel.ReportSheetEN) // WriteReport is English
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		var results []string
		for _, line := range got[1:] {
			results = append(results, line[len(st.Header)+1])
			if line[len(st.Header)+1] == uploadstatus.AlreadyRegistered && !strings.HasPrefix(line[len(st.Header)+2], "already registered as P-") {
				t.Errorf("report row %v: the reason does not name the product", line)
			}
		}
		// Row 5's SKU is registered with other content: a group of its
		// own, not a failure of the file, so a failed-rows report (to fix
		// and upload again) leaves it out.
		wantResults := "already_registered,already_registered,registered,already registered with different content,waiting,waiting"
		if failedOnly {
			wantResults = ""
		}
		if strings.Join(results, ",") != wantResults {
			t.Errorf("report (failed only %v) results %v, want %s", failedOnly, results, wantResults)
		}
	}
}

// TestLedgerConflictRefusesAStrictUpload: a changed product is a problem
// like any invalid cell, so --strict publishes nothing.
func TestLedgerConflictRefusesAStrictUpload(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil, WriterOptions{})
	ld := ledger.New(testredis.Start(t).Client(), ledger.Options{})
	e.up.Ledger = ld
	data := xlsx(t, "strict", validRows(3)...)
	if _, err := ld.Mark(ctx, "seller-1", "SKU-002", "0000000000000001:3", "ffffffffffffffffffffffffffffffff", "P-2"); err != nil {
		t.Fatal(err)
	}
	_, err := e.up.Upload(ctx, Request{SellerID: "seller-1", FileName: "f.xlsx", Data: data, Strict: true})
	var ir *InvalidRowsError
	if !errors.Is(err, ErrRefused) || !errors.As(err, &ir) || len(ir.Problems) != 1 || ir.Problems[0].Cell != "A3" {
		t.Fatalf("strict upload with a changed product: err = %v, want refused with one problem on A3", err)
	}
	if msgs := consume(t, e.brokers); len(msgs) != 0 {
		t.Errorf("%d messages published, want none", len(msgs))
	}
}

// TestLedgerDownRefusesToGuess: without the ledger's answer nothing is
// published (it could register every row twice); the seller tries again.
func TestLedgerDownRefusesToGuess(t *testing.T) {
	e := newEnv(t, nil, WriterOptions{})
	rs := testredis.Start(t)
	e.up.Ledger = ledger.New(rs.Client(), ledger.Options{})
	rs.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := e.up.Upload(ctx, Request{SellerID: "seller-1", FileName: "f.xlsx", Data: xlsx(t, "down", validRows(2)...)})
	if err == nil || !strings.Contains(err.Error(), "registered SKUs") {
		t.Fatalf("upload with the ledger down: err = %v, want one about the registered SKUs", err)
	}
	if msgs := consume(t, e.brokers); len(msgs) != 0 {
		t.Errorf("%d messages published, want none", len(msgs))
	}
}
