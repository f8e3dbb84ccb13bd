package upload

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// cellsOnly is a Statuses whose Cells are given (BuildReportIn reads no other).
type cellsOnly struct {
	Statuses
	cells map[int][]string
}

func (c cellsOnly) Cells(context.Context, string) (map[int][]string, error) { return c.cells, nil }

// TestReportOfTextThatDoesNotCompressIsBounded: an upload whose kept cells
// are 4 MiB of random syllables (text deflate cannot shrink) gets a report
// and a fix file of at most 1 MiB, both languages; the failed rows keep
// their cells first, and a row left without them says so. The report must
// not grow with the cells it quotes.
func TestReportOfTextThatDoesNotCompressIsBounded(t *testing.T) {
	header := excel.TemplateHeader()
	st := uploadstatus.Status{Upload: uploadstatus.Upload{ID: "u", Total: 500, Header: header}}
	cells := map[int][]string{}
	seed := uint32(45)
	for r := 2; r < 502; r++ {
		var d strings.Builder
		for range 2800 {
			seed = seed*1664525 + 1013904223
			d.WriteRune(rune(0xAC00 + seed>>8%11172))
		}
		row := make([]string, len(header))
		row[0], row[7] = "SKU-"+strconv.Itoa(r), d.String()
		cells[r] = row
		state := uploadstatus.Registered
		if r%5 == 0 {
			state = uploadstatus.Failed
		}
		st.Rows = append(st.Rows, uploadstatus.RowResult{Row: r, State: state, Reason: "price must be a number"})
	}
	u := &Uploader{Statuses: cellsOnly{cells: cells}}
	for _, lang := range []string{LangKO, LangEN} {
		for _, failedOnly := range []bool{false, true} {
			rep, err := u.BuildReportIn(t.Context(), lang, time.UTC, st, failedOnly)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s, failed only %v: %d bytes, %d rows", lang, failedOnly, len(rep.XLSX), rep.Rows)
			if len(rep.XLSX) > MaxReportBytes {
				t.Errorf("%s, failed only %v: a report of %d bytes; at most %d", lang, failedOnly, len(rep.XLSX), MaxReportBytes)
			}
			f, err := excelize.OpenReader(strings.NewReader(string(rep.XLSX)))
			if err != nil {
				t.Fatal(err)
			}
			rows, _ := f.GetRows(f.GetSheetName(0))
			f.Close()
			var withCells, failedWithCells int
			for _, r := range rows[1:] {
				if len(r) > 0 && strings.HasPrefix(r[0], "SKU-") {
					withCells++
					if n := strings.TrimPrefix(r[0], "SKU-"); n != "" && mustAtoi(t, n)%5 == 0 {
						failedWithCells++
					}
				}
			}
			if want := 100; failedOnly && failedWithCells < want/2 || !failedOnly && failedWithCells != want {
				t.Errorf("%s, failed only %v: %d failed rows with their cells (of %d with cells); the failed rows keep theirs first", lang, failedOnly, failedWithCells, withCells)
			}
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
