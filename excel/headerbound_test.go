package excel

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bulkreg/bulkreg/messages"
)

// headerFile is a CSV and an .xlsx (inline strings) of the header and
// rows given.
func headerFiles(t *testing.T, header []string, rows ...[]string) map[string][]byte {
	t.Helper()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write(header)
	for _, r := range rows {
		w.Write(r)
	}
	w.Flush()
	all := [][]any{}
	for _, r := range append([][]string{header}, rows...) {
		row := make([]any, len(r))
		for i, c := range r {
			row[i] = c
		}
		all = append(all, row)
	}
	return map[string][]byte{"csv": b.Bytes(), "xlsx": writer{name: "inline", inline: true}.build(t, all)}
}

// A header attack: the price column's name, then 60,000 '&' in brackets,
// which matching drops.
var longPrice = "판매가(" + strings.Repeat("&", 60_000) + ")"

// A header cell is cut once, where it is read, for CSV and .xlsx alike: a
// cell longer than MaxHeaderChars names no column, and says so, and every
// consumer of the sheet sees the cut text.
func TestLongHeaderCutAndNotMatched(t *testing.T) {
	t.Run("a required column's name, too long", func(t *testing.T) {
		for kind, data := range headerFiles(t, []string{"seller_sku", "name", "category_code", longPrice, "stock"}, []string{"A-1", "셔츠", "CAT-1", "1000", "1"}) {
			_, err := parse(t, data)
			fe := fileErrCode(t, err)
			if fe.Code != CodeMissingColumn || !strings.Contains(fe.Message, "longer than 100 characters (D1)") || len(fe.Message) > 400 {
				t.Fatalf("%s: %s: %.500s", kind, fe.Code, fe.Message)
			}
			if len(fe.Problems) != 1 || fe.Problems[0].Cell != "D1" || fe.Problems[0].Params["kind"] != "one_long" {
				t.Fatalf("%s: problems %+v", kind, fe.Problems)
			}
			for _, lang := range []string{messages.KO, messages.EN} {
				text, ok := messages.Render(lang, fe.Code, fe.Params)
				one, ok1 := messages.Render(lang, fe.Problems[0].Code, fe.Problems[0].Params)
				if !ok || !ok1 || !strings.Contains(text, "100") || !strings.Contains(text, "D1") || !strings.Contains(one, "D1") || strings.Contains(text+one, "&&&") {
					t.Errorf("%s %s: %q / %q", kind, lang, text, one)
				}
			}
		}
	})
	t.Run("an optional column's name, too long", func(t *testing.T) {
		longDesc := "상세설명(" + strings.Repeat("&", 60_000) + ")"
		for kind, data := range headerFiles(t, []string{"seller_sku", "name", "category_code", "price", "stock", longDesc}, []string{"A-1", "셔츠", "CAT-1", "1000", "1", "설명"}) {
			s, err := parse(t, data)
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			h := s.Header[5]
			if utf8.RuneCountInString(h) != MaxHeaderChars+1 || !strings.HasSuffix(h, "…") || !strings.HasPrefix(h, "상세설명(&&") {
				t.Fatalf("%s: header kept as %d characters: %.120q", kind, utf8.RuneCountInString(h), h)
			}
			if _, ok := HeaderField(h); ok {
				t.Errorf("%s: the cut header still names a column", kind)
			}
			if s.Rows[0].Product.Description != "" || !s.Rows[0].Valid() {
				t.Errorf("%s: the long column was read as the description: %+v", kind, s.Rows[0])
			}
			if len(s.Warnings) != 1 || s.Warnings[0].Params["kind"] != "long" || s.Warnings[0].Cell != "F1" || s.Warnings[0].Params["field"] != FieldDescription {
				t.Fatalf("%s: warnings %+v", kind, s.Warnings)
			}
			ko, ok := messages.Render(messages.KO, s.Warnings[0].Code, s.Warnings[0].Params)
			if !ok || !strings.Contains(ko, "100자") || len(ko) > 400 {
				t.Errorf("%s: %q", kind, ko)
			}
		}
	})
	t.Run("exactly the bound still names its column", func(t *testing.T) {
		at := "판매가(" + strings.Repeat("x", MaxHeaderChars-5) + ")"
		over := "재고수량(" + strings.Repeat("x", MaxHeaderChars-5) + ")"
		if utf8.RuneCountInString(at) != MaxHeaderChars || utf8.RuneCountInString(over) != MaxHeaderChars+1 {
			t.Fatal("bad test data")
		}
		for kind, data := range headerFiles(t, []string{"seller_sku", "name", "category_code", "  " + at + " ", "stock", over}, []string{"A-1", "셔츠", "CAT-1", "1000", "1", "9"}) {
			s, err := parse(t, data)
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			if s.Header[3] != at || s.Rows[0].Product.Price != 1000 || s.Rows[0].Product.Stock != 1 {
				t.Errorf("%s: header %q, product %+v", kind, s.Header[3], s.Rows[0].Product)
			}
			if f, ok := HeaderField(s.Header[3]); !ok || f != FieldPrice {
				t.Errorf("%s: %q names %q %v", kind, s.Header[3], f, ok)
			}
		}
	})
	t.Run("every header cell is bounded", func(t *testing.T) {
		header := []string{"seller_sku", "name", "category_code", "price", "stock"}
		for range 250 {
			header = append(header, strings.Repeat("가", 2000))
		}
		for kind, data := range headerFiles(t, header, []string{"A-1", "셔츠", "CAT-1", "1000", "1"}) {
			s, err := parse(t, data)
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			total := 0
			for _, h := range s.Header {
				if utf8.RuneCountInString(h) > MaxHeaderChars+1 {
					t.Fatalf("%s: a header of %d characters", kind, utf8.RuneCountInString(h))
				}
				total += len(h)
			}
			if len(s.Header) != 255 || total > 255*(3*MaxHeaderChars+3) {
				t.Errorf("%s: %d headers, %d bytes", kind, len(s.Header), total)
			}
		}
	})
}

// The column's name with decorations still names it, at any length up to
// the bound; its normalised key stops growing past the longest name.
func TestHeaderKeyStopsPastTheLongestName(t *testing.T) {
	if _, ok := appendHeaderKey(nil, strings.Repeat("a", 1<<20)); ok {
		t.Fatal("a megabyte of letters makes a key")
	}
	key, ok := appendHeaderKey(nil, "판매가 (원, 필수)*"+strings.Repeat(" ", 50))
	if !ok || string(key) != "판매가" {
		t.Fatalf("%q %v", key, ok)
	}
}

// A sheet's name reaches the same pages and messages: it is cut the same way.
func TestLongSheetNameCut(t *testing.T) {
	name := strings.Repeat("시", 600)
	sheet := sheetOf(``, nsRow("", 1, "", nsHeader...)+nsRow("", 2, "", nsProduct("A-1")...))
	s, err := parse(t, nsBookWith(t, sheet, "", `<sheet name="`+name+`" sheetId="1" r:id="rId1"/>`, nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.SheetName != cutHeader(name) || utf8.RuneCountInString(s.SheetName) != MaxHeaderChars+1 {
		t.Fatalf("sheet name of %d characters", utf8.RuneCountInString(s.SheetName))
	}
}

// What a refusal says of the XML is bounded too: a name or a cell
// reference a tag long is not repeated whole into the pages.
func TestDamageMessagesBounded(t *testing.T) {
	longName := strings.Repeat("n", 500_000)
	for _, tc := range []struct{ name, data string }{
		{"a long element name closed by another", sheetOf(``, nsRow("", 1, "", nsHeader...)+"<"+longName+"></x"+longName+">")},
		{"a long cell reference in another row", sheetOf(``, nsRow("", 1, "", nsHeader...)+`<row r="2"><c r="A`+strings.Repeat("0", 500_000)+`3"><v>1</v></c></row>`)},
	} {
		_, err := parse(t, nsBook(t, tc.data, ""))
		fe := fileErrCode(t, err)
		if fe.Code != CodeDamaged || len(fe.Message) > 1000 {
			t.Errorf("%s: %s, a message of %d bytes", tc.name, fe.Code, len(fe.Message))
		}
	}
}
