package upload

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/sellertime"
	"github.com/bulkreg/bulkreg/ledger"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// koreanUpload is an upload of a file with the seller's own Korean headers
// ("가격" for price) whose rows end every way a row can: refused by the
// validator (a unit after the price, a price out of range, a duplicate
// SKU, an empty name), registered, already registered, registered with
// other content, refused by the marketplace, and waiting.
func koreanUpload(t *testing.T) (uploadstatus.Status, map[int][]string) {
	t.Helper()
	csv := "판매자상품코드,상품명,카테고리코드,가격,재고\n" +
		"A-1,셔츠,CAT-1,\"12,000원\",5\n" + // 2
		"A-2,바지,CAT-1,0,5\n" + // 3
		"A-1,모자,CAT-1,100,5\n" + // 4
		"A-4,,CAT-1,100,5\n" + // 5
		"A-5,양말,CAT-1,100,5\n" + // 6 registered
		"A-6,장갑,CAT-1,100,5\n" + // 7 already registered
		"A-7,가방,CAT-1,100,5\n" + // 8 other content
		"A-8,신발,CAT-1,100,5\n" + // 9 refused by the API
		"A-9,벨트,CAT-1,100,5\n" + // 10 waiting
		"A-10,띠,CAT-1,100,5\n" // 11 dead-lettered
	sheet, err := excel.NewParser(excel.Options{}).ParseBytes(context.Background(), []byte(csv))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	st := uploadstatus.Status{Upload: uploadstatus.Upload{ID: "abc", FileName: `C:\Users\판매자\11월 상품목록.xlsx`, Header: sheet.Header, Total: len(sheet.Rows)}}
	cells := map[int][]string{}
	for _, r := range sheet.Rows {
		cells[r.Number] = r.Cells
		if !r.Valid() {
			st.Rows = append(st.Rows, refusedRow(r, at))
		}
	}
	st.Rows = append(st.Rows,
		uploadstatus.RowResult{Row: 6, State: uploadstatus.Registered, ProductID: "P-6", At: at},
		uploadstatus.RowResult{Row: 7, State: uploadstatus.AlreadyRegistered, ProductID: "P-7", At: at,
			Reason:  "already registered as P-7 by upload 0000000000000001 row 3 on 2026-10-01; nothing was sent again",
			Details: []uploadstatus.Detail{alreadyDetail(ledger.Entry{ProductID: "P-7", Row: "0000000000000001:3", At: at.AddDate(0, -1, 0)})}},
		uploadstatus.RowResult{Row: 8, State: uploadstatus.Failed, Code: uploadstatus.OtherContent, Field: "seller_sku", At: at,
			Reason:  `seller_sku "A-7" is already registered as P-8; bulk registration does not change existing products`,
			Details: []uploadstatus.Detail{{Code: uploadstatus.OtherContent, Params: map[string]string{"field": "seller_sku", "value": `"A-7"`, "product": "P-8"}}}},
		uploadstatus.RowResult{Row: 9, State: uploadstatus.Failed, Code: "invalid_category", Field: "category_code", At: at,
			Reason: "category CAT-1 does not exist"},
		uploadstatus.RowResult{Row: 11, State: uploadstatus.Failed, Code: "transient", Attempts: 8, At: at,
			Reason: "the registration API did not take the row after 8 attempts (status 503); it was set aside for an operator to retry"},
		uploadstatus.RowResult{Row: 12, State: uploadstatus.Registered, ProductID: "P-12", Code: "registered_twice", Field: "seller_sku", At: at,
			Reason: `registered as P-12, but seller_sku "A-12" was already registered as P-1 by upload 0000000000000001 row 4 on 2026-10-01: the marketplace now holds it twice; delete one of them in the seller center's product management`,
			Details: []uploadstatus.Detail{{Code: "registered_twice", Field: "seller_sku", Params: map[string]string{"field": "seller_sku", "value": `"A-12"`, "product": "P-12", "other": "P-1",
				"kind": "from", "upload": "0000000000000001", "row": "4", "date": "2026-10-01", "at": at.AddDate(0, -1, 0).Format(time.RFC3339Nano)}}}},
	)
	return st, cells
}

// TestAKoreanReportIsAllKorean opens the Korean report as a seller would
// (excelize) and checks every reason: Hangul in each, the seller's own
// header names instead of field names, the same facts as the English
// (the range, the unit hint, the other row), Korean results, the product
// number of each registered row, and the rows registered with other
// content apart from the failures. No reason may fall back to English
// ("price must be a whole number…").
func TestAKoreanReportIsAllKorean(t *testing.T) {
	st, cells := koreanUpload(t)
	var buf bytes.Buffer
	seoul, err := sellertime.Load("Asia/Seoul")
	if err != nil {
		t.Fatal(err)
	}
	if err := excel.WriteReportIn(&buf, LangKO, st.Header, ReportRowsIn(LangKO, seoul, st, cells), false); err != nil {
		t.Fatal(err)
	}
	f, err := excelize.OpenReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := f.GetRows(excel.ReportSheet)
	if err != nil {
		t.Fatal(err)
	}
	n := len(st.Header)
	if h := got[0]; len(h) != n+5 || h[n+3] != excel.ReportColumnProductID || h[n+4] != excel.ReportColumnAt {
		t.Fatalf("header %q: want the product number (상품번호) and the time (처리 시각) columns last", h)
	}
	// The report's own columns are Korean only (not "결과 (result)").
	for _, h := range got[0][n:] {
		if !hasHangul(h) || strings.ContainsFunc(h, func(r rune) bool { return r < 0x80 && unicode.IsLetter(r) }) {
			t.Errorf("the Korean report's column %q is not all Korean", h)
		}
	}
	byRow := map[string][]string{}
	for _, line := range got[1:] {
		for len(line) < n+5 {
			line = append(line, "")
		}
		byRow[line[n]] = line
		result, reason, product := line[n+1], line[n+2], line[n+3]
		if !hasHangul(result) {
			t.Errorf("row %s: result %q is not Korean", line[n], result)
		}
		if reason != "" && !hasHangul(reason) {
			t.Errorf("row %s: reason %q has no Hangul", line[n], reason)
		}
		for _, english := range []string{"must be", "price", "seller_sku", "is required", "already used"} {
			if strings.Contains(reason, english) {
				t.Errorf("row %s: reason %q holds the English %q", line[n], reason, english)
			}
		}
		_ = product
	}
	for row, want := range map[string][]string{
		"2":  {"실패", "D2 가격: 1 이상 1,000,000,000 이하", "원이나 ₩ 없이", `"12,000원"`},
		"3":  {"실패", "D3 가격: 1 이상 1,000,000,000 이하", "허용 범위", `"0"`},
		"4":  {"실패", `A4 판매자상품코드: "A-1"은 이미 원본 2행에서 썼습니다`},
		"5":  {"실패", "B5 상품명: 값이 비어 있습니다"},
		"6":  {"등록됨", "P-6"},
		"7":  {"이미 등록됨", "P-7", "2026-10-01", "0000000000000001", "3행"},
		"8":  {"다른 내용으로 이미 등록됨", "P-8", "판매자 센터"},
		"9":  {"실패", "카테고리코드: 값이 마켓의 상품 규칙에 맞지 않아", `마켓의 설명: "category CAT-1 does not exist"`},
		"10": {"대기 중"},
		"11": {"실패", "8번", "응답 코드 503", "일시적인 오류", "운영자"},
		"12": {"등록됨", "P-12", "P-1", "두 개", "판매자 센터", "0000000000000001", "4행"},
	} {
		line := strings.Join(byRow[row], "|")
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Errorf("row %s %q lacks %q", row, line, w)
			}
		}
	}
	// Each problem names its field once: the label is not repeated in the sentence.
	for row, field := range map[string]string{"2": "가격", "3": "가격", "4": "판매자상품코드", "5": "상품명", "9": "카테고리코드"} {
		if c := strings.Count(byRow[row][n+2], field); c != 1 {
			t.Errorf("row %s's reason %q names %s %d times, want once", row, byRow[row][n+2], field, c)
		}
	}
	if p := byRow["6"][n+3]; p != "P-6" {
		t.Errorf("row 6's product number %q, want P-6", p)
	}
	if p := byRow["7"][n+3]; p != "P-7" {
		t.Errorf("row 7's product number %q, want P-7", p)
	}
	// Each recorded row says when, in the seller's zone, the zone named;
	// a waiting row has no time yet.
	for row, want := range map[string]string{"6": "2026-11-01 오전 9:00:00 (KST)", "9": "2026-11-01 오전 9:00:00 (KST)", "10": ""} {
		if at := byRow[row][n+4]; at != want {
			t.Errorf("row %s's time %q, want %q", row, at, want)
		}
	}
	// When the SKU was registered before, in the same zone and format.
	if r := byRow["7"][n+2]; !strings.Contains(r, "2026-10-01 오전 9:00:00 (KST)에") {
		t.Errorf("row 7's reason %q: want when it was registered, in the seller's zone", r)
	}
	for _, r := range ReportRowsIn(LangEN, seoul, st, cells) {
		if r.Number == 7 && r.Reason != "already registered as P-7 by upload 0000000000000001 row 3 on 2026-10-01 9:00:00 AM (KST); nothing was sent again" {
			t.Errorf("row 7's English reason %q: want when it was registered, in the seller's zone", r.Reason)
		}
	}

	// The English report keeps its English sentences, the field named once
	// (by the field, as the seller's header is Korean).
	en := ReportRowsIn(LangEN, time.UTC, st, cells)
	enByRow := map[int]string{}
	for _, r := range en {
		enByRow[r.Number] = r.Reason
		if hasHangul(strings.NewReplacer("원", "").Replace(r.Reason)) {
			t.Errorf("English report row %d: %q", r.Number, r.Reason)
		}
	}
	for row, want := range map[int]string{
		2: `D2 price: must be a whole number from 1 to 1,000,000,000, got "12,000원"; type the number only, without 원 or ₩`,
		4: `A4 seller_sku: "A-1" is already used in row 2; each product needs its own code`,
		5: "B5 name: the cell is empty; the field is required",
	} {
		if enByRow[row] != want {
			t.Errorf("English report row %d: %q, want %q", row, enByRow[row], want)
		}
	}
	// ...and its sheet and own columns are English (not "결과" and
	// "결과 (result)" in both).
	buf.Reset()
	if err := excel.WriteReportIn(&buf, LangEN, st.Header, en, false); err != nil {
		t.Fatal(err)
	}
	fe, err := excelize.OpenReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	if sheets := fe.GetSheetList(); len(sheets) != 1 || sheets[0] != "Results" {
		t.Errorf("the English report's sheets %q, want Results", sheets)
	}
	if eng, _ := fe.GetRows(excel.ReportSheetEN); len(eng) == 0 || hasHangul(strings.Join(eng[0][n:], " ")) {
		t.Errorf("the English report's own columns %q", eng)
	}
}

// TestReportIsNamedAfterTheUpload: the report's name is the uploaded
// file's (not bulkreg-<id>-report.xlsx), without its path and extension,
// and the download's header says it in ASCII and in UTF-8 (RFC 5987).
func TestReportIsNamedAfterTheUpload(t *testing.T) {
	for _, tc := range []struct {
		file, lang   string
		failed       bool
		want, header string
	}{
		{`C:\Users\판매자\11월 상품목록.xlsx`, LangKO, false, "11월 상품목록-결과.xlsx",
			`attachment; filename="11_ ____-__.xlsx"; filename*=UTF-8''11%EC%9B%94%20%EC%83%81%ED%92%88%EB%AA%A9%EB%A1%9D-%EA%B2%B0%EA%B3%BC.xlsx`},
		{"products.csv", LangEN, false, "products-report.xlsx", `attachment; filename="products-report.xlsx"; filename*=UTF-8''products-report.xlsx`},
		{"products.csv", LangEN, true, "products-failed.xlsx", ""},
		{"상품.xlsx", LangKO, true, "상품-실패행.xlsx", ""},
		{`a"b;c%d\r.xlsx`, LangEN, false, "r-report.xlsx", ""},
		{"evil\"\r\nSet-Cookie: x.xlsx", LangEN, false, "evil___Set-Cookie_ x-report.xlsx", ""},
		{"", LangKO, false, "bulkreg-abc-결과.xlsx", ""},
		{"...", LangEN, false, "bulkreg-abc-report.xlsx", ""},
	} {
		got := ReportName(tc.lang, uploadstatus.Status{Upload: uploadstatus.Upload{ID: "abc", FileName: tc.file}}, tc.failed)
		if got != tc.want {
			t.Errorf("ReportName(%q) = %q, want %q", tc.file, got, tc.want)
		}
		cd := ContentDisposition(got)
		if tc.header != "" && cd != tc.header {
			t.Errorf("ContentDisposition(%q) = %q, want %q", got, cd, tc.header)
		}
		if strings.ContainsAny(cd, "\r\n") || strings.Count(cd, `"`) != 2 {
			t.Errorf("ContentDisposition(%q) = %q: not one safe header value", got, cd)
		}
	}
}

// TestADeadLetterIsSaidInKorean: a row set aside after its retries is
// recorded by the consumer in English (its class as the code, the last
// status or the client's error in the reason); a Korean page and report say
// the cause from the class and the status, with no English left, and the
// English keeps the consumer's sentence.
func TestADeadLetterIsSaidInKorean(t *testing.T) {
	reason := func(n int, detail string) string {
		return fmt.Sprintf("the registration API did not take the row after %d attempts (%s); it was set aside for an operator to retry", n, detail)
	}
	latin := regexp.MustCompile(`[A-Za-z]+`)
	for _, tc := range []struct {
		class, detail string
		want          []string
	}{
		{"transient", "status 503", []string{"4번", "일시적인 오류", "응답 코드 503", "파일 내용에는 문제가 없습니다", "두 번 등록되지는 않습니다"}},
		{"transient", `Post "http://registry/v1/sellers/s/products": context deadline exceeded`, []string{"4번", "일시적인 오류", "제대로 된 응답을 받지 못함"}},
		{"transient", "the marketplace did not answer in time", []string{"4번", "일시적인 오류", "마켓이 제한 시간 안에 답하지 않음"}},
		{"transient", "the marketplace could not be reached", []string{"마켓에 연결할 수 없음"}},
		{"transient", "the secure connection (TLS) to the marketplace failed", []string{"마켓과 보안 연결을 맺지 못함"}},
		{"misconfigured", "status 401", []string{"bulkreg의 접속을 거부해", "응답 코드 401"}},
		{"rate_limited", "status 429", []string{"등록 한도", "응답 코드 429"}},
		{"unknown", "status 418", []string{"4번", "응답 코드 418", "운영자"}},
	} {
		rr := uploadstatus.RowResult{Row: 2, State: uploadstatus.Failed, Code: tc.class, Attempts: 4, Reason: reason(4, tc.detail)}
		ko := RowReason(LangKO, nil, rr)
		for _, w := range tc.want {
			if !strings.Contains(ko, w) {
				t.Errorf("%s, %s: %q lacks %q", tc.class, tc.detail, ko, w)
			}
		}
		if words := latin.FindAllString(ko, -1); len(words) > 1 || len(words) == 1 && words[0] != "bulkreg" {
			t.Errorf("%s, %s: the Korean %q holds English %q", tc.class, tc.detail, ko, words)
		}
		if en := RowReason(LangEN, nil, rr); en != rr.Reason {
			t.Errorf("%s: English %q, want the consumer's %q", tc.class, en, rr.Reason)
		}
	}
}

// TestFieldsAreNamedOnce: a field is named by the seller's header without
// its marks and asides, in English by the field when the header is Korean;
// a problem says its cell and field once, then what is wrong; a table that
// shows the row's field beside the reason does not name it again.
func TestFieldsAreNamedOnce(t *testing.T) {
	template := excel.TemplateHeader()
	for _, tc := range []struct {
		lang   string
		header []string
		field  string
		want   string
	}{
		{LangKO, template, "price", "판매가"},
		{LangEN, template, "price", "price"},
		{LangKO, template, "category_code", "카테고리코드"},
		{LangEN, template, "image_url", "image_url"},
		{LangKO, []string{"가격 (원)"}, "price", "가격"},
		{LangEN, []string{"가격 (원)"}, "price", "price"},
		{LangKO, []string{"Price (KRW)*"}, "price", "Price"},
		{LangEN, []string{"Price (KRW)*"}, "price", "Price"},
		{LangKO, nil, "stock", "재고수량"},
		{LangEN, nil, "stock", "stock"},
	} {
		if got := FieldName(tc.lang, tc.header, tc.field); got != tc.want {
			t.Errorf("FieldName(%s, %q, %s) = %q, want %q", tc.lang, tc.header, tc.field, got, tc.want)
		}
	}

	price := Problem{Row: 3, Column: "price", Cell: "D3", Code: "out_of_range", Message: `price must be a whole number greater than 0 and at most 1,000,000,000, got "0"`,
		Params: map[string]string{"field": "price", "min": "1", "max": "1,000,000,000", "value": `"0"`}}
	for _, tc := range []struct {
		lang, text, in string
	}{
		{LangKO, `1 이상 1,000,000,000 이하여야 하는데 "0"입니다 (허용 범위를 벗어났습니다)`, `D3 판매가: 1 이상 1,000,000,000 이하여야 하는데 "0"입니다 (허용 범위를 벗어났습니다)`},
		{LangEN, `must be a whole number from 1 to 1,000,000,000, got "0"`, `D3 price: must be a whole number from 1 to 1,000,000,000, got "0"`},
	} {
		if got := price.Text(tc.lang, template); got != tc.text {
			t.Errorf("%s Text = %q, want %q", tc.lang, got, tc.text)
		}
		if got := price.In(tc.lang, template); got != tc.in {
			t.Errorf("%s In = %q, want %q", tc.lang, got, tc.in)
		}
	}
	// A sentence that names its field says it once, inside.
	fill := Problem{Cell: "D3", Code: "merged_fill", Params: map[string]string{"field": "price", "range": "D3:D5", "value": `"100"`, "from": "3", "to": "5"}}
	if got, want := fill.In(LangKO, template), `D3: D3:D5 셀이 병합되어 있어 "100" 값을 3행부터 5행까지의 판매가에 씁니다`; got != want {
		t.Errorf("merged_fill In = %q, want %q", got, want)
	}
	// A row without a cell is named by its number.
	if got := (Problem{Row: 5, Code: "hidden_row"}).In(LangKO, nil); got != "5행: 이 행은 스프레드시트에서 숨겨져 있지만 다른 행처럼 등록됩니다" {
		t.Errorf("a row's problem: %q", got)
	}

	rr := uploadstatus.RowResult{Row: 3, State: uploadstatus.Failed, Code: "out_of_range", Field: "price", Details: []uploadstatus.Detail{
		{Code: "out_of_range", Cell: "D3", Field: "price", Params: price.Params},
		{Code: "required", Cell: "E3", Field: "stock", Params: map[string]string{"field": "stock"}},
	}}
	if got, want := RowReason(LangKO, template, rr), `D3 판매가: 1 이상 1,000,000,000 이하여야 하는데 "0"입니다 (허용 범위를 벗어났습니다); E3 재고수량: 값이 비어 있습니다. 필수 항목이니 값을 입력해 주세요`; got != want {
		t.Errorf("RowReason = %q, want %q", got, want)
	}
	if got, want := RowReasonBeside(LangKO, template, rr), `D3: 1 이상 1,000,000,000 이하여야 하는데 "0"입니다 (허용 범위를 벗어났습니다); E3 재고수량: 값이 비어 있습니다. 필수 항목이니 값을 입력해 주세요`; got != want {
		t.Errorf("RowReasonBeside = %q, want %q", got, want)
	}
	refused := uploadstatus.RowResult{Row: 9, State: uploadstatus.Failed, Code: "invalid_category", Field: "category_code", Reason: "category CAT-1 does not exist"}
	if got, want := RowReasonBeside(LangKO, template, refused), `값이 마켓의 상품 규칙에 맞지 않아 마켓이 이 행을 받지 않았습니다. 마켓의 설명: "category CAT-1 does not exist"`; got != want {
		t.Errorf("RowReasonBeside of a refusal = %q, want %q", got, want)
	}
}
