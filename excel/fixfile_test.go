package excel

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/messages"
	"github.com/bulkreg/bulkreg/productrules"
)

// sellerFile is a seller's upload: rows 2 and 4 valid, row 3 with a code
// of digits (00123) and a price with its unit, row 5 without a name and
// with a negative stock.
func sellerFile(t testing.TB) *Sheet {
	t.Helper()
	bad3 := validRow(3)
	bad3[0], bad3[3] = "00123", "12,000원"
	bad5 := validRow(5)
	bad5[1], bad5[3], bad5[4] = "", 15000, "-5"
	return mustParse(t, book(t, [][]any{koreanHeader, validRow(2), bad3, validRow(4), bad5}, nil))
}

// reportRowsOf is what the producer hands the report writer: each row's
// result and, for a failed row, its problems in lang.
func reportRowsOf(t testing.TB, s *Sheet, lang string) []ReportRow {
	t.Helper()
	var out []ReportRow
	for _, r := range s.Rows {
		rr := ReportRow{Number: r.Number, Cells: r.Cells, Result: ResultRegistered, ProductID: "P-" + strconv.Itoa(r.Number)}
		if !r.Valid() {
			rr.Result, rr.ProductID = ResultFailed, ""
			for _, p := range r.Problems {
				text, ok := messages.Render(lang, p.Code, p.Params)
				if !ok {
					t.Fatalf("no message for %s", p.Code)
				}
				rr.Problems = append(rr.Problems, ReportProblem{Field: p.Column, Text: text})
			}
		}
		out = append(out, rr)
	}
	return out
}

func fixFile(t testing.TB, s *Sheet, lang string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteReportIn(&buf, lang, s.Header, reportRowsOf(t, s, lang), true); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFixFileNamesItsOwnCellsAndMarksThem opens the fix file of both
// languages as a seller's spreadsheet would (excelize) and finds: the
// reason names the fix file's own cells and the original row; the cells
// to fix are filled and carry the reason as a note in the file's
// language, and no other cell is; valid whole numbers are number cells
// in columns not formatted as text; a SKU of digits (00123) and every
// refused number stay text, as typed. Then it uploads the file again:
// the parser finds the same problems at the cells the reason names, and
// once the marked cells are fixed, every row is valid.
func TestFixFileNamesItsOwnCellsAndMarksThem(t *testing.T) {
	s := sellerFile(t)
	if problems := problems(s); strings.Join(problems, "|") != `D3: price must be a whole number greater than 0 and at most 1,000,000,000, got "12,000원"; type the number only, without 원 or ₩|B5: name is required but the cell is empty|E5: stock must be a whole number from 0 to 1,000,000, got "-5"` {
		t.Fatalf("the seller's file: %q", problems)
	}
	for _, lang := range []string{messages.KO, messages.EN} {
		t.Run(lang, func(t *testing.T) {
			data := fixFile(t, s, lang)
			f := openXLSX(t, data)
			sheet := ReportSheetIn(lang)
			get := func(cell string) string { v, _ := f.GetCellValue(sheet, cell); return v }
			orig := map[string]string{messages.KO: "원본 %d행", messages.EN: "original row %d"}[lang]
			// The reason column is L (9 columns, the original row, the result).
			for _, tc := range []struct {
				cell  string
				parts []string
			}{
				{"L2", []string{"D2: ", "(" + strings.Replace(orig, "%d", "3", 1) + ")"}},
				{"L3", []string{"B3: ", "; E3: ", "(" + strings.Replace(orig, "%d", "5", 1) + ")"}},
			} {
				reason := get(tc.cell)
				for _, p := range tc.parts {
					if !strings.Contains(reason, p) {
						t.Errorf("%s %q lacks %q", tc.cell, reason, p)
					}
				}
				if strings.Contains(reason, "D3:") || strings.Contains(reason, "B5:") || strings.Contains(reason, "E5:") {
					t.Errorf("%s %q names the original file's cells", tc.cell, reason)
				}
			}
			if get("J2") != "3" || get("J3") != "5" {
				t.Errorf("original rows %q %q, want 3 and 5", get("J2"), get("J3"))
			}

			// Notes on the cells to fix, and only on them.
			comments, err := f.GetComments(sheet)
			if err != nil {
				t.Fatal(err)
			}
			noted := map[string]string{}
			for _, c := range comments {
				text := c.Text
				for _, r := range c.Paragraph {
					text += r.Text
				}
				noted[c.Cell] = text
			}
			if len(noted) != 3 || noted["D2"] == "" || noted["B3"] == "" || noted["E3"] == "" {
				t.Fatalf("notes on %v, want D2, B3 and E3", noted)
			}
			for cell, text := range noted {
				if !strings.HasPrefix(text, "bulkreg:\n") || lang == messages.KO && !hasHangulText(strings.ReplaceAll(text, "원", "")) ||
					lang == messages.EN && hasHangulText(strings.ReplaceAll(strings.ReplaceAll(text, "원", ""), "상품명", "")) {
					t.Errorf("%s's note %q is not in %s", cell, text, lang)
				}
			}
			if !strings.Contains(noted["D2"], `"12,000원"`) || !strings.Contains(noted["E3"], `"-5"`) {
				t.Errorf("the notes do not say the problems: %q", noted)
			}

			// Fills on the same cells, and only on them.
			filled := func(cell string) bool {
				id, _ := f.GetCellStyle(sheet, cell)
				st, _ := f.GetStyle(id)
				return st != nil && len(st.Fill.Color) > 0 && st.Fill.Color[0] == "FFC7CE"
			}
			for r := 2; r <= 3; r++ {
				for c := 1; c <= 13; c++ {
					cell, _ := excelize.CoordinatesToCellName(c, r)
					if _, want := noted[cell]; filled(cell) != want {
						t.Errorf("%s filled %v, want %v", cell, filled(cell), want)
					}
				}
			}

			// Numbers are numbers; codes and refused numbers stay as typed.
			for cell, want := range map[string]struct {
				text   bool
				value  string
				quoted bool
			}{
				"A2": {true, "00123", false}, "D2": {true, "12,000원", false}, "E2": {false, "10", false}, "I2": {false, "2500", false},
				"D3": {false, "15000", false}, "E3": {true, "-5", true}, "C3": {true, "50000123", false}, "J3": {false, "5", false},
			} {
				typ, _ := f.GetCellType(sheet, cell)
				isText := typ == excelize.CellTypeSharedString || typ == excelize.CellTypeInlineString
				id, _ := f.GetCellStyle(sheet, cell)
				xf := f.Styles.CellXfs.Xf[id]
				quoted := xf.QuotePrefix != nil && *xf.QuotePrefix
				if isText != want.text || get(cell) != want.value || quoted != want.quoted {
					t.Errorf("%s = %q (text %v, quote prefix %v), want %q (text %v, quote prefix %v)", cell, get(cell), isText, quoted, want.value, want.text, want.quoted)
				}
				// A number column is not in the text format, so a number
				// typed into it to fix it is a number.
				textFormatted := xf.NumFmtID != nil && *xf.NumFmtID == textFormat
				if textFormatted != (cell[0] == 'A' || cell[0] == 'C') {
					t.Errorf("%s: text format %v", cell, textFormatted)
				}
			}

			// Uploaded again: the same problems, at the cells the reason names.
			again := mustParse(t, data)
			if got := strings.Join(problems(again), "|"); !strings.HasPrefix(got, "D2: price") || !strings.Contains(got, "|B3: name") || !strings.Contains(got, "|E3: stock") || len(problems(again)) != 3 {
				t.Errorf("the fix file uploaded again: %q", problems(again))
			}
			if w := warnings(again); len(w) != 0 {
				t.Errorf("warnings on the fix file: %v", w)
			}
			// The seller fixes the marked cells, typing numbers as numbers.
			f.SetCellInt(sheet, "D2", 12000)
			f.SetCellStr(sheet, "B3", "모자")
			f.SetCellInt(sheet, "E3", 5)
			var fixed bytes.Buffer
			if err := f.Write(&fixed); err != nil {
				t.Fatal(err)
			}
			done := mustParse(t, fixed.Bytes())
			if len(done.Rows) != 2 || done.Valid() != 2 || done.Rows[0].Product.SellerSKU != "00123" || done.Rows[0].Product.Price != 12000 ||
				done.Rows[1].Product.Stock != 5 || done.Rows[1].Product.Price != 15000 {
				t.Errorf("the fixed file: %d rows, %d valid, %+v, problems %v", len(done.Rows), done.Valid(), done.Rows, problems(done))
			}
		})
	}
}

// TestReportValue: a number column's cell is a number exactly when its
// rule takes it as one (then the number the check reads), and the
// seller's text otherwise; text columns keep the text.
func TestReportValue(t *testing.T) {
	price, stock := ruleOf(FieldPrice), ruleOf(FieldStock)
	for _, tc := range []struct {
		cell string
		rule bool // the price rule; else stock
		want any
	}{
		{"12900", true, int64(12900)}, {"12,900", true, int64(12900)}, {"12900.0", true, int64(12900)}, {" 5 ", false, int64(5)},
		{"0", true, "0"}, {"-5", false, "-5"}, {"12,000원", true, "12,000원"}, {"1.5", false, "1.5"}, {"", true, ""},
		{"99999999999999999999", true, "99999999999999999999"}, {"1000000001", true, "1000000001"},
	} {
		r := stock
		if tc.rule {
			r = price
		}
		if got := reportValue(&r, tc.cell); got != tc.want {
			t.Errorf("reportValue(%q) = %#v, want %#v", tc.cell, got, tc.want)
		}
	}
	sku := ruleOf(FieldSellerSKU)
	if got := reportValue(&sku, "00123"); got != "00123" {
		t.Errorf("a SKU of digits: %#v", got)
	}
}

func ruleOf(field string) productrules.Rule { return productrules.Must(field) }
