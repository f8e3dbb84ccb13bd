package excel

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bulkreg/bulkreg"
)

// The fixtures are made by testdata/gen (go run ./testdata/gen); each test
// here states exactly what the seller is told about one of them.

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatalf("%v (make the fixtures with: go run ./testdata/gen)", err)
	}
	return b
}

type sheetWant struct {
	header   int
	rows     []int // row numbers of the data rows, in order
	valid    int
	problems []string
	warnings []string
}

func checkSheet(t *testing.T, s *Sheet, w sheetWant) {
	t.Helper()
	if s.HeaderRow != w.header {
		t.Errorf("header row %d, want %d", s.HeaderRow, w.header)
	}
	var nums []int
	for _, r := range s.Rows {
		nums = append(nums, r.Number)
	}
	if w.rows != nil && !equalInts(nums, w.rows) {
		t.Errorf("data rows %v, want %v", nums, w.rows)
	}
	if s.Valid() != w.valid {
		t.Errorf("%d valid rows, want %d", s.Valid(), w.valid)
	}
	equalLines(t, "problems", problems(s), w.problems)
	equalLines(t, "warnings", warnings(s), w.warnings)
	for _, r := range s.Rows {
		if len(r.Cells) != len(s.Header) {
			t.Errorf("row %d has %d cells, header %d", r.Number, len(r.Cells), len(s.Header))
		}
		for _, p := range r.Problems {
			if p.Row != r.Number {
				t.Errorf("problem %q on row %d names row %d", p.Error(), r.Number, p.Row)
			}
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestFixtureValid500(t *testing.T) {
	s := mustParse(t, fixture(t, "valid-500.xlsx"))
	checkSheet(t, s, sheetWant{header: 1, rows: seq(2, 501), valid: 500})
	if s.SheetName != "Sheet1" || len(s.Header) != 9 || s.Header[0] != "판매자상품코드* (seller_sku)" {
		t.Errorf("sheet %q header %q", s.SheetName, s.Header)
	}
	last := s.Rows[499].Product
	want := bulkreg.Product{SellerSKU: "P-0500", Name: "반팔 티셔츠 네이비 M", CategoryCode: "50000803", Price: 29900, Stock: 0,
		Brand: "베이직하우스", ImageURL: "https://img.example.com/p/0500.jpg", Description: "반팔 티셔츠 네이비 M 상품입니다. 세탁 시 찬물에 단독 세탁해 주세요.", ShippingFee: 3000}
	if last != want {
		t.Errorf("row 501:\n got %+v\nwant %+v", last, want)
	}
}

func TestFixtureTooManyRows(t *testing.T) {
	s, err := parse(t, fixture(t, "rows-501.xlsx"))
	if s != nil {
		t.Fatalf("a refused file returned %d rows", len(s.Rows))
	}
	fe := fileErrCode(t, err)
	if fe.Code != CodeTooManyRows || fe.Message != "the file has 501 data rows; at most 500 can be uploaded at once, so nothing was registered: split it into files of at most 500 rows" {
		t.Errorf("%s: %s", fe.Code, fe.Message)
	}
}

func TestFixtureKoreanHeaders(t *testing.T) {
	s := mustParse(t, fixture(t, "korean-headers.xlsx"))
	checkSheet(t, s, sheetWant{header: 3, rows: seq(4, 8), valid: 5,
		warnings: []string{`J3: column "메모" is not a known column; it is ignored`}})
	if p := s.Rows[0].Product; p.SellerSKU != "K-0001" || p.Price != 10900 || p.ShippingFee != 2500 {
		t.Errorf("row 4 = %+v", p)
	}
}

func TestFixtureEnglishHeaders(t *testing.T) {
	s := mustParse(t, fixture(t, "english-headers.xlsx"))
	checkSheet(t, s, sheetWant{header: 1, rows: seq(2, 6), valid: 5})
	got := s.Rows[1].Product
	want := bulkreg.Product{SellerSKU: "E-0002", Name: "데님 팬츠 화이트 S", CategoryCode: "50000830", Price: 11900, Stock: 74,
		Brand: "데일리룩", ImageURL: "https://img.example.com/e/0002.jpg", Description: "데님 팬츠 화이트 S 상품입니다. 세탁 시 찬물에 단독 세탁해 주세요.", ShippingFee: 3000}
	if got != want {
		t.Errorf("row 3 (columns in another order):\n got %+v\nwant %+v", got, want)
	}
}

func TestFixtureMissingColumn(t *testing.T) {
	_, err := parse(t, fixture(t, "missing-column.xlsx"))
	fe := fileErrCode(t, err)
	if fe.Code != CodeMissingColumn {
		t.Fatalf("code %s: %s", fe.Code, fe.Message)
	}
	equalLines(t, "message", []string{fe.Message}, []string{`the header row (row 1 of sheet "Sheet1") lacks the required columns 판매가 (price) and 재고수량 (stock); add them or start from the template`})
	var cols []string
	for _, p := range fe.Problems {
		cols = append(cols, p.Column)
	}
	equalLines(t, "missing columns", cols, []string{"price", "stock"})
}

func TestFixtureBadValues(t *testing.T) {
	s := mustParse(t, fixture(t, "bad-values.xlsx"))
	checkSheet(t, s, sheetWant{header: 1, rows: append(seq(2, 18), 20, 21, 22), valid: 1, problems: []string{
		`A2: seller_sku must not contain spaces, got "SKU 2"`,
		`A3: seller_sku is required but the cell is empty`,
		`B4: name must be at most 200 characters, got 201 characters`,
		`B5: name must be one line, without line breaks or tabs`,
		`C6: category_code must be a code of 1 to 64 letters, digits, '-', '_' or '.', got "CAT 01"`,
		`D7: price must be a whole number greater than 0 and at most 1,000,000,000, got "12,000원"; type the number only, without 원 or ₩`,
		`D8: price must be a whole number greater than 0 and at most 1,000,000,000, got "0"`,
		`D9: price must be a whole number greater than 0 and at most 1,000,000,000, got "12000.5"`,
		`E10: stock must be a whole number from 0 to 1,000,000, got "-1"`,
		`E11: stock must be a whole number from 0 to 1,000,000, got "많음"`,
		`F12: brand must be at most 100 characters, got 101 characters`,
		`G13: image_url must be a web address starting with https:// or http://, got "ftp://img.example.com/a.jpg"`,
		`G14: image_url must be a web address starting with https:// or http://, got "img.jpg"`,
		`H15: description must be at most 10,000 characters, got 10,001 characters`,
		`I16: shipping_fee must be a whole number from 0 to 1,000,000, got "무료"`,
		`D17: price must be a whole number greater than 0 and at most 1,000,000,000, got "1,20,000"`,
		`A18: seller_sku "8.80123E+12" looks like a long number Excel shortened; format the column as text and type the code again`,
		`B20: name is required but the cell is empty`,
		`C20: category_code must be a code of 1 to 64 letters, digits, '-', '_' or '.', got "카테고리"`,
		`D20: price must be a whole number greater than 0 and at most 1,000,000,000, got "-5"`,
		`E20: stock must be a whole number from 0 to 1,000,000, got "1.5"`,
		`G20: image_url must be a web address starting with https:// or http://, got "x"`,
		`E21: stock must be a whole number from 0 to 1,000,000, got "1000001"`,
	}})
	// Codes and columns are what the producer's --json prints.
	p := s.Rows[5].Problems[0]
	if p.Row != 7 || p.Column != "price" || p.Cell != "D7" || p.Code != CodeNotWholeNumber {
		t.Errorf("D7 problem = %+v", p)
	}
	if p := s.Rows[len(s.Rows)-1]; !p.Valid() || p.Product.SellerSKU != "X-0022" {
		t.Errorf("row 22 = %+v", p)
	}
}

func TestFixtureBlankRows(t *testing.T) {
	s := mustParse(t, fixture(t, "blank-rows.xlsx"))
	// 4 is empty, 5 holds only spaces, 7-9 are empty, 10 holds only a memo outside the known columns.
	checkSheet(t, s, sheetWant{header: 1, rows: []int{2, 3, 6, 11}, valid: 4})
}

func TestFixtureMergedCells(t *testing.T) {
	s := mustParse(t, fixture(t, "merged-cells.xlsx"))
	checkSheet(t, s, sheetWant{header: 1, rows: seq(2, 9), valid: 7,
		problems: []string{`B7: cells B7:C7 are merged across name and category_code; unmerge them and type each value in its own cell`},
		warnings: []string{
			`F2: cells F2:F4 are merged: the value "공통브랜드" is used for brand in rows 2 to 4`,
			`C5: cells C5:C6 are merged: the value "50000803" is used for category_code in rows 5 to 6`,
		}})
	for _, r := range s.Rows[:3] {
		if r.Product.Brand != "공통브랜드" {
			t.Errorf("row %d brand %q, want the merged value", r.Number, r.Product.Brand)
		}
	}
	if c := s.Rows[4].Product.CategoryCode; c != "50000803" {
		t.Errorf("row 6 category %q, want the value merged down from C5", c)
	}
}

func TestFixtureFormulas(t *testing.T) {
	s := mustParse(t, fixture(t, "formulas.xlsx"))
	checkSheet(t, s, sheetWant{header: 1, rows: seq(2, 6), valid: 2, problems: []string{
		`D3: price is a formula ("=D2*2") without a saved result; open the file in Excel and save it, or type the value instead`,
		`B4: name is a formula ("=CONCAT(\"상품\",A4)") without a saved result; open the file in Excel and save it, or type the value instead`,
		`E5: stock shows the Excel error #N/A; fix the formula or type the value`,
	}})
	if p := s.Rows[0].Product; p.Price != 12000 {
		t.Errorf("D2 (formula with a saved result) price %d, want 12000", p.Price)
	}
	if r := s.Rows[4]; !r.Valid() || r.Product.Brand != "" {
		t.Errorf("F6 (formula whose saved result is empty) = %+v", r)
	}
}

func TestFixtureDates(t *testing.T) {
	s := mustParse(t, fixture(t, "dates.xlsx"))
	checkSheet(t, s, sheetWant{header: 1, rows: seq(2, 5), valid: 1, problems: []string{
		`A2: seller_sku holds a date (Excel shows 2024-01-01 and stores the number 45292); format the column as text and type the value again`,
		`B3: name holds a date (Excel shows 2026-03-04 and stores the number 46085); format the column as text and type the value again`,
		`D4: price holds a date (Excel shows 2026-11-22 and stores the number 46348); format the column as text and type the value again`,
	}})
}

func TestFixtureHiddenRows(t *testing.T) {
	s := mustParse(t, fixture(t, "hidden-rows.xlsx"))
	checkSheet(t, s, sheetWant{header: 1, rows: seq(2, 6), valid: 5, warnings: []string{
		`row 3: the row is hidden in the spreadsheet; it is registered like every other row`,
		`row 5: the row is hidden in the spreadsheet; it is registered like every other row`,
	}})
}

func TestFixtureDuplicates(t *testing.T) {
	s := mustParse(t, fixture(t, "duplicates.xlsx"))
	checkSheet(t, s, sheetWant{header: 1, rows: seq(2, 7), valid: 4, problems: []string{
		`A5: seller_sku "U-0002" is already used in row 2; each product needs its own code`,
		`A7: seller_sku "U-0002" is already used in row 2; each product needs its own code`,
	}})
}

func TestFixtureNumbersAsText(t *testing.T) {
	s := mustParse(t, fixture(t, "numbers-as-text.xlsx"))
	checkSheet(t, s, sheetWant{header: 1, rows: seq(2, 6), valid: 3, problems: []string{
		`D5: price must be a whole number greater than 0 and at most 1,000,000,000, got "1,2000"`,
		`D6: price must be a whole number greater than 0 and at most 1,000,000,000, got "₩12,000"; type the number only, without 원 or ₩`,
	}})
	want := []struct {
		cat                  string
		price, stock, shipFe int64
	}{{"0050000803", 12000, 7, 2500}, {"50000803", 12000, 1000, 3000}, {"50000803", 11000, 0, 0}}
	for i, w := range want {
		p := s.Rows[i].Product
		if p.CategoryCode != w.cat || p.Price != w.price || p.Stock != w.stock || p.ShippingFee != w.shipFe {
			t.Errorf("row %d = %+v, want %+v", s.Rows[i].Number, p, w)
		}
	}
}

func TestFixtureBigCell(t *testing.T) {
	data := fixture(t, "big-cell.xlsx")
	s := mustParse(t, data)
	checkSheet(t, s, sheetWant{header: 1, rows: seq(2, 4), valid: 1, problems: []string{
		`B2: name must be at most 200 characters, got 349,524 characters`,
		`H3: description must be at most 10,000 characters, got 349,524 characters`,
	}})
	// The cell holds 1 MiB; what is kept of it stops at MaxCellBytes, on a character.
	if c := s.Rows[0].Cells[1]; len(c) > DefaultMaxCellBytes || len(c) < DefaultMaxCellBytes-3 || !strings.HasPrefix(c, "가나다라") || !utf8.ValidString(c) {
		t.Errorf("the kept cell is %d bytes; want the first %d bytes of the 1 MiB cell, cut at a character", len(c), DefaultMaxCellBytes)
	}
	for _, r := range s.Rows {
		for _, p := range r.Problems {
			if len(p.Message) > 200 {
				t.Errorf("message of %d bytes: a big cell must not make a big message", len(p.Message))
			}
		}
	}
}

func TestFixturesRefused(t *testing.T) {
	for _, tc := range []struct {
		file, code, message string
	}{
		{"truncated.xlsx", CodeDamaged, `the file is damaged or incomplete (sheet "Sheet1": the XML is cut off at line 2); save it again from Excel and upload it again`},
		{"truncated-zip.xlsx", CodeDamaged, "the file is damaged or incomplete (it is not a readable .xlsx); save it again from Excel and upload it again"},
		{"zip-bomb.xlsx", CodeTooLarge, "the file would unpack to more than 64 MiB; a product list of 500 rows is far smaller, so the file was refused"},
		{"zip-bomb-lying.xlsx", CodeDamaged, "the file is damaged or incomplete (part xl/worksheets/sheet1.xml: its data does not match the zip directory); save it again from Excel and upload it again"},
		{"not-xlsx.xlsx", CodeNotXLSX, `the file is a PDF document, not a spreadsheet; put the products in the template (.xlsx), one a row, and save it as "Excel Workbook (.xlsx)" or "CSV UTF-8 (Comma delimited)"`},
		{"old-xls.xlsx", CodeNotXLSX, `the file is an old-style .xls workbook or is protected by a password; save it as "Excel Workbook (.xlsx)" without a password`},
		{"zip-not-workbook.xlsx", CodeNotXLSX, `the file is a ZIP archive, not an Excel workbook; unpack it and upload the .xlsx inside, or save the list from Excel as "Excel Workbook (.xlsx)"`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			s, err := NewParser(Options{}).Parse(context.Background(), bytes.NewReader(fixture(t, tc.file)))
			if s != nil {
				t.Fatalf("refused file returned a sheet of %d rows", len(s.Rows))
			}
			fe := fileErrCode(t, err)
			if fe.Code != tc.code || fe.Message != tc.message {
				t.Errorf("got  %s: %s\nwant %s: %s", fe.Code, fe.Message, tc.code, tc.message)
			}
		})
	}
}

// The zip bombs are refused fast and without unpacking them.
func TestZipBombBoundedTimeAndMemory(t *testing.T) {
	for _, name := range []string{"zip-bomb.xlsx", "zip-bomb-lying.xlsx"} {
		data := fixture(t, name)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := parse(t, data)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		fileErrCode(t, err)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s (%d KiB): refused in %v, %d KiB allocated", name, len(data)>>10, took, alloc>>10)
		if took > 2*time.Second {
			t.Errorf("%s took %v to refuse", name, took)
		}
		if alloc > 16<<20 {
			t.Errorf("%s allocated %d MiB; the bomb unpacks to 256 MiB and must not be unpacked", name, alloc>>20)
		}
	}
}

func TestDemoFixtures(t *testing.T) {
	seen := map[string]string{}
	for _, tc := range []struct {
		file string
		rows int
	}{{"demo/seller-a-500.xlsx", 500}, {"demo/seller-b-120.xlsx", 120}, {"demo/seller-c-40.xlsx", 40}} {
		s := mustParse(t, fixture(t, tc.file))
		if len(s.Rows) != tc.rows || s.Valid() != tc.rows || len(s.Warnings) != 0 {
			t.Errorf("%s: %d rows, %d valid, warnings %v; want %d valid", tc.file, len(s.Rows), s.Valid(), warnings(s), tc.rows)
		}
		for _, r := range s.Rows {
			if f, ok := seen[r.Product.SellerSKU]; ok {
				t.Errorf("%s and %s share seller_sku %s", f, tc.file, r.Product.SellerSKU)
			}
			seen[r.Product.SellerSKU] = tc.file
		}
	}
}

// The failed-rows report of a real upload, uploaded again as it is, gives back
// exactly the failed rows with the same cells and the same problems.
func TestFailedOnlyReportOfBadValues(t *testing.T) {
	s := mustParse(t, fixture(t, "bad-values.xlsx"))
	var rr []ReportRow
	var failed []Row
	for _, r := range s.Rows {
		res, reason := ResultRegistered, ""
		if !r.Valid() {
			res, reason = ResultFailed, r.Problems[0].Error()
			failed = append(failed, r)
		}
		rr = append(rr, ReportRow{Number: r.Number, Cells: r.Cells, Result: res, Reason: reason})
	}
	var buf bytes.Buffer
	if err := WriteReport(&buf, s.Header, rr, true); err != nil {
		t.Fatal(err)
	}
	again := mustParse(t, buf.Bytes())
	if len(again.Rows) != len(failed) || again.Valid() != 0 || len(again.Warnings) != 0 {
		t.Fatalf("report: %d rows, %d valid, warnings %v; want the %d failed rows", len(again.Rows), again.Valid(), warnings(again), len(failed))
	}
	for i, got := range again.Rows {
		want := failed[i]
		if got.Number != i+2 {
			t.Errorf("report row %d numbered %d", i+2, got.Number)
		}
		for j := range want.Cells {
			// Raw cells keep the report's apostrophe before "-1"; the value read is the same.
			if cleanCell(got.Cells[j]) != cleanCell(want.Cells[j]) {
				t.Errorf("report row %d (was %d) cell %d = %q, want %q", got.Number, want.Number, j, got.Cells[j], want.Cells[j])
			}
		}
		var gc, wc []string
		for _, p := range got.Problems {
			gc = append(gc, p.Column+":"+p.Code)
		}
		for _, p := range want.Problems {
			wc = append(wc, p.Column+":"+p.Code)
		}
		equalLines(t, "problems of row "+itoa(want.Number), gc, wc)
	}
}

// The checked-in fixtures are what the generator makes today.
func TestFixturesUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator (a few seconds)")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	dir := t.TempDir()
	cmd := exec.Command(goTool, "run", "./testdata/gen", "-out", dir)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./testdata/gen: %v\n%s", err, out)
	}
	made, err := filepath.Glob(filepath.Join(dir, "*.xlsx"))
	if err != nil {
		t.Fatal(err)
	}
	csvs, _ := filepath.Glob(filepath.Join(dir, "*.csv"))
	made = append(made, csvs...)
	demo, _ := filepath.Glob(filepath.Join(dir, "demo", "*.xlsx"))
	made = append(made, demo...)
	if len(made) < 20 {
		t.Fatalf("the generator made %d files", len(made))
	}
	for _, m := range made {
		rel, _ := filepath.Rel(dir, m)
		want, _ := os.ReadFile(m)
		if got := fixture(t, rel); !bytes.Equal(got, want) {
			t.Errorf("testdata/%s differs from what the generator makes now; run: go run ./testdata/gen", rel)
		}
	}
}
