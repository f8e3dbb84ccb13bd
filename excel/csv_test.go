package excel

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"golang.org/x/text/encoding/korean"
)

// sameSheet fails unless two parses give the same header, rows (numbers,
// cells, products, problems) and warnings.
func sameSheet(t *testing.T, what string, got, want *Sheet) {
	t.Helper()
	if got.HeaderRow != want.HeaderRow || strings.Join(got.Header, "|") != strings.Join(want.Header, "|") {
		t.Errorf("%s: header row %d %q, want %d %q", what, got.HeaderRow, got.Header, want.HeaderRow, want.Header)
	}
	equalLines(t, what+": problems", problems(got), problems(want))
	equalLines(t, what+": warnings", warnings(got), warnings(want))
	if len(got.Rows) != len(want.Rows) {
		t.Fatalf("%s: %d rows, want %d", what, len(got.Rows), len(want.Rows))
	}
	for i := range want.Rows {
		g, w := got.Rows[i], want.Rows[i]
		if g.Number != w.Number || g.Product != w.Product || strings.Join(g.Cells, "|") != strings.Join(w.Cells, "|") {
			t.Errorf("%s: row %d\n got %d %+v %q\nwant %d %+v %q", what, i, g.Number, g.Product, g.Cells, w.Number, w.Product, w.Cells)
		}
	}
}

// The korean-headers-* text fixtures hold korean-headers.xlsx as Korean Excel
// saves it in its two CSV formats, its two text formats (Unicode text:
// UTF-16LE with tabs; tab-delimited text: CP949), and as a CSV where the list
// separator is a semicolon.
func TestCSVFixturesSameAsXLSX(t *testing.T) {
	want := mustParse(t, fixture(t, "korean-headers.xlsx"))
	for _, name := range []string{"korean-headers-cp949.csv", "korean-headers-utf8-bom.csv",
		"korean-headers-unicode-text.txt", "korean-headers-tab-cp949.txt", "korean-headers-semicolon.csv"} {
		data := fixture(t, name)
		got := mustParse(t, data)
		if got.Format != FormatCSV || want.Format != FormatXLSX {
			t.Errorf("%s read as %s, the workbook as %s", name, got.Format, want.Format)
		}
		sameSheet(t, name, got, want)
	}
	if cp := fixture(t, "korean-headers-cp949.csv"); bytes.Contains(cp, []byte("판매자")) {
		t.Errorf("the CP949 fixture holds UTF-8 text")
	}
}

// Files LibreOffice saved (testdata/libreoffice/README.md): its CSV with
// commas and with semicolons, its UTF-16 tab text and its .xlsx read exactly
// as the workbook they came from; its own .ods is refused, named.
func TestLibreOfficeFiles(t *testing.T) {
	want := mustParse(t, fixture(t, "korean-headers.xlsx"))
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "libreoffice", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, name := range []string{"korean-headers-comma.csv", "korean-headers-semicolon.csv", "korean-headers-tab-utf16.txt", "korean-headers.xlsx", "korean-headers-from-csv.xlsx"} {
		sameSheet(t, name, mustParse(t, read(name)), want)
	}
	_, err := parse(t, read("korean-headers.ods"))
	if fe := fileErrCode(t, err); fe.Code != CodeNotXLSX || !strings.Contains(fe.Message, "OpenDocument") {
		t.Errorf("the .ods: %s: %s, want not_xlsx naming OpenDocument", fe.Code, fe.Message)
	}
}

// utf16Text is s in UTF-16 in the byte order o, after its byte-order mark.
func utf16Text(o binary.AppendByteOrder, s string) []byte {
	out := o.AppendUint16(nil, 0xFEFF)
	for _, u := range utf16.Encode([]rune(s)) {
		out = o.AppendUint16(out, u)
	}
	return out
}

// Which separator a text file is read with: the one that splits a header row
// out of its first rows, the comma first; a separator inside a field is text.
func TestTextSeparators(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want [][]string // each data row's first three cells
	}{
		{"tabs, a quoted tab and line end in a cell", []byte("판매자상품코드\t상품명\t상세설명\t판매가\t재고수량\t카테고리코드\r\n" +
			"A-1\t셔츠, 화이트\t\"첫 줄\t탭\r\n둘째 줄\"\t1000\t1\tC-1\r\nA-2\t\"a \"\"b\"\"\"\t;\t1000\t1\tC-1\n"),
			[][]string{{"A-1", "셔츠, 화이트", "첫 줄\t탭\n둘째 줄"}, {"A-2", `a "b"`, ";"}}},
		{"commas, with tabs and semicolons in cells", []byte("판매자상품코드,상품명,상세설명,판매가,재고수량,카테고리코드\r\n" +
			"A-1,a;b,x;y\tz,1000,1,C-1\r\n"),
			[][]string{{"A-1", "a;b", "x;y\tz"}}},
		{"semicolons, a comma in an unquoted cell", []byte("sku;name;description;price;stock;category_code\n" +
			"A-1;셔츠, 화이트;\"a;b\";1000;1;C-1\n"),
			[][]string{{"A-1", "셔츠, 화이트", "a;b"}}},
		{"tabs after a title row whose commas split nothing", []byte("2026년 11월, 신상품\r\n\r\nsku\tname\tdescription\tprice\tstock\tcategory_code\r\nA-1\tn\td\t1000\t1\tC-1\r\n"),
			[][]string{{"A-1", "n", "d"}}},
		{"UTF-16 big-endian with tabs and a surrogate pair", utf16Text(binary.BigEndian, "sku\tname\tdescription\tprice\tstock\tcategory_code\r\nA-1\t바지 😀\t설명\t1000\t1\tC-1\r\n"),
			[][]string{{"A-1", "바지 😀", "설명"}}},
		// The comma is tried first: here both the comma and the tab split a
		// whole header out of row 1, and the comma is kept.
		{"commas and tabs both split a header", []byte("sku\tname\tcategory_code\tprice\tstock\t,sku,name,category_code,price,stock\r\n" +
			"A-1\tn\tC-1\t100\t1\t,B-1,m,C-2,200,2\r\n"),
			[][]string{{"A-1\tn\tC-1\t100\t1\t", "B-1", "m"}}},
		// A header written ="sku", as exporters that keep leading zeros write every cell, is a header.
		{"commas, a header of =\"…\" cells", []byte("=\"판매자상품코드\",=\"상품명\",=\"카테고리코드\",=\"판매가\",=\"재고수량\",=\"메모\"\r\n" +
			"=\"A-001\",=\"셔츠\",=\"50000804\",=\"1000\",=\"5\",=\"메모: 가격;재고;배송비;확인\"\r\n"),
			[][]string{{"A-001", "셔츠", "50000804"}}},
		// Commas in a later cell of a tab file split two column names out of
		// row 2, but not a whole header: the tab's header in row 1 is.
		{"tabs, commas splitting column names out of a data cell", []byte("sku\tname\tcategory_code\tprice\tstock\tdescription\r\n" +
			"A-1\tn\tC-1\t100\t1\t색상, 가격, 재고\r\n"),
			[][]string{{"A-1", "n", "C-1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.data)
			if s.Format != FormatCSV || len(s.Rows) != len(tc.want) {
				t.Fatalf("read as %s with %d rows, want csv with %d", s.Format, len(s.Rows), len(tc.want))
			}
			for i, w := range tc.want {
				if got := s.Rows[i].Cells[:3]; strings.Join(got, "|") != strings.Join(w, "|") {
					t.Errorf("row %d: cells %q, want %q", s.Rows[i].Number, got, w)
				}
				if len(s.Rows[i].Problems) != 0 {
					t.Errorf("row %d: problems %v", s.Rows[i].Number, s.Rows[i].Problems)
				}
			}
		})
	}
	// U+FFFD in UTF-16 text is a character, not damage: the file is read and
	// the cell holding it is the one refused, by the rule every cell meets.
	s := mustParse(t, utf16Text(binary.LittleEndian, "sku\tname\tdescription\tprice\tstock\tcategory_code\r\nA-1\t바지\t설명\uFFFD\t1000\t1\tC-1\r\n"))
	if len(s.Rows) != 1 || len(s.Rows[0].Problems) != 1 || s.Rows[0].Problems[0].Cell != "C2" {
		t.Errorf("UTF-16 text holding U+FFFD: %d rows, problems %v; want one row with one problem in C2", len(s.Rows), problems(s))
	}
}

// csvOf writes rows as Excel writes a CSV file.
func csvOf(rows [][]any) string {
	var b strings.Builder
	for _, r := range rows {
		for i, v := range r {
			if i > 0 {
				b.WriteByte(',')
			}
			s := fmt.Sprint(v)
			if strings.ContainsAny(s, ",\"\r\n") {
				s = `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
			}
			b.WriteString(s)
		}
		b.WriteString("\r\n")
	}
	return b.String()
}

func cp949(t *testing.T, s string) []byte {
	t.Helper()
	b, err := korean.EUCKR.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The same seller data, good and bad rows, as an .xlsx, a CP949 CSV and a
// UTF-8 CSV with a byte-order mark: the same rows, cells and problems.
func TestCSVSameAsXLSXWithProblems(t *testing.T) {
	rows := [][]any{
		{"2026년 신상품"},
		{},
		{"판매자 상품코드 (필수)", "상품명*", "카테고리 코드", "판매가(원)", "재고 수량 *", "브랜드명", "대표 이미지 URL", "상세 설명", "배송비", "메모"},
		{"K-1", "셔츠, 화이트", "CAT-101", 12000, 5, "\"따옴표\" 브랜드", "https://img.example.com/1.jpg", "첫 줄\n둘째 줄", 0, "메모"},
		{"K-2", "바지", "50000803", "12,000원", 3, "", "", "", ""},
		{},
		{"K 3", "두 줄\n이름", "카테고리", "1,20,000", -1, "", "ftp://x", "", "무료"},
		{"K-1", "중복", "50000803", 100, 1, "", "", "", 3000},
		{"8.80123E+12", "긴 번호", "1.2E+15", "12000.0", "1,000", "", "", "", ""},
	}
	x := mustParse(t, book(t, rows, nil))
	text := csvOf(rows)
	for name, data := range map[string][]byte{
		"CP949":          cp949(t, text),
		"UTF-8 with BOM": append([]byte{0xEF, 0xBB, 0xBF}, text...),
		"UTF-8, LF only": []byte(strings.ReplaceAll(text, "\r\n", "\n")),
	} {
		sameSheet(t, name, mustParse(t, data), x)
	}
	// The problems themselves, so "the same" is not "the same and wrong".
	equalLines(t, "problems", problems(x), []string{
		`D5: price must be a whole number greater than 0 and at most 1,000,000,000, got "12,000원"; type the number only, without 원 or ₩`,
		`A7: seller_sku must not contain spaces, got "K 3"`,
		`B7: name must be one line, without line breaks or tabs`,
		`C7: category_code must be a code of 1 to 64 letters, digits, '-', '_' or '.', got "카테고리"`,
		`D7: price must be a whole number greater than 0 and at most 1,000,000,000, got "1,20,000"`,
		`E7: stock must be a whole number from 0 to 1,000,000, got "-1"`,
		`G7: image_url must be a web address starting with https:// or http://, got "ftp://x"`,
		`I7: shipping_fee must be a whole number from 0 to 1,000,000, got "무료"`,
		`A8: seller_sku "K-1" is already used in row 4; each product needs its own code`,
		`A9: seller_sku "8.80123E+12" looks like a long number Excel shortened; format the column as text and type the code again`,
		`C9: category_code "1.2E+15" looks like a long number Excel shortened; format the column as text and type the code again`,
	})
	if p := x.Rows[0].Product; p.Name != "셔츠, 화이트" || p.Brand != `"따옴표" 브랜드` || p.Description != "첫 줄\n둘째 줄" || p.CategoryCode != "CAT-101" {
		t.Errorf("row 4 = %+v", p)
	}
}

func TestCSVRefused(t *testing.T) {
	header := "판매자상품코드,상품명,카테고리코드,판매가,재고수량\r\n"
	var many strings.Builder
	many.WriteString(header)
	for i := range 501 {
		fmt.Fprintf(&many, "S-%d,상품,50000803,1000,1\r\n", i)
	}
	for _, tc := range []struct {
		name    string
		data    []byte
		code    string
		message string
	}{
		{"UTF-16 with an odd last byte", append(utf16Text(binary.LittleEndian, "ab"), 'x'), CodeNotXLSX, `the file is UTF-16 text (Excel's "Unicode text") but is damaged 6 bytes in: it ends in half a character; save it again from Excel, or as "CSV UTF-8 (Comma delimited)"`},
		{"UTF-16 with a lone trail surrogate", append(utf16Text(binary.LittleEndian, "ab"), 0x00, 0xDC, 'a', 0), CodeNotXLSX, `the file is UTF-16 text (Excel's "Unicode text") but is damaged 6 bytes in: half of a character pair; save it again from Excel, or as "CSV UTF-8 (Comma delimited)"`},
		{"UTF-16 with a lead surrogate at the end", append(utf16Text(binary.BigEndian, "ab"), 0xD8, 0x00), CodeNotXLSX, `the file is UTF-16 text (Excel's "Unicode text") but is damaged 6 bytes in: half of a character pair; save it again from Excel, or as "CSV UTF-8 (Comma delimited)"`},
		{"UTF-16 with a lead surrogate before a letter", append(utf16Text(binary.BigEndian, "ab"), 0xD8, 0x00, 0, 'a'), CodeNotXLSX, `the file is UTF-16 text (Excel's "Unicode text") but is damaged 6 bytes in: half of a character pair; save it again from Excel, or as "CSV UTF-8 (Comma delimited)"`},
		{"UTF-16 holding NUL", append(utf16Text(binary.BigEndian, "ab"), 0, 0), CodeNotXLSX, `the file is UTF-16 text (Excel's "Unicode text") but is damaged 6 bytes in: a NUL character, so it is not text; save it again from Excel, or as "CSV UTF-8 (Comma delimited)"`},
		{"UTF-16 without a header", utf16Text(binary.LittleEndian, "a\tb\r\n1\t2\r\n"), CodeNoHeader, noHeader(FormatCSV).Message},
		{"tabs, quote never closed", []byte(strings.ReplaceAll(header, ",", "\t") + "A-1\t\"셔츠\t50000803\t1000\t1\r\n"), CodeDamaged, `the tab-separated file is damaged: the quoted cell B2 is never closed; save it again from Excel`},
		{"tabs, header only", []byte(strings.ReplaceAll(header, ",", "\t") + "\t\t\r\n"), CodeNoRows, "the tab-separated file has a header row (row 1) but no product rows below it"},
		{"tabs, missing column", []byte("판매자상품코드\t상품명\t카테고리코드\r\nA\tb\t1\r\n"), CodeMissingColumn, `the header row (row 1 of the tab-separated file) lacks the required columns 판매가 (price) and 재고수량 (stock); add them or start from the template`},
		{"semicolons, missing column", []byte("판매자상품코드;상품명;카테고리코드\r\nA;b;1\r\n"), CodeMissingColumn, `the header row (row 1 of the CSV file) lacks the required columns 판매가 (price) and 재고수량 (stock); add them or start from the template`},
		{"binary", []byte("\x00\x01\x02\x03\x04\x05binary\x00"), CodeNotXLSX, `the file is neither an Excel workbook (.xlsx) nor a CSV file; save it from Excel as "Excel Workbook (.xlsx)" or "CSV UTF-8 (Comma delimited)"`},
		{"neither UTF-8 nor CP949", []byte("sku,name\r\n\xff\xff,\x80\r\n"), CodeNotXLSX, `the file is not an Excel workbook (.xlsx), and as text it is neither UTF-8 nor CP949 (EUC-KR); save it from Excel as "Excel Workbook (.xlsx)" or "CSV UTF-8 (Comma delimited)"`},
		{"BOM then not UTF-8", append([]byte{0xEF, 0xBB, 0xBF}, cp949(t, header)...), CodeNotXLSX, `the file starts as UTF-8 text but holds bytes that are not UTF-8; save it again from Excel as "CSV UTF-8 (Comma delimited)"`},
		{"quote never closed", []byte(header + "A-1,\"셔츠,50000803,1000,1\r\nA-2,바지,50000803,1000,1\r\n"), CodeDamaged, `the CSV file is damaged: the quoted cell B2 is never closed; save it again from Excel`},
		{"no header", []byte("a,b,c\r\n1,2,3\r\n"), CodeNoHeader, ""},
		{"header only", []byte(header + ",,,,\r\n"), CodeNoRows, "the CSV file has a header row (row 1) but no product rows below it"},
		{"missing column", []byte("판매자상품코드,상품명,카테고리코드\r\nA,b,1\r\n"), CodeMissingColumn, `the header row (row 1 of the CSV file) lacks the required columns 판매가 (price) and 재고수량 (stock); add them or start from the template`},
		{"501 rows", []byte(many.String()), CodeTooManyRows, "the file has 501 data rows; at most 500 can be uploaded at once, so nothing was registered: split it into files of at most 500 rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parse(t, tc.data)
			if s != nil {
				t.Fatalf("refused file returned %d rows", len(s.Rows))
			}
			fe := fileErrCode(t, err)
			if fe.Code != tc.code || (tc.message != "" && fe.Message != tc.message) {
				t.Errorf("got  %s: %s\nwant %s: %s", fe.Code, fe.Message, tc.code, tc.message)
			}
		})
	}
	// The size cap holds for a CSV as for a workbook: it is checked before the type.
	data := []byte(many.String())
	_, err := NewParser(Options{MaxFileSize: int64(len(data)) - 1}).ParseBytes(context.Background(), data)
	if fe := fileErrCode(t, err); fe.Code != CodeTooLarge {
		t.Errorf("oversized CSV: %s: %s", fe.Code, fe.Message)
	}
}

// Excel's CSV corners: a blank line is a row, text after a closing quote is
// kept, a lone CR ends a line, a doubled quote is a quote, ="007" is the text
// 007, and a cell over MaxCellBytes is counted but not kept.
func TestCSVCorners(t *testing.T) {
	long := strings.Repeat("설명", 40000) // 240,000 bytes, 80,000 characters
	text := "상품명,판매자상품코드,판매가,재고수량,카테고리코드,상세설명\r" +
		"\"이름\"뒤,A-1,100,1,C-1,\r\n" +
		"\n" +
		"\"a \"\"b\"\"\",A-2,100,1,C-1,\"" + long + "\"\n" +
		"c,A-3,100,1,C-1\n" +
		"=\"007\",\"=\"\"00123\"\"\",=\"1\"+\"2\",1,C-1"
	s, err := NewParser(Options{}).Parse(context.Background(), strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	checkSheet(t, s, sheetWant{header: 1, rows: []int{2, 4, 5, 6}, valid: 2, problems: []string{
		`F4: description must be at most 10,000 characters, got 80,000 characters`,
		`C6: price must be a whole number greater than 0 and at most 1,000,000,000, got "=\"1\"+\"2\""`,
	}})
	// ="007" is how a CSV keeps leading zeros: Excel shows 007.
	if p := s.Rows[3]; p.Cells[0] != "007" || p.Cells[1] != "00123" {
		t.Errorf("row 6 cells %q, want 007 and 00123", p.Cells[:2])
	}
	if got := s.Rows[0].Product.Name; got != "이름뒤" {
		t.Errorf("text after a closing quote: %q", got)
	}
	if got := s.Rows[1].Product.Name; got != `a "b"` {
		t.Errorf("doubled quotes: %q", got)
	}
	if got := s.Rows[1].Cells[5]; len(got) > DefaultMaxCellBytes || !strings.HasPrefix(got, "설명설명") {
		t.Errorf("a 240,000-byte cell kept %d bytes", len(got))
	}
}

// The report of a CSV upload is an .xlsx, built from the parsed rows like any
// other: the failed rows, uploaded again as they are, give the same problems.
func TestCSVReportIsXLSX(t *testing.T) {
	rows := [][]any{
		{"판매자상품코드", "상품명", "카테고리코드", "판매가", "재고수량", "상세설명"},
		{"C-1", "좋은 상품", "CAT-101", "12000", "3", "첫 줄\n둘째 줄"},
		{"C-2", "=HYPERLINK(\"x\")", "50000803", "12,000원", "-1", ""},
	}
	s := mustParse(t, cp949(t, csvOf(rows)))
	var rr []ReportRow
	for _, r := range s.Rows {
		res, reason := ResultRegistered, ""
		if !r.Valid() {
			res, reason = ResultFailed, r.Problems[0].Error()
		}
		rr = append(rr, ReportRow{Number: r.Number, Cells: r.Cells, Result: res, Reason: reason})
	}
	var buf bytes.Buffer
	if err := WriteReport(&buf, s.Header, rr, true); err != nil {
		t.Fatal(err)
	}
	again := mustParse(t, buf.Bytes())
	if again.Format != FormatXLSX || len(again.Rows) != 1 {
		t.Fatalf("report: %s with %d rows", again.Format, len(again.Rows))
	}
	equalLines(t, "problems of the report", problems(again), []string{
		`D2: price must be a whole number greater than 0 and at most 1,000,000,000, got "12,000원"; type the number only, without 원 or ₩`,
		`E2: stock must be a whole number from 0 to 1,000,000, got "-1"`,
	})
	if got := again.Rows[0].Product.Name; got != `=HYPERLINK("x")` {
		t.Errorf("name read back %q", got)
	}
}
