package upload

import (
	"slices"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/productrules"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// DefaultMaxReportCellBytes bounds the seller's cell text kept in Redis for
// one upload's result report. A typical 500-row upload keeps well under
// 1 MB; a file built to expand (every cell pointing at one huge shared
// string) keeps this much at most, for the 7 days an upload is kept.
const DefaultMaxReportCellBytes = 4 << 20

// numberCellLen bounds the cells of the number fields, in characters: the
// longest number a seller can mean ("1,000,000,000.0") with room to spare.
const numberCellLen = 40

// reportCellLimit is the most characters of a field's cell kept for the
// report: the field's own limit plus one. A cell that was too long is still
// too long in the report (marked with "…"), so uploading the report again
// refuses it again rather than registering a text bulkreg cut.
func reportCellLimit(field string) int {
	if r, ok := productrules.Lookup(field); ok && r.Type == productrules.Text {
		return r.MaxLen + 1
	}
	return numberCellLen
}

// cutCell keeps the first max characters of s, marking a cut with "…".
func cutCell(s string, max int) string {
	if len(s) <= max { // bytes ≥ characters: nothing to count
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// reportCells is what an upload keeps for its result report: the columns
// of the upload format only (unknown columns are the seller's own business
// and can be any size), each cell cut to its field's limit plus one, and at
// most budget bytes of encoded cells in all. Rows refused at upload come
// first, since they are the ones the seller must fix; a row past the budget
// keeps no cells (an empty list), which ReportRows explains in the report.
func reportCells(header []string, rows []excel.Row, budget int) (keptHeader []string, cells map[int][]string) {
	var cols []int
	var limits []int
	for i, h := range header {
		if f, ok := excel.HeaderField(h); ok {
			cols = append(cols, i)
			limits = append(limits, reportCellLimit(f))
			// The reader cut it to excel.MaxHeaderChars, and a cell it cut
			// names no column.
			keptHeader = append(keptHeader, h)
		}
	}
	order := slices.Clone(rows)
	slices.SortStableFunc(order, func(a, b excel.Row) int {
		switch {
		case !a.Valid() && b.Valid():
			return -1
		case a.Valid() && !b.Valid():
			return 1
		}
		return 0
	})
	cells = make(map[int][]string, len(rows))
	used := 0
	for _, r := range order {
		kept := make([]string, len(cols))
		for j, i := range cols {
			if i < len(r.Cells) {
				kept[j] = cutCell(r.Cells[i], limits[j])
			}
		}
		// Counted as uploadstatus stores it (JSON), without encoding it:
		// a row of escaped text encoded to be measured and dropped would
		// be 60 KB of garbage, 30 MB for 500 rows.
		size := 1 + len(kept)
		for _, c := range kept {
			size += uploadstatus.JSONSize(c)
		}
		if used+size > budget {
			cells[r.Number] = []string{}
			continue
		}
		used += size
		cells[r.Number] = kept
	}
	return keptHeader, cells
}
