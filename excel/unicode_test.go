package excel

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"
	"golang.org/x/text/unicode/norm"

	"github.com/bulkreg/bulkreg/messages"
	"github.com/bulkreg/bulkreg/productrules"
)

// rowsWithSKUs is the Korean header and one valid row per SKU, from row 2.
func rowsWithSKUs(skus ...string) [][]any {
	rows := [][]any{koreanHeader}
	for i, sku := range skus {
		r := validRow(i + 1)
		r[0] = sku
		rows = append(rows, r)
	}
	return rows
}

// bothFormats parses rows as an .xlsx and as a UTF-8 CSV.
func bothFormats(t *testing.T, rows [][]any) map[string]*Sheet {
	t.Helper()
	return map[string]*Sheet{"xlsx": mustParse(t, book(t, rows, nil)), "csv": mustParse(t, []byte(csvOf(rows)))}
}

// TestOneSKUOneFormInAFile: a SKU typed in NFC and the same SKU pasted in
// NFD (or with a space-like character the cell's trim takes off) are one
// SKU: the second is a duplicate naming its own cell and the first's row,
// and the product carries the NFC form whichever form was typed.
func TestOneSKUOneFormInAFile(t *testing.T) {
	nfc, nfd := "가방-001", norm.NFD.String("가방-001")
	if nfc == nfd {
		t.Fatal("the forms are equal")
	}
	for _, tc := range []struct {
		name        string
		first, then string
	}{
		{"NFC then NFD", nfc, nfd},
		{"NFD then NFC", nfd, nfc},
		{"NFD twice", nfd, nfd},
		{"a name of decomposed Latin", "CAFÉ-1", norm.NFD.String("CAFÉ-1")},
		{"a zero-width space before it, trimmed like a space", "ZW-002", "\u200bZW-002"},
		{"a byte-order mark after it, trimmed like a space", "ZW-002", "ZW-002\ufeff"},
	} {
		for format, s := range bothFormats(t, rowsWithSKUs(tc.first, "OTHER-1", tc.then)) {
			want := norm.NFC.String(strings.Trim(tc.first, "\u200b\ufeff"))
			if len(s.Rows) != 3 || s.Rows[0].Product.SellerSKU != want || !s.Rows[0].Valid() {
				t.Errorf("%s, %s: row 2 = %+v, want valid with SKU %+q", tc.name, format, s.Rows[0], want)
				continue
			}
			ps := s.Rows[2].Problems
			if len(ps) != 1 || ps[0].Code != CodeDuplicateSKU || ps[0].Cell != "A4" || ps[0].Params["row"] != "2" || ps[0].Params["value"] != strconv.Quote(want) {
				t.Errorf("%s, %s: row 4's problems %+v, want one duplicate_sku on A4 naming row 2 and %+q", tc.name, format, ps, want)
			}
			if !s.Rows[1].Valid() {
				t.Errorf("%s, %s: row 3 %v", tc.name, format, s.Rows[1].Problems)
			}
		}
	}
	// Names and the other text are sent in NFC too.
	rows := rowsWithSKUs("SKU-1")
	rows[1][1], rows[1][5], rows[1][7] = norm.NFD.String("가방 상품"), norm.NFD.String("브랜드"), norm.NFD.String("설명\n둘째 줄")
	for format, s := range bothFormats(t, rows) {
		p := s.Rows[0].Product
		if p.Name != "가방 상품" || p.Brand != "브랜드" || p.Description != "설명\n둘째 줄" {
			t.Errorf("%s: product text %+q %+q %+q, want NFC", format, p.Name, p.Brand, p.Description)
		}
		if typed := s.AsTyped(s.Rows[0]); typed.Name != rows[1][1] || typed.Brand != rows[1][5] || typed.SellerSKU != "SKU-1" || typed.Price != p.Price {
			t.Errorf("%s: AsTyped = %+v, want the text as typed", format, typed)
		}
	}
}

// TestInvisibleCharactersInSKUsAreRefusedByCell: "ZW-002" with a joiner, a
// word joiner, a non-joiner, a bidi control, a soft hyphen and the rest is
// refused on its own cell, naming the character, in Korean and English.
func TestInvisibleCharactersInSKUsAreRefusedByCell(t *testing.T) {
	cases := []struct {
		sku, char, at string
	}{
		{"ZW-\u200d002", "U+200D ZERO WIDTH JOINER", "4"},
		{"ZW-\u2060002", "U+2060 WORD JOINER", "4"},
		{"ZW-\u200c002", "U+200C ZERO WIDTH NON-JOINER", "4"},
		{"ZW-002\u2060", "U+2060 WORD JOINER", "7"},
		{"ZW-002\u200d", "U+200D ZERO WIDTH JOINER", "7"},
		{"\u202eZW-002", "U+202E RIGHT-TO-LEFT OVERRIDE", "1"},
		{"ZW\u202d-002\u202c", "U+202D LEFT-TO-RIGHT OVERRIDE", "3"},
		{"ZW-\u2066002\u2069", "U+2066 LEFT-TO-RIGHT ISOLATE", "4"},
		{"ZW-\u200e002", "U+200E LEFT-TO-RIGHT MARK", "4"},
		{"ZW-\u200f002", "U+200F RIGHT-TO-LEFT MARK", "4"},
		{"ZW-\u00ad002", "U+00AD SOFT HYPHEN", "4"},
		{"ZW-\ufeff002", "U+FEFF ZERO WIDTH NO-BREAK SPACE (BYTE ORDER MARK)", "4"},
		{"ZW-\u200b002", "U+200B ZERO WIDTH SPACE", "4"},
		{"ZW-0\ufe0f02", "U+FE0F VARIATION SELECTOR-16", "5"},
		{"ZW-\u3164002", "U+3164 HANGUL FILLER", "4"},
		{norm.NFD.String("가방") + "\u200d", "U+200D ZERO WIDTH JOINER", "3"}, // counted in NFC
	}
	var skus []string
	for _, c := range cases {
		skus = append(skus, c.sku)
	}
	for format, s := range bothFormats(t, rowsWithSKUs(append(skus, "ZW-002")...)) {
		if len(s.Rows) != len(cases)+1 {
			t.Fatalf("%s: %d rows", format, len(s.Rows))
		}
		for i, c := range cases {
			ps := s.Rows[i].Problems
			cell := "A" + strconv.Itoa(i+2)
			if len(ps) != 1 || ps[0].Cell != cell || ps[0].Code != CodeInvalidChars || ps[0].Params["char"] != c.char || ps[0].Params["at"] != c.at {
				t.Errorf("%s: %+q: problems %+v, want one invalid_characters on %s naming %s at %s", format, c.sku, ps, cell, c.char, c.at)
				continue
			}
			ko, _ := messages.Render(messages.KO, ps[0].Code, ps[0].Params)
			en, _ := messages.Render(messages.EN, ps[0].Code, ps[0].Params)
			if !strings.Contains(ko, c.char) || !strings.Contains(ko, c.at+"번째 글자") || !strings.Contains(ko, "보이지 않는 문자") {
				t.Errorf("%s: Korean %q does not name %s at %s", format, ko, c.char, c.at)
			}
			// The table's sentence is said after its field (messages.At); the
			// validator's names the field first.
			if want := "holds the invisible character " + c.char + " at character " + c.at + ", which makes it look like another code; delete it"; en != want || ps[0].Message != "seller_sku "+want {
				t.Errorf("%s: English %q / %q, want %q", format, en, ps[0].Message, want)
			}
		}
		if last := s.Rows[len(cases)]; !last.Valid() {
			t.Errorf("%s: the plain ZW-002 is refused: %v (a refused look-alike is no first use)", format, last.Problems)
		}
	}
}

// TestSignedZerosAreRefusedInEveryNumericField: "-0" and every other
// signed zero, typed as text, stored as a number (excelize writes -0 as
// <v>-0</v>) or written in a CSV, is refused in price, stock and
// shipping_fee with the message a signed number gets.
func TestSignedZerosAreRefusedInEveryNumericField(t *testing.T) {
	fields := []struct {
		col   int // 0-based
		field string
	}{{3, FieldPrice}, {4, FieldStock}, {8, FieldShippingFee}}
	texts := []string{"-0", "+0", "-0.0", "-0.00", "\u22120", "\uff0d0", "-0e0", "-.0", "-0.0000001", " -0 ", "-0,000"}
	for _, f := range fields {
		rows := [][]any{koreanHeader}
		for i, v := range texts {
			r := validRow(i + 1)
			r[f.col] = v
			rows = append(rows, r)
		}
		numeric := len(rows) + 1 // the row of the numeric cell
		r := validRow(99)
		r[f.col] = math.Copysign(0, -1)
		rows = append(rows, r)
		x := book(t, rows, func(fb *excelize.File) {
			// A numeric cell holding -0, as a writer other than Excel stores it.
			cell, _ := excelize.CoordinatesToCellName(f.col+1, numeric)
			if err := fb.SetCellFloat("Sheet1", cell, math.Copysign(0, -1), -1, 64); err != nil {
				t.Fatal(err)
			}
		})
		for format, s := range map[string]*Sheet{"xlsx": mustParse(t, x), "csv": mustParse(t, []byte(csvOf(rows)))} {
			if len(s.Rows) != len(texts)+1 {
				t.Fatalf("%s %s: %d rows", f.field, format, len(s.Rows))
			}
			for i, row := range s.Rows {
				shown := strings.TrimSpace(row.Cells[f.col])
				cell, _ := excelize.CoordinatesToCellName(f.col+1, row.Number)
				rule := productrules.Must(f.field)
				want := rule.NotWhole(shown).Message
				if len(row.Problems) != 1 || row.Problems[0].Cell != cell || row.Problems[0].Code != CodeNotWholeNumber || row.Problems[0].Message != want {
					t.Errorf("%s %s row %d (%+q): problems %v, want %s: %s", f.field, format, row.Number, row.Cells[f.col], row.Problems, cell, want)
				}
				if i == len(texts) && format == "xlsx" && shown != "-0" {
					t.Errorf("the numeric cell -0 reads as %q", shown)
				}
			}
		}
	}
	// Zero itself stays accepted where the range allows it.
	for _, v := range []any{0, "0", "0.0", 0.0} {
		r := validRow(1)
		r[4], r[8] = v, v
		s := mustParse(t, book(t, [][]any{koreanHeader, r}, nil))
		if !s.Rows[0].Valid() || s.Rows[0].Product.Stock != 0 {
			t.Errorf("stock and shipping_fee %v: %v", v, s.Rows[0].Problems)
		}
	}
}
