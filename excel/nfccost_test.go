package excel

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A CSV under the text budget (7.9 MiB) whose every text cell is "A" +
// U+030A (composes to Å) takes the normalizer's slow path on every cell:
// reading and validating it costs much of the upload's CPU ceiling. The
// producer then calls Sheet.AsTyped for rows whose SKU the ledger knows
// with other content; the validator recorded which fields it composed, so
// AsTyped does not normalise again (that would cost as much again).
// Reading the file and AsTyped of every row stay within the upload's 1 s
// ceiling.
func TestNFCSlowPathWithinTheCeiling(t *testing.T) {
	unit := "A\u030a"
	var b strings.Builder
	b.WriteString("seller_sku,name,category_code,price,stock,brand,image_url,description,shipping_fee\n")
	per := 79 * (1 << 20) / 10 / 500
	for i := range 500 {
		sku := fmt.Sprintf("S%d-%s", i, strings.Repeat(unit, 20))
		name, brand := strings.Repeat(unit, 60), strings.Repeat(unit, 30)
		desc := strings.Repeat(unit, (per-len(sku)-len(name)-len(brand)-60)/len(unit))
		fmt.Fprintf(&b, "%s,%s,CAT-1,1000,1,%s,,%s,0\n", sku, name, brand, desc)
	}
	data := []byte(b.String())
	c0 := processCPU()
	s, err := NewParser(Options{}).ParseBytes(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	c1 := processCPU()
	for _, r := range s.Rows {
		_ = s.AsTyped(r)
	}
	c2 := processCPU()
	t.Logf("%d bytes, %d valid rows: parse and validate %v CPU, AsTyped of every row %v CPU", len(data), s.Valid(), c1-c0, c2-c1)
	if s.Valid() != 500 {
		t.Fatalf("%d valid rows, want 500", s.Valid())
	}
	if c2-c0 > time.Second {
		t.Errorf("reading the file and AsTyped of its rows took %v of CPU, over the 1 s ceiling of the whole upload", c2-c0)
	}
}
