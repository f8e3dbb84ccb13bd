package excel

import (
	"context"
	"testing"
)

// BenchmarkParse500 parses and validates the 500-row fixture: every package
// check, excelize's read, the sheet scan and the rules.
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
	values := make([]map[string]string, len(s.Rows))
	for i, r := range s.Rows {
		values[i] = map[string]string{}
		for j, h := range s.Header {
			if c, ok := lookupColumn(h); ok {
				values[i][c.Field] = cleanCell(r.Cells[j])
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, v := range values {
			validateFields(v, func(string, *fieldError) { b.Fatal("invalid") })
		}
	}
}
