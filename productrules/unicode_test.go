package productrules

import (
	"runtime"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// formatChars are the invisible characters a SKU refuses, with the name
// the message gives: format characters (Cf) of every kind sellers meet
// (joiners, bidirectional controls, the soft hyphen, the byte-order mark,
// Arabic and Mongolian marks, tags) and the other default-ignorable code
// points (variation selectors, the grapheme joiner, Hangul fillers).
var formatChars = []struct {
	c    rune
	name string
}{
	{0x00AD, "U+00AD SOFT HYPHEN"},
	{0x034F, "U+034F COMBINING GRAPHEME JOINER"},
	{0x061C, "U+061C ARABIC LETTER MARK"},
	{0x115F, "U+115F HANGUL CHOSEONG FILLER"},
	{0x180E, "U+180E MONGOLIAN VOWEL SEPARATOR"},
	{0x200B, "U+200B ZERO WIDTH SPACE"},
	{0x200C, "U+200C ZERO WIDTH NON-JOINER"},
	{0x200D, "U+200D ZERO WIDTH JOINER"},
	{0x200E, "U+200E LEFT-TO-RIGHT MARK"},
	{0x200F, "U+200F RIGHT-TO-LEFT MARK"},
	{0x202A, "U+202A LEFT-TO-RIGHT EMBEDDING"},
	{0x202B, "U+202B RIGHT-TO-LEFT EMBEDDING"},
	{0x202C, "U+202C POP DIRECTIONAL FORMATTING"},
	{0x202D, "U+202D LEFT-TO-RIGHT OVERRIDE"},
	{0x202E, "U+202E RIGHT-TO-LEFT OVERRIDE"},
	{0x2060, "U+2060 WORD JOINER"},
	{0x2063, "U+2063 INVISIBLE SEPARATOR"},
	{0x2066, "U+2066 LEFT-TO-RIGHT ISOLATE"},
	{0x2067, "U+2067 RIGHT-TO-LEFT ISOLATE"},
	{0x2068, "U+2068 FIRST STRONG ISOLATE"},
	{0x2069, "U+2069 POP DIRECTIONAL ISOLATE"},
	{0x3164, "U+3164 HANGUL FILLER"},
	{0xFE0F, "U+FE0F VARIATION SELECTOR-16"},
	{0xFEFF, "U+FEFF ZERO WIDTH NO-BREAK SPACE (BYTE ORDER MARK)"},
	{0xFFA0, "U+FFA0 HALFWIDTH HANGUL FILLER"},
	{0x110BD, "U+110BD"},
	{0xE0041, "U+E0041"},
	{0xE0100, "U+E0100"},
}

// TestSKUsRefuseInvisibleCharacters: "ZW-002" with any invisible character
// inside or at its end is refused, naming the character and its place, so
// no two accepted SKUs look alike; a name keeps them (emoji sequences,
// Persian, Hebrew brand names need them).
func TestSKUsRefuseInvisibleCharacters(t *testing.T) {
	sku := Must(SellerSKU)
	for _, fc := range formatChars {
		for _, tc := range []struct {
			value string
			at    string
		}{
			{"ZW-" + string(fc.c) + "002", "4"},
			{"ZW-002" + string(fc.c), "7"},
			{"가방" + string(fc.c), "3"},
		} {
			v := sku.CheckText(tc.value)
			if v == nil {
				t.Errorf("seller_sku %+q is accepted", tc.value)
				continue
			}
			want := "seller_sku holds the invisible character " + fc.name + " at character " + tc.at + ", which makes it look like another code; delete it"
			if v.Code != CodeInvalidChars || v.Params["kind"] != "format" || v.Params["char"] != fc.name || v.Params["at"] != tc.at || v.Message != want {
				t.Errorf("seller_sku %+q: %s %v %q, want invalid_characters.format %q", tc.value, v.Code, v.Params, v.Message, want)
			}
		}
		if !IsInvisibleFormat(fc.c) {
			t.Errorf("IsInvisibleFormat(%U) = false", fc.c)
		}
	}
	for _, ok := range []string{"ZW-002", "가방-001", "ÄBC-1", "SKU_1.2", "商品-7"} {
		if v := sku.CheckText(ok); v != nil {
			t.Errorf("seller_sku %q: %v", ok, v)
		}
	}
	for _, name := range []string{"가족 👨\u200d👩\u200d👧 세트", "می\u200cخواهم", "\u05e9\u05dc\u05d5\u05dd \u200fbrand", "soft\u00adhyphen"} {
		if v := Must(Name).CheckText(name); v != nil {
			t.Errorf("name %+q is refused: %v", name, v)
		}
	}
	// Every Cf character, whatever the table names, is refused.
	var cf []rune
	for _, rt := range unicode.Cf.R16 {
		for c := rune(rt.Lo); c <= rune(rt.Hi); c += rune(rt.Stride) {
			cf = append(cf, c)
		}
	}
	for _, rt := range unicode.Cf.R32 {
		for c := rune(rt.Lo); c <= rune(rt.Hi); c += rune(rt.Stride) {
			cf = append(cf, c)
		}
	}
	for _, c := range cf {
		if v := sku.CheckText("A" + string(c) + "B"); v == nil || v.Code != CodeInvalidChars {
			t.Errorf("seller_sku with %U is not refused: %v", c, v)
		}
	}
	n := len(cf)
	if n < 100 {
		t.Fatalf("only %d Cf characters checked", n)
	}
}

// TestTextIsKeptInNFC: the same text typed in NFC or NFD is one value, with
// one length; a SKU's key is its NFC form.
func TestTextIsKeptInNFC(t *testing.T) {
	nfc, nfd := "가방-001", norm.NFD.String("가방-001")
	if nfc == nfd || !norm.NFC.IsNormalString(nfc) {
		t.Fatal("the test's forms are not NFC and NFD")
	}
	for _, in := range []string{nfc, nfd} {
		got, v := Must(SellerSKU).Text(in)
		if v != nil || got != nfc {
			t.Errorf("Text(%+q) = %+q, %v; want %+q", in, got, v, nfc)
		}
		if NormalizeSKU(in) != nfc {
			t.Errorf("NormalizeSKU(%+q) = %+q", in, NormalizeSKU(in))
		}
	}
	// 100 Hangul syllables are 100 characters in either form (NFD: 200–300 code points).
	long := strings.Repeat("각", 100)
	if utf8.RuneCountInString(norm.NFD.String(long)) != 300 {
		t.Fatal("NFD of 각 is not three jamo")
	}
	if v := Must(SellerSKU).CheckText(norm.NFD.String(long)); v != nil {
		t.Errorf("100 syllables in NFD: %v", v)
	}
	if v := Must(SellerSKU).CheckText(norm.NFD.String(long + "각")); v == nil || v.Params["n"] != "101" {
		t.Errorf("101 syllables in NFD: %v, want too long with 101 characters", v)
	}
	if got, _ := Must(Name).Text(norm.NFD.String("상품 이름")); got != "상품 이름" {
		t.Errorf("a name in NFD comes back as %+q", got)
	}
}

// TestSignedZerosAreRefused: a whole number has no sign, zero included, in
// every numeric field.
func TestSignedZerosAreRefused(t *testing.T) {
	for _, field := range []string{Price, Stock, ShippingFee} {
		r := Must(field)
		for _, shown := range []string{"-0", "+0", "\u22120", "\uff0d0", "\uff0b0", "\ufe630", " -0"} {
			v := r.CheckNumber(0, shown)
			if v == nil || v.Code != CodeNotWholeNumber || v.Params["value"] != Quote(shown) {
				t.Errorf("%s %q: %v, want not_whole_number", field, shown, v)
			}
		}
	}
	for _, tc := range []struct {
		field string
		n     int64
		shown string
	}{{Stock, 0, "0"}, {Stock, 0, ""}, {ShippingFee, 0, "0"}, {Price, 5, "5"}} {
		if v := Must(tc.field).CheckNumber(tc.n, tc.shown); v != nil {
			t.Errorf("%s %q: %v", tc.field, tc.shown, v)
		}
	}
}

// FuzzSKU: whatever the input, checking a SKU never panics, an accepted
// SKU comes back in NFC without an invisible or control character or a
// space, and its NFC and NFD forms are one key with one verdict.
func FuzzSKU(f *testing.F) {
	for _, s := range []string{"가방-001", "ZW-\u200d002", "A\u202eB", "\xff", "", " ", "e\u0301", "\u1100\u1161\u11a8", "ZW-002\u2060", strings.Repeat("가", 101)} {
		f.Add(s)
	}
	rule := Must(SellerSKU)
	f.Fuzz(func(t *testing.T, s string) {
		got, v := rule.Text(s)
		if v != nil {
			if v.Field != SellerSKU || v.Message == "" || !strings.HasPrefix(v.Message, SellerSKU+" ") {
				t.Fatalf("%+q: violation %+v", s, v)
			}
		} else {
			if !norm.NFC.IsNormalString(got) || got != NormalizeSKU(s) {
				t.Fatalf("%+q accepted as %+q, not its NFC form", s, got)
			}
			for _, c := range got {
				if IsInvisibleFormat(c) || unicode.IsControl(c) || IsSpace(c) || c == utf8.RuneError {
					t.Fatalf("%+q accepted with %U", s, c)
				}
			}
		}
		if !utf8.ValidString(s) {
			return
		}
		other, ov := rule.Text(norm.NFD.String(s))
		if (v == nil) != (ov == nil) || v == nil && other != got {
			t.Fatalf("%+q: NFC %+q %v, NFD %+q %v: the forms differ", s, got, v, other, ov)
		}
	})
}

// TestPlainTextSkipsTheNormalizer: the fast path answers exactly what the
// normalizer does, on the text it takes (ASCII and Hangul syllables) and
// on text next to it that it must leave to the normalizer.
func TestPlainTextSkipsTheNormalizer(t *testing.T) {
	for _, s := range []string{"", "SKU-001", "가방-001", "상품 이름 L", "힣가", "가\u11a8", "e\u0301", "가\u0301", "Å", "\u1100\u1161", "ＡＢＣ", "가\ufeff"} {
		if got, want := NFC(s), norm.NFC.String(s); got != want {
			t.Errorf("NFC(%+q) = %+q, want %+q", s, got, want)
		}
		if plainNFC(s) && !norm.NFC.IsNormalString(s) {
			t.Errorf("plainNFC(%+q) but it is not NFC", s)
		}
	}
	if !plainNFC("가방-001 상품") || plainNFC("가\u11a8") || plainNFC("e\u0301") {
		t.Error("plainNFC does not tell plain text")
	}
}

// NFC composes at most maxComposed characters into one (checked over every
// code point), so a text longer than maxComposed × MaxLen as typed is
// refused as too long without being composed: the refusal allocates no copy
// of the text. One at the bound is composed and counted in NFC.
func TestTooLongInAnyFormIsNotComposed(t *testing.T) {
	most := 0
	for c := rune(0); c <= unicode.MaxRune; c++ {
		if utf8.ValidRune(c) {
			most = max(most, utf8.RuneCountInString(norm.NFD.String(string(c))))
		}
	}
	if most != maxComposed {
		t.Fatalf("the longest canonical decomposition is %d characters, maxComposed is %d", most, maxComposed)
	}
	rule := Must(Description)
	alpha := "\u03b1\u0313\u0300\u0345" // ᾂ decomposed: four characters that compose to one
	for _, tc := range []struct {
		name string
		text string
		n    string // the length the refusal gives; "" when accepted
		copy bool   // composing allocates a copy of the text
	}{
		{"A and a ring, past four times the limit", strings.Repeat("A\u030a", 2*rule.MaxLen+1), "40,002", false},
		{"ᾂ decomposed, four times the limit", strings.Repeat(alpha, rule.MaxLen), "", true},
		{"ᾂ decomposed, past four times the limit", strings.Repeat(alpha, rule.MaxLen) + "\u03b1", "40,001", false},
		{"A and a ring, under four times the limit", strings.Repeat("A\u030a", rule.MaxLen+1), "10,001", true},
	} {
		var viol *Violation
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, viol = rule.Text(tc.text)
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		if tc.copy != (alloc >= uint64(len(tc.text))) {
			t.Errorf("%s: %d bytes allocated for a text of %d bytes, want a copy: %v", tc.name, alloc, len(tc.text), tc.copy)
		}
		switch {
		case tc.n == "" && viol != nil:
			t.Errorf("%s: %v, want it accepted (%d characters in NFC)", tc.name, viol, rule.MaxLen)
		case tc.n != "" && (viol == nil || viol.Code != CodeTooLong || viol.Params["n"] != tc.n):
			t.Errorf("%s: %+v, want too_long with n=%s", tc.name, viol, tc.n)
		}
	}
}
