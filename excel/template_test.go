package excel

import (
	"bytes"
	"encoding/xml"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/productrules"
)

func templateBytes(t testing.TB, opts TemplateOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteTemplate(&buf, opts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func openXLSX(t testing.TB, data []byte) *excelize.File {
	t.Helper()
	f, err := excelize.OpenReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("open the workbook: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

var someCategories = []Category{{"50000803", "여성의류 > 티셔츠"}, {"CAT-101", "남성의류 > 셔츠"}, {"00123", "잡화"}}

// TestTemplateChecksEveryRuledColumn opens the template as a script would
// (excelize's GetDataValidations, then the sheet's raw XML) and finds each
// column's check with its rule's numbers (package productrules): whole
// numbers between the rule's minimum and maximum, texts of 1 to the
// rule's length, the SKU without spaces and once in the sheet, the image
// address starting with http:// or https://, and the category code from
// the categories' sheet when there is one (its length otherwise). Every
// check covers the rows a file may hold, lets empty cells pass, refuses
// with a message and stays within Excel's lengths.
func TestTemplateChecksEveryRuledColumn(t *testing.T) {
	for _, tc := range []struct {
		name string
		cats []Category
	}{{"without categories", nil}, {"with categories", someCategories}} {
		t.Run(tc.name, func(t *testing.T) {
			data := templateBytes(t, TemplateOptions{Categories: tc.cats})
			f := openXLSX(t, data)
			dvs, err := f.GetDataValidations(TemplateSheet)
			if err != nil {
				t.Fatal(err)
			}
			byCol := map[string]*excelize.DataValidation{}
			for _, dv := range dvs {
				col := strings.TrimRight(strings.SplitN(dv.Sqref, ":", 2)[0], "0123456789")
				if dv.Sqref != col+"2:"+col+"501" {
					t.Errorf("a check covers %s, want %s2:%s501 (the 500 rows a file may hold)", dv.Sqref, col, col)
				}
				byCol[col] = dv
			}
			if len(dvs) != len(Columns()) {
				t.Errorf("%d checks, want one for each of the %d columns", len(dvs), len(Columns()))
			}
			n := func(v int64) string { return strconv.FormatInt(v, 10) }
			for i, c := range Columns() {
				col, _ := excelize.ColumnNumberToName(i + 1)
				dv, r := byCol[col], productrules.Must(c.Field)
				if dv == nil {
					t.Errorf("column %s (%s) has no check", col, c.Field)
					continue
				}
				type want struct{ typ, op, f1, f2 string }
				var w want
				var holds []string
				switch c.Field {
				case FieldPrice, FieldStock, FieldShippingFee:
					w = want{"whole", "between", n(r.Min), n(r.Max)}
				case FieldName, FieldBrand, FieldDescription:
					w = want{"textLength", "between", "1", n(int64(r.MaxLen))}
				case FieldCategoryCode:
					w = want{"textLength", "between", "1", n(int64(r.MaxLen))}
					if len(tc.cats) > 0 {
						w = want{"list", "", "'" + CategorySheet + "'!$A$2:$A$" + n(int64(len(tc.cats)+1)), ""}
					}
				case FieldSellerSKU:
					w = want{typ: "custom"}
					holds = []string{"LEN(A2)<=" + n(int64(r.MaxLen)), `ISERROR(FIND(" ",A2))`, "SUMPRODUCT(--EXACT($A$2:$A$501,A2))=1"}
				case FieldImageURL:
					w = want{typ: "custom"}
					holds = []string{"LEN(G2)<=" + n(int64(r.MaxLen)), `LEFT(G2,7)="http://"`, `LEFT(G2,8)="https://"`, `ISERROR(FIND(" ",G2))`}
				default:
					t.Errorf("no expectation for %s", c.Field)
				}
				got := want{dv.Type, dv.Operator, dv.Formula1, dv.Formula2}
				if len(holds) > 0 {
					got.f1 = ""
					for _, h := range holds {
						if !strings.Contains(dv.Formula1, h) {
							t.Errorf("%s (%s): check %q lacks %q", col, c.Field, dv.Formula1, h)
						}
					}
				}
				if got != w {
					t.Errorf("%s (%s): check %+v, want %+v", col, c.Field, got, w)
				}
				if !dv.AllowBlank || !dv.ShowErrorMessage || dv.ErrorStyle == nil || *dv.ErrorStyle != "stop" || !dv.ShowInputMessage {
					t.Errorf("%s: allow blank %v, error shown %v, input shown %v: want empty cells to pass and both messages", col, dv.AllowBlank, dv.ShowErrorMessage, dv.ShowInputMessage)
				}
				for what, s := range map[string]*string{"title": dv.PromptTitle, "error title": dv.ErrorTitle, "prompt": dv.Prompt, "error": dv.Error} {
					max := map[string]int{"title": maxValidationTitle, "error title": maxValidationTitle, "prompt": maxValidationPrompt, "error": maxValidationError}[what]
					if s == nil || *s == "" || len(utf16.Encode([]rune(*s))) > max {
						t.Errorf("%s: %s %v: want a text of at most %d UTF-16 units (Excel's limit)", col, what, s, max)
					} else if (what == "prompt" || what == "error") && !(hasHangulText(*s) && strings.ContainsAny(*s, "abcdefghijklmnopqrstuvwxyz")) {
						t.Errorf("%s: %s %q is not in Korean and English", col, what, *s)
					}
				}
			}

			// The raw XML: well-formed, one dataValidation a column, the
			// formulas' < escaped.
			sheet := zipPart(t, data, "xl/worksheets/sheet1.xml")
			var ws struct {
				DV []struct {
					Type     string `xml:"type,attr"`
					Sqref    string `xml:"sqref,attr"`
					Formula1 string `xml:"formula1"`
				} `xml:"dataValidations>dataValidation"`
			}
			if err := xml.Unmarshal(sheet, &ws); err != nil {
				t.Fatalf("the sheet's XML: %v", err)
			}
			if len(ws.DV) != len(Columns()) {
				t.Errorf("the sheet's XML holds %d dataValidation elements, want %d", len(ws.DV), len(Columns()))
			}
			for _, dv := range ws.DV {
				if dv.Type == "custom" && !strings.Contains(dv.Formula1, "<=") {
					t.Errorf("custom check %s: formula %q read back without its <=", dv.Sqref, dv.Formula1)
				}
			}
			if !bytes.Contains(sheet, []byte("&lt;=")) {
				t.Error("the sheet's XML holds no escaped <= in a formula")
			}
		})
	}
}

func hasHangulText(s string) bool {
	for _, r := range s {
		if r >= 0xAC00 && r <= 0xD7A3 {
			return true
		}
	}
	return false
}

// TestTemplateHeadersAreStyledAlike: every header cell of the product
// sheet has the one bold header style; the text columns' format under them
// does not replace it.
func TestTemplateHeadersAreStyledAlike(t *testing.T) {
	f := openXLSX(t, templateBytes(t, TemplateOptions{}))
	first, _ := f.GetCellStyle(TemplateSheet, "A1")
	for i := range Columns() {
		cell, _ := excelize.CoordinatesToCellName(i+1, 1)
		id, err := f.GetCellStyle(TemplateSheet, cell)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.GetStyle(id)
		if id != first || st.Font == nil || !st.Font.Bold {
			t.Errorf("%s: style %d (bold %v), A1 has %d: want every header cell in the bold header style", cell, id, st.Font != nil && st.Font.Bold, first)
		}
	}
}

// TestTemplateInstructionsSayTheRules: the instructions sheet's line of
// each column names its rule's numbers, the image address line says what
// the rule accepts (http:// and https://, which productrules takes both
// of), and the sheet says where category codes come from: the categories'
// sheet, or the seller center.
func TestTemplateInstructionsSayTheRules(t *testing.T) {
	for _, u := range []string{"http://img.example.com/a.jpg", "https://img.example.com/a.jpg"} {
		if v := productrules.Must(productrules.ImageURL).CheckText(u); v != nil {
			t.Fatalf("productrules refuses %s: %v", u, v)
		}
	}
	for _, cats := range [][]Category{nil, someCategories} {
		f := openXLSX(t, templateBytes(t, TemplateOptions{Categories: cats}))
		rows, err := f.GetRows(InstructionsSheet)
		if err != nil {
			t.Fatal(err)
		}
		lines := map[string]string{}
		all := ""
		for _, r := range rows {
			all += strings.Join(r, " ") + "\n"
			if len(r) == 2 {
				lines[r[0]] = r[1]
			}
		}
		for i, c := range Columns() {
			line, r := lines[TemplateHeader()[i]], productrules.Must(c.Field)
			var want []string
			if r.Type == productrules.WholeNumber {
				want = []string{group(r.Min) + " ", group(r.Max)}
			} else if !(c.Field == FieldCategoryCode && cats != nil) {
				want = []string{group(int64(r.MaxLen)) + "자", group(int64(r.MaxLen)) + " characters"}
			}
			if r.Required {
				want = append(want, "필수", "Required")
			} else {
				want = append(want, "선택", "Optional")
			}
			for _, w := range want {
				if !strings.Contains(line, w) {
					t.Errorf("categories %d: the line of %s %q lacks %q", len(cats), c.Field, line, w)
				}
			}
		}
		if url := lines[TemplateHeader()[6]]; !strings.Contains(url, "http://") || !strings.Contains(url, "https://") {
			t.Errorf("the image address line %q: want both http:// and https://", url)
		}
		if cats == nil && (!strings.Contains(all, "판매자 센터") || !strings.Contains(all, "seller center")) {
			t.Errorf("without categories the instructions do not say where codes are found:\n%s", all)
		}
		if cats != nil && (!strings.Contains(all, "'"+CategorySheet+"' 시트") || !strings.Contains(all, "(3)")) {
			t.Errorf("with categories the instructions do not name their sheet:\n%s", all)
		}
	}
}

// TestTemplateListsTheCategories: the categories' sheet lists each code
// (as text: 00123 stays 00123) and name under a header; the instructions'
// example uses a listed code; the template still uploads as an empty file,
// and with the example row typed in as one valid row.
func TestTemplateListsTheCategories(t *testing.T) {
	data := templateBytes(t, TemplateOptions{Categories: someCategories})
	f := openXLSX(t, data)
	if got := strings.Join(f.GetSheetList(), ","); got != TemplateSheet+","+InstructionsSheet+","+CategorySheet {
		t.Errorf("sheets %s", got)
	}
	rows, _ := f.GetRows(CategorySheet)
	if len(rows) != 4 || rows[0][0] != "카테고리코드 (category_code)" {
		t.Fatalf("category sheet rows %q", rows)
	}
	for i, c := range someCategories {
		if rows[i+1][0] != c.Code || rows[i+1][1] != c.Name {
			t.Errorf("category row %d %q, want %v", i+2, rows[i+1], c)
		}
		if typ, _ := f.GetCellType(CategorySheet, "A"+strconv.Itoa(i+2)); typ != excelize.CellTypeSharedString && typ != excelize.CellTypeInlineString {
			t.Errorf("code %s is stored as %v, want text", c.Code, typ)
		}
	}
	inst, _ := f.GetRows(InstructionsSheet)
	example := inst[len(inst)-1]
	if example[2] != someCategories[0].Code {
		t.Errorf("the example's category %q, want the first listed code", example[2])
	}
	if _, err := parse(t, data); fileErrCode(t, err).Code != CodeNoRows {
		t.Errorf("the untouched template with categories: %v, want %s", err, CodeNoRows)
	}
	for i, v := range example {
		cell, _ := excelize.CoordinatesToCellName(i+1, 2)
		f.SetCellStr(TemplateSheet, cell, v)
	}
	var filled bytes.Buffer
	if err := f.Write(&filled); err != nil {
		t.Fatal(err)
	}
	s := mustParse(t, filled.Bytes())
	if len(s.Rows) != 1 || !s.Rows[0].Valid() || s.Rows[0].Product.CategoryCode != someCategories[0].Code {
		t.Errorf("the template with the example row: %+v %v", s.Rows, problems(s))
	}
}

func TestReadCategories(t *testing.T) {
	long := strings.Repeat("가", 201)
	for _, tc := range []struct {
		name, in string
		want     []Category
		err      string
	}{
		{"codes and names", "50000803,여성의류 > 티셔츠\nCAT-101,\"남성, 셔츠\"\n00123\n", []Category{{"50000803", "여성의류 > 티셔츠"}, {"CAT-101", "남성, 셔츠"}, {"00123", ""}}, ""},
		{"BOM, header, comments, blank lines, unquoted commas", "\ufeff카테고리코드,카테고리명\n# 2026년 목록\n\n 50000803 , 티셔츠, 반팔 \r\n", []Category{{"50000803", "티셔츠, 반팔"}}, ""},
		{"English header", "category_code,name\nA.1,x\n", []Category{{"A.1", "x"}}, ""},
		{"a bad code", "A-1,x\nA 2,y\n", nil, "line 2: category_code must be a code"},
		{"a code twice", "A-1,x\nB-2,y\nA-1,z\n", nil, `line 3: code "A-1" is on line 1 already`},
		{"an empty code", "A-1,x\n,y\n", nil, "line 2: category_code is required"},
		{"a long name", "A-1," + long + "\n", nil, "line 1: the name of \"A-1\": must be at most 200 characters"},
		{"nothing", "# none\n", nil, "lists no category"},
		{"a broken quote", "A-1,\"x\n", nil, "categories: parse error on line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadCategories(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || len(got) != len(tc.want) {
				t.Fatalf("%v, %v; want %v", got, err, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("category %d = %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
	var many strings.Builder
	for i := range MaxCategories + 1 {
		many.WriteString("C" + strconv.Itoa(i) + "\n")
	}
	if _, err := ReadCategories(strings.NewReader(many.String())); err == nil || !strings.Contains(err.Error(), "more than 100,000") {
		t.Errorf("%d categories: %v, want refused", MaxCategories+1, err)
	}
	if _, err := ReadCategories(strings.NewReader(strings.Repeat("#", MaxCategoryFileBytes+1))); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a file past %d bytes: %v, want refused", MaxCategoryFileBytes, err)
	}
}
