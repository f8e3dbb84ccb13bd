package excel

import (
	"github.com/bulkreg/bulkreg/messages"

	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bulkreg/bulkreg"
	"github.com/xuri/excelize/v2"
)

// book builds an .xlsx in memory: rows are written from A1 on sheet "Sheet1";
// edit, when given, changes the file before it is saved.
func book(t testing.TB, rows [][]any, edit func(f *excelize.File)) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	for i, r := range rows {
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		if err := f.SetSheetRow("Sheet1", cell, &r); err != nil {
			t.Fatal(err)
		}
	}
	if edit != nil {
		edit(f)
	}
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var koreanHeader = []any{"판매자상품코드*", "상품명*", "카테고리코드*", "판매가*", "재고수량*", "브랜드", "대표이미지URL", "상세설명", "배송비"}

func validRow(i int) []any {
	return []any{"SKU-" + itoa(i), "상품 " + itoa(i), "50000123", 12000 + i, 10, "브랜드", "https://img.example.com/" + itoa(i) + ".jpg", "설명", 2500}
}

func itoa(i int) string { return group(int64(i)) }

func parse(t testing.TB, data []byte) (*Sheet, error) {
	t.Helper()
	return NewParser(Options{}).ParseBytes(context.Background(), data)
}

func mustParse(t testing.TB, data []byte) *Sheet {
	t.Helper()
	s, err := parse(t, data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func fileErrCode(t testing.TB, err error) *FileError {
	t.Helper()
	var fe *FileError
	if !errors.As(err, &fe) {
		t.Fatalf("error = %v (%T), want *FileError", err, err)
	}
	return fe
}

// problems lists every row problem as Error() strings, in row order.
func problems(s *Sheet) []string {
	var out []string
	for _, r := range s.Rows {
		for _, p := range r.Problems {
			out = append(out, p.Error())
		}
	}
	return out
}

func warnings(s *Sheet) []string {
	var out []string
	for _, p := range s.Warnings {
		out = append(out, p.Error())
	}
	return out
}

func equalLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestParseValidKorean(t *testing.T) {
	rows := [][]any{koreanHeader}
	for i := 1; i <= 3; i++ {
		rows = append(rows, validRow(i))
	}
	s := mustParse(t, book(t, rows, nil))
	if s.HeaderRow != 1 || s.SheetName != "Sheet1" || len(s.Rows) != 3 || s.Valid() != 3 {
		t.Fatalf("sheet %q header row %d rows %d valid %d; problems %v", s.SheetName, s.HeaderRow, len(s.Rows), s.Valid(), problems(s))
	}
	want := bulkreg.Product{SellerSKU: "SKU-1", Name: "상품 1", CategoryCode: "50000123", Price: 12001, Stock: 10,
		Brand: "브랜드", ImageURL: "https://img.example.com/1.jpg", Description: "설명", ShippingFee: 2500}
	if s.Rows[0].Product != want || s.Rows[0].Number != 2 {
		t.Errorf("row 2 = %d %+v, want %+v", s.Rows[0].Number, s.Rows[0].Product, want)
	}
	if len(s.Rows[0].Cells) != len(koreanHeader) || s.Rows[0].Cells[3] != "12001" {
		t.Errorf("cells = %q", s.Rows[0].Cells)
	}
}

func TestWriteReportRoundTrip(t *testing.T) {
	rows := [][]any{koreanHeader, validRow(1), {"SKU-2", "=HYPERLINK(\"x\")", "50000123", "-5", 3}, validRow(3), {"@SKU", "\t상품", "1", "12,000원", "x"}}
	s := mustParse(t, book(t, rows, nil))
	var rr []ReportRow
	for _, r := range s.Rows {
		res, reason := ResultRegistered, ""
		if !r.Valid() {
			res, reason = ResultFailed, r.Problems[0].Error()
		}
		rr = append(rr, ReportRow{Number: r.Number, Cells: r.Cells, Result: res, Reason: reason})
	}
	// Each language's report names its own columns in that language; the
	// parser knows both, so either fix file uploads again as it is.
	for _, lang := range []string{messages.KO, messages.EN} {
		var buf bytes.Buffer
		if err := WriteReportIn(&buf, lang, s.Header, rr, true); err != nil {
			t.Fatal(err)
		}
		again := mustParse(t, buf.Bytes())
		if len(again.Rows) != 2 {
			t.Fatalf("%s: failed-only report has %d rows, want 2", lang, len(again.Rows))
		}
		for i, num := range []int{3, 5} {
			var orig Row
			for _, r := range s.Rows {
				if r.Number == num {
					orig = r
				}
			}
			got := again.Rows[i]
			for j := range orig.Cells {
				if cleanCell(got.Cells[j]) != cleanCell(orig.Cells[j]) {
					t.Errorf("report row %d cell %d = %q, want %q", got.Number, j, got.Cells[j], orig.Cells[j])
				}
			}
			if len(got.Problems) != len(orig.Problems) {
				t.Errorf("report row %d problems %v, original %v", got.Number, got.Problems, orig.Problems)
			}
		}
		if w := warnings(again); len(w) != 0 {
			t.Errorf("%s: warnings on the report (its own columns not known?): %v", lang, w)
		}
	}
}

func TestTemplateParses(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTemplate(&buf, TemplateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := parse(t, buf.Bytes())
	if fe := fileErrCode(t, err); fe.Code != CodeNoRows {
		t.Fatalf("untouched template: %v (%s), want %s", fe, fe.Code, CodeNoRows)
	}
	f, err := excelize.OpenReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, h := range TemplateHeader() {
		cell, _ := excelize.CoordinatesToCellName(i+1, 2)
		if err := f.SetCellStr(TemplateSheet, cell, exampleRow[i]); err != nil {
			t.Fatal(err)
		}
		_ = h
	}
	var filled bytes.Buffer
	if err := f.Write(&filled); err != nil {
		t.Fatal(err)
	}
	s := mustParse(t, filled.Bytes())
	if len(s.Rows) != 1 || !s.Rows[0].Valid() || s.Rows[0].Product.Price != 12900 {
		t.Fatalf("template with the example row: %+v %v", s.Rows, problems(s))
	}
}

// TestHeaderSearchStopsAfterMaxHeaderSheets: the product sheet is found as
// the MaxHeaderSheets-th visible sheet, and not after it (every sheet
// searched costs its part's opening whatever it holds); hidden sheets
// before it do not count.
func TestHeaderSearchStopsAfterMaxHeaderSheets(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before        int // sheets without a header before the product sheet
		hiddenBefore  int // of them, hidden
		wantNoHeader  bool
		wantSheetName string
	}{
		{"last searched", MaxHeaderSheets - 1, 0, false, "products"},
		{"one too far", MaxHeaderSheets, 0, true, ""},
		{"hidden ones do not count", MaxHeaderSheets, 5, false, "products"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := book(t, [][]any{{"notes"}}, func(f *excelize.File) {
				for i := 2; i <= tc.before; i++ {
					name := "notes " + itoa(i)
					if _, err := f.NewSheet(name); err != nil {
						t.Fatal(err)
					}
					if err := f.SetCellValue(name, "A1", "nothing here"); err != nil {
						t.Fatal(err)
					}
					if i <= tc.hiddenBefore+1 && i > 1 {
						if err := f.SetSheetVisible(name, false); err != nil {
							t.Fatal(err)
						}
					}
				}
				if _, err := f.NewSheet("products"); err != nil {
					t.Fatal(err)
				}
				for r, row := range [][]any{koreanHeader, validRow(1)} {
					cell, _ := excelize.CoordinatesToCellName(1, r+1)
					if err := f.SetSheetRow("products", cell, &row); err != nil {
						t.Fatal(err)
					}
				}
			})
			s, err := parse(t, data)
			if tc.wantNoHeader {
				if fe := fileErrCode(t, err); fe.Code != CodeNoHeader || !strings.Contains(fe.Message, "first 50 visible sheets") || !strings.Contains(koreanOf(fe), "처음 50개의 보이는 시트") {
					t.Fatalf("error %v, want no_header naming the first %d visible sheets", fe, MaxHeaderSheets)
				}
				return
			}
			if err != nil || s.SheetName != tc.wantSheetName || len(s.Rows) != 1 {
				t.Fatalf("Parse = %+v, %v; want sheet %q with 1 row", s, err, tc.wantSheetName)
			}
		})
	}
}

// koreanOf is the Korean sentence a seller's page shows for fe.
func koreanOf(fe *FileError) string {
	s, _ := messages.Render(messages.KO, fe.Code, fe.Params)
	return s
}
