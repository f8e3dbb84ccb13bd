package excel

import (
	"math"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bulkreg/bulkreg"
)

// Limits of the fields, in characters (runes) or won.
const (
	MaxSKULen          = 50
	MaxNameLen         = 100
	MaxCategoryLen     = 20
	MaxBrandLen        = 50
	MaxImageURLLen     = 1000
	MaxDescriptionLen  = 10000
	MaxPrice           = 1_000_000_000
	MaxStock           = 1_000_000
	MaxShippingFee     = 1_000_000
	DefaultShippingFee = 0
)

// Problem codes of cells and rows.
const (
	CodeRequired       = "required"
	CodeTooLong        = "too_long"
	CodeInvalidChars   = "invalid_characters"
	CodeNotWholeNumber = "not_whole_number"
	CodeOutOfRange     = "out_of_range"
	CodeInvalidURL     = "invalid_url"
	CodeInvalidCode    = "invalid_code"
	CodeFormulaNoValue = "formula_without_value"
	CodeExcelError     = "excel_error"
	CodeDateValue      = "date_value"
	CodeBoolValue      = "logical_value"
	CodeDuplicateSKU   = "duplicate_sku"
	CodeMergedCells    = "merged_cells"
	// Warnings.
	CodeHiddenRow     = "hidden_row"
	CodeUnknownColumn = "unknown_column"
	CodeMergedFill    = "merged_fill"
)

// cleanCell turns a raw cell text into the value a seller meant: outer
// spaces (also the no-break and ideographic spaces Korean keyboards and web
// copies produce) are trimmed, and the apostrophe the report writer puts
// before text that could start a formula is taken off again.
func cleanCell(raw string) string {
	v := strings.TrimLeftFunc(raw, isSpace)
	for len(v) >= 2 && v[0] == '\'' && strings.ContainsRune(formulaStarts, rune(v[1])) {
		v = strings.TrimLeftFunc(v[1:], isSpace)
	}
	return strings.TrimRightFunc(v, isSpace)
}

func isSpace(r rune) bool {
	return unicode.IsSpace(r) || r == '\u00a0' || r == '\u3000' || r == '\ufeff' || r == '\u200b'
}

// fieldError is a failed rule, before it is placed in a cell.
type fieldError struct{ code, msg string }

// checkText applies the rules of a text field. multiline allows line breaks and tabs.
func checkText(field, v string, required bool, maxLen int, multiline bool) *fieldError {
	if v == "" {
		if required {
			return &fieldError{CodeRequired, field + " is required but the cell is empty"}
		}
		return nil
	}
	if !utf8.ValidString(v) {
		return &fieldError{CodeInvalidChars, field + " holds characters that are not valid text"}
	}
	if n := utf8.RuneCountInString(v); n > maxLen {
		return &fieldError{CodeTooLong, field + " must be at most " + group(int64(maxLen)) + " characters, got " + group(int64(n)) + " characters"}
	}
	for _, r := range v {
		if r == '\n' || r == '\r' || r == '\t' {
			if multiline {
				continue
			}
			return &fieldError{CodeInvalidChars, field + " must be one line, without line breaks or tabs"}
		}
		if unicode.IsControl(r) || r == utf8.RuneError {
			return &fieldError{CodeInvalidChars, field + " holds an invisible control character (" + strconv.QuoteRune(r) + ")"}
		}
	}
	return nil
}

// checkSKU: one word of letters, digits and symbols, up to MaxSKULen.
func checkSKU(v string) *fieldError {
	if fe := checkText(FieldSellerSKU, v, true, MaxSKULen, false); fe != nil {
		return fe
	}
	if strings.IndexFunc(v, isSpace) >= 0 {
		return &fieldError{CodeInvalidChars, "seller_sku must not contain spaces, got " + quote(v)}
	}
	if looksScientific(v) {
		return &fieldError{CodeInvalidCode, "seller_sku " + quote(v) + " looks like a long number Excel shortened; format the column as text and type the code again"}
	}
	return nil
}

// checkCategory: digits only.
func checkCategory(v string) *fieldError {
	if v == "" {
		return &fieldError{CodeRequired, "category_code is required but the cell is empty"}
	}
	if looksScientific(v) {
		return &fieldError{CodeInvalidCode, "category_code " + quote(v) + " looks like a long number Excel shortened; format the column as text and type the code again"}
	}
	if len(v) > MaxCategoryLen || strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return &fieldError{CodeInvalidCode, "category_code must be a code of 1 to " + strconv.Itoa(MaxCategoryLen) + " digits, got " + quote(v)}
	}
	return nil
}

// checkURL: an absolute http or https address.
func checkURL(v string) *fieldError {
	if fe := checkText(FieldImageURL, v, false, MaxImageURLLen, false); fe != nil || v == "" {
		return fe
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.IndexFunc(v, isSpace) >= 0 {
		return &fieldError{CodeInvalidURL, "image_url must be a web address starting with https:// or http://, got " + quote(v)}
	}
	return nil
}

// parseWhole reads a whole number as sellers type it. Accepted: "12000",
// "12,000" (commas exactly every three digits), "12000.0", and a number a
// formula left a hair off whole ("11000.000000000002"). Refused, with the
// reason: units ("12,000원"), decimals, signs and anything else.
func parseWhole(field, v string, minVal, maxVal int64, required bool, def int64) (int64, *fieldError) {
	if v == "" {
		if required {
			return 0, &fieldError{CodeRequired, field + " is required but the cell is empty"}
		}
		return def, nil
	}
	notWhole := func() (int64, *fieldError) {
		hint := ""
		if strings.ContainsAny(v, "원₩￦") {
			hint = "; type the number only, without 원 or ₩"
		}
		return 0, &fieldError{CodeNotWholeNumber, field + " must be " + rangeWords(minVal, maxVal) + ", got " + quote(v) + hint}
	}
	s := v
	if strings.Contains(s, ",") {
		if !validGrouping(s) {
			return notWhole()
		}
		s = strings.ReplaceAll(s, ",", "")
	}
	var n int64
	if allDigits(s) {
		if len(s) > 18 {
			return 0, &fieldError{CodeOutOfRange, field + " must be " + rangeWords(minVal, maxVal) + ", got " + quote(v)}
		}
		n, _ = strconv.ParseInt(s, 10, 64)
	} else {
		// Numbers Excel saved: "12000.0", "1.2E+4", formula results with float noise.
		if s == "" || !(s[0] >= '0' && s[0] <= '9' || s[0] == '-' || s[0] == '.') || strings.ContainsAny(s, "xXpP_") {
			return notWhole()
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return notWhole()
		}
		r := math.Round(f)
		if math.Abs(f-r) > 1e-6 {
			return notWhole()
		}
		if r < float64(minVal) || r > float64(maxVal) {
			return 0, &fieldError{CodeOutOfRange, field + " must be " + rangeWords(minVal, maxVal) + ", got " + quote(v)}
		}
		n = int64(r)
	}
	if n < minVal || n > maxVal {
		return 0, &fieldError{CodeOutOfRange, field + " must be " + rangeWords(minVal, maxVal) + ", got " + quote(v)}
	}
	return n, nil
}

func rangeWords(minVal, maxVal int64) string {
	switch minVal {
	case 0:
		return "a whole number from 0 to " + group(maxVal)
	case 1:
		return "a whole number greater than 0 and at most " + group(maxVal)
	}
	return "a whole number from " + group(minVal) + " to " + group(maxVal)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// validGrouping reports whether s is digits with a comma before every group of three: "1,234,567".
func validGrouping(s string) bool {
	parts := strings.Split(s, ",")
	if len(parts[0]) < 1 || len(parts[0]) > 3 || !allDigits(parts[0]) {
		return false
	}
	for _, p := range parts[1:] {
		if len(p) != 3 || !allDigits(p) {
			return false
		}
	}
	return true
}

// looksScientific reports text like "8.80123E+12": a long code Excel stored as a number.
func looksScientific(s string) bool {
	i := strings.IndexAny(s, "eE")
	if i <= 0 || i == len(s)-1 {
		return false
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return false
	}
	return strings.ContainsAny(s[i+1:], "+-") || allDigits(s[i+1:])
}

// group writes n with thousands separators: 1048576 → "1,048,576".
func group(n int64) string {
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

// validateFields checks one row's cleaned values (by field) and builds the
// product. bad receives each failed rule with its field.
func validateFields(values map[string]string, bad func(field string, fe *fieldError)) bulkreg.Product {
	var p bulkreg.Product
	p.SellerSKU = values[FieldSellerSKU]
	if fe := checkSKU(p.SellerSKU); fe != nil {
		bad(FieldSellerSKU, fe)
	}
	p.Name = values[FieldName]
	if fe := checkText(FieldName, p.Name, true, MaxNameLen, false); fe != nil {
		bad(FieldName, fe)
	}
	p.CategoryCode = values[FieldCategoryCode]
	if fe := checkCategory(p.CategoryCode); fe != nil {
		bad(FieldCategoryCode, fe)
	}
	var fe *fieldError
	if p.Price, fe = parseWhole(FieldPrice, values[FieldPrice], 1, MaxPrice, true, 0); fe != nil {
		bad(FieldPrice, fe)
	}
	if p.Stock, fe = parseWhole(FieldStock, values[FieldStock], 0, MaxStock, true, 0); fe != nil {
		bad(FieldStock, fe)
	}
	p.Brand = values[FieldBrand]
	if fe := checkText(FieldBrand, p.Brand, false, MaxBrandLen, false); fe != nil {
		bad(FieldBrand, fe)
	}
	p.ImageURL = values[FieldImageURL]
	if fe := checkURL(p.ImageURL); fe != nil {
		bad(FieldImageURL, fe)
	}
	p.Description = values[FieldDescription]
	if fe := checkText(FieldDescription, p.Description, false, MaxDescriptionLen, true); fe != nil {
		bad(FieldDescription, fe)
	}
	if p.ShippingFee, fe = parseWhole(FieldShippingFee, values[FieldShippingFee], 0, MaxShippingFee, false, DefaultShippingFee); fe != nil {
		bad(FieldShippingFee, fe)
	}
	return p
}
