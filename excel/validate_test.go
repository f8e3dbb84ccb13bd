package excel

import (
	"strings"
	"testing"

	"github.com/bulkreg/bulkreg/productrules"
)

func TestParseWhole(t *testing.T) {
	price := productrules.Must(FieldPrice)
	for _, tc := range []struct {
		in   string
		want int64
		code string // "" = accepted
	}{
		{"12000", 12000, ""},
		{"12,000", 12000, ""},
		{"1,234,567", 1234567, ""},
		{"12000.0", 12000, ""},
		{"11000.000000000002", 11000, ""},
		{"1.2E+4", 12000, ""},
		{"1000000000", 1000000000, ""},
		{"0", 0, CodeOutOfRange},
		{"1000000001", 0, CodeOutOfRange},
		{"99999999999999999999", 0, CodeOutOfRange},
		{"1e300", 0, CodeOutOfRange},
		{"12,000원", 0, CodeNotWholeNumber},
		{"₩12000", 0, CodeNotWholeNumber},
		{"1,20,000", 0, CodeNotWholeNumber},
		{",000", 0, CodeNotWholeNumber},
		{"12,000.5", 0, CodeNotWholeNumber},
		{"12000.5", 0, CodeNotWholeNumber},
		{"-5", 0, CodeOutOfRange},
		{"+5", 0, CodeNotWholeNumber},
		{"0x10", 0, CodeNotWholeNumber},
		{"NaN", 0, CodeNotWholeNumber},
		{"Inf", 0, CodeNotWholeNumber},
		{"1_000", 0, CodeNotWholeNumber},
	} {
		got, viol := parseWhole(price, tc.in)
		code := ""
		if viol != nil {
			code = viol.Code
			if !strings.HasPrefix(viol.Message, "price ") {
				t.Errorf("%q: message %q does not name the field first", tc.in, viol.Message)
			}
		}
		if code != tc.code || got != tc.want {
			t.Errorf("parseWhole(%q) = %d, %q; want %d, %q", tc.in, got, code, tc.want, tc.code)
		}
	}
	if _, n, viol := checkCell(price, cellValue{}); viol == nil || viol.Code != CodeRequired || n != 0 {
		t.Errorf("empty price: %v", viol)
	}
	if _, n, viol := checkCell(productrules.Must(FieldShippingFee), cellValue{}); viol != nil || n != 0 {
		t.Errorf("empty optional shipping_fee = %d, %v; want the default 0", n, viol)
	}
}

// The cell checks: the table's rules plus what a spreadsheet needs said.
func TestCheckCell(t *testing.T) {
	for _, tc := range []struct {
		field, value, code string
	}{
		{FieldSellerSKU, "ABC-001_x.1", ""},
		{FieldSellerSKU, "티셔츠-01", ""},
		{FieldSellerSKU, "A 1", CodeInvalidChars},
		{FieldSellerSKU, strings.Repeat("a", 101), CodeTooLong},
		{FieldSellerSKU, strings.Repeat("a", 100), ""},
		{FieldSellerSKU, "8.80123E+12", CodeInvalidCode},
		{FieldSellerSKU, "2E5", CodeInvalidCode},
		{FieldSellerSKU, "CODE", ""},
		{FieldSellerSKU, "A\x00B", CodeInvalidChars},
		{FieldCategoryCode, "0050000803", ""},
		{FieldCategoryCode, "CAT-101", ""},
		{FieldCategoryCode, "cat_1.2", ""},
		{FieldCategoryCode, "CAT 101", CodeInvalidCode},
		{FieldCategoryCode, "카테고리", CodeInvalidCode},
		{FieldCategoryCode, "1.2E+15", CodeInvalidCode},
		{FieldCategoryCode, "", CodeRequired},
		{FieldCategoryCode, strings.Repeat("1", 65), CodeTooLong},
		{FieldImageURL, "https://img.example.com/a.jpg?x=1", ""},
		{FieldImageURL, "http://img.example.com/a.jpg", ""},
		{FieldImageURL, "", ""},
		{FieldImageURL, "javascript:alert(1)", CodeInvalidURL},
		{FieldImageURL, "https:///a.jpg", CodeInvalidURL},
		{FieldImageURL, "https://img.example.com/a b.jpg", CodeInvalidURL},
		{FieldImageURL, "https://a.example.com/" + strings.Repeat("a", 2048), CodeTooLong},
		{FieldName, "a\nb", CodeInvalidChars},
		{FieldDescription, "a\r\nb\tc", ""},
		{FieldDescription, "a\x07", CodeInvalidChars},
		{FieldName, "a\xffb", CodeInvalidChars},
		{FieldName, strings.Repeat("가", 200), ""},
		{FieldName, strings.Repeat("가", 201), CodeTooLong},
	} {
		_, _, viol := checkCell(productrules.Must(tc.field), cellValue{text: tc.value})
		code := ""
		if viol != nil {
			code = viol.Code
		}
		if code != tc.code {
			t.Errorf("%s %q: code %q (%v), want %q", tc.field, productrules.Quote(tc.value), code, viol, tc.code)
		}
	}
	// A cell cut at MaxCellBytes is judged by its whole length.
	_, _, viol := checkCell(productrules.Must(FieldName), cellValue{text: "가나다", runes: 349524, cut: true})
	if viol == nil || viol.Message != "name must be at most 200 characters, got 349,524 characters" {
		t.Errorf("cut cell: %v", viol)
	}
}

func TestCleanCell(t *testing.T) {
	for in, want := range map[string]string{
		"  a  ":         "a",
		"\u00a0a\u3000": "a",
		"'=1+1":         "=1+1",
		"'-5":           "-5",
		"'abc":          "'abc",
		"'":             "'",
		"it's":          "it's",
	} {
		if got := cleanCell(in); got != want {
			t.Errorf("cleanCell(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDateFormats(t *testing.T) {
	for code, want := range map[string]bool{
		"yyyy-mm-dd": true, "m/d/yy": true, "[$-412]yyyy\"년\" m\"월\" d\"일\"": true, "h:mm": true, "[h]:mm:ss": true,
		"General": false, "0": false, "#,##0": false, "0.00E+00": false, "@": false, "#,##0\"원\"": false,
		"[Red]#,##0": false, "\"day\"0": false, "0_);(0)": false,
	} {
		if got := isDateFormatCode(code); got != want {
			t.Errorf("isDateFormatCode(%q) = %v, want %v", code, got, want)
		}
	}
	for id, want := range map[int]bool{0: false, 1: false, 14: true, 22: true, 49: false, 45: true} {
		if got := isBuiltinDateFormat(id); got != want {
			t.Errorf("isBuiltinDateFormat(%d) = %v", id, got)
		}
	}
}

func TestGroup(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1048576: "1,048,576", -1234: "-1,234"} {
		if got := group(n); got != want {
			t.Errorf("group(%d) = %q, want %q", n, got, want)
		}
	}
}
