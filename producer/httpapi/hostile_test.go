package httpapi

import (
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/hostile"
	"github.com/bulkreg/bulkreg/internal/hostile/answers"
	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// The ceiling every answer about an upload of at most 10 MiB stays under
// (design.md): its bytes, the CPU and the RSS growth it costs.
const (
	answerCeilingBytes = 1 << 20
	answerCeilingCPU   = time.Second
	answerCeilingRSS   = 64 << 20
	// shippedMemoryLimit is the producer's GOMEMLIMIT in the shipped
	// sizing (a 512 MiB container): the test runs under it, so an answer
	// that needs more than the process may have shows as the collector
	// thrashing (CPU) or as growth past it.
	shippedMemoryLimit = 460 << 20
)

var hostileDir = filepath.Join("..", "..", "testdata", "hostile")

// answerMatrix are the files TestHostileAnswersUnderTheCeiling sends by
// default: the largest answers of the whole corpus (go run ./bench/hostile
// -answers) and one file of each kind of refusal.
var answerMatrix = []string{
	"csv-header-attack.csv",          // a long header named once per problem
	"sheet-header-attack.xlsx",       // the same in a workbook
	"csv-256-unknown-columns.csv",    // a wide preview
	"csv-long-headers-bad-cells.csv", // long headers, every field bad, bidi overrides
	"csv-every-cell-bad.csv",         // the most problems and the longest reasons
	"sheet-every-cell-bad.xlsx",
	"csv-wide.csv",             // 2,000 columns
	"csv-10mib-cell.csv",       // one cell of 10 MiB
	"merges-10000.xlsx",        // one merge ×10,000: the largest answer without its bounds
	"sheet-1m-empty-rows.xlsx", // accepted, 5 rows
	"zip-20000-entries.xlsx",   // refused: too large
	"csv-no-header-10mib.csv",  // refused: no header
}

// TestHostileAnswersUnderTheCeiling sends every file of the hostile
// corpus through every answer the service gives about it (the check page,
// its fragment, Register without confirmation, the dry run's and the
// upload's JSON, the detail and history pages, the status JSON, the event
// stream's first event, the report and the fix file) in Korean and
// English, and holds each to the ceiling: at most 1 MiB, 1 s of CPU and
// 64 MiB of RSS growth, whatever a page repeats per problem, cell or row.
//
// Every file through every answer is 57 files x 21 answers, each parse
// of a 10 MiB file near its own ceiling: minutes. The test sends
// answerMatrix's files, the shapes that make answers large (what a page
// repeats per problem, per cell, per row) and one of each other kind;
// HOSTILE_ALL=1 sends every file, as go run ./bench/hostile -answers does
// for the published table. HOSTILE_ONLY=name sends the files whose name
// holds name.
func TestHostileAnswersUnderTheCeiling(t *testing.T) {
	if testing.Short() {
		t.Skip("hostile files through every answer: about a minute")
	}
	names, err := hostile.Names(hostileDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"csv-header-attack.csv", "csv-256-unknown-columns.csv", "sheet-header-attack.xlsx", "csv-long-headers-bad-cells.csv"} {
		if !slices.Contains(names, must) {
			t.Errorf("%s: not in testdata/hostile; run go run ./testdata/hostile/gen", must)
		}
	}
	old := debug.SetMemoryLimit(shippedMemoryLimit)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	e := newEnv(t, nil, upload.WriterOptions{})
	s := &Server{Uploader: e.up, Auth: Auth{Secret: secret}}
	h := s.Handler()
	only := os.Getenv("HOSTILE_ONLY")
	worst := map[string]answers.Answer{}
	all := os.Getenv("HOSTILE_ALL") == "1"
	for i, name := range names {
		if only != "" && !strings.Contains(name, only) || only == "" && !all && !slices.Contains(answerMatrix, name) {
			continue
		}
		data, err := hostile.Load(hostileDir, name)
		if err != nil {
			t.Fatal(err)
		}
		seller := "hostile-" + strconv.Itoa(i)
		got, err := answers.Run(t.Context(), h, data, answers.Options{Token: token(t, seller), FileName: name, RSS: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		kinds := map[string]bool{}
		for _, a := range got {
			kinds[a.Kind] = true
			if a.Status == 0 {
				continue
			}
			if w, ok := worst[a.Kind+" "+a.Lang]; !ok || a.Bytes > w.Bytes {
				worst[a.Kind+" "+a.Lang] = a
			}
			if a.Status >= 500 {
				t.Errorf("%s: %s (%s) answered %d", name, a.Kind, a.Lang, a.Status)
			}
			if a.Bytes > answerCeilingBytes || a.CPU > answerCeilingCPU || a.RSSGrowth > answerCeilingRSS {
				t.Errorf("%s: %s (%s): %d bytes, %v CPU, RSS +%.1f MiB; the ceiling is %d bytes, %v, %d MiB",
					name, a.Kind, a.Lang, a.Bytes, a.CPU.Round(time.Millisecond), float64(a.RSSGrowth)/(1<<20),
					answerCeilingBytes, answerCeilingCPU, answerCeilingRSS>>20)
			}
		}
		for _, k := range answers.Kinds {
			if !kinds[k] {
				t.Errorf("%s: no %s answer measured", name, k)
			}
		}
	}
	keys := make([]string, 0, len(worst))
	for k := range worst {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		a := worst[k]
		t.Logf("largest %-28s %8d bytes, %4d ms CPU, RSS +%5.1f MiB", k, a.Bytes, a.CPU.Milliseconds(), float64(a.RSSGrowth)/(1<<20))
	}
}

// TestCheckPageOfTheWorstContentIsBounded renders the check page and
// Register's question of a check made of the worst content each field can
// hold (every header, cell, value and message long and made of the
// characters escaping makes longest, every row with a problem in every
// column, hundreds of warnings), which no file need reach: each is at most
// 1 MiB in both languages, whatever the reader lets through.
func TestCheckPageOfTheWorstContentIsBounded(t *testing.T) {
	long := func(s string, n int) string { return strings.Repeat(s, n) }
	c := &upload.Checked{Problems: []upload.Problem{}, Warnings: []upload.Problem{}}
	// One string of each kind, shared by every cell (a string is never copied).
	cell, message, value := long("\"<&>'", 2000), long("<&>", 3000), long("&\u202e", 3000)
	for i := range 256 {
		c.Header = append(c.Header, "판매가("+long("&", 5000)+strconv.Itoa(i)+")")
		c.Columns = append(c.Columns, upload.ColumnLetters(i))
	}
	for r := 2; r < 502; r++ {
		row := upload.CheckedRow{Number: r, State: upload.RowInvalid}
		for i := range 256 {
			row.Cells = append(row.Cells, cell)
			p := upload.Problem{Row: r, Column: "price", Cell: c.Columns[i] + strconv.Itoa(r), Code: "not_whole_number",
				Message: message, Params: map[string]string{"field": "price", "value": value, "min": "0", "max": "1"}}
			row.Problems = append(row.Problems, p)
			c.Problems = append(c.Problems, p)
		}
		c.Rows = append(c.Rows, row)
		c.Invalid++
	}
	for i := range 500 {
		c.Warnings = append(c.Warnings, upload.Problem{Code: "unknown_column", Message: long("<", 5000), Params: map[string]string{"header": long("&", 5000) + strconv.Itoa(i)}})
	}
	pages := parsePages()
	for _, lang := range []string{langKO, langEN} {
		for _, confirm := range []bool{false, true} {
			v := checkedView(lang, time.UTC, c)
			v.Confirm = confirm
			var buf strings.Builder
			d := pageData{Lang: lang, Check: v, Again: confirm}
			if err := pages["upload"].ExecuteTemplate(&buf, "layout", d); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s, confirm %v: %d bytes, %d problems and %d rows shown", lang, confirm, buf.Len(), len(v.Problems), len(v.Rows))
			if buf.Len() > answerCeilingBytes {
				t.Errorf("%s: the check page of the worst content is %d bytes; the ceiling is %d", lang, buf.Len(), answerCeilingBytes)
			}
			page := html.UnescapeString(buf.String())
			for _, said := range []string{v.ProblemsMore, v.PreviewCut, v.WarningsMore} {
				if said == "" || !strings.Contains(page, said) {
					t.Errorf("%s: the page does not say what it left out: %q %q %q", lang, v.ProblemsMore, v.PreviewCut, v.WarningsMore)
				}
			}
		}
	}
}

// TestFailedRowsOfTheWorstContentAreBounded: an upload of 500 failed rows
// whose reasons and header are long and made of what escaping makes
// longest: the event carrying them and the detail page's lists stay under
// 1 MiB, and the rows left out are counted.
func TestFailedRowsOfTheWorstContentAreBounded(t *testing.T) {
	st := uploadstatus.Status{Upload: uploadstatus.Upload{ID: "u", Total: 1000, Header: []string{"가격(" + strings.Repeat("&", 60000) + ")"}}}
	reason := strings.Repeat("<&\u202e", 3000)
	for r := 2; r < 1002; r++ {
		rr := uploadstatus.RowResult{Row: r, State: uploadstatus.Failed, Field: "price", Code: "invalid_price", Reason: reason,
			Details: []uploadstatus.Detail{{Code: "not_whole_number", Cell: "A" + strconv.Itoa(r), Field: "price", Params: map[string]string{"field": "price", "value": reason}}}}
		switch r % 3 {
		case 0:
			rr.Code = uploadstatus.OtherContent
		case 1:
			rr.State, rr.Code, rr.ProductID = uploadstatus.Registered, uploadstatus.RegisteredTwice, strings.Repeat("P<", 2000)
			rr.Details = []uploadstatus.Detail{{Code: uploadstatus.RegisteredTwice, Field: "seller_sku", Params: map[string]string{
				"field": "seller_sku", "value": reason, "product": rr.ProductID, "other": reason, "kind": "from", "upload": reason, "row": "5", "date": "2026-03-02"}}}
		}
		st.Rows = append(st.Rows, rr)
	}
	want := map[int]int{} // rows 2–1001 by r % 3: failed, other, twice
	for r := 2; r < 1002; r++ {
		want[r%3]++
	}
	for _, lang := range []string{langKO, langEN} {
		l := listRows(lang, st)
		b, _ := json.Marshal(ProgressEvent{FailedRows: l.Failed, OtherContentRows: l.Other, TwiceRows: l.Twice,
			FailedRowsMore: l.FailedMore, OtherContentRowsMore: l.OtherMore, TwiceRowsMore: l.TwiceMore})
		var page int
		for _, r := range slices.Concat(l.Failed, l.Other, l.Twice) {
			page += len(r.FieldHTML()) + len(r.ReasonHTML())
		}
		t.Logf("%s: %d + %d + %d rows listed, %d + %d + %d left out; the event %d bytes, the lists on a page %d", lang,
			len(l.Failed), len(l.Other), len(l.Twice), l.FailedMore, l.OtherMore, l.TwiceMore, len(b), page)
		if len(l.Failed)+l.FailedMore != want[2] || len(l.Other)+l.OtherMore != want[0] || len(l.Twice)+l.TwiceMore != want[1] || l.FailedMore == 0 || len(l.Twice) == 0 || l.TwiceMore == 0 {
			t.Errorf("%s: %d + %d failed rows, %d + %d other, %d + %d twice: not every row counted (want %v)", lang,
				len(l.Failed), l.FailedMore, len(l.Other), l.OtherMore, len(l.Twice), l.TwiceMore, want)
		}
		if len(b) > answerCeilingBytes || page > answerCeilingBytes {
			t.Errorf("%s: the event is %d bytes, the detail page's lists %d; the ceiling is %d", lang, len(b), page, answerCeilingBytes)
		}
	}
}
