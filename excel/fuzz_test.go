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
	"unicode/utf8"
)

var fileCodes = map[string]bool{
	CodeTooLarge: true, CodeNotXLSX: true, CodeDamaged: true, CodeNoHeader: true, CodeMissingColumn: true,
	CodeDuplicateColumn: true, CodeTooManyRows: true, CodeNoRows: true, CodeTimeout: true, CodeCanceled: true,
}

func fuzzParser() *Parser {
	return NewParser(Options{MaxFileSize: 2 << 20, UnzipSizeLimit: 16 << 20, ParseTimeout: 3 * time.Second, MaxConcurrent: 1})
}

// checkParseResult holds for every input: a *FileError with a known code, or
// a sheet whose rows are consistent. A panic recovered inside excelize is an
// accepted refusal (excelize v2.11.0 has known panics on crafted files); a
// panic in this package is a bug.
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
		if fe.Err != nil && panicInThisPackage(fe.Err.Error()) {
			t.Fatalf("panic in package excel: %v", fe.Err)
		}
		return
	}
	if s == nil || len(s.Rows) == 0 || len(s.Rows) > p.opts.MaxRows {
		t.Fatalf("sheet with %v rows", s)
	}
	prev := s.HeaderRow
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
		if r.Valid() {
			q := r.Product
			if q.SellerSKU == "" || q.Name == "" || q.CategoryCode == "" || q.Price < 1 || q.Price > MaxPrice ||
				q.Stock < 0 || q.Stock > MaxStock || q.ShippingFee < 0 || q.ShippingFee > MaxShippingFee ||
				utf8.RuneCountInString(q.Name) > MaxNameLen || utf8.RuneCountInString(q.Description) > MaxDescriptionLen {
				t.Fatalf("row %d is valid but its product breaks a rule: %+v", r.Number, q)
			}
		}
	}
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
	p := fuzzParser()
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := p.ParseBytes(context.Background(), data)
		checkParseResult(t, p, s, err)
	})
}

// FuzzSheetXML: any worksheet XML inside an otherwise valid workbook, so the
// fuzzer gets past the zip checksums into excelize and the sheet scan.
func FuzzSheetXML(f *testing.F) {
	base := fixture(f, "formulas.xlsx")
	for _, name := range []string{"formulas.xlsx", "merged-cells.xlsx", "korean-headers.xlsx", "dates.xlsx", "hidden-rows.xlsx"} {
		f.Add(zipPart(f, fixture(f, name), "xl/worksheets/sheet1.xml"))
	}
	f.Add([]byte(`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1048577"><c r="A1048577"><v>1</v></c></row></sheetData></worksheet>`))
	f.Add([]byte(`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row><c r="ZZZZ1" t="s"><v>99999</v></c></row></sheetData><mergeCells><mergeCell ref="A1:XFD1048576"/></mergeCells></worksheet>`))
	p := fuzzParser()
	f.Fuzz(func(t *testing.T, sheet []byte) {
		data := replacePart(t, base, "xl/worksheets/sheet1.xml", sheet)
		s, err := p.ParseBytes(context.Background(), data)
		checkParseResult(t, p, s, err)
	})
}

// FuzzCell: the cell rules on any text.
func FuzzCell(f *testing.F) {
	for _, s := range []string{"12000", "12,000", "12,000원", "1.2E+4", "11000.000000000002", "-0", "'=1+1", "\t'=x",
		"https://img.example.com/a.jpg", "8.80123E+12", " 판매가 (필수)* ", "(((", "가\xff", strings.Repeat("9", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, lim := range []struct{ lo, hi int64 }{{1, MaxPrice}, {0, MaxStock}} {
			n, fe := parseWhole("price", v, lim.lo, lim.hi, true, 0)
			if fe != nil {
				if len(fe.msg) > 400 {
					t.Fatalf("message of %d bytes", len(fe.msg))
				}
				continue
			}
			if n < lim.lo || n > lim.hi {
				t.Fatalf("parseWhole(%q) = %d outside [%d, %d]", v, n, lim.lo, lim.hi)
			}
			for _, again := range []string{strconv.FormatInt(n, 10), group(n)} {
				if m, fe := parseWhole("price", again, lim.lo, lim.hi, true, 0); fe != nil || m != n {
					t.Fatalf("parseWhole(%q) = %d but %q gives %d, %v", v, n, again, m, fe)
				}
			}
		}
		for _, fe := range []*fieldError{checkSKU(v), checkCategory(v), checkURL(v),
			checkText("name", v, true, MaxNameLen, false), checkText("description", v, false, MaxDescriptionLen, true)} {
			if fe != nil && (fe.code == "" || len(fe.msg) > 400) {
				t.Fatalf("%q: %+v", v, fe)
			}
		}
		if checkSKU(v) == nil && (v == "" || strings.ContainsAny(v, " \t\n")) {
			t.Fatalf("checkSKU accepted %q", v)
		}
		if checkCategory(v) == nil && !allDigits(v) {
			t.Fatalf("checkCategory accepted %q", v)
		}
		if a, b := cleanCell(neutralize(v)), cleanCell(v); a != b {
			t.Fatalf("cleanCell(neutralize(%q)) = %q, cleanCell = %q", v, a, b)
		}
		if n := neutralize(v); n != "" && strings.ContainsRune(formulaStarts, rune(n[0])) {
			t.Fatalf("neutralize(%q) = %q still starts a formula", v, n)
		}
		if h := normalizeHeader(v); normalizeHeader(h) != h {
			t.Fatalf("normalizeHeader not idempotent on %q: %q then %q", v, h, normalizeHeader(h))
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
