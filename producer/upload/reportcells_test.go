package upload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testsheet"
	"github.com/bulkreg/bulkreg/productrules"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

func TestReportCells(t *testing.T) {
	maxDescription, maxSKU := productrules.Must(productrules.Description).MaxLen, productrules.Must(productrules.SellerSKU).MaxLen
	long := strings.Repeat("가", maxDescription+500)
	// The reader cuts every header cell to excel.MaxHeaderChars, and a
	// longer one names no column: the longest known one is kept whole.
	named := "상품명 (" + strings.Repeat("x", excel.MaxHeaderChars-6) + ")"
	header := []string{"seller_sku", "my notes", "price", "description", named}
	rows := []excel.Row{
		{Number: 2, Cells: []string{"A-1", strings.Repeat("n", 1<<20), "1000", "short", "x"}},
		{Number: 3, Cells: []string{"A-2", "", "1,000", long}, Problems: []excel.Problem{{Code: excel.CodeTooLong}}},
		{Number: 4, Cells: []string{strings.Repeat("S", 1<<20), "", strings.Repeat("9", 1<<20), ""}, Problems: []excel.Problem{{Code: excel.CodeTooLong}}},
	}
	kh, cells := reportCells(header, rows, 1<<20)
	if len(kh) != 4 || kh[0] != "seller_sku" || kh[1] != "price" || kh[2] != "description" || kh[3] != named {
		t.Errorf("kept header %q, want seller_sku, price, description and the 상품명 column (the unknown column dropped)", kh)
	}
	if got := cells[2]; len(got) != 4 || got[0] != "A-1" || got[1] != "1000" || got[2] != "short" || got[3] != "x" {
		t.Errorf("row 2 cells %q, want the known columns as they were", got)
	}
	d := cells[3][2]
	if n := utf8.RuneCountInString(d); n != maxDescription+2 || !strings.HasSuffix(d, "…") {
		t.Errorf("too-long description kept as %d characters, want the limit + 1 and a closing …", n)
	}
	if got := cells[4]; utf8.RuneCountInString(got[0]) != maxSKU+2 || utf8.RuneCountInString(got[1]) != numberCellLen+1 {
		t.Errorf("row 4 kept %d and %d characters of a 1 MiB SKU and price", utf8.RuneCountInString(got[0]), utf8.RuneCountInString(got[1]))
	}

	// Past the budget, rows keep no cells; refused rows come first.
	row4, _ := json.Marshal(cells[4])
	_, cells = reportCells(header, rows, len(row4)+10)
	if len(cells[4]) == 0 || len(cells[2]) != 0 || len(cells[3]) != 0 {
		t.Errorf("with a budget that fits row 4 only: row 4 (refused, small once cut) %q, row 3 (refused, 30 KB) %d cells, row 2 (valid) %d cells; want row 4 kept, the others none",
			cells[4], len(cells[3]), len(cells[2]))
	}
	rr := ReportRows(uploadstatus.Status{Upload: uploadstatus.Upload{Header: kh}}, cells)
	if len(rr) != 3 || !strings.Contains(rr[0].Reason, "not in this report") || rr[2].Reason != "" {
		t.Errorf("report rows %+v: want the rows without cells explained", rr)
	}
}

// expandedParser returns what a file built to expand yields: rows whose
// every cell, known column or not, is one huge text. It stands in for any
// parser, so the bound on what is stored does not depend on the reader's
// own bounds.
type expandedParser struct {
	cell       string
	rows, cols int
}

func (p expandedParser) Parse(context.Context, io.Reader) (*excel.Sheet, error) {
	s := &excel.Sheet{SheetName: "x", HeaderRow: 1, Header: slicesClone(testsheet.Header)}
	for i := len(testsheet.Header); i < p.cols; i++ {
		s.Header = append(s.Header, "extra "+strconv.Itoa(i))
	}
	for n := range p.rows {
		cells := make([]string, p.cols)
		for i := range cells {
			cells[i] = p.cell
		}
		s.Rows = append(s.Rows, excel.Row{Number: n + 2, Cells: cells,
			Problems: []excel.Problem{{Row: n + 2, Column: "name", Cell: "B" + strconv.Itoa(n+2), Code: excel.CodeTooLong, Message: "name must be at most 100 characters, got 1,048,576 characters"}}})
	}
	return s, nil
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// uploadMemory is what Redis holds for one upload: MEMORY USAGE of each of
// its keys, and the growth of used_memory since before.
func uploadMemory(t *testing.T, rdb *redis.Client, id string, before int64) (keys, growth int64) {
	t.Helper()
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "bulkreg:upload:{"+id+"}:*", 100).Iterator()
	n := 0
	for iter.Next(ctx) {
		u, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		keys += u
		n++
	}
	if n == 0 {
		t.Fatalf("no keys of upload %s in Redis", id)
	}
	return keys, usedMemory(t, rdb) - before
}

func usedMemory(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatal("INFO memory has no used_memory")
	return 0
}

// fewMB is what one upload may make Redis hold, whatever its file.
const fewMB = 6 << 20

// An upload whose 500 rows × 15 cells each expand to 1 MiB (7.5 GB of
// text, the expansion attack) keeps a few MB in Redis: only the known
// columns, each cut to its field's limit, within the upload's budget.
func TestExpandedUploadKeepsAFewMBInRedis(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	e := newEnv(t, testkafka.Start(t, 1, topic), WriterOptions{})
	e.up.Statuses = uploadstatus.New(rdb, time.Hour)
	e.up.Parser = expandedParser{cell: strings.Repeat("<", 1<<20), rows: 500, cols: 15}
	before := usedMemory(t, rdb)
	start := time.Now()
	res, err := e.up.Upload(context.Background(), Request{SellerID: "seller-x", FileName: "bomb.xlsx", Data: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	keys, growth := uploadMemory(t, rdb, res.UploadID, before)
	t.Logf("500 rows × 15 cells of 1 MiB: Redis holds %.2f MB in the upload's keys, used_memory grew %.2f MB, upload took %s",
		float64(keys)/1e6, float64(growth)/1e6, took.Round(time.Millisecond))
	if keys > fewMB || growth > fewMB {
		t.Errorf("one upload holds %d bytes in its keys (used_memory +%d), want at most %d", keys, growth, fewMB)
	}
	if res.Invalid != 500 {
		t.Errorf("%d rows recorded as failed, want 500", res.Invalid)
	}
}

// The same bound with a real workbook and the real reader: every cell of
// 500 rows, in 9 known columns and one unknown, is one shared string of
// 20,000 characters (an 87 KB file that expands to 100 MB of text). The
// reader may refuse the file or report every row; either way Redis keeps a
// few MB, and the report carries the known columns only.
func TestExpandedWorkbookKeepsAFewMBInRedis(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	e := newEnv(t, testkafka.Start(t, 1, topic), WriterOptions{})
	e.up.Statuses = uploadstatus.New(rdb, time.Hour)
	data := sharedStringBomb(t, strings.Repeat("A", 20000), 500)
	t.Logf("workbook: %d bytes", len(data))
	before := usedMemory(t, rdb)
	res, err := e.up.Upload(context.Background(), Request{SellerID: "seller-x", FileName: "bomb.xlsx", Data: data})
	if errors.Is(err, ErrRefused) {
		t.Logf("the reader refused the file: %v", err)
		if n, _ := rdb.DBSize(context.Background()).Result(); n != 0 {
			t.Errorf("a refused file left %d keys in Redis", n)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	keys, growth := uploadMemory(t, rdb, res.UploadID, before)
	t.Logf("Redis holds %.2f MB in the upload's keys, used_memory grew %.2f MB", float64(keys)/1e6, float64(growth)/1e6)
	if keys > fewMB || growth > fewMB {
		t.Errorf("one upload holds %d bytes in its keys (used_memory +%d), want at most %d", keys, growth, fewMB)
	}
	st, err := e.up.Statuses.Get(context.Background(), res.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Header) != len(testsheet.Header) {
		t.Errorf("stored header %q, want the %d known columns only", st.Header, len(testsheet.Header))
	}
	cells, err := e.up.Statuses.Cells(context.Background(), res.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := excel.WriteReport(&buf, st.Header, ReportRows(st, cells), true); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > fewMB {
		t.Errorf("the failed-rows report is %d bytes", buf.Len())
	}
}

// sharedStringBomb writes a workbook whose header names every known column
// and one unknown, and whose rows × 10 cells all refer to one shared string.
func sharedStringBomb(t *testing.T, text string, rows int) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	sh := f.GetSheetName(0)
	h := append(slicesClone(testsheet.Header), "my notes")
	hv := make([]any, len(h))
	for i, c := range h {
		hv[i] = c
	}
	if err := f.SetSheetRow(sh, "A1", &hv); err != nil {
		t.Fatal(err)
	}
	for r := range rows {
		for c := range h {
			// SetCellStr puts text in the shared-string table once: every
			// cell is a reference to it, so the file stays small.
			cell, _ := excelize.CoordinatesToCellName(c+1, r+2)
			if err := f.SetCellStr(sh, cell, text); err != nil {
				t.Fatal(err)
			}
		}
	}
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
