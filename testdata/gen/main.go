// Command gen writes the spreadsheets under testdata/: the fixtures the excel
// tests assert exact errors on, and the demo uploads. Every file is made here
// so anyone can see, change and remake them:
//
//	go run ./testdata/gen            # writes ./testdata/*.xlsx, ./testdata/*.csv and ./testdata/demo/*.xlsx
//	go run ./testdata/gen -out DIR
//
// The output is deterministic (excelize writes fixed timestamps), so running
// it again without changes leaves git clean. Files excelize cannot write (a
// formula with a saved result, a cell over Excel's 32,767 characters, a cut-off
// sheet, a zip bomb) are made by rewriting the parts of a generated file.
package main

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/xuri/excelize/v2"
	"golang.org/x/text/encoding/korean"

	"github.com/bulkreg/bulkreg/excel"
)

func main() {
	out := flag.String("out", "testdata", "directory to write the fixtures into")
	flag.Parse()
	if err := os.MkdirAll(filepath.Join(*out, "demo"), 0o755); err != nil {
		log.Fatal(err)
	}
	for _, fx := range fixtures() {
		data, err := fx.make()
		if err != nil {
			log.Fatalf("%s: %v", fx.name, err)
		}
		if err := os.WriteFile(filepath.Join(*out, fx.name), data, 0o644); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-28s %9d bytes  %s\n", fx.name, len(data), fx.what)
	}
}

type fixture struct {
	name string
	what string
	make func() ([]byte, error)
}

func fixtures() []fixture {
	return []fixture{
		{"valid-500.xlsx", "500 valid rows under the template header", func() ([]byte, error) { return products("P", 500, nil) }},
		{"rows-501.xlsx", "501 valid rows: one too many", func() ([]byte, error) { return products("P", 501, nil) }},
		{"korean-headers.xlsx", "title rows, then Korean headers with (필수), *, spaces and an unknown column", koreanHeaders},
		{"korean-headers-cp949.csv", "korean-headers.xlsx as Korean Excel saves \"CSV (쉼표로 분리)\": CP949, CRLF", func() ([]byte, error) { return koreanHeadersText(cp949, ',') }},
		{"korean-headers-utf8-bom.csv", "korean-headers.xlsx as \"CSV UTF-8 (쉼표로 분리)\": a byte-order mark, CRLF", func() ([]byte, error) { return koreanHeadersText(utf8BOM, ',') }},
		{"korean-headers-unicode-text.txt", "korean-headers.xlsx as \"유니코드 텍스트\" (Unicode text): UTF-16LE after a byte-order mark, tabs, CRLF", func() ([]byte, error) { return koreanHeadersText(utf16LE, '\t') }},
		{"korean-headers-tab-cp949.txt", "korean-headers.xlsx as \"텍스트 (탭으로 분리)\": CP949, tabs, CRLF", func() ([]byte, error) { return koreanHeadersText(cp949, '\t') }},
		{"korean-headers-semicolon.csv", "korean-headers.xlsx as Excel saves \"CSV UTF-8\" where the list separator is a semicolon: a byte-order mark, semicolons, CRLF", func() ([]byte, error) { return koreanHeadersText(utf8BOM, ';') }},
		{"english-headers.xlsx", "English headers in another order, mixed case", englishHeaders},
		{"missing-column.xlsx", "no 판매가 and no 재고수량 column", missingColumn},
		{"bad-values.xlsx", "a bad value in every field, one row per rule", badValues},
		{"blank-rows.xlsx", "blank rows, rows of spaces, a row with only a memo", blankRows},
		{"merged-cells.xlsx", "vertical merges (filled down), a merge across two columns, one from the header", mergedCells},
		{"formulas.xlsx", "formulas with and without a saved result, an #N/A cell", formulas},
		{"dates.xlsx", "dates where a code, a name and a price belong", dates},
		{"hidden-rows.xlsx", "rows 3 and 5 hidden", hiddenRows},
		{"duplicates.xlsx", "seller_sku used three times", duplicates},
		{"numbers-as-text.xlsx", "numbers typed as text, with and without commas", numbersAsText},
		{"big-cell.xlsx", "a 1 MiB name cell and a 1 MiB description cell", bigCell},
		{"truncated.xlsx", "the worksheet XML cut off at 60%, inside a valid zip", truncatedSheet},
		{"truncated-zip.xlsx", "the first 60% of the bytes of a valid file", truncatedZip},
		{"zip-bomb.xlsx", "a worksheet that unpacks to 256 MiB of spaces", zipBomb},
		{"zip-bomb-lying.xlsx", "the same bomb with its sizes in the zip directory rewritten to 4 KiB", zipBombLying},
		{"not-xlsx.xlsx", "a PDF file renamed to .xlsx", notXLSX},
		{"old-xls.xlsx", "the header of an old .xls (OLE) file", oldXLS},
		{"zip-not-workbook.xlsx", "a zip file holding a text file", zipNotWorkbook},
		{"demo/seller-a-500.xlsx", "demo: seller A, 500 valid rows", func() ([]byte, error) { return products("A", 500, nil) }},
		{"demo/seller-b-120.xlsx", "demo: seller B, 120 valid rows", func() ([]byte, error) { return products("B", 120, nil) }},
		{"demo/seller-c-40.xlsx", "demo: seller C, 40 valid rows", func() ([]byte, error) { return products("C", 40, nil) }},
	}
}

var (
	names  = []string{"반팔 티셔츠", "린넨 셔츠", "데님 팬츠", "니트 가디건", "후드 집업", "캔버스 스니커즈", "가죽 벨트", "울 머플러", "코튼 양말 5족", "에코백"}
	colors = []string{"화이트", "블랙", "네이비", "베이지", "그레이", "카키"}
	sizes  = []string{"S", "M", "L", "XL", "FREE"}
	brands = []string{"베이직하우스", "모던핏", "데일리룩", "", "어반스텝"}
	cats   = []string{"50000803", "50000804", "50000830", "50000167", "50001311"}
)

// product returns the cells of a valid row; i numbers the product within the file.
func product(prefix string, i int) []any {
	n := names[i%len(names)] + " " + colors[(i/len(names))%len(colors)] + " " + sizes[(i/7)%len(sizes)]
	return []any{
		fmt.Sprintf("%s-%04d", prefix, i),
		n,
		cats[i%len(cats)],
		9900 + (i%40)*1000,
		(i * 37) % 500,
		brands[i%len(brands)],
		fmt.Sprintf("https://img.example.com/%s/%04d.jpg", strings.ToLower(prefix), i),
		n + " 상품입니다. 세탁 시 찬물에 단독 세탁해 주세요.",
		[]int{0, 2500, 3000}[i%3],
	}
}

func header() []any {
	h := excel.TemplateHeader()
	out := make([]any, len(h))
	for i, v := range h {
		out[i] = v
	}
	return out
}

// products writes the template header and n valid rows.
func products(prefix string, n int, edit func(*excelize.File) error) ([]byte, error) {
	rows := [][]any{header()}
	for i := 1; i <= n; i++ {
		rows = append(rows, product(prefix, i))
	}
	return write(rows, edit)
}

// write puts rows from A1 of Sheet1, applies edit and returns the file.
func write(rows [][]any, edit func(*excelize.File) error) ([]byte, error) {
	f := excelize.NewFile()
	defer f.Close()
	for i, r := range rows {
		if r == nil {
			continue
		}
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		if err := f.SetSheetRow("Sheet1", cell, &r); err != nil {
			return nil, err
		}
	}
	if edit != nil {
		if err := edit(f); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func koreanHeaders() ([]byte, error) { return write(koreanHeaderRows(), nil) }

func koreanHeaderRows() [][]any {
	rows := [][]any{
		{"2026년 11월 신상품 등록"},
		nil,
		{" 판매자 상품코드 (필수)", "상품명*", "카테고리 코드", "판매가(원)", "재고 수량 *", "브랜드명", "대표 이미지 URL", "상세 설명", "배송비", "메모"},
	}
	for i := 1; i <= 5; i++ {
		rows = append(rows, append(product("K", i), "내부용 메모"))
	}
	return rows
}

// textEncoding is how Excel encodes a text export.
type textEncoding int

const (
	cp949   textEncoding = iota // "CSV (쉼표로 분리)", "텍스트 (탭으로 분리)"
	utf8BOM                     // "CSV UTF-8 (쉼표로 분리)"
	utf16LE                     // "유니코드 텍스트": UTF-16LE after a byte-order mark
)

// koreanHeadersText writes koreanHeaderRows as Excel writes a text export:
// fields separated by sep, every line as wide as the widest, CRLF line ends,
// quotes only where needed (a field holding sep, a quote or a line end), in
// the encoding enc.
func koreanHeadersText(enc textEncoding, sep byte) ([]byte, error) {
	rows := koreanHeaderRows()
	width := 0
	for _, r := range rows {
		width = max(width, len(r))
	}
	var b strings.Builder
	for _, r := range rows {
		for i := range width {
			if i > 0 {
				b.WriteByte(sep)
			}
			if i < len(r) {
				v := fmt.Sprint(r[i])
				if strings.ContainsAny(v, string(sep)+"\"\r\n") {
					v = `"` + strings.ReplaceAll(v, `"`, `""`) + `"`
				}
				b.WriteString(v)
			}
		}
		b.WriteString("\r\n")
	}
	switch enc {
	case cp949:
		return korean.EUCKR.NewEncoder().Bytes([]byte(b.String()))
	case utf16LE:
		out := []byte{0xFF, 0xFE}
		for _, u := range utf16.Encode([]rune(b.String())) {
			out = binary.LittleEndian.AppendUint16(out, u)
		}
		return out, nil
	}
	return append([]byte{0xEF, 0xBB, 0xBF}, b.String()...), nil
}

func englishHeaders() ([]byte, error) {
	// The columns in another order than the template's.
	rows := [][]any{{"NAME", "Seller SKU", "Price *", "Stock (required)", "Category_Code", "shipping fee", "Image URL", "Brand", "Description"}}
	for i := 1; i <= 5; i++ {
		p := product("E", i)
		rows = append(rows, []any{p[1], p[0], p[3], p[4], p[2], p[8], p[6], p[5], p[7]})
	}
	return write(rows, nil)
}

func missingColumn() ([]byte, error) {
	rows := [][]any{{"판매자상품코드", "상품명", "카테고리코드", "브랜드"}}
	for i := 1; i <= 3; i++ {
		p := product("M", i)
		rows = append(rows, []any{p[0], p[1], p[2], p[5]})
	}
	return write(rows, nil)
}

// badValues: row r holds one broken rule (see the test for each message).
func badValues() ([]byte, error) {
	ok := func(i int) []any { return product("X", i) }
	with := func(i, col int, v any) []any { r := ok(i); r[col] = v; return r }
	rows := [][]any{
		header(),
		with(2, 0, "SKU 2"),                          // 2: sku with a space
		with(3, 0, ""),                               // 3: sku empty
		with(4, 1, strings.Repeat("가", 201)),         // 4: name too long
		with(5, 1, "두 줄\n이름"),                        // 5: name with a line break
		with(6, 2, "CAT 01"),                         // 6: category code with a space
		with(7, 3, "12,000원"),                        // 7: price with a unit
		with(8, 3, 0),                                // 8: price zero
		with(9, 3, 12000.5),                          // 9: price not whole
		with(10, 4, -1),                              // 10: stock negative
		with(11, 4, "많음"),                            // 11: stock a word
		with(12, 5, strings.Repeat("B", 101)),        // 12: brand too long
		with(13, 6, "ftp://img.example.com/a.jpg"),   // 13: image_url not http
		with(14, 6, "img.jpg"),                       // 14: image_url relative
		with(15, 7, strings.Repeat("설", 10001)),      // 15: description too long
		with(16, 8, "무료"),                            // 16: shipping_fee a word
		with(17, 3, "1,20,000"),                      // 17: price with wrong grouping
		with(18, 0, "8.80123E+12"),                   // 18: sku Excel shortened
		{"", "", "", "", "", "", "", "", ""},         // 19: blank (skipped)
		{"X-0020", "", "카테고리", "-5", "1.5", "", "x"}, // 20: everything wrong at once
		with(21, 4, 1000001),                         // 21: stock over the maximum
		ok(22),                                       // 22: valid
	}
	return write(rows, nil)
}

func blankRows() ([]byte, error) {
	rows := [][]any{
		header(),
		product("L", 2),
		product("L", 3),
		nil,
		{" ", "  ", "\u3000", "", "", "", "", "", "", ""},
		product("L", 6),
		nil, nil, nil,
		{"", "", "", "", "", "", "", "", "", "메모만 있는 행"},
		product("L", 11),
	}
	return write(rows, nil)
}

func mergedCells() ([]byte, error) {
	rows := [][]any{header()}
	for i := 2; i <= 9; i++ {
		rows = append(rows, product("G", i))
	}
	return write(rows, func(f *excelize.File) error {
		// F2:F4 brand merged down three rows: the value of F2 applies to 3 and 4.
		for _, c := range []string{"F3", "F4"} {
			if err := f.SetCellStr("Sheet1", c, ""); err != nil {
				return err
			}
		}
		if err := f.SetCellStr("Sheet1", "F2", "공통브랜드"); err != nil {
			return err
		}
		if err := f.MergeCell("Sheet1", "F2", "F4"); err != nil {
			return err
		}
		// C5:C6 category merged down.
		if err := f.MergeCell("Sheet1", "C5", "C6"); err != nil {
			return err
		}
		// B7:C7 name merged with category: an error on row 7.
		if err := f.MergeCell("Sheet1", "B7", "C7"); err != nil {
			return err
		}
		// J1:J9 is outside the known columns: ignored.
		if err := f.MergeCell("Sheet1", "J1", "J9"); err != nil {
			return err
		}
		return nil
	})
}

func formulas() ([]byte, error) {
	rows := [][]any{header()}
	for i := 2; i <= 6; i++ {
		rows = append(rows, product("F", i))
	}
	data, err := write(rows, nil)
	if err != nil {
		return nil, err
	}
	// Written as Excel and scripts write them; excelize would keep a stale result.
	cells := map[string]string{
		"D2": `<c r="D2"><f>10000+2000</f><v>12000</v></c>`,                                        // result saved: used
		"D3": `<c r="D3"><f>D2*2</f></c>`,                                                          // no result: error
		"B4": `<c r="B4" t="str"><f>CONCAT(&quot;상품&quot;,A4)</f></c>`,                             // no result: error
		"E5": `<c r="E5" t="e"><f>VLOOKUP(A5,재고!A:B,2,FALSE)</f><v>#N/A</v></c>`,                   // an Excel error
		"F6": `<c r="F6" t="str"><f>IF(A6=&quot;&quot;,&quot;x&quot;,&quot;&quot;)</f><v></v></c>`, // empty result: brand empty
	}
	return rewrite(data, func(name string, b []byte) ([]byte, error) {
		if name != "xl/worksheets/sheet1.xml" {
			return b, nil
		}
		for ref, c := range cells {
			re := regexp.MustCompile(`<c r="` + ref + `"[^>]*>.*?</c>`)
			if !re.Match(b) {
				return nil, fmt.Errorf("formulas: cell %s not in the sheet", ref)
			}
			b = re.ReplaceAllLiteral(b, []byte(c))
		}
		return b, nil
	})
}

func dates() ([]byte, error) {
	rows := [][]any{header()}
	for i := 2; i <= 5; i++ {
		rows = append(rows, product("D", i))
	}
	day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	return write(rows, func(f *excelize.File) error {
		// What Excel does when "2024-01" is typed as a code, "3/4" as a name and a date lands in price.
		style, err := f.NewStyle(&excelize.Style{NumFmt: 14})
		if err != nil {
			return err
		}
		for _, c := range []struct {
			cell string
			v    time.Time
		}{{"A2", day}, {"B3", time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)}, {"D4", time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}} {
			if err := f.SetCellValue("Sheet1", c.cell, c.v); err != nil {
				return err
			}
			if err := f.SetCellStyle("Sheet1", c.cell, c.cell, style); err != nil {
				return err
			}
		}
		return nil
	})
}

func hiddenRows() ([]byte, error) {
	return products("H", 5, func(f *excelize.File) error {
		for _, r := range []int{3, 5} {
			if err := f.SetRowVisible("Sheet1", r, false); err != nil {
				return err
			}
		}
		return nil
	})
}

func duplicates() ([]byte, error) {
	rows := [][]any{header()}
	for i := 2; i <= 7; i++ {
		rows = append(rows, product("U", i))
	}
	rows[4][0] = "U-0002" // row 5
	rows[6][0] = "U-0002" // row 7
	return write(rows, nil)
}

func numbersAsText() ([]byte, error) {
	rows := [][]any{
		header(),
		{"T-0001", "텍스트 숫자 1", "0050000803", "12000", "7", "", "", "", " 2500 "},
		{"T-0002", "텍스트 숫자 2", "50000803", "12,000", "1,000", "", "", "", "3,000"},
		{"T-0003", "텍스트 숫자 3", "50000803", "12000.0", "0", "", "", "", ""},
		{"T-0004", "텍스트 숫자 4", "50000803", "1,2000", "10", "", "", "", ""},
		{"T-0005", "텍스트 숫자 5", "50000803", "₩12,000", "10", "", "", "", ""},
	}
	return write(rows, func(f *excelize.File) error {
		// Numbers typed as text in Excel are strings in the file; SetSheetRow
		// already wrote the Go strings as strings. Also one real number with float noise,
		// 12 decimals written out: excelize's automatic precision (-1) rounds to
		// Excel's 15 significant digits since v2.11.1 and would drop the noise.
		return f.SetCellFloat("Sheet1", "D4", 11000.000000000002, 12, 64)
	})
}

const mib = 1 << 20

func bigCell() ([]byte, error) {
	rows := [][]any{header(), product("Z", 2), product("Z", 3), product("Z", 4)}
	rows[1][1] = "@@BIG-NAME@@"
	rows[2][7] = "@@BIG-DESC@@"
	data, err := write(rows, nil)
	if err != nil {
		return nil, err
	}
	// excelize cuts cells to Excel's 32,767 characters; put 1 MiB in by hand.
	big := bytes.Repeat([]byte("가나다라"), mib/12) // 3 bytes a rune: about 1 MiB, 349,524 runes
	return rewrite(data, func(name string, b []byte) ([]byte, error) {
		b = bytes.ReplaceAll(b, []byte("@@BIG-NAME@@"), big)
		b = bytes.ReplaceAll(b, []byte("@@BIG-DESC@@"), big)
		return b, nil
	})
}

func truncatedSheet() ([]byte, error) {
	data, err := products("C", 50, nil)
	if err != nil {
		return nil, err
	}
	return rewrite(data, func(name string, b []byte) ([]byte, error) {
		if name == "xl/worksheets/sheet1.xml" {
			return b[:len(b)*6/10], nil
		}
		return b, nil
	})
}

func truncatedZip() ([]byte, error) {
	data, err := products("C", 50, nil)
	if err != nil {
		return nil, err
	}
	return data[:len(data)*6/10], nil
}

const bombSize = 256 * mib

func zipBomb() ([]byte, error) {
	data, err := products("B", 3, nil)
	if err != nil {
		return nil, err
	}
	return rewrite(data, func(name string, b []byte) ([]byte, error) {
		if name != "xl/worksheets/sheet1.xml" {
			return b, nil
		}
		// Spaces between two rows are valid XML: the sheet is well-formed, just huge.
		i := bytes.Index(b, []byte("</row>")) + len("</row>")
		return append(append(append([]byte{}, b[:i]...), bytes.Repeat([]byte(" "), bombSize)...), b[i:]...), nil
	})
}

// zipBombLying is zipBomb with the sheet's sizes in the central directory
// and local header rewritten to 4 KiB: a check of declared sizes passes it.
func zipBombLying() ([]byte, error) {
	data, err := zipBomb()
	if err != nil {
		return nil, err
	}
	out := append([]byte{}, data...)
	name := []byte("xl/worksheets/sheet1.xml")
	patched := 0
	for i := 0; i+46 < len(out); i++ {
		switch {
		case bytes.Equal(out[i:i+4], []byte("PK\x01\x02")): // central directory header
			n := int(binary.LittleEndian.Uint16(out[i+28:]))
			if bytes.Equal(out[i+46:i+46+n], name) {
				binary.LittleEndian.PutUint32(out[i+24:], 4096) // uncompressed size
				patched++
			}
		case bytes.Equal(out[i:i+4], []byte("PK\x03\x04")): // local header
			n := int(binary.LittleEndian.Uint16(out[i+26:]))
			if bytes.Equal(out[i+30:i+30+n], name) {
				binary.LittleEndian.PutUint32(out[i+22:], 4096)
				patched++
			}
		}
	}
	if patched == 0 {
		return nil, fmt.Errorf("zip-bomb-lying: sheet entry not found")
	}
	return out, nil
}

// notXLSX is the start of a PDF: binary, neither a workbook nor text.
func notXLSX() ([]byte, error) {
	return []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Length 4 /Filter /FlateDecode >>\nstream\n\x78\x9c\x03\x00\x00\x00\x00\x01\nendstream\nendobj\n"), nil
}

func oldXLS() ([]byte, error) {
	b := []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}
	return append(b, make([]byte, 504)...), nil
}

func zipNotWorkbook() ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "hello.txt", Method: zip.Deflate, Modified: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(w, "not a workbook\n"); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// rewrite copies a zip, passing each entry through fn.
func rewrite(data []byte, fn func(name string, b []byte) ([]byte, error)) ([]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, flate.BestCompression)
	})
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		if b, err = fn(f.Name, b); err != nil {
			return nil, err
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: zip.Deflate, Modified: f.Modified})
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(b); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
