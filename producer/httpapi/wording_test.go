package httpapi

import (
	"context"
	"fmt"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// Pairs of particle forms a sentence must not leave for the reader.
var bothForms = []string{"(는)", "(은)", "(를)", "(을)", "(가)", "(이)", "(와)", "(과)", "(으)"}

// checkCounted fails a sentence that counts rows wrongly: a particle pair
// left, in Korean a count read as a row's number ("21행"; 21 rows are
// "21개 행"), in English a noun or verb that disagrees with its number.
func checkCounted(t *testing.T, what, lang, s string) {
	t.Helper()
	for _, pair := range bothForms {
		if strings.Contains(s, pair) {
			t.Errorf("%s (%s): %q holds %q", what, lang, s, pair)
		}
	}
	if lang == langKO {
		if m := regexp.MustCompile(`\d행`).FindString(s); m != "" {
			t.Errorf("%s: %q says a count as a row's number (%s): a count is \"N개 행\"", what, s, m)
		}
		return
	}
	// "2 of 21 rows need": the count before "of" is the subject.
	s = regexp.MustCompile(`\bof \d+ rows\b`).ReplaceAllString(s, "of N rows")
	if m := regexp.MustCompile(`\b1 (?:more |failed )?(?:rows|problems|notes|uploads|hours|days|columns|registrations|seconds)\b|\b1 (?:more )?(?:row )?(?:are|need)\b|\b1 of N rows need\b`).FindString(s); m != "" {
		t.Errorf("%s: %q says %q: one is singular", what, s, m)
	}
	if m := regexp.MustCompile(`\b(?:0|2|21) (?:more |failed )?(?:row|problem|note|upload|hour|day|column|registration|second)\b(?: is| has)?|\b(?:2|21) (?:more )?(?:rows? )?(?:is|has|needs)\b|\b(?:2|21) of N rows needs\b`).FindString(s); m != "" {
		t.Errorf("%s: %q says %q: more than one is plural", what, s, m)
	}
}

// checkNoZero fails a sentence that names a count of 0 ("이미 등록된 0개
// 행", "0 already registered"): a count that is 0 is left out.
func checkNoZero(t *testing.T, what, lang, s string) {
	t.Helper()
	if m := regexp.MustCompile(`(?:^|[^0-9,.])0(?:개| |$)`).FindString(s); m != "" {
		t.Errorf("%s (%s): %q names a count of 0", what, lang, s)
	}
}

// checkKoreanCounts fails Korean that counts without "개": every number
// of a count sentence is "N개" ("21개 행", "오류 2개").
func checkKoreanCounts(t *testing.T, what, s string) {
	t.Helper()
	for _, m := range regexp.MustCompile(`\d[\d,]*(.?)`).FindAllStringSubmatch(s, -1) {
		if m[1] != "개" {
			t.Errorf("%s: %q counts %q without 개", what, s, m[0])
		}
	}
}

// TestEveryPageMessageReadsRightWithAnyCount walks every page text in both
// languages with its counts 1, 2 and 21 (and 0, for the leftovers), then
// the sentences the pages build from them (the summary and plan of a
// check, the end of an upload) with every mix of 0, 1, 2 and 21: no
// particle pair, a count of rows said "N개 행" and never as a row's number,
// no count of 0 named, English nouns and verbs agreeing with their number.
func TestEveryPageMessageReadsRightWithAnyCount(t *testing.T) {
	verbs := regexp.MustCompile(`%(?:\[(\d+)\])?([ds])`)
	for key := range messages {
		for _, n := range []int{0, 1, 2, 21} {
			for _, lang := range []string{langKO, langEN} {
				tmpl := messages[key][langIndex(lang)]
				// The arguments by their verbs: numbers for %d, text for %s.
				var args []any
				for _, v := range verbs.FindAllStringSubmatch(tmpl, -1) {
					i := len(args)
					if v[1] != "" {
						fmt.Sscan(v[1], &i)
						i--
					}
					for len(args) <= i {
						args = append(args, nil)
					}
					if v[2] == "d" {
						args[i] = n
					} else {
						args[i] = "X"
					}
				}
				for i := range args {
					if args[i] == nil {
						args[i] = n
					}
				}
				got := msg(lang, strings.TrimSuffix(key, ".one"), args...)
				if strings.Contains(got, "%!") {
					t.Errorf("%s (%s): %q: the arguments do not fit", key, lang, got)
				}
				if key == "check.rownum" || key == "dur.min" || key == "dur.sec" || key == "detail.percent" || n == 0 {
					for _, pair := range bothForms {
						if strings.Contains(got, pair) {
							t.Errorf("%s (%s): %q holds %q", key, lang, got, pair)
						}
					}
					continue
				}
				checkCounted(t, key, lang, got)
			}
		}
	}

	counts := []int{0, 1, 2, 21}
	for _, valid := range counts {
		for _, fix := range counts {
			for _, already := range counts {
				for _, other := range counts {
					total := valid + fix + already + other
					if total == 0 {
						continue
					}
					c := &upload.Checked{Valid: valid, Invalid: fix + other, AlreadyRegistered: already, OtherContent: other}
					what := fmt.Sprintf("%d ready, %d to fix, %d registered, %d other", valid, fix, already, other)
					for _, lang := range []string{langKO, langEN} {
						for _, s := range []string{summaryText(lang, total, valid, fix, already, other), planText(lang, c)} {
							checkCounted(t, what, lang, s)
							checkNoZero(t, what, lang, s)
							if lang == langKO {
								checkKoreanCounts(t, what, s)
							}
						}
					}
				}
			}
		}
	}
	for _, registered := range counts {
		for _, already := range counts {
			for _, fix := range counts {
				for _, other := range counts {
					total := registered + already + fix + other
					if total == 0 {
						continue
					}
					st := uploadstatus.Status{Upload: uploadstatus.Upload{State: uploadstatus.Published, Total: total},
						Registered: registered, AlreadyRegistered: already, Failed: fix + other, OtherContent: other}
					what := fmt.Sprintf("end of %d registered, %d already, %d to fix, %d other", registered, already, fix, other)
					for _, lang := range []string{langKO, langEN} {
						s := endText(lang, st)
						checkCounted(t, what, lang, s)
						checkNoZero(t, what, lang, s)
						if lang == langKO {
							checkKoreanCounts(t, what, s)
						}
					}
				}
			}
		}
	}
}

// TestTheWordsOfACheckAndAnEnd holds the sentences sellers read most,
// whole.
func TestTheWordsOfACheckAndAnEnd(t *testing.T) {
	for _, tc := range []struct {
		lang                       string
		valid, fix, already, other int
		summary, plan              string
	}{
		{langKO, 21, 0, 0, 0, "21개 행: 등록 가능 21개", "문제가 없습니다. '등록'을 누르면 21개 행을 모두 등록합니다."},
		{langEN, 21, 0, 0, 0, "21 rows: 21 ready", "No problems. Register registers all 21 rows."},
		{langEN, 1, 0, 0, 0, "1 row: 1 ready", "No problems. Register registers 1 row."},
		{langKO, 19, 2, 0, 0, "21개 행: 등록 가능 19개, 오류 2개", "'등록'을 누르면 19개 행을 등록하고, 오류가 있는 2개 행은 건너뜁니다."},
		{langKO, 18, 2, 1, 0, "21개 행: 등록 가능 18개, 오류 2개, 이미 등록됨 1개", "'등록'을 누르면 18개 행을 등록하고, 오류가 있는 2개 행과 이미 등록된 1개 행은 건너뜁니다."},
		{langKO, 17, 2, 1, 1, "21개 행: 등록 가능 17개, 오류 2개, 이미 등록됨 1개, 다른 내용으로 이미 등록됨 1개",
			"'등록'을 누르면 17개 행을 등록하고, 오류가 있는 2개 행, 이미 등록된 1개 행과 다른 내용으로 이미 등록된 1개 행은 건너뜁니다."},
		{langEN, 20, 0, 1, 0, "21 rows: 20 ready, 1 already registered", "Register registers 20 rows and skips 1 row registered already."},
		{langEN, 17, 2, 1, 1, "21 rows: 17 ready, 2 with problems, 1 already registered, 1 already registered with different content",
			"Register registers 17 rows and skips 2 rows with problems, 1 row registered already and 1 row registered already with different content."},
		{langKO, 0, 0, 21, 0, "21개 행: 이미 등록됨 21개", "21개 행이 모두 이미 등록되어 있습니다. 새로 등록할 행이 없습니다."},
		{langEN, 0, 0, 1, 0, "1 row: 1 already registered", "1 row is registered already; there is nothing new to register."},
		{langKO, 0, 2, 1, 0, "3개 행: 오류 2개, 이미 등록됨 1개", "등록할 행이 없습니다: 오류가 있는 2개 행과 이미 등록된 1개 행. 오류를 고친 뒤 다시 올려 주세요."},
		{langEN, 0, 1, 1, 0, "2 rows: 1 with problems, 1 already registered", "Nothing to register: 1 row has problems and 1 row is registered already. Fix the problems and upload again."},
		{langEN, 0, 0, 0, 2, "2 rows: 2 already registered with different content", "Nothing to register: 2 rows are registered already with different content."},
	} {
		total := tc.valid + tc.fix + tc.already + tc.other
		c := &upload.Checked{Valid: tc.valid, Invalid: tc.fix + tc.other, AlreadyRegistered: tc.already, OtherContent: tc.other}
		if got := summaryText(tc.lang, total, tc.valid, tc.fix, tc.already, tc.other); got != tc.summary {
			t.Errorf("summary %+v:\n got %q\nwant %q", tc, got, tc.summary)
		}
		if got := planText(tc.lang, c); got != tc.plan {
			t.Errorf("plan %+v:\n got %q\nwant %q", tc, got, tc.plan)
		}
	}
	for _, tc := range []struct {
		lang string
		args []any
		key  string
		want string
	}{
		{langKO, []any{21}, "confirm.register", "21개 행 등록"},
		{langEN, []any{1}, "confirm.register", "Register 1 row"},
		{langEN, []any{2}, "confirm.register", "Register 2 rows"},
		{langEN, []any{1}, "detail.rows.more", "1 more row is not listed here; the fix file (.xlsx) has every row and its reason."},
		{langKO, []any{3}, "detail.rows.more", "3개 행은 여기에 보여 주지 않았습니다. 고칠 파일(.xlsx)에 모든 행과 사유가 있습니다."},
		{langKO, []any{1}, "end.fix", "고칠 파일 내려받기: 실패한 1개 행 (.xlsx)"},
		{langEN, []any{1}, "end.fix", "Download the fix file: 1 failed row (.xlsx)"},
		{langKO, []any{7}, "check.rownum", "7행"},
		{langEN, []any{7}, "check.rownum", "Row 7"},
		{langEN, []any{1, "minute"}, "wait.pace", "The marketplace allows 1 registration per minute per seller; rows are registered at that pace."},
	} {
		if got := msg(tc.lang, tc.key, tc.args...); got != tc.want {
			t.Errorf("%s %s %v: %q, want %q", tc.lang, tc.key, tc.args, got, tc.want)
		}
	}
	if got, want := msg(langKO, "check.preview.cut", msgN(langKO, "n.rows", 200, 200), msgN(langKO, "n.cols", 9, 9), msgN(langKO, "n.rows", 500, 500), msgN(langKO, "n.cols", 12, 12)),
		"미리보기는 전체 500개 행, 12개 열 가운데 첫 200개 행과 9개 열만 보여 줍니다. 검사는 모든 행과 열에 했습니다."; got != want {
		t.Errorf("preview cut: %q, want %q", got, want)
	}
	if got, want := msg(langEN, "check.preview.cut", msgN(langEN, "n.rows", 1, 1), msgN(langEN, "n.cols", 9, 9), msgN(langEN, "n.rows", 500, 500), msgN(langEN, "n.cols", 12, 12)),
		"The preview shows the first 1 row and 9 columns only, of 500 rows and 12 columns; every row and column was checked."; got != want {
		t.Errorf("preview cut: %q, want %q", got, want)
	}
}

// TestTheProgressPageSaysCountsAndReasonsOnce reads a partly failed
// upload's progress page (httptest, no browser) in both languages: the end
// counts rows as "N개 행" and says one row in the singular, names no count
// of 0, and the failed row's reason names each cell once and the field
// only where the field column does not.
func TestTheProgressPageSaysCountsAndReasonsOnce(t *testing.T) {
	e := newSessionEnv(t)
	c, _ := e.signIn(t, "seller-a")
	ctx := context.Background()
	id := "00112233445566ff"
	if _, err := e.store.Create(ctx, uploadstatus.Upload{ID: id, SellerID: "seller-a", FileName: "f.xlsx", Total: 2, Valid: 1, Invalid: 1,
		Header: excel.TemplateHeader(), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := e.up.Index.AddToSeller(ctx, "seller-a", id, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetState(ctx, id, uploadstatus.Published, ""); err != nil {
		t.Fatal(err)
	}
	price := map[string]string{"field": "price", "min": "1", "max": "1,000,000,000", "value": `"0"`}
	for _, rr := range []uploadstatus.RowResult{
		{Row: 2, State: uploadstatus.Registered, ProductID: "P-2"},
		{Row: 3, State: uploadstatus.Failed, Code: "out_of_range", Field: "price",
			Reason: `D3: price must be a whole number greater than 0 and at most 1,000,000,000, got "0"; E3: stock is required but the cell is empty`,
			Details: []uploadstatus.Detail{{Code: "out_of_range", Cell: "D3", Field: "price", Params: price},
				{Code: "required", Cell: "E3", Field: "stock", Params: map[string]string{"field": "stock"}}}},
	} {
		if err := e.store.RecordRow(ctx, id, rr); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		lang string
		want []string
	}{
		{langKO, []string{
			`class="eta end-partial"`, `aria-live="polite">일부 실패: 2개 행 중 1개 행을 고쳐야 합니다. 나머지는 등록되었습니다.</p>`,
			`>고칠 파일 내려받기: 실패한 1개 행 (.xlsx)</a>`,
			`<tr><th scope="row">3</th><td>판매가</td><td>D3: 1 이상 1,000,000,000 이하여야 하는데 "0"입니다 (허용 범위를 벗어났습니다); E3 재고수량: 값이 비어 있습니다. 필수 항목이니 값을 입력해 주세요</td></tr>`,
		}},
		{langEN, []string{
			`class="eta end-partial"`, `aria-live="polite">Partly failed: 1 of 2 rows needs fixing; the rest are registered.</p>`,
			`>Download the fix file: 1 failed row (.xlsx)</a>`,
			`<tr><th scope="row">3</th><td>price</td><td>D3: must be a whole number from 1 to 1,000,000,000, got "0"; E3 stock: the cell is empty; the field is required</td></tr>`,
			`"end.fix.one":"Download the fix file: %d failed row (.xlsx)"`,
		}},
	} {
		_, b := pageDo(t, c, "GET", e.srv.URL+"/uploads/"+id, tc.lang, "", nil)
		page := html.UnescapeString(strings.NewReplacer("<bdi>", "", "</bdi>", "").Replace(string(b)))
		page = strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(page)
		for _, w := range tc.want {
			if !strings.Contains(page, w) {
				t.Errorf("the %s progress page lacks %q", tc.lang, w)
			}
		}
		for _, wrong := range append([]string{"0개 행", " 0 rows", "1 rows", "(판매가"}, bothForms...) {
			if strings.Contains(page, wrong) {
				t.Errorf("the %s progress page holds %q", tc.lang, wrong)
			}
		}
	}
}
