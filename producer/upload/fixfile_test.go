package upload

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/excel"
)

// TestTheFixFileNamesItsOwnCellsForEveryKindOfFailure writes the Korean
// fix file of an upload whose rows failed every way (koreanUpload) and
// reads each row's reason and notes: a problem the validator found, a
// duplicate SKU and a refusal of the registration API naming a field are
// each said at the fix file's own cell, with the original row, and that
// cell carries a note; a row set aside after its retries names no cell and
// has no note; a row registered with other content is not in the fix file,
// and in the full report its reason names its cell but the cell is not
// marked (nothing in the file is wrong). A row whose cells were not kept
// says so after its problems.
func TestTheFixFileNamesItsOwnCellsForEveryKindOfFailure(t *testing.T) {
	st, cells := koreanUpload(t)
	cells[3] = []string{}
	write := func(failedOnly bool) *excelize.File {
		t.Helper()
		var buf bytes.Buffer
		if err := excel.WriteReportIn(&buf, LangKO, st.Header, ReportRowsIn(LangKO, time.UTC, st, cells), failedOnly); err != nil {
			t.Fatal(err)
		}
		f, err := excelize.OpenReader(&buf)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	f := write(true)
	rows, _ := f.GetRows(excel.ReportSheet)
	n := len(st.Header)
	reasons := map[string]string{}
	for _, r := range rows[1:] {
		for len(r) < n+4 {
			r = append(r, "")
		}
		reasons[r[n]] = r[n+2]
	}
	for orig, want := range map[string][]string{
		"2":  {"D2 가격: ", "(원본 2행)"},
		"3":  {"D3 가격: ", "이 보고서에는 이 행의 셀이 없습니다", "(원본 3행)"},
		"4":  {"A4 판매자상품코드: ", "(원본 4행)"},
		"5":  {"B5 상품명: ", "(원본 5행)"},
		"9":  {"C6 카테고리코드: 값이 마켓의 상품 규칙에 맞지 않아", "(원본 9행)"},
		"11": {"8번"},
	} {
		reason, ok := reasons[orig]
		if !ok {
			t.Errorf("original row %s is not in the fix file", orig)
			continue
		}
		for _, w := range want {
			if !strings.Contains(reason, w) {
				t.Errorf("original row %s: reason %q lacks %q", orig, reason, w)
			}
		}
	}
	if _, ok := reasons["8"]; ok || len(reasons) != 6 {
		t.Errorf("the fix file holds original rows %v; want the six failed rows, without the one registered with other content", reasons)
	}
	if r := reasons["11"]; strings.Contains(r, "원본") || strings.Contains(r, "7: ") {
		t.Errorf("the set-aside row's reason %q names a cell or a row", r)
	}
	comments, _ := f.GetComments(excel.ReportSheet)
	noted := []string{}
	for _, c := range comments {
		noted = append(noted, c.Cell)
	}
	if strings.Join(noted, ",") != "D2,D3,A4,B5,C6" {
		t.Errorf("notes on %v, want D2, D3, A4, B5 and C6", noted)
	}

	full := write(false)
	cell, _ := excelize.CoordinatesToCellName(n+3, 8) // the reason of original row 8, the full report's row 8
	if reason, _ := full.GetCellValue(excel.ReportSheet, cell); !strings.HasPrefix(reason, "A8: 판매자상품코드") || !strings.HasSuffix(reason, "(원본 8행)") {
		t.Errorf("the full report's other-content row: reason %q", reason)
	}
	comments, _ = full.GetComments(excel.ReportSheet)
	for _, c := range comments {
		if c.Cell == "A8" {
			t.Error("the SKU registered with other content is marked to fix")
		}
	}
}
