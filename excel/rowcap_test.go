package excel

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// manyRowsSheet is a worksheet with the Korean header in row 1 and n tiny
// data rows below it (only seller_sku filled), the shape of an upload crafted
// to make the parser walk a huge sheet before it counts past the row cap.
func manyRowsSheet(n int) []byte { return manyRowsSheetWith(koreanHeader, n) }

func manyRowsSheetWith(header []any, n int) []byte {
	var b bytes.Buffer
	b.Grow(n*100 + 1024)
	b.WriteString(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` +
		`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1">`)
	for i, h := range header {
		b.WriteString(`<c r="` + cellName(i+1, 1) + `" t="inlineStr"><is><t>` + h.(string) + `</t></is></c>`)
	}
	b.WriteString(`</row>`)
	for r := 2; r <= n+1; r++ {
		s := strconv.Itoa(r)
		b.WriteString(`<row r="` + s + `"><c r="A` + s + `" t="inlineStr"><is><t>SKU-` + s + `</t></is></c><c r="E` + s + `"><v>1</v></c></row>`)
	}
	b.WriteString(`</sheetData></worksheet>`)
	return b.Bytes()
}

func manyRowsFile(t testing.TB, n int) []byte {
	t.Helper()
	return replacePart(t, fixture(t, "korean-headers.xlsx"), "xl/worksheets/sheet1.xml", manyRowsSheet(n))
}

// A file of 577,000 data rows that fits the size caps (about 7.5 MB packed,
// 60 MiB unpacked) is refused as soon as the 501st data row is read, not after
// walking every row: the time to refuse does not grow with the rows below.
func TestTooManyRowsRefusedEarly(t *testing.T) {
	data := manyRowsFile(t, 577_000)
	p := NewParser(Options{})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	s, err := p.ParseBytes(context.Background(), data)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if s != nil {
		t.Fatalf("a file of 577,000 rows returned %d rows", len(s.Rows))
	}
	fe := fileErrCode(t, err)
	t.Logf("%.1f MB file: refused in %v, %d MiB allocated: %s", float64(len(data))/1e6, took, (after.TotalAlloc-before.TotalAlloc)>>20, fe.Message)
	if want := "the file has more than 5,000 data rows; at most 500 can be uploaded at once, so nothing was registered: split it into files of at most 500 rows"; fe.Code != CodeTooManyRows || fe.Message != want {
		t.Fatalf("%s: %s\nwant %s", fe.Code, fe.Message, want)
	}
	// Allocation, unlike time, does not depend on how busy the machine is:
	// walking all 577,000 rows would allocate gigabytes; stopping early in
	// the one-pass reader allocates well under 1 MiB.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Errorf("refusing allocated %d MiB: the rows past the count limit were read", alloc>>20)
	}
}

// Between MaxRows and the count limit the seller is told the exact count.
func TestTooManyRowsExactCount(t *testing.T) {
	_, err := parse(t, manyRowsFile(t, 5000))
	fe := fileErrCode(t, err)
	if want := "the file has 5,000 data rows; at most 500 can be uploaded at once, so nothing was registered: split it into files of at most 500 rows"; fe.Code != CodeTooManyRows || fe.Message != want {
		t.Fatalf("%s: %s\nwant %s", fe.Code, fe.Message, want)
	}
	_, err = parse(t, manyRowsFile(t, 5001))
	if fe := fileErrCode(t, err); !strings.HasPrefix(fe.Message, "the file has more than 5,000 data rows;") {
		t.Fatalf("%s: %s", fe.Code, fe.Message)
	}
}

// The same for rows whose only content is a formula without a saved result:
// the value reader sees them as blank, the sheet scan counts them.
func TestTooManyFormulaRowsRefusedEarly(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1">`)
	for i, h := range koreanHeader {
		b.WriteString(`<c r="` + cellName(i+1, 1) + `" t="inlineStr"><is><t>` + h.(string) + `</t></is></c>`)
	}
	b.WriteString(`</row>`)
	for r := 2; r <= 500_000; r++ {
		s := strconv.Itoa(r)
		b.WriteString(`<row r="` + s + `"><c r="D` + s + `"><f>1+1</f></c></row>`)
	}
	b.WriteString(`</sheetData></worksheet>`)
	data := replacePart(t, fixture(t, "korean-headers.xlsx"), "xl/worksheets/sheet1.xml", b.Bytes())
	start := time.Now()
	_, err := NewParser(Options{}).ParseBytes(context.Background(), data)
	t.Logf("%.1f MB file of formula rows: refused in %v", float64(len(data))/1e6, time.Since(start))
	fe := fileErrCode(t, err)
	if want := "the file has more than 5,000 data rows; at most 500 can be uploaded at once, so nothing was registered: split it into files of at most 500 rows"; fe.Code != CodeTooManyRows || fe.Message != want {
		t.Fatalf("%s: %s\nwant %s", fe.Code, fe.Message, want)
	}
}

// A header without a required column refuses the file before any row below
// it is read, however many there are.
func TestMissingColumnRefusedBeforeTheRows(t *testing.T) {
	data := replacePart(t, fixture(t, "korean-headers.xlsx"), "xl/worksheets/sheet1.xml", manyRowsSheetWith(koreanHeader[:3], 577_000))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := parse(t, data)
	runtime.ReadMemStats(&after)
	fe := fileErrCode(t, err)
	if want := `the header row (row 1 of sheet "Sheet1") lacks the required columns 판매가 (price) and 재고수량 (stock); add them or start from the template`; fe.Code != CodeMissingColumn || fe.Message != want {
		t.Fatalf("%s: %s\nwant %s", fe.Code, fe.Message, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Errorf("refusing allocated %d MiB: the rows below the header were read", alloc>>20)
	}
}
