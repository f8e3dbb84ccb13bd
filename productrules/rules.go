// Package productrules is the registration API's contract for one product,
// field by field: whether a field is required, its type, its length or range,
// and its format. It is the single source of truth for those rules: the
// spreadsheet validator (package excel) and the reference API
// (internal/sandbox) both check a product against this table, so an upload
// is refused for a field exactly when the API would refuse it, with the same
// field named.
//
// The table, in the contract's field order (lengths are characters, not bytes):
//
//	field          required  type          rule
//	seller_sku     yes       text          1–100 characters, one word: no spaces, line breaks, control or format characters
//	name           yes       text          1–200 characters, one line
//	category_code  yes       text          1–64 characters: letters A–Z a–z, digits, '-', '_', '.' (an opaque marketplace code)
//	price          yes       whole number  1 to 1,000,000,000 (won)
//	stock          yes       whole number  0 to 1,000,000
//	brand          no        text          at most 100 characters, one line
//	image_url      no        text          at most 2,048 characters, an absolute http or https URL with a host, no spaces
//	description    no        text          at most 10,000 characters; line breaks and tabs allowed
//	shipping_fee   no (0)    whole number  0 to 1,000,000 (won)
//
// A text that is empty or holds only spaces is absent. Text must be valid
// UTF-8 without control characters (line breaks and tabs only where allowed).
//
// Text is compared, counted and kept in Unicode Normalization Form C (NFC):
// "가방" typed on one computer (one code point a syllable) and pasted from
// another (NFD, the jamo one by one) are the same text, the same length
// and, for a SKU, the same product. Text answers its NFC form (Text);
// NormalizeSKU is the one SKU key every comparison uses (the file's
// duplicate check, the ledger, the API's own bookkeeping).
//
// A SKU is an identifier, so it refuses what makes two SKUs look alike
// while they differ: format characters (Unicode category Cf: zero-width
// joiners and non-joiners, the word joiner, bidirectional controls such as
// U+202E that reverse how the text is shown, the soft hyphen, the byte-order
// mark) and the other default-ignorable code points (variation selectors,
// the combining grapheme joiner, Hangul fillers), which no font shows.
// Other text (name, brand, description) keeps them: emoji sequences join
// with U+200D, Persian and Indic writing needs U+200C, Hebrew and Arabic
// brand names carry direction marks; what keeps them from reordering a page
// is isolating seller text where it is shown.
//
// What is not here is not a rule of the API: the spreadsheet validator adds
// help a spreadsheet needs (a long number Excel shortened to 8.8E+12, a price
// typed as "12,000원", a date where a code belongs), which explains a problem
// better but never refuses a value the API would accept as the seller typed it.
package productrules

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Field names, as in the registration API's JSON body.
const (
	SellerSKU    = "seller_sku"
	Name         = "name"
	CategoryCode = "category_code"
	Price        = "price"
	Stock        = "stock"
	Brand        = "brand"
	ImageURL     = "image_url"
	Description  = "description"
	ShippingFee  = "shipping_fee"
)

// Type is the JSON type of a field.
type Type int

// Types.
const (
	Text        Type = iota + 1 // a JSON string
	WholeNumber                 // a JSON integer literal (no fraction, no exponent)
)

// Format is what a Text field may hold beyond its length.
type Format int

// Formats.
const (
	// Line is one line of text: no line breaks, tabs or other control characters.
	Line Format = iota + 1
	// Paragraphs allows line breaks and tabs, no other control characters.
	Paragraphs
	// Word is one line without any space.
	Word
	// Code is an opaque code of ASCII letters, digits, '-', '_' and '.'.
	Code
	// WebURL is an absolute http or https URL with a host and without spaces.
	WebURL
)

// Rule is the contract of one field.
type Rule struct {
	Field    string
	Required bool
	Type     Type
	// MaxLen is the most characters (runes) a Text field may hold.
	MaxLen int
	// Format applies to Text fields.
	Format Format
	// Min and Max bound a WholeNumber field, both included.
	Min, Max int64
	// Default is the value of an absent optional WholeNumber field.
	Default int64
}

// Rules returns the table, in the contract's field order. The slice is new on
// every call; changing it changes nothing here.
func Rules() []Rule {
	return []Rule{
		{Field: SellerSKU, Required: true, Type: Text, MaxLen: 100, Format: Word},
		{Field: Name, Required: true, Type: Text, MaxLen: 200, Format: Line},
		{Field: CategoryCode, Required: true, Type: Text, MaxLen: 64, Format: Code},
		{Field: Price, Required: true, Type: WholeNumber, Min: 1, Max: 1_000_000_000},
		{Field: Stock, Required: true, Type: WholeNumber, Min: 0, Max: 1_000_000},
		{Field: Brand, Type: Text, MaxLen: 100, Format: Line},
		{Field: ImageURL, Type: Text, MaxLen: 2048, Format: WebURL},
		{Field: Description, Type: Text, MaxLen: 10_000, Format: Paragraphs},
		{Field: ShippingFee, Type: WholeNumber, Min: 0, Max: 1_000_000, Default: 0},
	}
}

// Lookup returns the rule of a field.
func Lookup(field string) (Rule, bool) {
	for _, r := range Rules() {
		if r.Field == field {
			return r, true
		}
	}
	return Rule{}, false
}

// Must returns the rule of a field that is known to exist; it panics on a
// field that is not in the table, which is a programming error.
func Must(field string) Rule {
	r, ok := Lookup(field)
	if !ok {
		panic("productrules: no field " + strconv.Quote(field))
	}
	return r
}

// Violation codes: what kind of rule a value broke.
const (
	CodeRequired       = "required"
	CodeWrongType      = "wrong_type" // a JSON value of the wrong type (text for a number, a number for text)
	CodeTooLong        = "too_long"
	CodeInvalidChars   = "invalid_characters"
	CodeNotWholeNumber = "not_whole_number"
	CodeOutOfRange     = "out_of_range"
	CodeInvalidURL     = "invalid_url"
	CodeInvalidCode    = "invalid_code"
)

// Violation is one broken rule.
type Violation struct {
	Field   string
	Code    string // one of the Code constants
	Message string // a sentence that starts with the field: "price must be ..."
	// Params are the facts of Message, for the message table (package
	// messages) to say them in the seller's language: "field", "value"
	// (quoted), "min", "max", "n", "char", and "kind" for a variant.
	Params map[string]string
}

func (v *Violation) Error() string { return v.Message }

func (r Rule) violation(code, msg string, params ...string) *Violation {
	p := map[string]string{"field": r.Field}
	for i := 0; i+1 < len(params); i += 2 {
		p[params[i]] = params[i+1]
	}
	return &Violation{Field: r.Field, Code: code, Message: r.Field + " " + msg, Params: p}
}

// Missing is the answer for an absent field: a violation when it is required.
func (r Rule) Missing() *Violation {
	if !r.Required {
		return nil
	}
	return r.violation(CodeRequired, "is required", "kind", "absent")
}

// WrongType refuses a value of the wrong JSON type; got describes it ("a string").
func (r Rule) WrongType(got string) *Violation {
	if r.Type == WholeNumber {
		return r.violation(CodeWrongType, "must be "+r.Describe()+" written as a JSON number, got "+got, "value", got)
	}
	return r.violation(CodeWrongType, "must be text (a JSON string), got "+got, "value", got)
}

// IsBlank reports a text the table treats as absent: empty or only spaces.
func IsBlank(s string) bool { return strings.TrimFunc(s, IsSpace) == "" }

// IsSpace is every space the table knows: Unicode white space (which
// includes the no-break and ideographic spaces Korean keyboards and web
// copies produce) and the zero-width space and byte-order mark.
func IsSpace(r rune) bool {
	return unicode.IsSpace(r) || r == '\ufeff' || r == '\u200b'
}

// CheckText checks the value of a Text field in its NFC form. A blank
// value is absent.
func (r Rule) CheckText(s string) *Violation {
	_, v := r.Text(s)
	return v
}

// Text checks the value of a Text field and answers it in NFC, the form it
// is compared, sent and kept in. Its length is counted in that form, so the
// same text typed in either form has the same length. A blank value is
// absent (and answered as it came).
func (r Rule) Text(s string) (string, *Violation) {
	if IsBlank(s) {
		return s, r.Missing()
	}
	n, plain, valid := scanText(s)
	if !valid {
		return s, r.violation(CodeInvalidChars, "holds characters that are not valid text")
	}
	if !plain {
		if n > maxComposed*r.MaxLen {
			// Too long in any form: composing it would only cost time.
			return s, r.TooLong(n)
		}
		s = norm.NFC.String(s)
		n = utf8.RuneCountInString(s)
	}
	if n > r.MaxLen {
		return s, r.TooLong(n)
	}
	return s, r.checkFormat(s)
}

// maxComposed is the most characters NFC composes into one: the longest
// canonical decomposition (U+1F82, ᾂ, is four). A text of more than
// maxComposed × MaxLen characters as typed is too long in NFC too, and is
// refused without composing it, its length given as typed.
const maxComposed = 4

// scanText counts the characters of s and reports whether it is plain
// (plainNFC) and valid UTF-8, in one pass.
func scanText(s string) (n int, plain, valid bool) {
	plain = true
	for i := 0; i < len(s); n++ {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			return n, false, false
		}
		if c < 0xAC00 || c > 0xD7A3 {
			plain = false
		}
		i += size
	}
	return n, plain, true
}

// NormalizeSKU is the key a SKU is compared by: its NFC form. Two SKUs are
// the same product exactly when their keys are equal. It is what the
// validator sends, the ledger keys entries by and the API counts products
// by; text that is not valid UTF-8 is answered unchanged (no rule accepts
// it).
func NormalizeSKU(s string) string { return NFC(s) }

// NFC is the composed form of a text, the form text is compared, sent and
// kept in.
func NFC(s string) string {
	if plainNFC(s) {
		return s
	}
	return norm.NFC.String(s)
}

// plainNFC reports text of ASCII and precomposed Hangul syllables only,
// most of what sellers type: it is in NFC already (none of these
// characters decomposes, and none composes with another of them: a
// syllable composes only with a conjoining jamo after it), so the
// normalizer's tables need not be read.
func plainNFC(s string) bool {
	_, plain, valid := scanText(s)
	return plain && valid
}

// NFD is the decomposed form of a text: the other form software writes
// text in (macOS file names, text copied from them). Records kept before
// text was normalised may hold it.
func NFD(s string) string { return norm.NFD.String(s) }

// IsNFC reports whether s is in NFC.
func IsNFC(s string) bool { return norm.NFC.IsNormalString(s) }

// IsInvisibleFormat reports a character a SKU refuses because no font shows
// it while it makes the text differ: a format character (Unicode category
// Cf), a variation selector, or another default-ignorable code point
// (U+034F, the Hangul fillers, Khmer's inherent vowels, Mongolian's
// free variation selectors).
func IsInvisibleFormat(c rune) bool {
	return unicode.Is(unicode.Cf, c) || unicode.Is(unicode.Variation_Selector, c) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, c)
}

// formatName names the format characters sellers meet, for messages; ""
// for the rest, which are named by code point only.
func formatName(c rune) string {
	switch c {
	case 0x00AD:
		return "SOFT HYPHEN"
	case 0x034F:
		return "COMBINING GRAPHEME JOINER"
	case 0x061C:
		return "ARABIC LETTER MARK"
	case 0x115F:
		return "HANGUL CHOSEONG FILLER"
	case 0x1160:
		return "HANGUL JUNGSEONG FILLER"
	case 0x180E:
		return "MONGOLIAN VOWEL SEPARATOR"
	case 0x200B:
		return "ZERO WIDTH SPACE"
	case 0x200C:
		return "ZERO WIDTH NON-JOINER"
	case 0x200D:
		return "ZERO WIDTH JOINER"
	case 0x200E:
		return "LEFT-TO-RIGHT MARK"
	case 0x200F:
		return "RIGHT-TO-LEFT MARK"
	case 0x202A:
		return "LEFT-TO-RIGHT EMBEDDING"
	case 0x202B:
		return "RIGHT-TO-LEFT EMBEDDING"
	case 0x202C:
		return "POP DIRECTIONAL FORMATTING"
	case 0x202D:
		return "LEFT-TO-RIGHT OVERRIDE"
	case 0x202E:
		return "RIGHT-TO-LEFT OVERRIDE"
	case 0x2060:
		return "WORD JOINER"
	case 0x2061:
		return "FUNCTION APPLICATION"
	case 0x2062:
		return "INVISIBLE TIMES"
	case 0x2063:
		return "INVISIBLE SEPARATOR"
	case 0x2064:
		return "INVISIBLE PLUS"
	case 0x2066:
		return "LEFT-TO-RIGHT ISOLATE"
	case 0x2067:
		return "RIGHT-TO-LEFT ISOLATE"
	case 0x2068:
		return "FIRST STRONG ISOLATE"
	case 0x2069:
		return "POP DIRECTIONAL ISOLATE"
	case 0x3164:
		return "HANGUL FILLER"
	case 0xFE0E:
		return "VARIATION SELECTOR-15"
	case 0xFE0F:
		return "VARIATION SELECTOR-16"
	case 0xFEFF:
		return "ZERO WIDTH NO-BREAK SPACE (BYTE ORDER MARK)"
	case 0xFFA0:
		return "HALFWIDTH HANGUL FILLER"
	}
	return ""
}

// CharName names a character for a message: "U+200D ZERO WIDTH JOINER",
// or "U+E0041" when the table has no name for it.
func CharName(c rune) string {
	s := fmt.Sprintf("U+%04X", c)
	if n := formatName(c); n != "" {
		s += " " + n
	}
	return s
}

// TooLong refuses a text of n characters; n is past MaxLen.
func (r Rule) TooLong(n int) *Violation {
	return r.violation(CodeTooLong, "must be at most "+Group(int64(r.MaxLen))+" characters, got "+Group(int64(n))+" characters",
		"max", Group(int64(r.MaxLen)), "n", Group(int64(n)))
}

func (r Rule) checkFormat(s string) *Violation {
	switch r.Format {
	case Code:
		for i := 0; i < len(s); i++ {
			if !isCodeByte(s[i]) {
				return r.violation(CodeInvalidCode, "must be a code of 1 to "+strconv.Itoa(r.MaxLen)+" letters, digits, '-', '_' or '.', got "+Quote(s),
					"max", strconv.Itoa(r.MaxLen), "value", Quote(s))
			}
		}
		return nil
	case WebURL:
		if v := r.checkChars(s, false); v != nil {
			return v
		}
		return r.checkURL(s)
	case Word:
		if v := r.checkChars(s, false); v != nil {
			return v
		}
		if v := r.checkInvisible(s); v != nil {
			return v
		}
		if strings.IndexFunc(s, IsSpace) >= 0 {
			return r.violation(CodeInvalidChars, "must not contain spaces, got "+Quote(s), "kind", "spaces", "value", Quote(s))
		}
		return nil
	case Paragraphs:
		return r.checkChars(s, true)
	}
	return r.checkChars(s, false)
}

// checkURL accepts an absolute http or https URL with a host and no
// spaces. A refusal says what is wrong as the seller would fix it: the
// space in an address that starts right, the site missing after http://
// or https://, else the start.
func (r Rule) checkURL(s string) *Violation {
	u, err := url.Parse(s)
	web := err == nil && (u.Scheme == "http" || u.Scheme == "https")
	space := strings.IndexFunc(s, IsSpace) >= 0
	switch {
	case web && u.Host != "" && !space:
		return nil
	case space && webStart(s):
		return r.violation(CodeInvalidURL, "must be a web address without spaces, got "+Quote(s), "kind", "spaces", "value", Quote(s))
	case web && u.Host == "":
		return r.violation(CodeInvalidURL, "must name a site after https:// or http://, got "+Quote(s), "kind", "host", "value", Quote(s))
	}
	return r.violation(CodeInvalidURL, "must be a web address starting with https:// or http://, got "+Quote(s), "value", Quote(s))
}

// webStart reports an address that starts with http:// or https://, in
// any case (url.Parse reads the scheme so).
func webStart(s string) bool {
	for _, p := range []string{"https://", "http://"} {
		if len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) {
			return true
		}
	}
	return false
}

// checkChars refuses control characters; multiline allows line breaks and tabs.
func (r Rule) checkChars(s string, multiline bool) *Violation {
	for _, c := range s {
		if c == '\n' || c == '\r' || c == '\t' {
			if multiline {
				continue
			}
			return r.violation(CodeInvalidChars, "must be one line, without line breaks or tabs", "kind", "multiline")
		}
		if c == utf8.RuneError {
			return r.violation(CodeInvalidChars, "holds characters that are not valid text")
		}
		if unicode.IsControl(c) {
			return r.violation(CodeInvalidChars, "holds an invisible control character ("+strconv.QuoteRune(c)+")", "kind", "control", "char", strconv.QuoteRune(c))
		}
	}
	return nil
}

// checkInvisible refuses the first invisible format character
// (IsInvisibleFormat), naming it and its place: a SKU that holds one looks
// like another SKU that does not.
func (r Rule) checkInvisible(s string) *Violation {
	at := 0
	for _, c := range s {
		at++
		if IsInvisibleFormat(c) {
			name := CharName(c)
			return r.violation(CodeInvalidChars, "holds the invisible character "+name+" at character "+strconv.Itoa(at)+", which makes it look like another code; delete it",
				"kind", "format", "char", name, "at", strconv.Itoa(at))
		}
	}
	return nil
}

func isCodeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

// CheckNumber checks the value of a WholeNumber field. shown is the value as
// the caller received it, for the message (the seller's cell text, or the
// JSON literal); empty means the number itself.
//
// A whole number has no sign: a negative one is out of range, and a zero
// written with a sign ("-0", "+0", "−0") is refused as not a whole number
// like any other signed value, whatever its field's range.
func (r Rule) CheckNumber(n int64, shown string) *Violation {
	if n == 0 && HasSign(shown) {
		return r.NotWhole(shown)
	}
	if n < r.Min || n > r.Max {
		return r.OutOfRange(orNumber(shown, n))
	}
	return nil
}

// HasSign reports a number written with a sign before it, after any
// spaces: '+' or '-', the minus sign U+2212, and the small and full-width
// plus and minus signs.
func HasSign(shown string) bool {
	c, _ := utf8.DecodeRuneInString(strings.TrimLeftFunc(shown, IsSpace))
	switch c {
	case '+', '-', '\u2212', '\ufe62', '\ufe63', '\uff0b', '\uff0d':
		return true
	}
	return false
}

// OutOfRange refuses a whole number outside Min..Max; shown is how the value is quoted.
func (r Rule) OutOfRange(shown string) *Violation {
	return r.violation(CodeOutOfRange, "must be "+r.Describe()+", got "+Quote(shown), "min", Group(r.Min), "max", Group(r.Max), "value", Quote(shown))
}

// NotWhole refuses a value that is not a whole number; shown is how it is quoted.
func (r Rule) NotWhole(shown string) *Violation {
	return r.violation(CodeNotWholeNumber, "must be "+r.Describe()+", got "+Quote(shown), "min", Group(r.Min), "max", Group(r.Max), "value", Quote(shown))
}

func orNumber(shown string, n int64) string {
	if shown == "" {
		return strconv.FormatInt(n, 10)
	}
	return shown
}

// Describe says what a WholeNumber field accepts, for messages:
// "a whole number greater than 0 and at most 1,000,000,000".
func (r Rule) Describe() string {
	switch r.Min {
	case 0:
		return "a whole number from 0 to " + Group(r.Max)
	case 1:
		return "a whole number greater than 0 and at most " + Group(r.Max)
	}
	return "a whole number from " + Group(r.Min) + " to " + Group(r.Max)
}

// Group writes n with thousands separators: 1048576 → "1,048,576".
func Group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Quote shows a value in a message, shortened so a 1 MB value does not make a
// 1 MB message.
func Quote(s string) string {
	const max = 40
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}
