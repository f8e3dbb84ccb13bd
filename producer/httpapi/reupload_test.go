package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode"

	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/excel"
)

// TestTheSameFileAgainShowsTheNoteAndReportsAreNamed: a
// seller registers a file on the page, then the same file again. The second
// time lands on the first upload's page with the "uploaded before" note
// (and the API answers 200 duplicate), and the report downloads in Korean,
// named after the file, with the product number of every registered row
// column.
func TestTheSameFileAgainShowsTheNoteAndReportsAreNamed(t *testing.T) {
	e := newSessionEnv(t)
	c, csrf := e.signIn(t, "seller-a")
	file := xlsx(t, "reupload", validRows(3)...)
	noFollow := *c
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	register := func() string {
		t.Helper()
		ct, body := multipartBody(t, "file", file, map[string]string{"csrf_token": csrf, "confirmed": "1"})
		resp, _ := pageDo(t, &noFollow, "POST", e.srv.URL+"/upload", "ko", ct, body)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("register: %d, want 303 to the upload's page", resp.StatusCode)
		}
		return resp.Header.Get("Location")
	}
	check := func() string {
		t.Helper()
		ct, body := multipartBody(t, "file", file, map[string]string{"csrf_token": csrf})
		_, b := pageDo(t, c, "POST", e.srv.URL+"/upload/check", "ko", ct, body)
		return string(b)
	}
	if page := check(); strings.Contains(page, `id="uploaded-before"`) {
		t.Errorf("the check of a new file says it was uploaded before")
	}
	first := register()
	// Checking the same file again says, before Register, that it was
	// uploaded before, and links its upload with the note.
	if page := check(); !strings.Contains(page, `id="uploaded-before"`) || !strings.Contains(page, "올린 적이 있어 다시 등록하지 않습니다. <a") ||
		!strings.Contains(page, `href="`+first+`?duplicate=true"`) {
		t.Errorf("checking the same file again does not say it was uploaded before, with a link to %s", first)
	}
	again := register()
	if strings.Contains(first, "duplicate") || again != first+"?duplicate=true" {
		t.Fatalf("first upload to %q, the same file again to %q; want the same page with ?duplicate=true", first, again)
	}
	get := func(path, lang string) (*http.Response, []byte) {
		t.Helper()
		return pageDo(t, c, "GET", e.srv.URL+path, lang, "", nil)
	}
	if _, page := get(again, "ko"); !bytes.Contains(page, []byte(msg(langKO, "detail.duplicate"))) {
		t.Errorf("the page of the same file sent again lacks the note %q", msg(langKO, "detail.duplicate"))
	}
	if _, page := get(first, "ko"); bytes.Contains(page, []byte(msg(langKO, "detail.duplicate"))) {
		t.Errorf("the first upload's page says it was uploaded before")
	}
	ct, body := multipartBody(t, "file", file, nil)
	resp, b := e.do(t, "POST", "/v1/uploads", token(t, "seller-a"), ct, body)
	var ur UploadResponse
	json.Unmarshal(b, &ur)
	if resp.StatusCode != 200 || !ur.Duplicate || "/uploads/"+ur.UploadID != first {
		t.Errorf("the API's answer to the same file: %d %s; want 200 duplicate of %s", resp.StatusCode, b, first)
	}

	// The report, in Korean, named after the file.
	id := strings.TrimPrefix(first, "/uploads/")
	resp, x := get("/v1/uploads/"+id+"/report.xlsx", "ko-KR,ko;q=0.9")
	if cd := resp.Header.Get("Content-Disposition"); cd != `attachment; filename="products-__.xlsx"; filename*=UTF-8''products-%EA%B2%B0%EA%B3%BC.xlsx` {
		t.Errorf("Content-Disposition %q, want products-결과.xlsx", cd)
	}
	f, err := excelize.OpenReader(bytes.NewReader(x))
	if err != nil {
		t.Fatalf("report: %v (%d %s)", err, resp.StatusCode, x)
	}
	defer f.Close()
	rows, _ := f.GetRows(excel.ReportSheet)
	if len(rows) != 4 || rows[0][len(rows[0])-2] != excel.ReportColumnProductID || rows[0][len(rows[0])-1] != excel.ReportColumnAt {
		t.Fatalf("report rows %q: want 3 rows and the product number and time columns", rows)
	}
	for _, r := range rows[1:] {
		hangul := false
		for _, ch := range r[len(rows[0])-4] {
			hangul = hangul || unicode.Is(unicode.Hangul, ch)
		}
		if !hangul {
			t.Errorf("report row %q: the result is not Korean", r)
		}
	}
	// A script without Accept-Language keeps the English report.
	resp, _ = e.do(t, "GET", "/v1/uploads/"+id+"/report.xlsx?failed_only=true", token(t, "seller-a"), "", nil)
	if cd := resp.Header.Get("Content-Disposition"); !strings.Contains(cd, `filename="products-failed.xlsx"`) {
		t.Errorf("the API's failed-rows report: Content-Disposition %q, want products-failed.xlsx", cd)
	}
}
