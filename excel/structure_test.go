package excel

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// SpreadsheetML elements nested where the schema does not allow them are
// not data: a row inside a row or a cell, a value inside a value.
// LibreOffice 7.4.7 (soffice --convert-to csv) shows, for each file, the
// products in libreOffice; Excel reports such a file as damaged. Either is
// acceptable; reading a product neither shows is not.
func TestNestedElementsAreNotData(t *testing.T) {
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

// Every other element that holds data, standing where the schema does not
// put it, refuses the file as damaged, naming the element: in the sheet and
// in the shared strings alike.
func TestMisplacedDataElementsRefused(t *testing.T) {
	header := nsRow("", 1, "", nsHeader...)
	visible := nsRow("", 2, "", nsProduct("SHOWN-1")...)
	shared := func(entries string) string {
		return `<sst xmlns="` + mainNS + `">` + entries + `</sst>`
	}
	// A row whose SKU is shared string 0, and whose name is shared string 1.
	sharedRow := `<row r="3"><c r="A3" t="s"><v>0</v></c><c r="B3" t="s"><v>1</v></c><c r="C3" t="inlineStr"><is><t>CAT-1</t></is></c><c r="D3"><v>1000</v></c><c r="E3"><v>1</v></c></row>`
	for _, tc := range []struct {
		name, sheet, sst string
		err              string // part of the refusal
	}{
		{"a second sheetData", `<worksheet xmlns="` + mainNS + `"><sheetData>` + header + visible + `</sheetData><sheetData>` + nsRow("", 3, "", nsProduct("HIDDEN-1")...) + `</sheetData></worksheet>`, "", "<worksheet> holds a second <sheetData>"},
		{"a row outside sheetData", `<worksheet xmlns="` + mainNS + `"><sheetPr>` + nsRow("", 3, "", nsProduct("HIDDEN-1")...) + `</sheetPr><sheetData>` + header + visible + `</sheetData></worksheet>`, "", "<row> stands outside"},
		{"sheetData inside sheetData", sheetOf(``, header+visible+`<sheetData>`+nsRow("", 3, "", nsProduct("HIDDEN-1")...)+`</sheetData>`), "", "<sheetData> stands inside <sheetData>"},
		{"a cell outside a row", sheetOf(``, header+visible+`<c r="A3" t="inlineStr"><is><t>HIDDEN-1</t></is></c>`), "", "<c> stands inside <sheetData>"},
		{"an unknown element among the cells", sheetOf(``, header+strings.Replace(visible, "</row>", `<extra><c r="F2"><v>1</v></c></extra></row>`, 1)), "", "<extra> stands inside <row>"},
		{"a cell's second value", sheetOf(``, header+strings.Replace(visible, `<c r="D2" t="inlineStr"><is><t>1000</t></is></c>`, `<c r="D2"><v>1</v><v>9</v></c>`, 1)), "", "<c> holds a second <v>"},
		{"a value inside a formula", sheetOf(``, header+strings.Replace(visible, `<c r="D2" t="inlineStr"><is><t>1000</t></is></c>`, `<c r="D2"><f>1+1<v>9</v></f><v>2</v></c>`, 1)), "", "<v> stands inside <f>, which holds only text"},
		{"inline text inside a run's properties", sheetOf(``, header+strings.Replace(visible, `<is><t>SHOWN-1</t></is>`, `<is><r><rPr><t>HIDDEN</t></rPr><t>SHOWN-1</t></r></is>`, 1)), "", "<t> stands outside"},
		{"two texts in a cell's inline text", sheetOf(``, header+strings.Replace(visible, `<is><t>SHOWN-1</t></is>`, `<is><t>SHOWN</t><t>-1</t></is>`, 1)), "", "<is> holds a second <t>"},
		{"a shared string inside a shared string", sheetOf(``, header+visible+sharedRow), shared(`<si><t>SKU-</t><si><t>HIDDEN</t></si></si><si><t>셔츠</t></si>`), "<si> stands inside <si>"},
		{"a text inside a text", sheetOf(``, header+visible+sharedRow), shared(`<si><t>SKU<t>HIDDEN</t></t></si><si><t>셔츠</t></si>`), "<t> stands inside <t>, which holds only text"},
		{"a shared text inside a run's properties", sheetOf(``, header+visible+sharedRow), shared(`<si><r><rPr><t>HIDDEN</t></rPr><t>SKU-3</t></r></si><si><t>셔츠</t></si>`), "<t> stands outside"},
		{"a run inside a run", sheetOf(``, header+visible+sharedRow), shared(`<si><r><t>SKU-3</t><r><t>HIDDEN</t></r></r></si><si><t>셔츠</t></si>`), "<r> stands inside <r>"},
		{"a row among the shared strings", sheetOf(``, header+visible+sharedRow), shared(`<si><t>SKU-3</t></si><si><t>셔츠</t></si>` + nsRow("", 4, "", nsProduct("HIDDEN-1")...)), "<row> stands inside <sst>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, nsBook(t, tc.sheet, tc.sst))
			fe := (*FileError)(nil)
			if !errors.As(err, &fe) || fe.Code != CodeDamaged || !strings.Contains(fe.Message, tc.err) {
				t.Fatalf("got %v, want the file refused as damaged: …%s…", err, tc.err)
			}
		})
	}
	// The same shapes where the schema puts them are read.
	s, err := parse(t, nsBook(t, sheetOf(``, header+visible+sharedRow), shared(`<si><r><rPr><b/></rPr><t>SKU-</t></r><r><t>3</t></r><rPh sb="0" eb="1"><t>HIDDEN</t></rPh><phoneticPr fontId="1"/></si><si><t>셔츠</t></si>`)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range s.Rows {
		got = append(got, r.Product.SellerSKU+":"+r.Product.Name)
	}
	if strings.Join(got, ",") != "SHOWN-1:셔츠,SKU-3:셔츠" {
		t.Errorf("read %q, want SHOWN-1:셔츠 and SKU-3:셔츠", got)
	}
}

// An mc:AlternateContent whose Choice requires a namespace this reader does
// not understand, inside the shared strings or the workbook's sheets, is
// refused as damaged like one among the rows: Excel, which understands x14,
// would show the Choice where this reader would read the Fallback.
func TestAlternateContentNotUnderstoodInDataRefused(t *testing.T) {
	header := nsRow("", 1, "", nsHeader...)
	sharedRow := `<row r="2"><c r="A2" t="s"><v>0</v></c><c r="B2" t="inlineStr"><is><t>셔츠</t></is></c><c r="C2" t="inlineStr"><is><t>CAT-1</t></is></c><c r="D2"><v>1000</v></c><c r="E2"><v>1</v></c></row>`
	alt := func(choice, fallback string) string {
		return `<mc:AlternateContent xmlns:mc="` + mcNS + `" xmlns:x14="` + x14NS + `"><mc:Choice Requires="x14">` + choice + `</mc:Choice><mc:Fallback>` + fallback + `</mc:Fallback></mc:AlternateContent>`
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"in a shared string", nsBook(t, sheetOf(``, header+sharedRow), `<sst xmlns="`+mainNS+`"><si>`+alt(`<t>CHOICE-1</t>`, `<t>FALLBACK-1</t>`)+`</si></sst>`)},
		{"among the shared strings", nsBook(t, sheetOf(``, header+sharedRow), `<sst xmlns="`+mainNS+`">`+alt(`<si><t>CHOICE-1</t></si>`, `<si><t>FALLBACK-1</t></si>`)+`</sst>`)},
		{"among the workbook's sheets", nsBookWith(t, sheetOf(``, header+nsRow("", 2, "", nsProduct("SHOWN-1")...)), "",
			alt(`<sheet name="상품" sheetId="1" r:id="rId2"/>`, `<sheet name="상품" sheetId="1" r:id="rId1"/>`), map[string]string{"xl/worksheets/sheet2.xml": sheetOf(``, header+nsRow("", 2, "", nsProduct("OTHER-1")...))})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.data)
			fe := (*FileError)(nil)
			if !errors.As(err, &fe) || fe.Code != CodeDamaged || !strings.Contains(fe.Message, `mc:Choice requires "x14"`) {
				t.Fatalf("got %v, want the file refused as damaged for its mc:Choice", err)
			}
		})
	}
}
