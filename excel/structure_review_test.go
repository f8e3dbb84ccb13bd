package excel

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// Review: the sheet reader takes <row> anywhere under <sheetData>, <c>
// anywhere under a row and <v> anywhere under a cell, so SpreadsheetML
// elements nested where the schema does not allow them are read as data.
// LibreOffice 7.4.7 (soffice --convert-to csv) shows, for each file, the
// products in libreOffice; Excel reports such a file as damaged. Either is
// acceptable; reading a product neither shows is not.
func TestReviewNestedElementsAreNotData(t *testing.T) {
	header := nsRow("", 1, "", nsHeader...)
	visible := nsRow("", 2, "", nsProduct("SHOWN-1")...)
	hidden := nsRow("", 3, "", nsProduct("HIDDEN-1")...)
	for _, tc := range []struct {
		name        string
		sheet       string
		libreOffice []string // SKU:price as LibreOffice shows them
	}{
		{"a row inside a row", sheetOf(``, header+strings.Replace(visible, "</row>", hidden+"</row>", 1)), []string{"SHOWN-1:1000"}},
		{"a row inside a cell", sheetOf(``, header+strings.Replace(visible, "</c></row>", hidden+"</c></row>", 1)), []string{"SHOWN-1:1000"}},
		{"a value inside a value", sheetOf(``, header+`<row r="2"><c r="A2" t="inlineStr"><is><t>SHOWN-1</t></is></c><c r="B2" t="inlineStr"><is><t>x</t></is></c><c r="C2" t="inlineStr"><is><t>CAT-1</t></is></c><c r="D2"><v>1<v>9</v>000</v></c><c r="E2"><v>1</v></c></row>`), []string{"SHOWN-1:0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parse(t, nsBook(t, tc.sheet, ""))
			if fe := (*FileError)(nil); errors.As(err, &fe) && fe.Code == CodeDamaged {
				return // refused as damaged, as Excel does
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range s.Rows {
				got = append(got, r.Product.SellerSKU+":"+strconv.FormatInt(r.Product.Price, 10))
			}
			if strings.Join(got, ",") != strings.Join(tc.libreOffice, ",") {
				t.Errorf("read %q; LibreOffice shows %q and Excel calls the file damaged", got, tc.libreOffice)
			}
		})
	}
}
