// Package testsheet builds sellers' upload files for the tests of the upload
// use case and of its HTTP side, which upload the same kinds of files.
package testsheet

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"

	"github.com/xuri/excelize/v2"
)

// Header is the English header row of every field.
var Header = []string{"seller_sku", "name", "category_code", "price", "stock", "brand", "image_url", "description", "shipping_fee"}

// Row is one data row; Price is a string so a test can make it invalid.
type Row struct {
	SKU, Price string
}

// XLSX builds a workbook with Header and the given rows, the way a seller's
// file looks. salt goes into a description so files with the same rows can
// differ (and so get different upload ids).
func XLSX(t testing.TB, salt string, rows ...Row) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	sh := f.GetSheetName(0)
	h := make([]any, len(Header))
	for i, c := range Header {
		h[i] = c
	}
	if err := f.SetSheetRow(sh, "A1", &h); err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		vals := []any{r.SKU, "상품 " + r.SKU, "50000123", r.Price, 10, "브랜드", "https://img.example.com/" + r.SKU + ".jpg", "desc " + salt, 0}
		if n, err := strconv.Atoi(r.Price); err == nil {
			vals[3] = n
		}
		if err := f.SetSheetRow(sh, "A"+strconv.Itoa(i+2), &vals); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Valid returns n valid rows, SKU-001 on.
func Valid(n int) []Row {
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = Row{SKU: fmt.Sprintf("SKU-%03d", i+1), Price: strconv.Itoa(1000 + i)}
	}
	return rows
}
