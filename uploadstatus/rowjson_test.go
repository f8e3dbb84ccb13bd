package uploadstatus

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzRowResultJSON: a row's result is stored as json.Marshal writes it,
// whether appendJSON writes it or leaves it to encoding/json.
func FuzzRowResultJSON(f *testing.F) {
	f.Add(3, Registered, "p-1", "", "", "", 1, int64(1795000000), int64(5), 9*3600, "", false)
	f.Add(7, Failed, "", "invalid_price", "price", "price must be > 0 <&>", 3, int64(-62167219201), int64(0), 0, "", false)
	f.Add(500, AlreadyRegistered, "p-\u2028", "", "", "\xff", 0, int64(0), int64(999999999), 24*3600, "C7", true)
	f.Fuzz(func(t *testing.T, row int, state, productID, code, field, reason string, attempts int, sec, nsec int64, offset int, cell string, details bool) {
		r := RowResult{Row: row, State: state, ProductID: productID, Code: code, Field: field, Reason: reason, Attempts: attempts,
			At: time.Unix(sec, nsec).In(time.FixedZone("z", offset))}
		if cell != "" {
			r.Cells = []string{cell}
		}
		if details {
			r.Details = []Detail{{Code: code, Cell: cell}}
		}
		want, wantErr := json.Marshal(r)
		got, ok := r.appendJSON([]byte("x"))
		if !ok {
			if len(r.Details) == 0 && len(r.Cells) == 0 && wantErr == nil {
				t.Fatalf("appendJSON refused %+v, which encoding/json writes", r)
			}
			return
		}
		if wantErr != nil || string(got) != "x"+string(want) {
			t.Fatalf("appendJSON = %s\nencoding/json = %s (%v)", got[1:], want, wantErr)
		}
	})
}

// BenchmarkRowResultJSON: a registered row's result, by appendJSON and by
// encoding/json.
func BenchmarkRowResultJSON(b *testing.B) {
	r := RowResult{Row: 123, State: Registered, ProductID: "p-48213", Attempts: 1, At: time.Now()}
	b.Run("appendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 160)
		for b.Loop() {
			buf, _ = r.appendJSON(buf[:0])
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
