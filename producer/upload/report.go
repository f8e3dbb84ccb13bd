package upload

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/sellertime"
	"github.com/bulkreg/bulkreg/messages"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// cellsNotKept explains a report row without its cells (see reportCells).
const cellsNotKept = "the row's cells are not in this report: the upload held more text than bulkreg keeps; copy them from your file"

// ReportRows joins an upload's original cells with its row results: one
// report row per spreadsheet row, "registered", "already_registered" (the
// reason names the existing product), "failed" (with the reason) or
// "waiting". A failed-only report keeps the failed rows alone, so an already
// registered row is never sent again from it.
func ReportRows(st uploadstatus.Status, cells map[int][]string) []excel.ReportRow {
	return ReportRowsIn(LangEN, time.UTC, st, cells)
}

// ReportRowsIn is ReportRows with every reason in lang (LangKO, LangEN),
// the field names as the seller's header names them. A registered or
// already registered row carries its product number; a row whose SKU is
// registered already with other content is ResultOtherContent, apart from
// the failed rows (nothing in the file is wrong), and left out of a
// failed-rows report. Each recorded row says when its result was recorded,
// in zone, as pages say times (sellertime).
func ReportRowsIn(lang string, zone *time.Location, st uploadstatus.Status, cells map[int][]string) []excel.ReportRow {
	results := make(map[int]uploadstatus.RowResult, len(st.Rows))
	for _, r := range st.Rows {
		results[r.Row] = r
	}
	nums := make([]int, 0, len(cells))
	for n := range cells {
		nums = append(nums, n)
	}
	for n := range results {
		if _, ok := cells[n]; !ok {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	out := make([]excel.ReportRow, 0, len(nums))
	for _, n := range nums {
		rr := excel.ReportRow{Number: n, Cells: cells[n], Result: "waiting"}
		if res, ok := results[n]; ok {
			res = zoned(lang, zone, res)
			rr.Result = res.State
			// A registered row with a code needs the seller too: the
			// marketplace holds its SKU twice (registered_twice).
			if res.State != uploadstatus.Registered || res.Code != "" {
				rr.Reason = RowReason(lang, st.Header, res)
			}
			rr.Problems = reportProblems(lang, st.Header, res)
			if res.State == uploadstatus.Failed && res.Code == uploadstatus.OtherContent {
				rr.Result = excel.ResultOtherContent
			}
			if res.State != uploadstatus.Failed {
				rr.ProductID = res.ProductID
			}
			if !res.At.IsZero() {
				rr.At = sellertime.Format(lang, res.At, zone)
			}
		}
		if c, ok := cells[n]; ok && len(c) == 0 && len(st.Header) > 0 {
			notKept := cellsNotKept
			if lang != LangEN {
				notKept, _ = messages.Render(lang, "cells_not_kept", nil)
			}
			rr.Reason = strings.TrimPrefix(rr.Reason+"; "+notKept, "; ")
			if len(rr.Problems) > 0 {
				rr.Problems = append(rr.Problems, excel.ReportProblem{Text: notKept})
			}
		}
		out = append(out, rr)
	}
	return out
}

// reportProblems are a failed row's problems as its report says them, in
// lang and without their places (the report names its own cells): its
// details as the message table says them, or the registration API's
// refusal of a field. None when the row has neither, or a detail the table
// does not know: the row's reason then stands as it is.
func reportProblems(lang string, header []string, res uploadstatus.RowResult) []excel.ReportProblem {
	if res.State != uploadstatus.Failed {
		return nil
	}
	if len(res.Details) == 0 {
		if _, set := deadLettered(res); res.Field == "" || set {
			return nil
		}
		return []excel.ReportProblem{{Field: res.Field, Name: FieldName(lang, header, res.Field), Text: RowReasonBeside(lang, header, res)}}
	}
	out := make([]excel.ReportProblem, 0, len(res.Details))
	for _, d := range res.Details {
		code := d.Code
		if code == excel.CodeDuplicateSKU {
			// The report's rows are not the file's (the fix file holds only
			// failed rows): the first use is named as the file's row.
			code += ".report"
		}
		s, named, ok := say(lang, header, code, d.Params)
		if !ok {
			return nil
		}
		field := d.Field
		if field == "" {
			field = d.Params["field"]
		}
		name := ""
		if !named && field != "" {
			name = FieldName(lang, header, field)
		}
		out = append(out, excel.ReportProblem{Field: field, Name: name, Text: s})
	}
	return out
}

// zoned says the instants a row result's facts carry (param "at": when a
// SKU was registered before) in zone, as their message's date; an English
// reason is then said from the same facts, not the stored sentence, whose
// date is the day in UTC.
func zoned(lang string, zone *time.Location, r uploadstatus.RowResult) uploadstatus.RowResult {
	details, changed := slices.Clone(r.Details), false
	for i, d := range details {
		at, err := time.Parse(time.RFC3339Nano, d.Params["at"])
		if err != nil {
			continue
		}
		details[i].Params = maps.Clone(d.Params)
		details[i].Params["date"] = sellertime.Format(lang, at, zone)
		changed = true
	}
	if !changed {
		return r
	}
	r.Details = details
	if lang == LangEN && len(details) == 1 {
		if s, ok := messages.Render(LangEN, details[0].Code, details[0].Params); ok {
			r.Reason = s
		}
	}
	return r
}

// Report is a result report, built.
type Report struct {
	XLSX []byte
	// Rows is the rows written: every row of the upload, or with
	// failedOnly its failed rows only.
	Rows int
	// Name is the report's file name, after the uploaded file's
	// ("상품목록-결과.xlsx"); see ContentDisposition.
	Name string
}

// BuildReport writes the upload's result report (.xlsx): the seller's
// columns, then the original row, the result and the reason. failedOnly
// keeps the failed rows, in a file the seller can fix and upload again.
// It reads the upload's cells from the store; st says whose upload it is,
// so callers serving sellers pass a Status from Uploader.Status.
func (u *Uploader) BuildReport(ctx context.Context, st uploadstatus.Status, failedOnly bool) (Report, error) {
	return u.BuildReportIn(ctx, LangEN, time.UTC, st, failedOnly)
}

// BuildReportIn is BuildReport in lang: the results and reasons in that
// language, the times in zone, and the file's name (Report.Name) after the
// uploaded file.
func (u *Uploader) BuildReportIn(ctx context.Context, lang string, zone *time.Location, st uploadstatus.Status, failedOnly bool) (Report, error) {
	cells, err := u.Statuses.Cells(ctx, st.ID)
	if err != nil {
		return Report{}, err
	}
	rows := ReportRowsIn(lang, zone, st, cells)
	n := len(rows)
	if failedOnly {
		n = 0
		for _, r := range rows {
			if r.Result == excel.ResultFailed {
				n++
			}
		}
	}
	var buf bytes.Buffer
	if err := excel.WriteReportIn(&buf, lang, st.Header, rows, failedOnly); err != nil {
		return Report{}, fmt.Errorf("write the report of upload %s: %w", st.ID, err)
	}
	// The cells kept are bounded in bytes (DefaultMaxReportCellBytes), but
	// text that does not compress (random syllables) writes a report as
	// large as its cells. Past MaxReportBytes the report is written again
	// with the cells of fewer rows, the rows to fix first, each row left
	// without its cells saying so, until it fits.
	for try := 0; buf.Len() > MaxReportBytes && try < 4; try++ {
		kept := cellBytes(cells)
		if kept == 0 {
			break
		}
		cells = keepCells(st, cells, int(int64(kept)*int64(MaxReportBytes)*9/10/int64(buf.Len())))
		rows = ReportRowsIn(lang, zone, st, cells)
		buf.Reset()
		if err := excel.WriteReportIn(&buf, lang, st.Header, rows, failedOnly); err != nil {
			return Report{}, fmt.Errorf("write the report of upload %s: %w", st.ID, err)
		}
	}
	return Report{XLSX: buf.Bytes(), Rows: n, Name: ReportName(lang, st, failedOnly)}, nil
}

// MaxReportBytes bounds a report's file: every answer about an upload of at
// most 10 MiB is at most 1 MiB (design.md's ceiling).
const MaxReportBytes = 1 << 20

func cellBytes(cells map[int][]string) int {
	n := 0
	for _, c := range cells {
		for _, v := range c {
			n += len(v)
		}
	}
	return n
}

// keepCells keeps the cells of rows while their bytes fit budget, the
// failed rows first (the fix file's rows), in row order; the other rows
// keep none (an empty list, which ReportRows explains in the report).
func keepCells(st uploadstatus.Status, cells map[int][]string, budget int) map[int][]string {
	failed := make(map[int]bool, len(st.Rows))
	for _, r := range st.Rows {
		failed[r.Row] = r.State == uploadstatus.Failed
	}
	nums := make([]int, 0, len(cells))
	for n := range cells {
		nums = append(nums, n)
	}
	slices.SortFunc(nums, func(a, b int) int {
		if failed[a] != failed[b] {
			if failed[a] {
				return -1
			}
			return 1
		}
		return a - b
	})
	out := make(map[int][]string, len(cells))
	used := 0
	for _, n := range nums {
		size := 0
		for _, v := range cells[n] {
			size += len(v)
		}
		if used+size > budget {
			out[n] = []string{}
			continue
		}
		used += size
		out[n] = cells[n]
	}
	return out
}
