package excel

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/hostile"
)

// addPart returns data with one more part, name holding content.
func addPart(t testing.TB, data []byte, name string, content []byte) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		if err := zw.Copy(f); err != nil {
			t.Fatal(err)
		}
	}
	w, err := zw.Create(name)
	if err == nil {
		_, err = io.Copy(w, bytes.NewReader(content))
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// hostileDir is the hostile corpus (go run ./testdata/hostile/gen writes it).
var hostileDir = filepath.Join("..", "testdata", "hostile")

// hostileFile reads a file of the hostile corpus as it is uploaded.
func hostileFile(t testing.TB, name string) []byte {
	t.Helper()
	data, err := hostile.Load(hostileDir, name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// hostileNames lists the corpus, as uploaded (without .gz).
func hostileNames(t testing.TB) []string {
	t.Helper()
	names, err := hostile.Names(hostileDir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// Each budget refuses the file built to pass it, saying which, in well
// under a second of CPU time (TestHostileCorpusUnderTheCeiling in
// producer/upload holds every file to the whole ceiling). CPU time, not the
// clock's: a machine busy with other test processes stretches the clock,
// not what the parse costs.
func TestHostileFilesRefusedByTheirBudget(t *testing.T) {
	entries := "more than 4,000,000 XML entries"
	for _, tc := range []struct{ file, code, msg string }{
		{"sst-13m-empty.xlsx", CodeTooLarge, "shared strings hold more than 500,000 entries"},
		{"sst-long-strings.xlsx", CodeTooLarge, "shared strings hold more than 8 MiB of text"},
		{"styles-13m-xf.xlsx", CodeTooLarge, "styles hold more than 65,536 formats"},
		{"numfmts-200k.xlsx", CodeTooLarge, "styles hold more than 65,536 formats"},
		{"rels-1m.xlsx", CodeTooLarge, "lists more than 10,000 relationships"},
		{"sheets-1m.xlsx", CodeTooLarge, "lists more than 10,000 sheets"},
		{"sheet-13m-empty-elements.xlsx", CodeTooLarge, entries},
		{"sheet-comments.xlsx", CodeTooLarge, entries},
		{"sheet-wide-rows.xlsx", CodeTooLarge, entries},
		{"sheet-many-attrs-cells.xlsx", CodeTooLarge, entries},
		{"workbook-149k-attrs.xlsx", CodeDamaged, "more than 256 attributes"},
		{"sheet-deep-nesting.xlsx", CodeDamaged, "nested more than 256 deep"},
		{"zip-20000-entries.xlsx", CodeTooLarge, "holds 20,005 parts"},
		{"zip-duplicate-names.xlsx", CodeDamaged, `two parts named "xl/worksheets/sheet1.xml"`},
		{"zip-declared-huge.xlsx", CodeTooLarge, "would unpack to more than 64 MiB"},
	} {
		data := hostileFile(t, tc.file)
		c0 := processCPU()
		_, err := parse(t, data)
		took := processCPU() - c0
		fe := fileErrCode(t, err)
		if fe.Code != tc.code || !strings.Contains(fe.Message, tc.msg) {
			t.Errorf("%s: %s: %s\nwant %s: …%s…", tc.file, fe.Code, fe.Message, tc.code, tc.msg)
		}
		t.Logf("%s: refused in %v of CPU", tc.file, took)
		if took > time.Second {
			t.Errorf("%s: refused in %v of CPU", tc.file, took)
		}
	}
}

// The search for a header, sheet after sheet, costs by the cells there are,
// not by the columns they sit in, and reads every part into one buffer: the
// bytes allocated are a figure the load of the machine does not change. A
// row searched is not laid out to its last column and looked up cell by
// cell, and a part does not get a buffer of its own.
func TestHeaderSearchOfManySheetsAllocatesLittle(t *testing.T) {
	const most = 100 << 20
	for _, file := range []string{"sheets-9990-far-cell.xlsx", "sheets-9990-no-header.xlsx"} {
		data := hostileFile(t, file)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := parse(t, data)
		runtime.ReadMemStats(&after)
		if fe := fileErrCode(t, err); fe.Code != CodeNoHeader {
			t.Errorf("%s: %s: %s, want %s", file, fe.Code, fe.Message, CodeNoHeader)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > most {
			t.Errorf("%s: the parse allocated %d MiB, more than %d MiB", file, n>>20, most>>20)
		}
	}
}

// A part bulkreg does not need is not read: an element of 149,000
// attributes or a deflate bomb in docProps changes nothing.
func TestUnneededPartsAreNotRead(t *testing.T) {
	for _, name := range []string{"docprops-149k-attrs.xlsx", "zip-bomb-docprops.xlsx", "zip-9999-entries.xlsx"} {
		data := hostileFile(t, name)
		c0 := processCPU()
		s := mustParse(t, data)
		d := processCPU() - c0
		if len(s.Rows) != 5 || s.Valid() != 5 {
			t.Errorf("%s: %d rows, %d valid; want the 5 valid rows", name, len(s.Rows), s.Valid())
		}
		if d > time.Second {
			t.Errorf("%s: read in %v of CPU", name, d)
		}
	}
}

// A merge is one problem naming its range, however many times it is given
// and however many rows it covers; each other row it covers points at it
// once: 10,000 merges of rows 2 to 501 make 500 problems, not one on each
// of the 500 rows for each merge.
func TestMergesAreOneProblemEach(t *testing.T) {
	rows := [][]any{koreanHeader}
	for i := 1; i <= 5; i++ {
		rows = append(rows, validRow(i))
	}
	data := book(t, rows, nil)
	sheet := zipPart(t, data, "xl/worksheets/sheet1.xml")
	merges := strings.Repeat(`<mergeCell ref="B2:C3"/>`, 1000) + `<mergeCell ref="F4:F6"/><mergeCell ref="F5:F6"/>`
	sheet = bytes.Replace(sheet, []byte("</sheetData>"), []byte("</sheetData><mergeCells>"+merges+"</mergeCells>"), 1)
	s := mustParse(t, replacePart(t, data, "xl/worksheets/sheet1.xml", sheet))
	checkSheet(t, s, sheetWant{header: 1, rows: []int{2, 3, 4, 5, 6}, valid: 2, problems: []string{
		`B2: cells B2:C3 are merged across name and category_code; unmerge them and type each value in its own cell`,
		`B3: the cell is inside the merged cells B2:C3 (see row 2); unmerge them and type each value in its own cell`,
		`F5: cells F5:F6 overlap other merged cells, which Excel cannot open; unmerge them and type each value in its own cell`,
	}, warnings: []string{
		`F4: cells F4:F6 are merged: the value "브랜드" is used for brand in rows 4 to 6`,
	}})
	// 10,000 merges of one range: one problem, one pointer per other row.
	s = mustParse(t, hostileFile(t, "merges-10000.xlsx"))
	if got := len(problems(s)); len(s.Rows) != 500 || s.Valid() != 0 || got != 500 {
		t.Errorf("merges-10000.xlsx: %d rows, %d valid, %d problems; want 500, 0 and 500", len(s.Rows), s.Valid(), got)
	}
}

// The problems and warnings one upload lists are bounded in number and in
// length, whatever the file, so its answer stays well under 1 MiB.
func TestProblemsAreBounded(t *testing.T) {
	long := strings.Repeat("<", 1000)
	s := &Sheet{}
	for r := 2; r < 602; r++ {
		row := Row{Number: r}
		for c := range 12 {
			row.Problems = append(row.Problems, Problem{Row: r, Cell: cellName(c+1, r), Code: CodeTooLong, Message: "name " + long})
		}
		s.Rows = append(s.Rows, row)
	}
	for i := range 150 {
		s.Warnings = append(s.Warnings, Problem{Row: i + 2, Code: CodeHiddenRow, Message: "hidden " + long})
	}
	boundProblems(s)
	listed := 0
	for i, r := range s.Rows {
		listed += len(r.Problems)
		want := maxRowProblems
		if i >= maxListedProblems/maxRowProblems {
			want = 1 // past the listed problems: each row its first
		}
		if len(r.Problems) != want {
			t.Fatalf("row %d lists %d problems, want %d", r.Number, len(r.Problems), want)
		}
		if want == maxRowProblems {
			if last := r.Problems[want-1]; last.Code != CodeMoreProblems || last.Message != "and 3 more problems in this row" || last.Row != r.Number {
				t.Fatalf("row %d ends with %+v", r.Number, last)
			}
		}
		for _, p := range r.Problems {
			if b, _ := json.Marshal(p.Message); len(b)-2 > maxMessageJSON {
				t.Fatalf("row %d: a message of %d bytes of JSON", r.Number, len(b)-2)
			}
		}
	}
	if listed != maxListedProblems+550 {
		t.Errorf("%d problems listed, want %d", listed, maxListedProblems+550)
	}
	n := len(s.Warnings)
	if n != maxWarnings+1 || s.Warnings[maxWarnings-1].Message != "and 51 more warnings" {
		t.Fatalf("%d warnings, the 100th %q", n, s.Warnings[min(n, maxWarnings)-1].Message)
	}
	if w := s.Warnings[n-1]; w.Code != CodeMoreProblems || !strings.HasPrefix(w.Message, "6,050 more problems are not listed") {
		t.Errorf("last warning %+v", w)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 700<<10 {
		t.Errorf("the sheet's problems and warnings take %d KiB of JSON", len(b)>>10)
	}
}

// hostileSeeds are the corpus files named *ext, as fuzz seeds: the first
// max bytes of each (a cut file is a seed as good as a whole one).
func hostileSeeds(t testing.TB, ext string, max int) [][]byte {
	t.Helper()
	var out [][]byte
	for _, name := range hostileNames(t) {
		if strings.HasSuffix(name, ext) {
			data := hostileFile(t, name)
			out = append(out, data[:min(len(data), max)])
		}
	}
	return out
}

// hostileAttrs writes n distinct attributes.
func hostileAttrs(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(" a" + strconv.Itoa(i) + `=""`)
	}
	return b.String()
}

// More merged ranges than maxMerges refuse the file, naming the sheet.
func TestTooManyMergesRefused(t *testing.T) {
	data := book(t, [][]any{koreanHeader, validRow(1)}, nil)
	sheet := zipPart(t, data, "xl/worksheets/sheet1.xml")
	merges := strings.Repeat(`<mergeCell ref="K5:L6"/>`, maxMerges+1)
	sheet = bytes.Replace(sheet, []byte("</sheetData>"), []byte("</sheetData><mergeCells>"+merges+"</mergeCells>"), 1)
	_, err := parse(t, replacePart(t, data, "xl/worksheets/sheet1.xml", sheet))
	if fe := fileErrCode(t, err); fe.Code != CodeTooLarge || fe.Message != `the sheet "Sheet1" has more than 100,000 merged ranges, far more than a product list needs; unmerge the cells and save the file again` {
		t.Errorf("%s: %s", fe.Code, fe.Message)
	}
}
