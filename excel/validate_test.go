package excel

import (
	"strings"
	"testing"
)

func TestParseWhole(t *testing.T) {
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
		{"", 0, CodeRequired},
	} {
		got, fe := parseWhole("price", tc.in, 1, MaxPrice, true, 0)
		code := ""
		if fe != nil {
			code = fe.code
			if !strings.HasPrefix(fe.msg, "price ") {
				t.Errorf("%q: message %q does not name the field first", tc.in, fe.msg)
			}
		}
		if code != tc.code || got != tc.want {
			t.Errorf("parseWhole(%q) = %d, %q; want %d, %q", tc.in, got, code, tc.want, tc.code)
		}
	}
	if n, fe := parseWhole("shipping_fee", "", 0, MaxShippingFee, false, DefaultShippingFee); fe != nil || n != 0 {
		t.Errorf("empty optional shipping_fee = %d, %v; want the default 0", n, fe)
	}
}

func TestCheckers(t *testing.T) {
	for _, tc := range []struct {
		name string
		fe   *fieldError
		code string
	}{
		{"sku ok", checkSKU("ABC-001_x.1"), ""},
		{"sku korean ok", checkSKU("티셔츠-01"), ""},
		{"sku space", checkSKU("A 1"), CodeInvalidChars},
		{"sku 51", checkSKU(strings.Repeat("a", 51)), CodeTooLong},
		{"sku 50", checkSKU(strings.Repeat("a", 50)), ""},
		{"sku sci", checkSKU("8.80123E+12"), CodeInvalidCode},
		{"sku word with e", checkSKU("2E5"), CodeInvalidCode},
		{"sku ends in e", checkSKU("CODE"), ""},
		{"sku control", checkSKU("A\x00B"), CodeInvalidChars},
		{"category ok", checkCategory("0050000803"), ""},
		{"category letters", checkCategory("50A"), CodeInvalidCode},
		{"category empty", checkCategory(""), CodeRequired},
		{"category 21 digits", checkCategory(strings.Repeat("1", 21)), CodeInvalidCode},
		{"url https", checkURL("https://img.example.com/a.jpg?x=1"), ""},
		{"url http", checkURL("http://img.example.com/a.jpg"), ""},
		{"url empty", checkURL(""), ""},
		{"url javascript", checkURL("javascript:alert(1)"), CodeInvalidURL},
		{"url no host", checkURL("https:///a.jpg"), CodeInvalidURL},
		{"url space", checkURL("https://img.example.com/a b.jpg"), CodeInvalidURL},
		{"url long", checkURL("https://a.example.com/" + strings.Repeat("a", 1000)), CodeTooLong},
		{"name newline", checkText("name", "a\nb", true, MaxNameLen, false), CodeInvalidChars},
		{"description newline", checkText("description", "a\r\nb\tc", false, MaxDescriptionLen, true), ""},
		{"description bell", checkText("description", "a\x07", false, MaxDescriptionLen, true), CodeInvalidChars},
		{"name invalid utf8", checkText("name", "a\xffb", true, MaxNameLen, false), CodeInvalidChars},
		{"name 100 runes", checkText("name", strings.Repeat("가", 100), true, MaxNameLen, false), ""},
		{"name 101 runes", checkText("name", strings.Repeat("가", 101), true, MaxNameLen, false), CodeTooLong},
	} {
		code := ""
		if tc.fe != nil {
			code = tc.fe.code
		}
		if code != tc.code {
			t.Errorf("%s: code %q (%v), want %q", tc.name, code, tc.fe, tc.code)
		}
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
