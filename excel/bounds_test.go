package excel

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// expansionBook is an .xlsx (written by excelize) whose shared strings hold
// one text of size bytes and whose sheet has the Korean header and rows × 9
// cells that all show that one text: a few hundred KB that a reader without
// bounds expands to rows × 9 × size bytes of cells (4.4 GiB for 500 rows of
// 1 MiB).
func expansionBook(t testing.TB, size, rows int) []byte {
	t.Helper()
	grid := [][]any{koreanHeader}
	for range rows {
		r := make([]any, len(koreanHeader))
		for j := range r {
			r[j] = "@@BIG@@"
		}
		grid = append(grid, r)
	}
	data := book(t, grid, nil)
	sst := zipPart(t, data, "xl/sharedStrings.xml")
	if bytes.Count(sst, []byte("@@BIG@@")) != 1 {
		t.Fatalf("the cells do not share one string: %s", sst)
	}
	return replacePart(t, data, "xl/sharedStrings.xml", bytes.Replace(sst, []byte("@@BIG@@"), bytes.Repeat([]byte("a"), size), 1))
}

// 500 rows × 9 cells all pointing at one 1 MiB shared string: the reader
// keeps at most MaxCellBytes of each and refuses the upload once the cells
// expand past MaxTextBytes, in well under a second and a few MiB, instead of
// building 4.4 GiB of cells (and storing them with the upload's status).
func TestSharedStringExpansionRefused(t *testing.T) {
	data := expansionBook(t, 1<<20, 500)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	s, err := NewParser(Options{}).ParseBytes(context.Background(), data)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d KiB file: answered in %v, %d KiB allocated", len(data)>>10, took, alloc>>10)
	if s != nil {
		t.Fatalf("the upload was accepted with %d rows", len(s.Rows))
	}
	fe := fileErrCode(t, err)
	if want := "the file's cells hold more than 8 MiB of text (long texts, or one long text shown in many cells); a product list of a few hundred rows is far smaller, so the file was refused"; fe.Code != CodeTooLarge || fe.Message != want {
		t.Errorf("%s: %s\nwant %s", fe.Code, fe.Message, want)
	}
	if took > time.Second {
		t.Errorf("took %v to refuse", took)
	}
	// The budget (8 MiB) plus the file and the reader's buffers.
	if alloc > 24<<20 {
		t.Errorf("allocated %d MiB; the bounds allow about 8", alloc>>20)
	}
}

// Under the total bound, a long shared string shown in a few cells is kept
// to MaxCellBytes per cell and reported with its whole length.
func TestLongSharedStringKeptToTheCellBound(t *testing.T) {
	data := expansionBook(t, 1<<20, 3)
	s, err := NewParser(Options{MaxCellBytes: 4 << 10}).ParseBytes(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Rows) != 3 || s.Valid() != 0 {
		t.Fatalf("%d rows, %d valid", len(s.Rows), s.Valid())
	}
	for _, r := range s.Rows {
		for _, c := range r.Cells {
			if len(c) != 4<<10 {
				t.Fatalf("row %d keeps a cell of %d bytes, want %d", r.Number, len(c), 4<<10)
			}
		}
	}
	want := `B2: name must be at most 200 characters, got 1,048,576 characters`
	if got := problems(s); len(got) < 2 || got[1] != want {
		t.Errorf("problems %q, want the second to be %q", got, want)
	}
}

// A long cell merged down over 500 rows is as much text as 500 copies: the
// rows are stored and reported with it, so the copies count too.
func TestMergedLongCellCountsPerRow(t *testing.T) {
	rows := [][]any{koreanHeader}
	for i := 1; i <= 500; i++ {
		rows = append(rows, validRow(i))
	}
	rows[1][7] = strings.Repeat("가", 20000) // 60,000 bytes of description in H2
	data := book(t, rows, nil)
	sheet := zipPart(t, data, "xl/worksheets/sheet1.xml")
	sheet = []byte(strings.Replace(string(sheet), "</sheetData>", `</sheetData><mergeCells count="1"><mergeCell ref="H2:H501"/></mergeCells>`, 1))
	_, err := parse(t, replacePart(t, data, "xl/worksheets/sheet1.xml", sheet))
	if fe := fileErrCode(t, err); fe.Code != CodeTooLarge || !strings.Contains(fe.Message, "more than 8 MiB of text") {
		t.Errorf("%s: %s", fe.Code, fe.Message)
	}
}
