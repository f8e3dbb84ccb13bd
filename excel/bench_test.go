package excel

import (
	"context"
	"testing"

	"github.com/bulkreg/bulkreg/productrules"
)

// BenchmarkParse500 parses and validates the 500-row fixture: the zip's
// checks, every part read once, the sheet's one pass and the rules.
func BenchmarkParse500(b *testing.B) {
	data := fixture(b, "valid-500.xlsx")
	p := NewParser(Options{})
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		s, err := p.ParseBytes(context.Background(), data)
		if err != nil || s.Valid() != 500 {
			b.Fatalf("%v", err)
		}
	}
}

// BenchmarkValidate500 is the rules alone on 500 rows of cleaned values.
func BenchmarkValidate500(b *testing.B) {
	s := mustParse(b, fixture(b, "valid-500.xlsx"))
	v := newValidator()
	values := make([][numFields]cellValue, len(s.Rows))
	for i, r := range s.Rows {
		for j, h := range s.Header {
			if c, ok := lookupColumn(h); ok {
				for fi, rule := range v.rules {
					if rule.Field == c.Field {
						values[i][fi] = cellValue{text: cleanCell(r.Cells[j])}
					}
				}
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, vals := range values {
			v.product(vals, func(int, *productrules.Violation) { b.Fatal("invalid") })
		}
	}
}
