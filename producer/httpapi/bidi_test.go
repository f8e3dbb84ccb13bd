package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bulkreg/bulkreg/producer/upload"
)

// Bidi marks and overrides a seller's file can hold: right-to-left
// override, left-to-right embedding, right-to-left isolate, right-to-left mark.
var bidiControls = []string{"\u202e", "\u202a", "\u2067", "\u200f"}

// unisolated reports where page shows one of bidiControls outside an
// element that sets it apart: in text, outside every <bdi>; in an
// attribute, outside a first-strong isolate (U+2068 … U+2069). Empty when
// every one is set apart.
func unisolated(page string) []string {
	var bad []string
	depth := 0 // open <bdi> elements
	for i := 0; i < len(page); {
		if page[i] == '<' {
			end := strings.IndexByte(page[i:], '>')
			if end < 0 {
				break
			}
			tag := page[i : i+end+1]
			switch {
			case strings.HasPrefix(tag, "<bdi"):
				depth++
			case tag == "</bdi>":
				depth--
			}
			// In an attribute, a control must sit inside FSI … PDI.
			open := 0
			for _, r := range tag {
				switch {
				case r == '\u2068':
					open++
				case r == '\u2069':
					open--
				case isBidiControl(r) && open <= 0:
					bad = append(bad, "attribute: "+cutRunes(tag, 120))
				}
			}
			i += end + 1
			continue
		}
		r, size := utf8.DecodeRuneInString(page[i:])
		if isBidiControl(r) && depth <= 0 {
			bad = append(bad, "text: "+cutRunes(page[max(0, i-80):i], 80))
		}
		i += size
	}
	return bad
}

func isBidiControl(r rune) bool {
	for _, c := range bidiControls {
		if string(r) == c {
			return true
		}
	}
	return false
}

// TestSellerTextIsIsolated: a file whose SKUs, names, prices, an unknown
// column's header and cells and whose file name hold right-to-left
// overrides and marks: every page that shows them (the check, Register's
// question, the detail page, the history) sets each apart (<bdi>, or
// FSI … PDI in an attribute), in Korean and English, so the page's own words
// around them read as written. A U+202E in a cell must not reverse the text
// around it on the check page.
func TestSellerTextIsIsolated(t *testing.T) {
	e := newEnv(t, nil, upload.WriterOptions{})
	h := (&Server{Uploader: e.up, Auth: Auth{Secret: secret}}).Handler()
	tok := token(t, "seller-bidi")
	var csv strings.Builder
	csv.WriteString("seller_sku,name,category_code,price,stock,brand,image_url,description,shipping_fee,메모\u202e\r\n")
	for i, c := range bidiControls {
		fmt.Fprintf(&csv, "%sRTL-%d,상품%s이름 %d,50000803,%s12000,10,브랜드%s,https://img.example.com/%d.jpg,설명,0,%s값\r\n", c, i, c, i, c, c, i, c)
	}
	csv.WriteString("OK-1,반팔 티셔츠,50000803,9900,10,브랜드,https://img.example.com/ok.jpg,설명,0,x\r\n")
	data := []byte(csv.String())
	fileName := "\u202e가격표.csv"
	send := func(method, path, lang string, file bool) (int, string) {
		var body bytes.Buffer
		r := httptest.NewRequest(method, path, nil)
		if file {
			mw := multipart.NewWriter(&body)
			fw, _ := mw.CreateFormFile("file", fileName)
			fw.Write(data)
			mw.Close()
			r = httptest.NewRequest(method, path, &body)
			r.Header.Set("Content-Type", mw.FormDataContentType())
		}
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("Accept-Language", lang)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	code, body := send("POST", "/v1/uploads", "en", true)
	id, _, _ := strings.Cut(strings.TrimPrefix(body, "{\n  \"upload_id\": \""), "\"")
	if code != http.StatusCreated || id == "" {
		t.Fatalf("upload: %d %.300s", code, body)
	}
	for _, lang := range []string{"ko", "en"} {
		for _, p := range []struct {
			name, method, path string
			file               bool
		}{
			{"check page", "POST", "/upload/check", true},
			{"Register's question", "POST", "/upload", true},
			{"detail page", "GET", "/uploads/" + id, false},
			{"history", "GET", "/uploads", false},
		} {
			code, page := send(p.method, p.path, lang, p.file)
			if code != http.StatusOK {
				t.Errorf("%s (%s): %d", p.name, lang, code)
				continue
			}
			if !strings.Contains(page, "\u202e") {
				t.Errorf("%s (%s) shows none of the seller's text with U+202E", p.name, lang)
			}
			if bad := unisolated(page); len(bad) > 0 {
				t.Errorf("%s (%s): %d bidi controls not set apart, first: %q", p.name, lang, len(bad), bad[0])
			}
		}
	}
}

// TestIsolated: isolated sets the whole text and each value in it apart,
// escapes the rest, and cuts the text first without splitting a character.
func TestIsolated(t *testing.T) {
	for _, tc := range []struct {
		text   string
		max    int
		values []string
		want   string
	}{
		{"", 10, nil, ""},
		{"price must be a number, got \u202eabc", 100, []string{"\u202eabc"}, "<bdi>price must be a number, got <bdi>\u202eabc</bdi></bdi>"},
		{"a <b> & \"c\"", 100, []string{"<b>"}, "<bdi>a <bdi>&lt;b&gt;</bdi> &amp; &#34;c&#34;</bdi>"},
		{"ab ab abc", 100, []string{"ab", "abc"}, "<bdi><bdi>ab</bdi> <bdi>ab</bdi> <bdi>abc</bdi></bdi>"},
		{"가나다라마", 3, nil, "<bdi>가나다…</bdi>"},
	} {
		if got := string(isolated(tc.text, tc.max, tc.values...)); got != tc.want {
			t.Errorf("isolated(%q, %d, %q) = %q, want %q", tc.text, tc.max, tc.values, got, tc.want)
		}
	}
	for _, s := range []string{"가나다라", "😀😀😀", "ab\u0301cd"} {
		for n := range 4 {
			if got := cutRunes(s, n); !utf8.ValidString(got) || utf8.RuneCountInString(strings.TrimSuffix(got, "…")) > n {
				t.Errorf("cutRunes(%q, %d) = %q", s, n, got)
			}
		}
	}
}

// TestJSONProblemsAreBudgeted: the JSON answers' problems are kept while
// they fit the budget, the rest counted; a list under it is kept whole.
func TestJSONProblemsAreBudgeted(t *testing.T) {
	p := upload.Problem{Row: 2, Column: "price", Cell: "D2", Code: "not_whole_number", Message: strings.Repeat("<", 1000), Params: map[string]string{"value": strings.Repeat("&", 1000)}}
	ps := make([]upload.Problem, 1000)
	for i := range ps {
		ps[i] = p
	}
	kept, omitted := budgetProblems(ps, jsonProblemsBudget)
	b, _ := json.Marshal(kept)
	if len(kept)+omitted != len(ps) || omitted == 0 || len(b) > jsonProblemsBudget {
		t.Errorf("kept %d (%d bytes of JSON), omitted %d of %d; the budget is %d bytes", len(kept), len(b), omitted, len(ps), jsonProblemsBudget)
	}
	if kept, omitted := budgetProblems(ps[:10], jsonProblemsBudget); len(kept) != 10 || omitted != 0 {
		t.Errorf("10 problems: kept %d, omitted %d", len(kept), omitted)
	}
}
