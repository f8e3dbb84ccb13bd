package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/producer/upload"
)

// TestTheFixFileRoundTripsInBothLanguages: a seller uploads a file whose
// rows 3 and 5 are refused (a price with its unit, a price of 0), then
// downloads the fix file in Korean and in English. Each names its own
// cells (D2, D3) and the original rows, marks those cells with a fill and
// a note in its language, and holds the valid numbers as numbers. Checked
// again as it is (POST /v1/uploads?dry_run=true), each is the same two
// rows with the same problems, at the cells its reason names, and no
// warning about its own columns; with the marked cells fixed, it uploads
// as two valid rows.
func TestTheFixFileRoundTripsInBothLanguages(t *testing.T) {
	e := newHTTPEnv(t)
	tok := token(t, "seller-a")
	file := xlsx(t, "fix", sheetRow{SKU: "SKU-001", Price: "1000"}, sheetRow{SKU: "SKU-002", Price: "12,000원"},
		sheetRow{SKU: "SKU-003", Price: "1200"}, sheetRow{SKU: "SKU-004", Price: "0"})
	ct, body := multipartBody(t, "file", file, nil)
	resp, b := e.do(t, "POST", "/v1/uploads", tok, ct, body)
	var ur UploadResponse
	if err := json.Unmarshal(b, &ur); err != nil || resp.StatusCode != http.StatusCreated || ur.Invalid != 2 || ur.Published != 2 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	check := func(data []byte) CheckResponse {
		t.Helper()
		ct, body := multipartBody(t, "file", data, nil)
		resp, b := e.do(t, "POST", "/v1/uploads?dry_run=true", tok, ct, body)
		var cr CheckResponse
		if err := json.Unmarshal(b, &cr); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("check: %d %s", resp.StatusCode, b)
		}
		return cr
	}
	for _, tc := range []struct {
		lang, acceptLanguage, original string
	}{
		{langKO, "ko-KR,ko;q=0.9", "원본 %s행"},
		{langEN, "en-US,en;q=0.9", "original row %s"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			req, _ := http.NewRequest("GET", e.srv.URL+"/v1/uploads/"+ur.UploadID+"/report.xlsx?failed_only=true", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Accept-Language", tc.acceptLanguage)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var fix bytes.Buffer
			fix.ReadFrom(resp.Body)
			resp.Body.Close()
			f, err := excelize.OpenReader(bytes.NewReader(fix.Bytes()))
			if err != nil {
				t.Fatalf("the fix file: %d, %v", resp.StatusCode, err)
			}
			defer f.Close()
			sheet := excel.ReportSheetIn(tc.lang)
			rows, _ := f.GetRows(sheet)
			if len(rows) != 3 || rows[1][0] != "SKU-002" || rows[2][0] != "SKU-004" {
				t.Fatalf("the fix file's rows %q", rows)
			}
			reasonCol := len(rows[0]) - 3 // the reason, the product id, the time
			for i, want := range []struct{ cell, row string }{{"D2 price: ", "3"}, {"D3 price: ", "5"}} {
				reason := rows[i+1][reasonCol]
				if !strings.HasPrefix(reason, want.cell) || !strings.HasSuffix(reason, "("+strings.Replace(tc.original, "%s", want.row, 1)+")") {
					t.Errorf("reason %q: want it to start with %q and name the original row %s", reason, want.cell, want.row)
				}
			}
			comments, _ := f.GetComments(sheet)
			if len(comments) != 2 || comments[0].Cell != "D2" || comments[1].Cell != "D3" {
				t.Errorf("notes %+v, want D2 and D3", comments)
			}
			for _, c := range comments {
				text := c.Text
				for _, r := range c.Paragraph {
					text += r.Text
				}
				hangul := strings.ContainsFunc(strings.ReplaceAll(text, "원", ""), func(r rune) bool { return r >= 0xAC00 && r <= 0xD7A3 })
				if hangul != (tc.lang == langKO) {
					t.Errorf("%s's note %q is not in %s", c.Cell, text, tc.lang)
				}
			}
			for _, cell := range []string{"D2", "D3"} {
				id, _ := f.GetCellStyle(sheet, cell)
				if st, _ := f.GetStyle(id); st == nil || len(st.Fill.Color) == 0 {
					t.Errorf("%s is not filled", cell)
				}
			}
			if typ, _ := f.GetCellType(sheet, "E2"); typ == excelize.CellTypeSharedString {
				t.Error("the stock E2 (10) is text, want a number")
			}

			cr := check(fix.Bytes())
			got := []string{}
			for _, p := range cr.Problems {
				got = append(got, p.Cell+" "+p.Code)
			}
			if cr.Total != 2 || cr.Invalid != 2 || strings.Join(got, ",") != "D2 not_whole_number,D3 out_of_range" || len(cr.Warnings) != 0 {
				t.Errorf("the fix file checked again: %d rows, %d invalid, problems %v, warnings %v", cr.Total, cr.Invalid, got, cr.Warnings)
			}
			// The seller fixes the marked cells.
			f.SetCellInt(sheet, "D2", 12000)
			f.SetCellInt(sheet, "D3", 900)
			var fixed bytes.Buffer
			f.Write(&fixed)
			if cr := check(fixed.Bytes()); cr.Total != 2 || cr.Valid != 2 || len(cr.Problems) != 0 || len(cr.Warnings) != 0 {
				t.Errorf("the fixed file checked: %+v", cr)
			}
		})
	}
}

// TestTemplateETagFollowsItsCategories: the template served with
// categories lists them and has another ETag than without, or with other
// categories; the same categories give the same bytes and ETag (two
// replicas of the service answer a client's If-None-Match alike).
func TestTemplateETagFollowsItsCategories(t *testing.T) {
	get := func(cats []upload.Category) (string, []byte) {
		h := (&Server{Uploader: &upload.Uploader{}, Auth: Auth{Secret: secret}, Categories: cats}).Handler()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/template.xlsx", nil))
		if w.Code != http.StatusOK {
			t.Fatalf("template: %d", w.Code)
		}
		return w.Header().Get("ETag"), w.Body.Bytes()
	}
	cats := []upload.Category{{Code: "50000803", Name: "티셔츠"}, {Code: "CAT-101", Name: "셔츠"}}
	none, _ := get(nil)
	with, data := get(cats)
	again, _ := get([]upload.Category{{Code: "50000803", Name: "티셔츠"}, {Code: "CAT-101", Name: "셔츠"}})
	other, _ := get([]upload.Category{{Code: "50000803", Name: "티셔츠"}, {Code: "CAT-102", Name: "셔츠"}})
	if none == with || with != again || with == other || none == "" {
		t.Errorf("ETags: none %s, with categories %s, the same again %s, other %s", none, with, again, other)
	}
	f, err := excelize.OpenReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if rows, _ := f.GetRows(excel.CategorySheet); len(rows) != 3 || rows[2][0] != "CAT-101" {
		t.Errorf("the served template's categories %q", rows)
	}
}
