package excel

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/productrules"
)

var fileCodes = map[string]bool{
	CodeTooLarge: true, CodeNotXLSX: true, CodeDamaged: true, CodeNoHeader: true, CodeMissingColumn: true,
	CodeDuplicateColumn: true, CodeTooManyRows: true, CodeNoRows: true, CodeTimeout: true, CodeCanceled: true,
}

func fuzzParser() *Parser {
	return NewParser(Options{MaxFileSize: 2 << 20, UnzipSizeLimit: 16 << 20, ParseTimeout: 3 * time.Second, MaxConcurrent: 1})
}

// checkParseResult holds for every input: a *FileError with a known code, or
// a sheet whose rows are consistent, keep no more text than the bounds allow,
// and are valid only when the API's rules accept them. Every panic is a bug:
// the reader is this package's own code (panicInThisPackage tells which frame).
func checkParseResult(t *testing.T, p *Parser, s *Sheet, err error) {
	t.Helper()
	if err != nil {
		var fe *FileError
		if !errors.As(err, &fe) {
			t.Fatalf("error %T %v is not a *FileError", err, err)
		}
		if fe.Code == CodeTimeout {
			t.Fatalf("a small file took longer than %v: %v", p.opts.ParseTimeout, fe)
		}
		if !fileCodes[fe.Code] || fe.Message == "" {
			t.Fatalf("file error with code %q message %q", fe.Code, fe.Message)
		}
		if s != nil {
			t.Fatalf("a refused file returned a sheet")
		}
		if fe.Err != nil && strings.Contains(fe.Err.Error(), "panic while parsing") {
			t.Fatalf("panic (in package excel: %v): %v", panicInThisPackage(fe.Err.Error()), fe.Err)
		}
		return
	}
	if s == nil || len(s.Rows) == 0 || len(s.Rows) > p.opts.MaxRows {
		t.Fatalf("sheet with %v rows", s)
	}
	prev, text := s.HeaderRow, 0
	for _, r := range s.Rows {
		if r.Number <= prev {
			t.Fatalf("row %d after row %d", r.Number, prev)
		}
		prev = r.Number
		if len(r.Cells) != len(s.Header) {
			t.Fatalf("row %d: %d cells, header %d", r.Number, len(r.Cells), len(s.Header))
		}
		for _, pr := range r.Problems {
			if pr.Row != r.Number || pr.Code == "" || pr.Message == "" {
				t.Fatalf("row %d: problem %+v", r.Number, pr)
			}
		}
		total := 0
		for _, c := range r.Cells {
			if len(c) > p.opts.MaxCellBytes {
				t.Fatalf("row %d keeps a cell of %d bytes; the bound is %d", r.Number, len(c), p.opts.MaxCellBytes)
			}
			total += len(c)
		}
		text += total
		if r.Valid() {
			if v := productViolation(r.Product); v != nil {
				t.Fatalf("row %d is valid but its product breaks a rule (%v): %+v", r.Number, v, r.Product)
			}
		}
	}
	if int64(text) > p.opts.MaxTextBytes {
		t.Fatalf("the rows keep %d bytes of text; the bound is %d", text, p.opts.MaxTextBytes)
	}
}

// productViolation checks a product against the shared table, as the API does.
func productViolation(q bulkreg.Product) *productrules.Violation {
	texts := map[string]string{FieldSellerSKU: q.SellerSKU, FieldName: q.Name, FieldCategoryCode: q.CategoryCode,
		FieldBrand: q.Brand, FieldImageURL: q.ImageURL, FieldDescription: q.Description}
	numbers := map[string]int64{FieldPrice: q.Price, FieldStock: q.Stock, FieldShippingFee: q.ShippingFee}
	for _, r := range productrules.Rules() {
		var v *productrules.Violation
		if r.Type == productrules.Text {
			v = r.CheckText(texts[r.Field])
		} else {
			v = r.CheckNumber(numbers[r.Field], "")
		}
		if v != nil {
			return v
		}
	}
	return nil
}

// panicInThisPackage reads the stack Parse recorded and reports whether the
// panicking frame (the first after panic(), runtime frames skipped) is ours.
func panicInThisPackage(stack string) bool {
	lines := strings.Split(stack, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "panic(") {
			continue
		}
		for _, f := range lines[i+1:] {
			if strings.HasPrefix(f, "\t") || strings.HasPrefix(f, "runtime.") || strings.HasPrefix(f, "panic(") {
				continue
			}
			return strings.HasPrefix(f, "github.com/bulkreg/bulkreg/excel.")
		}
	}
	return false
}

var fuzzSeeds = []string{"korean-headers.xlsx", "formulas.xlsx", "merged-cells.xlsx", "dates.xlsx", "hidden-rows.xlsx",
	"truncated.xlsx", "truncated-zip.xlsx", "not-xlsx.xlsx", "old-xls.xlsx", "zip-not-workbook.xlsx", "missing-column.xlsx"}

// FuzzParse: any bytes.
func FuzzParse(f *testing.F) {
	for _, name := range fuzzSeeds {
		f.Add(fixture(f, name))
	}
	f.Add([]byte{})
	f.Add([]byte("PK\x03\x04"))
	for _, data := range hostileSeeds(f, ".xlsx", 64<<10) {
		f.Add(data)
	}
	p := fuzzParser()
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := p.ParseBytes(context.Background(), data)
		checkParseResult(t, p, s, err)
	})
}

// FuzzSheetXML: any worksheet XML inside an otherwise valid workbook, so the
// fuzzer gets past the zip checksums into the sheet reader.
func FuzzSheetXML(f *testing.F) {
	base := fixture(f, "formulas.xlsx")
	for _, name := range []string{"formulas.xlsx", "merged-cells.xlsx", "korean-headers.xlsx", "dates.xlsx", "hidden-rows.xlsx"} {
		f.Add(zipPart(f, fixture(f, name), "xl/worksheets/sheet1.xml"))
	}
	// The shapes of the hostile corpus, small: repeated, overlapping and
	// header merges, deep nesting, many attributes, huge numbers.
	f.Add([]byte(`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>sku</t></is></c><c r="B1" t="inlineStr"><is><t>name</t></is></c><c r="D1" t="inlineStr"><is><t>price</t></is></c></row><row r="2"><c r="A2" t="inlineStr"><is><t>A</t></is></c><c r="D2"><v>1e308</v></c></row><row r="3" hidden="1"><c r="D3"><v>` + strings.Repeat("9", 400) + `</v></c></row></sheetData><mergeCells>` +
		strings.Repeat(`<mergeCell ref="A2:B3"/>`, 50) + `<mergeCell ref="D1:D3"/><mergeCell ref="D2:D3"/><mergeCell ref="D3:D3"/></mergeCells></worksheet>`))
	f.Add([]byte(`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>` + strings.Repeat("<x>", 300) + strings.Repeat("</x>", 300) + `</sheetData></worksheet>`))
	f.Add([]byte(`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row` + strings.Repeat(` a=""`, 1) + ` b="" c=""` + `/></sheetData><x` + hostileAttrs(300) + `/></worksheet>`))
	f.Add([]byte(`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1048577"><c r="A1048577"><v>1</v></c></row></sheetData></worksheet>`))
	f.Add([]byte(`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row><c r="ZZZZ1" t="s"><v>99999</v></c></row></sheetData><mergeCells><mergeCell ref="A1:XFD1048576"/></mergeCells></worksheet>`))
	// Namespaces and Markup Compatibility: prefixes, a default bound again,
	// ignorable and foreign elements, AlternateContent's branches.
	header, row := nsRow("x:", 1, "", nsHeader...), nsRow("", 2, ` x14ac:dyDescent="0.3"`, nsProduct("A-1")...)
	f.Add([]byte(`<x:worksheet xmlns:x="` + mainNS + `" xmlns:mc="` + mcNS + `" xmlns:h="` + foreignNS + `" xmlns:x14ac="` + x14acNS + `" mc:Ignorable="h x14ac"><x:sheetData>` + header +
		`<h:row r="2"/><mc:AlternateContent><mc:Choice Requires="x">` + strings.Replace(row, "<row", `<row xmlns="`+mainNS+`"`, 1) + `</mc:Choice><mc:Fallback><h:x/></mc:Fallback></mc:AlternateContent></x:sheetData></x:worksheet>`))
	f.Add([]byte(`<worksheet xmlns="` + mainNS + `" xmlns:mc="` + mcNS + `" xmlns:x14="` + x14NS + `"><sheetData>` + nsRow("", 1, "", nsHeader...) +
		`<mc:AlternateContent><mc:Choice Requires="x14"><x14:row/></mc:Choice><mc:Fallback>` + nsRow("", 2, "", nsProduct("B-1")...) + `</mc:Fallback></mc:AlternateContent><row r="3" xmlns=""/></sheetData></worksheet>`))
	p := fuzzParser()
	f.Fuzz(func(t *testing.T, sheet []byte) {
		data := replacePart(t, base, "xl/worksheets/sheet1.xml", sheet)
		s, err := p.ParseBytes(context.Background(), data)
		checkParseResult(t, p, s, err)
	})
}

// FuzzBoundedSheet: any worksheet and shared-strings XML, read with tiny
// cell and text bounds: whatever the cells point at, no row keeps more than
// MaxCellBytes of a cell or MaxTextBytes in all, and every answer is a sheet
// or a *FileError.
func FuzzBoundedSheet(f *testing.F) {
	base := fixture(f, "big-cell.xlsx")
	f.Add(zipPart(f, base, "xl/worksheets/sheet1.xml"), []byte(`<sst><si><t>판매자상품코드</t></si></sst>`))
	f.Add([]byte(`<worksheet><sheetData><row r="1"><c t="s"><v>0</v></c><c t="s"><v>0</v></c></row></sheetData></worksheet>`),
		[]byte(`<sst><si><t>`+strings.Repeat("가", 100)+`</t><rPh><t>x</t></rPh></si></sst>`))
	f.Add(manyRowsSheet(30), []byte(`<sst/>`))
	f.Add([]byte(sheetOf(``, `<row r="1"><c t="s"><v>0</v></c><c t="s"><v>1</v></c></row>`)),
		[]byte(`<s:sst xmlns:s="`+mainNS+`" xmlns:mc="`+mcNS+`" xmlns:h="`+foreignNS+`" mc:Ignorable="h"><s:si><s:t>판매자</s:t><h:t>x</h:t><s:r><s:t>상품코드</s:t></s:r></s:si><h:si/><s:si><s:t>price</s:t></s:si></s:sst>`))
	p := NewParser(Options{MaxFileSize: 2 << 20, UnzipSizeLimit: 16 << 20, ParseTimeout: 3 * time.Second, MaxConcurrent: 1,
		MaxCellBytes: 64, MaxTextBytes: 4096})
	f.Fuzz(func(t *testing.T, sheet, sst []byte) {
		data := replacePart(t, base, "xl/worksheets/sheet1.xml", sheet)
		data = replacePart(t, data, "xl/sharedStrings.xml", sst)
		s, err := p.ParseBytes(context.Background(), data)
		checkParseResult(t, p, s, err)
	})
}

// FuzzCSV: any bytes read as a CSV file (text or not, any encoding), with
// small bounds, get a sheet or a *FileError.
func FuzzCSV(f *testing.F) {
	f.Add([]byte("판매자상품코드,상품명,카테고리코드,판매가,재고수량\r\nA-1,\"티셔츠, \"\"흰색\"\"\",CAT-101,\"12,000\",10\r\n"))
	f.Add(append([]byte{0xEF, 0xBB, 0xBF}, "sku,name,category,price,stock\nA,\"a\nb\",1,2,3\n\n,,,,\nB,b,1,2"...))
	f.Add([]byte("\xc6\xc7\xb8\xc5\xc0\xda,name,category,price,stock\r\nA,\xc0\xcc\xb8\xa7,1,2,3\r\n"))
	f.Add([]byte("sku,name,category,price,stock\n\"A"))
	f.Add([]byte("sku\tname\tcategory\tprice\tstock\r\nA\t\"a\tb\"\t1\t2\t3\r\n"))
	f.Add([]byte("sku;name;category;price;stock\nA;a, b;1;2;3\n"))
	for _, name := range []string{"korean-headers-unicode-text.txt", "korean-headers-tab-cp949.txt"} {
		f.Add(fixture(f, name))
	}
	for _, ext := range []string{".csv", ".txt"} {
		for _, data := range hostileSeeds(f, ext, 64<<10) {
			f.Add(data)
		}
	}
	p := NewParser(Options{MaxFileSize: 1 << 20, ParseTimeout: 3 * time.Second, MaxConcurrent: 1, MaxCellBytes: 16, MaxTextBytes: 1024})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := p.ParseBytes(context.Background(), data)
		checkParseResult(t, p, s, err)
		if s != nil && s.Format != FormatCSV {
			t.Fatalf("format %q for a file that is not a zip", s.Format)
		}
	})
}

// FuzzCell: the cell rules on any text.
func FuzzCell(f *testing.F) {
	for _, s := range []string{"12000", "12,000", "12,000원", "1.2E+4", "11000.000000000002", "-0", "'=1+1", "\t'=x",
		"https://img.example.com/a.jpg", "8.80123E+12", " 판매가 (필수)* ", "(((", "가\xff", strings.Repeat("9", 40), "CAT-101",
		"ZW-\u200d002", "ZW-002\u2060", "\u202eZW", "\u1100\u1161\u1107\u1161\u11bc-001", "-0.0", "\u22120", "-0.0000001"} {
		f.Add(s)
	}
	v := newValidator()
	f.Fuzz(func(t *testing.T, s string) {
		for _, rule := range v.rules {
			text, n, viol := checkCell(rule, cellValue{text: cleanCell(s)})
			if viol != nil {
				if viol.Code == "" || viol.Field != rule.Field || len(viol.Message) > 400 || !strings.HasPrefix(viol.Message, rule.Field+" ") {
					t.Fatalf("%s %q: %+v", rule.Field, s, viol)
				}
				continue
			}
			// What the validator accepts, the table (the API) accepts as it is sent.
			var again *productrules.Violation
			if rule.Type == productrules.Text && !productrules.IsNFC(text) {
				t.Fatalf("%s %q accepted as %+q, not in NFC", rule.Field, s, text)
			}
			if rule.Field == productrules.SellerSKU && strings.IndexFunc(text, productrules.IsInvisibleFormat) >= 0 {
				t.Fatalf("seller_sku %+q accepted with an invisible character", text)
			}
			if rule.Type == productrules.WholeNumber && n == 0 && productrules.HasSign(cleanCell(s)) {
				t.Fatalf("%s %q: a signed zero accepted", rule.Field, s)
			}
			if rule.Type == productrules.Text {
				if text != "" {
					again = rule.CheckText(text)
				}
			} else {
				again = rule.CheckNumber(n, "")
				if m, viol := parseWhole(rule, strconv.FormatInt(n, 10)); viol != nil || m != n {
					t.Fatalf("%s %q = %d but %d reads as %d, %v", rule.Field, s, n, n, m, viol)
				}
				if m, viol := parseWhole(rule, group(n)); viol != nil || m != n {
					t.Fatalf("%s %q = %d but %q reads as %d, %v", rule.Field, s, n, group(n), m, viol)
				}
			}
			if again != nil {
				t.Fatalf("the validator accepted %s %q, the API's rules refuse it: %v", rule.Field, s, again)
			}
		}
		if h := normalizeHeader(s); normalizeHeader(h) != h {
			t.Fatalf("normalizeHeader not idempotent on %q: %q then %q", s, h, normalizeHeader(h))
		}
	})
}

func zipPart(t testing.TB, data []byte, name string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		if f.Name == name {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			b, err := io.ReadAll(rc)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("no part %s", name)
	return nil
}

func replacePart(t testing.TB, data []byte, name string, content []byte) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		w, err := zw.Create(f.Name)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name == name {
			_, err = w.Write(content)
		} else {
			var rc io.ReadCloser
			if rc, err = f.Open(); err == nil {
				_, err = io.Copy(w, rc)
				rc.Close()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestPanicInThisPackage(t *testing.T) {
	ours := "goroutine 1 [running]:\nruntime/debug.Stack()\n\t/x\ngithub.com/bulkreg/bulkreg/excel.(*Parser).ParseBytes.func1.2()\n\t/x\npanic({0x1, 0x2})\n\t/usr/lib/go/src/runtime/panic.go:1\nruntime.goPanicIndex(...)\n\t/x\ngithub.com/bulkreg/bulkreg/excel.applyMerges(...)\n"
	theirs := strings.Replace(ours, "github.com/bulkreg/bulkreg/excel.applyMerges", "github.com/xuri/excelize/v2.(*File).Rows", 1)
	if !panicInThisPackage(ours) || panicInThisPackage(theirs) {
		t.Fatal("panic frame misread")
	}
}
