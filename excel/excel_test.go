package excel

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"
)

func TestParseSizeCap(t *testing.T) {
	data := book(t, [][]any{koreanHeader, validRow(1)}, nil)
	p := NewParser(Options{MaxFileSize: int64(len(data))})
	if s, err := p.Parse(context.Background(), bytes.NewReader(data)); err != nil || len(s.Rows) != 1 {
		t.Fatalf("a file of exactly MaxFileSize: %v", err)
	}
	p = NewParser(Options{MaxFileSize: int64(len(data)) - 1})
	// The reader is never read past the limit + 1 byte.
	r := &countingReader{r: bytes.NewReader(append(data, make([]byte, 1<<20)...))}
	_, err := p.Parse(context.Background(), r)
	fe := fileErrCode(t, err)
	if fe.Code != CodeTooLarge || !strings.HasPrefix(fe.Message, "the file is larger than ") {
		t.Errorf("%s: %s", fe.Code, fe.Message)
	}
	if r.n > int64(len(data)) {
		t.Errorf("read %d bytes of an oversized upload; the cap is %d", r.n, len(data)-1)
	}
	if got := NewParser(Options{}).Options().MaxFileSize; got != 10<<20 {
		t.Errorf("default MaxFileSize %d", got)
	}
}

type countingReader struct {
	r *bytes.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// A parse that runs out of time ends with its request, and its slot comes
// back as Parse returns: the next parse, another seller's, gets it at once.
// (A parse in a goroutine of its own would keep the slot after Parse had
// answered "timeout", until it ended by itself.)
func TestParseTimeoutGivesTheSlotBack(t *testing.T) {
	data := book(t, [][]any{koreanHeader, validRow(1)}, nil)
	var stuck atomic.Bool
	stuck.Store(true)
	p := NewParser(Options{MaxConcurrent: 1, ParseTimeout: 100 * time.Millisecond})
	p.beforeParse = func(ctx context.Context) {
		if stuck.Load() {
			<-ctx.Done() // a reader working until its context ends
		}
	}
	start := time.Now()
	_, err := p.ParseBytes(context.Background(), data)
	if fe := fileErrCode(t, err); fe.Code != CodeTimeout || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stuck parse: %s: %v", fe.Code, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("timeout of 100ms took %v", d)
	}
	stuck.Store(false)
	select {
	case p.slots <- struct{}{}:
		<-p.slots
	default:
		t.Fatal("the parse that timed out still holds the only slot after Parse returned")
	}
	if s, err := p.ParseBytes(context.Background(), data); err != nil || len(s.Rows) != 1 {
		t.Fatalf("the next parse: %v", err)
	}
}

// processCPU is the CPU time the test process has used, user and system:
// what a step costs, which a machine busy with other processes does not
// inflate as it does the time on the clock.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A crafted file whose parse outlasts its request must not keep the slot
// another seller's 5-row upload needs. An element of 149,000 attributes in
// docProps would cost a quadratic duplicate check tens of seconds of CPU;
// a part bulkreg does not need is not read at all, and the check is linear
// where it runs.
func TestCraftedParseLeavesTheSlotToTheNext(t *testing.T) {
	var attrs strings.Builder
	for i := range 100000 {
		attrs.WriteString(" a" + strconv.FormatInt(int64(i), 36) + `=""`)
	}
	data := book(t, [][]any{koreanHeader, validRow(1)}, nil)
	crafted := addPart(t, data, "docProps/custom.xml", []byte("<Properties"+attrs.String()+"/>"))
	p := NewParser(Options{MaxConcurrent: 1, ParseTimeout: 300 * time.Millisecond})
	start := time.Now()
	_, _ = p.ParseBytes(context.Background(), crafted)
	first := time.Since(start)
	five := book(t, [][]any{koreanHeader, validRow(1), validRow(2), validRow(3), validRow(4), validRow(5)}, nil)
	s, err := p.ParseBytes(context.Background(), five)
	if err != nil || len(s.Rows) != 5 {
		t.Fatalf("a 5-row upload right after the crafted one (which took %v): %v", first, err)
	}
	// The workbook's own root with as many attributes is refused, fast.
	wb := zipPart(t, data, "xl/workbook.xml")
	wb = bytes.Replace(wb, []byte("<workbook "), []byte("<workbook"+attrs.String()+" "), 1)
	// CPU time, not the clock's: the refusal costs milliseconds, the
	// quadratic check it guards against seconds.
	crafted = replacePart(t, data, "xl/workbook.xml", wb)
	c0 := processCPU()
	_, err = NewParser(Options{}).ParseBytes(context.Background(), crafted)
	cpu := processCPU() - c0
	if fe := fileErrCode(t, err); fe.Code != CodeDamaged || !strings.Contains(fe.Message, "more than 256 attributes") {
		t.Errorf("%s: %s", fe.Code, fe.Message)
	}
	t.Logf("refusing a workbook root of 100,000 attributes: %v of CPU", cpu)
	if cpu > time.Second {
		t.Errorf("refusing a workbook root of 100,000 attributes took %v of CPU", cpu)
	}
}

func TestParseRecoversPanics(t *testing.T) {
	p := NewParser(Options{MaxConcurrent: 1})
	p.beforeParse = func(context.Context) { panic("boom") }
	_, err := p.ParseBytes(context.Background(), []byte("PK"))
	fe := fileErrCode(t, err)
	if fe.Code != CodeDamaged || fe.Err == nil || !strings.Contains(fe.Err.Error(), "boom") {
		t.Fatalf("%s: %v (%v)", fe.Code, fe, fe.Err)
	}
	// The slot was given back.
	p.beforeParse = nil
	if _, err := p.ParseBytes(context.Background(), book(t, [][]any{koreanHeader, validRow(1)}, nil)); err != nil {
		t.Fatalf("after a panic: %v", err)
	}
}

func TestParseCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := NewParser(Options{MaxConcurrent: 1})
	p.slots <- struct{}{} // every slot busy: Parse must give up on ctx
	_, err := p.ParseBytes(ctx, book(t, [][]any{koreanHeader, validRow(1)}, nil))
	if fe := fileErrCode(t, err); fe.Code != CodeCanceled || !errors.Is(err, context.Canceled) {
		t.Fatalf("%s: %v", fe.Code, err)
	}
}

func TestParseConcurrencyCap(t *testing.T) {
	data := fixture(t, "demo/seller-c-40.xlsx")
	p := NewParser(Options{MaxConcurrent: 2})
	var now, peak atomic.Int32
	p.beforeParse = func(context.Context) {
		n := now.Add(1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		now.Add(-1)
	}
	var wg sync.WaitGroup
	var ok atomic.Int32
	for range 8 {
		wg.Go(func() {
			if s, err := p.ParseBytes(context.Background(), data); err == nil && len(s.Rows) == 40 {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 8 || peak.Load() != 2 {
		t.Fatalf("%d of 8 parses ok, at most %d at once; want 8 and 2", ok.Load(), peak.Load())
	}
}

func TestHeaderNames(t *testing.T) {
	for _, tc := range []struct {
		header, field string
	}{
		{"판매자상품코드", FieldSellerSKU},
		{" 판매자 상품코드 (필수) ", FieldSellerSKU},
		{"*판매자상품코드*", FieldSellerSKU},
		{"Seller_SKU", FieldSellerSKU},
		{"SELLER SKU", FieldSellerSKU},
		{"상품명[필수]", FieldName},
		{"Product Name", FieldName},
		{"카테고리 코드", FieldCategoryCode},
		{"category-code", FieldCategoryCode},
		{"판매가(원)", FieldPrice},
		{"판매가（필수）", FieldPrice},
		{"Price *", FieldPrice},
		{"재고수량", FieldStock},
		{"qty", FieldStock},
		{"브랜드", FieldBrand},
		{"대표이미지URL", FieldImageURL},
		{"image_url", FieldImageURL},
		{"상세설명", FieldDescription},
		{"배송비", FieldShippingFee},
		{"Shipping Fee", FieldShippingFee},
		{"판매자상품코드* (seller_sku)", FieldSellerSKU},
		// The brackets Korean and Japanese templates use around a note.
		{"상품명【필수】", FieldName},
		{"상품명〈필수〉", FieldName},
		{"상품명《필수》", FieldName},
		{"상품명「필수」", FieldName},
		{"상품명『필수』", FieldName},
		{"상품명〔필수〕", FieldName},
		{"상품명‹필수›", FieldName},
		{"상품명＜필수＞", FieldName},
		{"판매가{원}", FieldPrice},
		{"판매가｛원｝", FieldPrice},
		{"〖필수〗 판매가", FieldPrice},
		{"메모", ""},
		{"", ""},
	} {
		c, ok := lookupColumn(tc.header)
		if got := map[bool]string{true: c.Field}[ok]; got != tc.field {
			t.Errorf("%q → %q, want %q", tc.header, got, tc.field)
		}
	}
}

func TestHeaderRowSearch(t *testing.T) {
	mk := func(headerAt int) []byte {
		rows := make([][]any, headerAt-1)
		for i := range rows {
			rows[i] = []any{"제목 " + itoa(i+1)}
		}
		rows = append(rows, koreanHeader, validRow(1))
		return book(t, rows, nil)
	}
	s := mustParse(t, mk(HeaderSearchRows))
	if s.HeaderRow != HeaderSearchRows || s.Rows[0].Number != HeaderSearchRows+1 {
		t.Errorf("header at row %d: found %d", HeaderSearchRows, s.HeaderRow)
	}
	_, err := parse(t, mk(HeaderSearchRows+1))
	if fe := fileErrCode(t, err); fe.Code != CodeNoHeader {
		t.Errorf("header at row %d: %s %v", HeaderSearchRows+1, fe.Code, fe)
	}
}

func TestDuplicateColumn(t *testing.T) {
	h := append(append([]any{}, koreanHeader...), "Price")
	_, err := parse(t, book(t, [][]any{h, validRow(1)}, nil))
	fe := fileErrCode(t, err)
	if fe.Code != CodeDuplicateColumn || fe.Message != `the header row names a column twice: J1: column "Price" names price again (already D1)` {
		t.Errorf("%s: %s", fe.Code, fe.Message)
	}
}

func TestNoRows(t *testing.T) {
	_, err := parse(t, book(t, [][]any{koreanHeader, {}, {" "}}, nil))
	if fe := fileErrCode(t, err); fe.Code != CodeNoRows || fe.Message != `the sheet "Sheet1" has a header row (row 1) but no product rows below it` {
		t.Errorf("%s: %s", fe.Code, fe.Message)
	}
}

func TestSheetChoice(t *testing.T) {
	data := book(t, [][]any{{"안내문"}, {"이 시트에는 상품이 없습니다"}}, func(f *excelize.File) {
		if _, err := f.NewSheet("숨김"); err != nil {
			t.Fatal(err)
		}
		for i, r := range [][]any{koreanHeader, validRow(9)} {
			cell, _ := excelize.CoordinatesToCellName(1, i+1)
			_ = f.SetSheetRow("숨김", cell, &r)
		}
		if err := f.SetSheetVisible("숨김", false); err != nil {
			t.Fatal(err)
		}
		if _, err := f.NewSheet("상품"); err != nil {
			t.Fatal(err)
		}
		for i, r := range [][]any{koreanHeader, validRow(1), validRow(2)} {
			cell, _ := excelize.CoordinatesToCellName(1, i+1)
			_ = f.SetSheetRow("상품", cell, &r)
		}
	})
	s := mustParse(t, data)
	if s.SheetName != "상품" || len(s.Rows) != 2 {
		t.Errorf("read sheet %q with %d rows; want the first visible sheet with a header, 상품", s.SheetName, len(s.Rows))
	}
}

func TestMergeFromHeader(t *testing.T) {
	data := book(t, [][]any{koreanHeader, validRow(1), validRow(2), validRow(3)}, func(f *excelize.File) {
		if err := f.MergeCell("Sheet1", "F1", "F3"); err != nil {
			t.Fatal(err)
		}
	})
	s := mustParse(t, data)
	checkSheet(t, s, sheetWant{header: 1, rows: []int{2, 3, 4}, valid: 1, problems: []string{
		`F2: cells F1:F3 are merged with the header row; unmerge them and type each value in its own cell`,
		`F3: the cell is inside the merged cells F1:F3 (see row 2); unmerge them and type each value in its own cell`,
	}})
}

// Rows whose only content is a formula without a result still count, both
// as problems and towards the row limit.
func TestFormulaOnlyRowsCount(t *testing.T) {
	data := book(t, [][]any{koreanHeader}, func(f *excelize.File) {
		for r := 2; r <= 602; r++ {
			cell, _ := excelize.CoordinatesToCellName(4, r)
			if err := f.SetCellFormula("Sheet1", cell, "1+1"); err != nil {
				t.Fatal(err)
			}
		}
	})
	_, err := parse(t, data)
	if fe := fileErrCode(t, err); fe.Code != CodeTooManyRows || !strings.HasPrefix(fe.Message, "the file has 601 data rows;") {
		t.Fatalf("%s: %s", fe.Code, fe.Message)
	}
}

func TestQuotePrefixed(t *testing.T) {
	for in, want := range map[string]bool{
		"=1+1": true, "+82": true, "-5": true, "@SUM(A1)": true, "\tx": true, "\rx": true,
		"상품": false, "": false, " =x": false, "'=x": false,
	} {
		if got := quotePrefixed(in); got != want {
			t.Errorf("quotePrefixed(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestReportLayout(t *testing.T) {
	header := []string{"판매자상품코드", "상품명", "카테고리코드", "판매가", "재고수량"}
	rows := []ReportRow{
		{Number: 2, Cells: []string{"A-1", "=cmd|' /C calc'!A0", "1", "100", "1"}, Result: ResultRegistered, ProductID: "P-1", At: "2026-12-01 3:04:05 PM (KST)"},
		{Number: 3, Cells: []string{"A-2", "셔츠", "1", "x", "1"}, Result: ResultFailed, Reason: `D3: price must be a whole number greater than 0, got "x"`, At: "2026-12-01 3:04:04 PM (KST)"},
		{Number: 4, Cells: []string{"A-3", "바지", "1", "100", "1"}, Result: ResultWaiting},
	}
	for _, failedOnly := range []bool{false, true} {
		var buf bytes.Buffer
		if err := WriteReport(&buf, header, rows, failedOnly); err != nil {
			t.Fatal(err)
		}
		f, err := excelize.OpenReader(&buf)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.GetRows(ReportSheetEN)
		if err != nil {
			t.Fatal(err)
		}
		panes, _ := f.GetPanes(ReportSheetEN)
		// The formula-like text is a string cell with the quote-prefix
		// style: shown as the seller typed it, never run.
		formula, _ := f.GetCellFormula(ReportSheetEN, "B2")
		typ, _ := f.GetCellType(ReportSheetEN, "B2")
		style, _ := f.GetCellStyle(ReportSheetEN, "B2")
		plain, _ := f.GetCellStyle(ReportSheetEN, "A2")
		quoted := func(id int) bool {
			xf := f.Styles.CellXfs.Xf[id]
			return xf.QuotePrefix != nil && *xf.QuotePrefix
		}
		if !failedOnly && (formula != "" || typ == excelize.CellTypeFormula || !quoted(style) || quoted(plain) || *f.Styles.CellXfs.Xf[style].NumFmtID != textFormat) {
			t.Errorf("B2: formula %q, type %v, quote prefix %v (A2: %v), want text with the quote prefix in the text format", formula, typ, quoted(style), quoted(plain))
		}
		f.Close()
		want := [][]string{
			{"판매자상품코드", "상품명", "카테고리코드", "판매가", "재고수량", ReportColumnRowEN, ReportColumnResultEN, ReportColumnReasonEN, ReportColumnProductIDEN, ReportColumnAtEN},
			{"A-1", "=cmd|' /C calc'!A0", "1", "100", "1", "2", "registered", "", "P-1", "2026-12-01 3:04:05 PM (KST)"},
			{"A-2", "셔츠", "1", "x", "1", "3", "failed", `D3: price must be a whole number greater than 0, got "x"`, "", "2026-12-01 3:04:04 PM (KST)"},
			{"A-3", "바지", "1", "100", "1", "4", "waiting"},
		}
		if failedOnly {
			want = [][]string{want[0], want[2]}
		}
		if len(got) != len(want) {
			t.Fatalf("failedOnly=%v: %d rows %q, want %d", failedOnly, len(got), got, len(want))
		}
		for i := range want {
			if strings.Join(got[i], "|") != strings.Join(want[i], "|") {
				t.Errorf("failedOnly=%v row %d = %q, want %q", failedOnly, i+1, got[i], want[i])
			}
		}
		if !panes.Freeze || panes.YSplit != 1 {
			t.Errorf("header row not frozen: %+v", panes)
		}
	}
}

func TestTemplateLayout(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTemplate(&buf, TemplateOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := excelize.OpenReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.GetSheetList(); strings.Join(got, ",") != TemplateSheet+","+InstructionsSheet {
		t.Errorf("sheets %q", got)
	}
	head, _ := f.GetRows(TemplateSheet)
	if len(head) != 1 || strings.Join(head[0], "|") != strings.Join(TemplateHeader(), "|") {
		t.Errorf("template sheet rows %q", head)
	}
	if panes, _ := f.GetPanes(TemplateSheet); !panes.Freeze || panes.YSplit != 1 {
		t.Errorf("header row not frozen: %+v", panes)
	}
	// Text columns in the text format (a code such as 00123 stays as
	// typed), number columns not (a typed number stays a number).
	for col, text := range map[string]bool{"A": true, "B": true, "C": true, "D": false, "E": false, "G": true, "I": false} {
		id, err := f.GetColStyle(TemplateSheet, col)
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.GetStyle(id)
		if err != nil {
			t.Fatal(err)
		}
		if (st.NumFmt == textFormat) != text {
			t.Errorf("column %s number format %d; text format wanted: %v", col, st.NumFmt, text)
		}
	}
	inst, _ := f.GetRows(InstructionsSheet)
	last := inst[len(inst)-1]
	if strings.Join(last, "|") != strings.Join(exampleRow, "|") {
		t.Errorf("last instructions row %q, want the example row", last)
	}
}

// A sheet cut off before its header row is reported as damaged, not as a file without a header.
func TestTruncatedBeforeHeader(t *testing.T) {
	data := book(t, [][]any{{"제목"}, {"안내"}, {"안내"}, koreanHeader, validRow(1)}, nil)
	sheet := zipPart(t, data, "xl/worksheets/sheet1.xml")
	cut := bytes.Index(sheet, []byte(`<row r="3"`))
	data = replacePart(t, data, "xl/worksheets/sheet1.xml", sheet[:cut+5])
	_, err := parse(t, data)
	if fe := fileErrCode(t, err); fe.Code != CodeDamaged || !strings.Contains(fe.Message, "cut off") {
		t.Fatalf("%s: %s", fe.Code, fe.Message)
	}
}

// A workbook saved as "Strict Open XML" names its relationships in another namespace.
func TestStrictNamespaceWorkbook(t *testing.T) {
	data := book(t, [][]any{koreanHeader, validRow(1)}, nil)
	wb := zipPart(t, data, "xl/workbook.xml")
	strict := bytes.ReplaceAll(wb, []byte("http://schemas.openxmlformats.org/officeDocument/2006/relationships"), []byte("http://purl.oclc.org/ooxml/officeDocument/relationships"))
	if bytes.Equal(wb, strict) {
		t.Fatal("the workbook names no relationships namespace")
	}
	s := mustParse(t, replacePart(t, data, "xl/workbook.xml", strict))
	if len(s.Rows) != 1 || !s.Rows[0].Valid() {
		t.Fatalf("rows %v", problems(s))
	}
}

// Merges naming the whole sheet cost only the rows that exist. (Written into
// the sheet XML directly: excelize's MergeCell takes seconds for a few dozen.)
func TestHugeMerges(t *testing.T) {
	data := book(t, [][]any{koreanHeader, validRow(1), validRow(2)}, nil)
	var merges strings.Builder
	merges.WriteString(`<mergeCells count="20001"><mergeCell ref="F2:F1048576"/>`)
	// Merges across two known columns below the data (overlapping: only the parser reads them).
	for i := range 20000 {
		top := strconv.Itoa(4 + (i%20)*50000)
		bottom := strconv.Itoa(4 + (i%20)*50000 + 49999)
		merges.WriteString(`<mergeCell ref="A` + top + ":B" + bottom + `"/>`)
	}
	merges.WriteString(`</mergeCells>`)
	sheet := zipPart(t, data, "xl/worksheets/sheet1.xml")
	sheet = bytes.Replace(sheet, []byte("</sheetData>"), []byte("</sheetData>"+merges.String()), 1)
	data = replacePart(t, data, "xl/worksheets/sheet1.xml", sheet)
	start := time.Now()
	s := mustParse(t, data)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	checkSheet(t, s, sheetWant{header: 1, rows: []int{2, 3}, valid: 2, warnings: []string{
		`F2: cells F2:F1048576 are merged: the value "브랜드" is used for brand in rows 2 to 1048576`,
	}})
}

// A parse that runs out of time stops working soon after: it gives its
// slot back when it returns, having spent far less CPU than the whole file
// costs. Figures are CPU time, which a busy machine does not inflate as it
// does the clock's: the timeout is a tenth of the whole parse's CPU, so the
// timed-out parse can use no more than about that before its deadline,
// whatever the load, and a reader that did not check its context would
// spend the whole parse's.
func TestTimedOutParseStops(t *testing.T) {
	// A product and 16 MiB of rows below it whose cells stand past the
	// columns read: the reader walks them all (none counts as a row).
	data := book(t, [][]any{koreanHeader, validRow(1)}, nil)
	sheet := zipPart(t, data, "xl/worksheets/sheet1.xml")
	var rows bytes.Buffer
	for r := 3; rows.Len() < 16<<20; r++ {
		n := strconv.Itoa(r)
		rows.WriteString(`<row r="` + n + `"><c r="AZ` + n + `" t="inlineStr"><is><t>S` + n + `</t></is></c><c r="BA` + n + `"><v>` + n + `</v></c></row>`)
	}
	sheet = bytes.Replace(sheet, []byte("</sheetData>"), append(rows.Bytes(), "</sheetData>"...), 1)
	big := replacePart(t, data, "xl/worksheets/sheet1.xml", sheet)

	full := NewParser(Options{MaxConcurrent: 1})
	c0 := processCPU()
	s, err := full.ParseBytes(context.Background(), big)
	whole := processCPU() - c0
	if err != nil || len(s.Rows) != 1 {
		t.Fatalf("the whole parse: %v", err)
	}

	// Shorter each time the parse still beat the timeout (it cannot, on
	// the clock, with a tenth of its CPU; the loop only keeps the test
	// from depending on it).
	var p *Parser
	var timed time.Duration
	for timeout := whole / 10; ; timeout /= 4 {
		p = NewParser(Options{MaxConcurrent: 1, ParseTimeout: timeout})
		c0 = processCPU()
		_, err = p.ParseBytes(context.Background(), big)
		timed = processCPU() - c0
		if fe := (*FileError)(nil); errors.As(err, &fe) && fe.Code == CodeTimeout {
			t.Logf("whole parse %v of CPU; with a timeout of %v the parse stopped having used %v", whole, timeout, timed)
			break
		}
		if timeout < time.Millisecond {
			t.Fatalf("with a parse timeout of %v the parse ended: %v", timeout, err)
		}
	}
	if timed > whole/2 {
		t.Errorf("the timed-out parse used %v of CPU; the whole parse uses %v", timed, whole)
	}
	select {
	case p.slots <- struct{}{}:
		<-p.slots
	default:
		t.Fatal("the timed-out parse still holds its slot after Parse returned")
	}
}

// Cell kinds excelize reads as plain text but a seller did not type as such.
func TestCellKinds(t *testing.T) {
	data := book(t, [][]any{koreanHeader, validRow(1), validRow(2), validRow(3), validRow(4)}, nil)
	sheet := zipPart(t, data, "xl/worksheets/sheet1.xml")
	for ref, c := range map[string]string{
		"D2": `<c r="D2" t="b"><v>1</v></c>`,
		"A3": `<c r="A3" t="d"><v>2024-01-05T00:00:00Z</v></c>`,
		"D4": `<c r="D4"><f t="shared" si="0"/></c>`,
	} {
		re := regexp.MustCompile(`<c r="` + ref + `"[^>]*>.*?</c>`)
		if !re.Match(sheet) {
			t.Fatalf("no cell %s", ref)
		}
		sheet = re.ReplaceAllLiteral(sheet, []byte(c))
	}
	s := mustParse(t, replacePart(t, data, "xl/worksheets/sheet1.xml", sheet))
	checkSheet(t, s, sheetWant{header: 1, rows: []int{2, 3, 4, 5}, valid: 1, problems: []string{
		`D2: price holds the logical value TRUE, not text or a number; type the value instead`,
		`A3: seller_sku holds a date ("2024-01-05T00:00:00Z"); format the column as text and type the value again`,
		`D4: price is a shared formula without a saved result; open the file in Excel and save it, or type the value instead`,
	}})
}

// A 1904-based workbook (old Mac Excel) shows its dates four years later.
func TestDate1904(t *testing.T) {
	data := fixture(t, "dates.xlsx")
	wb := zipPart(t, data, "xl/workbook.xml")
	re := regexp.MustCompile(`<workbookPr[^>]*>`)
	if !re.Match(wb) {
		t.Fatalf("no workbookPr in %s", wb)
	}
	wb = re.ReplaceAll(wb, []byte(`<workbookPr date1904="1">`))
	s := mustParse(t, replacePart(t, data, "xl/workbook.xml", wb))
	if got := s.Rows[0].Problems[0].Message; !strings.Contains(got, "Excel shows 2028-01-02 and stores the number 45292") {
		t.Errorf("A2: %s", got)
	}
}

// TestKoreanReportSaysResultsInKorean: a report in Korean says each row's
// result in Korean, and a registered row its product number (상품번호).
func TestKoreanReportSaysResultsInKorean(t *testing.T) {
	rows := []ReportRow{
		{Number: 2, Cells: []string{"A-1"}, Result: ResultRegistered, ProductID: "P-1"},
		{Number: 3, Cells: []string{"A-2"}, Result: ResultFailed, Reason: "D3: 판매가 오류"},
		{Number: 4, Cells: []string{"A-3"}, Result: ResultWaiting},
		{Number: 5, Cells: []string{"A-4"}, Result: ResultAlreadyRegistered, ProductID: "P-4"},
		{Number: 6, Cells: []string{"A-5"}, Result: ResultOtherContent, Reason: "이미 다른 내용으로"},
	}
	var buf bytes.Buffer
	if err := WriteReportIn(&buf, "ko", []string{"판매자상품코드"}, rows, false); err != nil {
		t.Fatal(err)
	}
	f, err := excelize.OpenReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, _ := f.GetRows(ReportSheet)
	want := []string{"등록됨|P-1", "실패|", "대기 중|", "이미 등록됨|P-4", "다른 내용으로 이미 등록됨|"}
	for i, w := range want {
		r := got[i+1]
		for len(r) < 5 {
			r = append(r, "")
		}
		if g := r[2] + "|" + r[4]; g != w {
			t.Errorf("row %d: result|product %q, want %q", i+2, g, w)
		}
	}
}
