package httpapi

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/ledger"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// TestKoreanPagesSayReasonsInKorean: the check page of a Korean seller
// says every problem, refusal and note in Korean, with the facts the
// English has (the range, the unit hint, the other row), not a bare
// "정수가 아닙니다", and names columns by the seller's own headers.
func TestKoreanPagesSayReasonsInKorean(t *testing.T) {
	e := newSessionEnv(t)
	c, csrf := e.signIn(t, "seller-a")
	var raw string // the last page as sent, its attributes still quoted
	post := func(path string, data []byte, lang string) string {
		t.Helper()
		ct, body := multipartBody(t, "file", data, map[string]string{"csrf_token": csrf})
		_, b := pageDo(t, c, "POST", e.srv.URL+path, lang, ct, body)
		raw = string(b)
		return html.UnescapeString(raw)
	}
	csv := []byte("판매자상품코드,상품명,카테고리코드,가격,재고수량,internal_note\n" +
		"A-1,셔츠,CAT-1,\"12,000원\",5,x\n" +
		"A-2,바지,CAT-1,0,5,x\n" +
		"A-1,모자,CAT-1,100,5,x\n")
	page := post("/upload/check", csv, "ko")
	for _, want := range []string{"원이나 ₩ 없이", "1 이상 1,000,000,000 이하", "가격", "허용 범위", "2행", "알 수 없는 열"} {
		if !strings.Contains(page, want) {
			t.Errorf("the Korean check page lacks %q", want)
		}
	}
	// Each problem names its cell and field once, then what is wrong (it
	// said "D3 (가격): 가격은(는) …").
	words := html.UnescapeString(strings.NewReplacer("<bdi>", "", "</bdi>", "").Replace(raw))
	for _, want := range []string{
		`D2</a> 가격: 1 이상 1,000,000,000 이하의 정수여야 하는데 "12,000원"입니다. 원이나 ₩ 없이 숫자만 입력해 주세요</li>`,
		`D3</a> 가격: 1 이상 1,000,000,000 이하여야 하는데 "0"입니다 (허용 범위를 벗어났습니다)</li>`,
		`A4</a> 판매자상품코드: "A-1"은 이미 2행에서 썼습니다. 상품마다 다른 코드가 필요합니다</li>`,
		"3개 행: 오류 3개", "등록할 행이 없습니다: 오류가 있는 3개 행. 오류를 고친 뒤 다시 올려 주세요.",
	} {
		if !strings.Contains(words, want) {
			t.Errorf("the Korean check page lacks %q", want)
		}
	}
	for _, wrong := range []string{"(는)", "(를)", "(으)", "(가격)"} {
		if strings.Contains(words, wrong) {
			t.Errorf("the Korean check page holds %q", wrong)
		}
	}
	for _, english := range []string{"must be", "is not a known column", "is already used in row"} {
		if strings.Contains(page, english) {
			t.Errorf("the Korean check page holds the English %q", english)
		}
	}
	// Every problem, warning and cell hint shown has Hangul.
	items := regexp.MustCompile(`(?s)<li>(.*?)</li>|title="([^"]*)"`).FindAllStringSubmatch(raw, -1)
	if len(items) < 5 {
		t.Fatalf("found %d problems, warnings and hints on the page", len(items))
	}
	for _, m := range items {
		text := html.UnescapeString(m[1] + m[2])
		if !regexp.MustCompile(`\p{Hangul}`).MatchString(text) {
			t.Errorf("a Korean page shows %q without Hangul", text)
		}
	}
	post("/upload/check", csv, "en") // read as raw below
	words = html.UnescapeString(strings.NewReplacer("<bdi>", "", "</bdi>", "").Replace(raw))
	for _, want := range []string{`D2</a> price: must be a whole number from 1 to 1,000,000,000, got "12,000원"; type the number only, without 원 or ₩</li>`,
		"is not a known column", "3 rows: 3 with problems", "Nothing to register: 3 rows have problems. Fix the problems and upload again."} {
		if !strings.Contains(words, want) {
			t.Errorf("the English check page lacks %q", want)
		}
	}
	page = post("/upload/check", []byte("%PDF-1.4\n1 0 obj\n"), "ko")
	if !strings.Contains(page, "PDF 문서") || strings.Contains(page, "header row") {
		t.Errorf("a PDF's Korean refusal does not say it is a PDF document")
	}
}

// TestRowsRegisteredWithOtherContentAreAGroupApart: the
// progress page lists rows whose SKU is registered with other content
// apart from the failed rows, with where changes are made, and the event
// stream's JSON carries them apart too.
func TestRowsRegisteredWithOtherContentAreAGroupApart(t *testing.T) {
	e := newSessionEnv(t)
	c, _ := e.signIn(t, "seller-a")
	ctx := context.Background()
	id := "0123456789abcdef"
	publishedUpload(t, e, id)
	for _, rr := range []uploadstatus.RowResult{
		{Row: 2, State: uploadstatus.Failed, Code: uploadstatus.OtherContent, Field: "seller_sku",
			Reason:  `seller_sku "A-1" is already registered as P-1; bulk registration does not change existing products`,
			Details: []uploadstatus.Detail{{Code: uploadstatus.OtherContent, Params: map[string]string{"field": "seller_sku", "value": `"A-1"`, "product": "P-1"}}}},
		{Row: 3, State: uploadstatus.Failed, Code: "invalid_price", Field: "price", Reason: "price is too high for this category"},
	} {
		if err := e.store.RecordRow(ctx, id, rr); err != nil {
			t.Fatal(err)
		}
	}
	resp, b := pageDo(t, c, "GET", e.srv.URL+"/uploads/"+id, "ko", "", nil)
	// The seller's text is set apart (<bdi>): read the words without it.
	page := html.UnescapeString(strings.NewReplacer("<bdi>", "", "</bdi>", "").Replace(string(b)))
	other := strings.Index(page, `<section id="other"`)
	failed := strings.Index(page, `id="failed"`)
	if resp.StatusCode != 200 || other < 0 || failed < 0 {
		t.Fatalf("page %d: other-content group at %d, failed table at %d", resp.StatusCode, other, failed)
	}
	group := page[other:]
	if !strings.Contains(group, "판매자상품코드 \"A-1\"") || !strings.Contains(group, "P-1") || !strings.Contains(group, "판매자 센터") {
		t.Errorf("the other-content group does not say the SKU, its product and where changes are made: %s", group[:min(len(group), 800)])
	}
	if f := page[failed:other]; strings.Contains(f, "A-1") || !strings.Contains(f, "가격") {
		t.Errorf("the failed rows hold the other-content row, or lack the price row: %s", f)
	}
	// One row to fix in the file, not two.
	if !strings.Contains(page, `<dd id="n-failed">1</dd>`) {
		t.Error("the page's failed count holds the row registered with other content")
	}
	// ...which has a count of its own, so the counts add up to the total.
	if !strings.Contains(page, `<div id="tile-other"><dt>다른 내용으로 이미 등록됨</dt><dd id="n-other-tile">1</dd></div>`) {
		t.Error("the page has no count of the rows registered with other content")
	}
	if !strings.Contains(page, msg(langKO, "end.fix", 1)) || strings.Contains(page, msg(langKO, "end.fix", 2)) {
		t.Errorf("the page does not offer the one row to fix (%q)", msg(langKO, "end.fix", 1))
	}
	// The history reads the upload's counts only (not its rows): it too
	// says one row to fix and the other one apart, in Korean.
	_, b = pageDo(t, c, "GET", e.srv.URL+"/uploads", "ko", "", nil)
	list := html.UnescapeString(string(b))
	row := list[strings.Index(list, "f.xlsx"):]
	row = row[:strings.Index(row, "</tr>")]
	for _, want := range []string{`class="state-partial">일부 실패<`, `data-label="실패"><span>1 <span class="apart">+ 다른 내용으로 이미 등록됨 1</span></span>`} {
		if !strings.Contains(row, want) {
			t.Errorf("the history's line lacks %q: %s", want, row)
		}
	}
}

// TestTheCheckPageGroupsOtherContentApart: before
// registering, a row whose SKU is registered with different content is
// listed in its own group with where changes are made, not among the
// problems to fix.
func TestTheCheckPageGroupsOtherContentApart(t *testing.T) {
	e := newSessionEnv(t)
	ld := ledger.New(testredis.Start(t).Client(), ledger.Options{})
	e.up.Ledger = ld
	c, csrf := e.signIn(t, "seller-a")
	csv := []byte("판매자상품코드,상품명,카테고리코드,판매가,재고수량\nA-1,셔츠,CAT-1,100,5\nA-2,바지,CAT-1,0,5\n")
	if _, err := ld.Mark(context.Background(), "seller-a", "A-1", "0000000000000001:2", "other-hash", "P-1"); err != nil {
		t.Fatal(err)
	}
	ct, body := multipartBody(t, "file", csv, map[string]string{"csrf_token": csrf})
	_, b := pageDo(t, c, "POST", e.srv.URL+"/upload/check", "ko", ct, body)
	page := html.UnescapeString(string(b))
	other, problems := strings.Index(page, `id="other-content"`), strings.Index(page, `id="problems"`)
	if other < 0 || problems < 0 || other < problems {
		t.Fatalf("other-content group at %d, problems at %d; want both, the group after the problems", other, problems)
	}
	if p := page[problems:other]; strings.Contains(p, "A-1") || !strings.Contains(p, "D3") {
		t.Errorf("the problems to fix hold the other-content row or lack D3: %s", p)
	}
	if g := page[other:]; !strings.Contains(g, `"A-1"`) || !strings.Contains(g, "P-1") {
		t.Errorf("the other-content group does not name A-1 and P-1")
	}
	// The counts say the same: one row with a problem (D3), the A-1 row
	// apart, nothing to register (a new-user review read "오류 2" and two
	// rows "with errors" skipped, where one cell was listed to fix).
	for _, want := range []string{
		"2개 행: 오류 1개, 다른 내용으로 이미 등록됨 1개",
		"등록할 행이 없습니다: 오류가 있는 1개 행과 다른 내용으로 이미 등록된 1개 행. 오류를 고친 뒤 다시 올려 주세요.",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the check page lacks %q", want)
		}
	}
	if strings.Contains(page, `id="confirm"`) {
		t.Error("with nothing to register the page still has the question, which said the plan a second time")
	}
}

// TestRowsRegisteredTwiceAreAGroupApart: a row the marketplace registered
// while it already held the row's SKU (registered_twice) is registered,
// and the progress page and the event stream still list it apart, naming
// both products and where one is deleted: the seller has a duplicate to
// remove, which the counts alone would hide.
func TestRowsRegisteredTwiceAreAGroupApart(t *testing.T) {
	e := newSessionEnv(t)
	c, _ := e.signIn(t, "seller-a")
	ctx := context.Background()
	id := "0123456789abcdee"
	publishedUpload(t, e, id)
	for _, rr := range []uploadstatus.RowResult{
		{Row: 2, State: uploadstatus.Registered, ProductID: "P-NEW", Code: uploadstatus.RegisteredTwice, Field: "seller_sku", At: time.Now(),
			Reason: `registered as P-NEW, but seller_sku "A-1" was already registered as P-OLD by upload 9f86d081884c7d65 row 5 on 2026-03-02: the marketplace now holds it twice; delete one of them in the seller center's product management`,
			Details: []uploadstatus.Detail{{Code: uploadstatus.RegisteredTwice, Field: "seller_sku", Params: map[string]string{
				"field": "seller_sku", "value": `"A-1"`, "product": "P-NEW", "other": "P-OLD",
				"kind": "from", "upload": "9f86d081884c7d65", "row": "5", "date": "2026-03-02", "at": "2026-03-02T14:30:00Z"}}}},
		{Row: 3, State: uploadstatus.Registered, ProductID: "P-3", At: time.Now()},
	} {
		if err := e.store.RecordRow(ctx, id, rr); err != nil {
			t.Fatal(err)
		}
	}
	resp, b := pageDo(t, c, "GET", e.srv.URL+"/uploads/"+id, "ko", "", nil)
	page := html.UnescapeString(strings.NewReplacer("<bdi>", "", "</bdi>", "").Replace(string(b)))
	twice := strings.Index(page, `<section id="twice">`)
	if resp.StatusCode != 200 || twice < 0 {
		t.Fatalf("page %d: no shown registered-twice group", resp.StatusCode)
	}
	group := page[twice:]
	group = group[:strings.Index(group, "</section>")]
	for _, want := range []string{"P-NEW", "P-OLD", `판매자상품코드 "A-1"`, "9f86d081884c7d65", "판매자 센터", `<span id="n-twice">1</span>`} {
		if !strings.Contains(group, want) {
			t.Errorf("the registered-twice group lacks %q: %s", want, group)
		}
	}
	if strings.Contains(group, "P-3") || !strings.Contains(page, `<dd id="n-registered">2</dd>`) {
		t.Errorf("the group holds the plain registered row, or the count of registered rows is not 2")
	}
	// The end says it too: every row registered is not all the seller needs to know.
	if end := msg(langKO, "end.twice", 1); !strings.Contains(page, end) {
		t.Errorf("the finished page does not say %q", end)
	}
	// The history reads the upload's counts only (upload_record.lua counts the rows registered twice).
	_, b = pageDo(t, c, "GET", e.srv.URL+"/uploads", "ko", "", nil)
	list := html.UnescapeString(string(b))
	line := list[strings.Index(list, "f.xlsx"):]
	line = line[:strings.Index(line, "</tr>")]
	if want := `<span>2 <span class="apart">(두 번 등록됨 1)</span></span>`; !strings.Contains(line, want) {
		t.Errorf("the history's line lacks %q: %s", want, line)
	}

	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/uploads/"+id+"/events", nil)
	req.Header.Set("Accept-Language", "en")
	sresp, err := c.Do(req)
	if err != nil || sresp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", sresp, err)
	}
	defer sresp.Body.Close()
	text, _ := io.ReadAll(io.LimitReader(sresp.Body, 1<<20)) // done: the stream ends after its first event
	if !strings.Contains(string(text), `"failed_rows":[]`) {
		t.Errorf("the event has no empty failed_rows: the page keeps the lists it showed unless each comes, empty or not\n%s", text)
	}
	var ev ProgressEvent
	for _, line := range strings.Split(string(text), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"id"`) {
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if ev.RegisteredTwice != 1 || len(ev.TwiceRows) != 1 || ev.TwiceRows[0].Row != 2 ||
		!strings.Contains(ev.TwiceRows[0].Reason, "P-NEW") || !strings.Contains(ev.TwiceRows[0].Reason, "P-OLD") || !strings.Contains(ev.TwiceRows[0].Reason, "twice") {
		t.Errorf("the stream's event: registered_twice %d, twice_rows %+v; want row 2 naming P-NEW and P-OLD", ev.RegisteredTwice, ev.TwiceRows)
	}
}

// publishedUpload creates seller-a's upload id of two rows (f.xlsx, Korean
// headers), in the seller's history and published, its rows not recorded.
func publishedUpload(t *testing.T, e *sessionEnv, id string) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.store.Create(ctx, uploadstatus.Upload{ID: id, SellerID: "seller-a", FileName: "f.xlsx", Total: 2, Valid: 2,
		Header: []string{"판매자상품코드", "가격"}, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := e.up.Index.AddToSeller(ctx, "seller-a", id, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetState(ctx, id, uploadstatus.Published, ""); err != nil {
		t.Fatal(err)
	}
}
