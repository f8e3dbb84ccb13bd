package excel

import (
	"math"
	"strconv"
	"strings"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/productrules"
)

// Problem codes of cells and rows. The codes of the field rules are those of
// package productrules.
const (
	CodeRequired       = productrules.CodeRequired
	CodeTooLong        = productrules.CodeTooLong
	CodeInvalidChars   = productrules.CodeInvalidChars
	CodeNotWholeNumber = productrules.CodeNotWholeNumber
	CodeOutOfRange     = productrules.CodeOutOfRange
	CodeInvalidURL     = productrules.CodeInvalidURL
	CodeInvalidCode    = productrules.CodeInvalidCode
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

// numFields is the number of fields of a product (productrules.Rules()).
const numFields = 9

// cleanCell turns a raw cell text into the value a seller meant: outer
// spaces (also the no-break and ideographic spaces Korean keyboards and web
// copies produce) are trimmed, and the apostrophe that older reports put
// before text that could start a formula is taken off again.
func cleanCell(raw string) string {
	v := strings.TrimLeftFunc(raw, isSpace)
	for len(v) >= 2 && v[0] == '\'' && strings.ContainsRune(formulaStarts, rune(v[1])) {
		v = strings.TrimLeftFunc(v[1:], isSpace)
	}
	return strings.TrimRightFunc(v, isSpace)
}

func isSpace(r rune) bool { return productrules.IsSpace(r) }

// cellValue is a cleaned cell as the rules see it.
type cellValue struct {
	text  string
	runes int  // characters of the whole cell, when cut
	cut   bool // text is only the start of the cell
}

// validator applies the shared field rules to cells, adding what a
// spreadsheet needs said: an empty cell, a long code Excel shortened, a unit
// typed after a number, numbers written with thousands separators.
type validator struct {
	rules []productrules.Rule // in the contract's order; index fi
}

func newValidator() validator { return validator{rules: productrules.Rules()} }

// textFieldBit is a text field's bit in textForms.changed (0 for a field
// that is not text).
func textFieldBit(field string) uint16 {
	switch field {
	case productrules.SellerSKU:
		return 1 << 0
	case productrules.Name:
		return 1 << 1
	case productrules.CategoryCode:
		return 1 << 2
	case productrules.Brand:
		return 1 << 3
	case productrules.ImageURL:
		return 1 << 4
	case productrules.Description:
		return 1 << 5
	}
	return 0
}

// product checks one row's values (indexed like v.rules) and builds the
// product; bad receives each failed rule with its field's index. forms says
// which text fields NFC changed from the text as typed.
func (v validator) product(values [numFields]cellValue, bad func(fi int, viol *productrules.Violation)) (bulkreg.Product, textForms) {
	var p bulkreg.Product
	forms := textForms{known: true}
	for fi, rule := range v.rules {
		text, n, viol := checkCell(rule, values[fi])
		if viol != nil {
			bad(fi, viol)
		} else if rule.Type == productrules.Text && text != values[fi].text {
			forms.changed |= textFieldBit(rule.Field)
		}
		switch rule.Field {
		case productrules.SellerSKU:
			p.SellerSKU = text
		case productrules.Name:
			p.Name = text
		case productrules.CategoryCode:
			p.CategoryCode = text
		case productrules.Price:
			p.Price = n
		case productrules.Stock:
			p.Stock = n
		case productrules.Brand:
			p.Brand = text
		case productrules.ImageURL:
			p.ImageURL = text
		case productrules.Description:
			p.Description = text
		case productrules.ShippingFee:
			p.ShippingFee = n
		}
	}
	return p, forms
}

// checkCell applies one field's rule to a cleaned cell. A Text field answers
// its text in NFC (productrules.Rule.Text: the form the file's duplicate
// check, the ledger and the API compare), a WholeNumber field its number.
func checkCell(rule productrules.Rule, cv cellValue) (string, int64, *productrules.Violation) {
	v, field := cv.text, rule.Field
	if v == "" && !cv.cut {
		if rule.Required {
			return "", 0, &productrules.Violation{Field: field, Code: CodeRequired, Message: field + " is required but the cell is empty",
				Params: pairs("field", field)}
		}
		return "", rule.Default, nil
	}
	if rule.Type == productrules.WholeNumber {
		n, viol := parseWhole(rule, v)
		if viol != nil {
			return "", 0, viol
		}
		return "", n, nil
	}
	if rule.Format == productrules.Word || rule.Format == productrules.Code {
		if looksScientific(v) {
			return "", 0, &productrules.Violation{Field: field, Code: CodeInvalidCode,
				Message: field + " " + quote(v) + " looks like a long number Excel shortened; format the column as text and type the code again",
				Params:  pairs("field", field, "kind", "scientific", "value", quote(v))}
		}
	}
	if cv.cut {
		if cv.runes > rule.MaxLen {
			return "", 0, rule.TooLong(cv.runes)
		}
		return "", 0, &productrules.Violation{Field: field, Code: CodeTooLong,
			Message: field + " holds more text than one cell may hold here (" + byteSize(int64(len(v))) + "); shorten it",
			Params:  pairs("field", field, "kind", "cell", "size", byteSize(int64(len(v))))}
	}
	text, viol := rule.Text(v)
	if viol != nil {
		return "", 0, viol
	}
	return text, 0, nil
}

// parseWhole reads a whole number as sellers type it. Accepted: "12000",
// "12,000" (commas exactly every three digits), "12000.0", and a number a
// formula left a hair off whole ("11000.000000000002"). Refused, with the
// reason: units ("12,000원"), decimals, signs ("+5", "−5", and on zero too:
// "-0", "+0", "-0.0", the "-0" a writer may store in a numeric cell) and
// anything else; a negative number is out of range. Then the rule's range
// applies.
func parseWhole(rule productrules.Rule, v string) (int64, *productrules.Violation) {
	notWhole := func() (int64, *productrules.Violation) {
		viol := rule.NotWhole(v)
		if strings.ContainsAny(v, "원₩￦") {
			viol.Message += "; type the number only, without 원 or ₩"
			viol.Params["kind"] = "unit"
		}
		return 0, viol
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
			return 0, rule.OutOfRange(v)
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
		if math.Abs(f-r) > 1e-6 || r == 0 && productrules.HasSign(s) {
			return notWhole() // a fraction, or a signed zero: "-0", "-0.0", "-0e3"
		}
		if r < float64(rule.Min) || r > float64(rule.Max) {
			return 0, rule.OutOfRange(v)
		}
		n = int64(r)
	}
	if viol := rule.CheckNumber(n, v); viol != nil {
		return 0, viol
	}
	return n, nil
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
func group(n int64) string { return productrules.Group(n) }
