package excel

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

const (
	relNS    = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
	pkgRelNS = "http://schemas.openxmlformats.org/package/2006/relationships"
	mcNS     = "http://schemas.openxmlformats.org/markup-compatibility/2006"
	x14acNS  = "http://schemas.microsoft.com/office/spreadsheetml/2009/9/ac"
	x14NS    = "http://schemas.microsoft.com/office/spreadsheetml/2009/9/main"
	xrNS     = "http://schemas.microsoft.com/office/spreadsheetml/2014/revision"
	// foreignNS is no namespace Excel knows.
	foreignNS = "http://example.com/hidden-rows"
)

// nsRow writes row r of inline strings, its elements prefixed by p ("" or
// "x:"), with extra attributes on the row.
func nsRow(p string, r int, rowAttrs string, cells ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<%srow r="%d"%s>`, p, r, rowAttrs)
	for i, c := range cells {
		fmt.Fprintf(&b, `<%sc r="%s" t="inlineStr"><%sis><%st>%s</%st></%sis></%sc>`, p, cellName(i+1, r), p, p, c, p, p, p)
	}
	b.WriteString("</" + p + "row>")
	return b.String()
}

var nsHeader = []string{"seller_sku", "name", "category_code", "price", "stock"}

func nsProduct(sku string) []string { return []string{sku, "셔츠", "CAT-1", "1000", "1"} }

// nsBook is a workbook of one sheet (sheetXML), with the shared strings
// sst when not empty; extra parts and workbook sheets are added as given.
func nsBook(t testing.TB, sheetXML, sst string) []byte {
	t.Helper()
	return nsBookWith(t, sheetXML, sst, `<sheet name="상품" sheetId="1" r:id="rId1"/>`, nil)
}

func nsBookWith(t testing.TB, sheetXML, sst, sheets string, extra map[string]string) []byte {
	t.Helper()
	rels := `<Relationship Id="rId1" Type="` + relNS + `/worksheet" Target="worksheets/sheet1.xml"/>` +
		`<Relationship Id="rId2" Type="` + relNS + `/worksheet" Target="worksheets/sheet2.xml"/>`
	parts := map[string]string{
		"[Content_Types].xml": `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>` +
			`<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>` +
			`<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>` +
			`<Override PartName="/xl/worksheets/sheet2.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>` +
			`<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>`,
		"_rels/.rels":              `<Relationships xmlns="` + pkgRelNS + `"><Relationship Id="rId1" Type="` + relNS + `/officeDocument" Target="xl/workbook.xml"/></Relationships>`,
		"xl/workbook.xml":          `<workbook xmlns="` + mainNS + `" xmlns:r="` + relNS + `" xmlns:h="` + foreignNS + `" xmlns:mc="` + mcNS + `" mc:Ignorable="h"><sheets>` + sheets + `</sheets></workbook>`,
		"xl/worksheets/sheet1.xml": sheetXML,
	}
	if sst != "" {
		rels += `<Relationship Id="rId3" Type="` + relNS + `/sharedStrings" Target="sharedStrings.xml"/>`
		parts["xl/sharedStrings.xml"] = sst
	}
	parts["xl/_rels/workbook.xml.rels"] = `<Relationships xmlns="` + pkgRelNS + `">` + rels + `</Relationships>`
	for k, v := range extra {
		parts[k] = v
	}
	return rawXLSX(t, parts)
}

// sheetOf wraps rows in a worksheet whose root declares attrs.
func sheetOf(rootAttrs, data string) string {
	return `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\r\n" + `<worksheet xmlns="` + mainNS + `"` + rootAttrs + `><sheetData>` + data + `</sheetData></worksheet>`
}

// What a sheet holds outside SpreadsheetML's namespace is not a row. On the
// first three shapes a reader matching names in any namespace would read a
// product more than LibreOffice shows. LibreOffice
// Calc 7.4.7, given these files (converted to CSV), shows SHOWN-1 alone for
// the foreign row, the ignorable row, the ignorable cell, the no-namespace
// row, the Office-namespace row and the ProcessContent wrapper, and
// SHOWN-1 and FALLBACK-1 for the AlternateContent, where Excel, which
// understands x14, shows SHOWN-1 and CHOICE-1: an AlternateContent among
// the rows whose Choice requires a namespace this reader does not
// understand is refused as damaged, so that what Excel shows and what is
// registered cannot differ. Where LibreOffice skips a foreign element that
// stands among the cells, which Markup Compatibility calls an error and
// Excel reports as damage, the file is refused, naming it.
func TestOnlySpreadsheetMLMakesRows(t *testing.T) {
	header := nsRow("", 1, "", nsHeader...)
	visible := nsRow("", 2, "", nsProduct("SHOWN-1")...)
	for _, tc := range []struct {
		name  string
		sheet string
		skus  []string // the products read, in order; nil: refused
		err   string   // part of the refusal
	}{
		{"a row in a foreign namespace, where only rows may stand",
			sheetOf(` xmlns:h="`+foreignNS+`"`, header+visible+nsRow("h:", 3, "", nsProduct("HIDDEN-1")...)),
			nil, `<h:row> of the namespace "http://example.com/hidden-rows"`},
		{"a row in an ignorable namespace",
			sheetOf(` xmlns:h="`+foreignNS+`" xmlns:mc="`+mcNS+`" mc:Ignorable="h"`, header+visible+nsRow("h:", 3, "", nsProduct("HIDDEN-1")...)),
			[]string{"SHOWN-1"}, ""},
		{"AlternateContent: a Choice needing x14, and a Fallback",
			sheetOf(` xmlns:mc="`+mcNS+`" xmlns:x14="`+x14NS+`"`, header+visible+
				`<mc:AlternateContent><mc:Choice Requires="x14">`+nsRow("", 3, "", nsProduct("CHOICE-1")...)+`</mc:Choice>`+
				`<mc:Fallback>`+nsRow("", 3, "", nsProduct("FALLBACK-1")...)+`</mc:Fallback></mc:AlternateContent>`),
			nil, `mc:Choice requires "x14"`},
		{"AlternateContent: a Choice needing x14 after one taken",
			sheetOf(` xmlns:mc="`+mcNS+`" xmlns:x14="`+x14NS+`" xmlns:s="`+mainNS+`"`, header+visible+
				`<mc:AlternateContent><mc:Choice Requires="s">`+nsRow("", 3, "", nsProduct("CHOICE-1")...)+`</mc:Choice>`+
				`<mc:Choice Requires="x14">`+nsRow("", 3, "", nsProduct("CHOICE-2")...)+`</mc:Choice></mc:AlternateContent>`),
			nil, `mc:Choice requires "x14"`},
		{"AlternateContent in a cell: a Choice needing x14",
			sheetOf(` xmlns:mc="`+mcNS+`" xmlns:x14="`+x14NS+`"`, header+
				`<row r="2"><c r="A2" t="inlineStr"><is><t>SHOWN-1</t></is></c><c r="B2" t="inlineStr"><is><t>셔츠</t></is></c><c r="C2" t="inlineStr"><is><t>CAT-1</t></is></c><c r="D2"><mc:AlternateContent><mc:Choice Requires="x14"><v>9</v></mc:Choice><mc:Fallback><v>1000</v></mc:Fallback></mc:AlternateContent></c><c r="E2"><v>1</v></c></row>`),
			nil, `mc:Choice requires "x14"`},
		{"AlternateContent beside sheetData: not data, the Choice passed over",
			`<worksheet xmlns="` + mainNS + `" xmlns:mc="` + mcNS + `" xmlns:x14="` + x14NS + `"><sheetData>` + header + visible + `</sheetData>` +
				`<mc:AlternateContent><mc:Choice Requires="x14"><x14:sparklineGroups/></mc:Choice><mc:Fallback/></mc:AlternateContent></worksheet>`,
			[]string{"SHOWN-1"}, ""},
		{"AlternateContent: a Choice needing SpreadsheetML is taken, the rest not",
			sheetOf(` xmlns:mc="`+mcNS+`" xmlns:x14="`+x14NS+`" xmlns:s="`+mainNS+`"`, header+visible+
				`<mc:AlternateContent>`+
				`<mc:Choice Requires="s">`+nsRow("", 3, "", nsProduct("CHOICE-2")...)+`</mc:Choice>`+
				`<mc:Choice Requires="s">`+nsRow("", 3, "", nsProduct("CHOICE-3")...)+`</mc:Choice>`+
				`<mc:Fallback>`+nsRow("", 3, "", nsProduct("FALLBACK-1")...)+`</mc:Fallback></mc:AlternateContent>`),
			[]string{"SHOWN-1", "CHOICE-2"}, ""},
		{"AlternateContent: no Choice understood, no Fallback",
			sheetOf(` xmlns:mc="`+mcNS+`" xmlns:x14="`+x14NS+`"`, header+visible+
				`<mc:AlternateContent><mc:Choice Requires="x14">`+nsRow("", 3, "", nsProduct("CHOICE-1")...)+`</mc:Choice></mc:AlternateContent>`),
			nil, `mc:Choice requires "x14"`},
		{"AlternateContent in a Fallback, declaring its own prefix",
			sheetOf(` xmlns:mc="`+mcNS+`"`, header+visible+
				`<mc:AlternateContent><mc:Choice Requires="h" xmlns:h="`+foreignNS+`">`+nsRow("", 3, "", nsProduct("CHOICE-1")...)+`</mc:Choice>`+
				`<mc:Fallback><mc:AlternateContent><mc:Choice xmlns:y="`+mainNS+`" Requires="y">`+nsRow("y:", 3, "", nsProduct("INNER-1")...)+`</mc:Choice></mc:AlternateContent></mc:Fallback></mc:AlternateContent>`),
			nil, `mc:Choice requires "h"`},
		{"AlternateContent in a Fallback, every Choice understood",
			sheetOf(` xmlns:mc="`+mcNS+`"`, header+visible+
				`<mc:AlternateContent><mc:Fallback><mc:AlternateContent><mc:Choice xmlns:y="`+mainNS+`" Requires="y">`+nsRow("y:", 3, "", nsProduct("INNER-1")...)+`</mc:Choice></mc:AlternateContent></mc:Fallback></mc:AlternateContent>`),
			[]string{"SHOWN-1", "INNER-1"}, ""},
		{"text between AlternateContent's branches is not a value's",
			sheetOf(` xmlns:mc="`+mcNS+`" xmlns:s="`+mainNS+`"`, header+
				`<row r="2"><c r="A2" t="inlineStr"><is><t>SHOWN-1</t></is></c><c r="B2" t="inlineStr"><is><t>셔츠</t></is></c><c r="C2" t="inlineStr"><is><t>CAT-1</t></is></c><c r="D2"><v>1<mc:AlternateContent>x<mc:Choice Requires="s">0</mc:Choice>x</mc:AlternateContent>00</v></c><c r="E2"><v>1</v></c></row>`),
			[]string{"SHOWN-1"}, ""},
		{"a cell in an ignorable namespace, inside a row",
			sheetOf(` xmlns:h="`+foreignNS+`" xmlns:mc="`+mcNS+`" mc:Ignorable="h"`, header+
				`<row r="2"><h:c r="A2" t="inlineStr"><h:is><h:t>HIDDEN-1</h:t></h:is></h:c><c r="A2" t="inlineStr"><is><t>SHOWN-1</t></is></c><c r="B2" t="inlineStr"><is><t>셔츠</t></is></c><c r="C2" t="inlineStr"><is><t>CAT-1</t></is></c><c r="D2"><v>1000</v></c><c r="E2"><v>1</v></c></row>`),
			[]string{"SHOWN-1"}, ""},
		{"a value's text split by an ignorable element",
			sheetOf(` xmlns:h="`+foreignNS+`" xmlns:mc="`+mcNS+`" mc:Ignorable="h"`, header+
				`<row r="2"><c r="A2" t="inlineStr"><is><t>SHO<h:x>XX</h:x>WN-1</t></is></c><c r="B2" t="inlineStr"><is><t>셔츠</t></is></c><c r="C2" t="inlineStr"><is><t>CAT-1</t></is></c><c r="D2"><v>1<h:x>9</h:x>000</v></c><c r="E2"><v>1</v></c></row>`),
			[]string{"SHOWN-1"}, ""},
		{"ProcessContent: an ignorable wrapper is skipped, as LibreOffice does",
			sheetOf(` xmlns:h="`+foreignNS+`" xmlns:mc="`+mcNS+`" mc:Ignorable="h" mc:ProcessContent="h:wrap"`, header+visible+
				`<h:wrap>`+nsRow("", 3, "", nsProduct("WRAPPED-1")...)+`<h:other>`+nsRow("", 4, "", nsProduct("HIDDEN-1")...)+`</h:other></h:wrap>`),
			[]string{"SHOWN-1"}, ""},
		{"an element of an Office namespace Excel knows, among the rows",
			sheetOf(` xmlns:x14="`+x14NS+`"`, header+visible+nsRow("x14:", 3, "", nsProduct("HIDDEN-1")...)),
			[]string{"SHOWN-1"}, ""},
		{"a row in no namespace (the default unbound on it)",
			sheetOf(``, header+visible+`<row r="3" xmlns="">`+`<c r="A3" t="inlineStr"><is><t>HIDDEN-1</t></is></c></row>`),
			nil, "<row> of no namespace"},
		{"rows under a foreign element beside sheetData",
			sheetOf(` xmlns:h="`+foreignNS+`"`, header+visible) + "", // replaced below
			[]string{"SHOWN-1"}, ""},
		{"sheetData whose default namespace is another",
			`<worksheet xmlns="` + mainNS + `"><sheetData xmlns="` + foreignNS + `">` + header + visible + `</sheetData></worksheet>`,
			nil, "no header row"},
		{"SpreadsheetML under any prefix, and the default bound again inside",
			`<x:worksheet xmlns:x="` + mainNS + `"><x:sheetData>` + nsRow("x:", 1, "", nsHeader...) + `<row xmlns="` + mainNS + `" r="2"><c r="A2" t="inlineStr"><is><t>SHOWN-1</t></is></c><x:c r="B2" t="inlineStr"><x:is><x:t>셔츠</x:t></x:is></x:c><c r="C2" t="inlineStr"><is><t>CAT-1</t></is></c><c r="D2"><v>1000</v></c><c r="E2"><v>1</v></c></row></x:sheetData></x:worksheet>`,
			[]string{"SHOWN-1"}, ""},
		{"a worksheet in no namespace",
			`<worksheet><sheetData>` + header + visible + `</sheetData></worksheet>`,
			nil, "root element <worksheet> is in no namespace"},
		{"a prefix not declared",
			sheetOf(``, header+visible+nsRow("h:", 3, "", nsProduct("HIDDEN-1")...)),
			nil, "prefix h of <h:row> is not declared"},
		{"as Excel writes it: x14ac:dyDescent on every row, xr:uid on the root",
			sheetOf(` xmlns:r="`+relNS+`" xmlns:mc="`+mcNS+`" mc:Ignorable="x14ac xr" xmlns:x14ac="`+x14acNS+`" xmlns:xr="`+xrNS+`" xr:uid="{00000000-0001-0000-0000-000000000000}"`,
				nsRow("", 1, ` spans="1:5" x14ac:dyDescent="0.3"`, nsHeader...)+nsRow("", 2, ` spans="1:5" x14ac:dyDescent="0.3"`, nsProduct("SHOWN-1")...)+nsRow("", 3, ` spans="1:5" x14ac:dyDescent="0.3"`, nsProduct("SHOWN-2")...)),
			[]string{"SHOWN-1", "SHOWN-2"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sheet := tc.sheet
			if strings.HasPrefix(tc.name, "rows under a foreign element") {
				sheet = strings.Replace(sheet, `</sheetData>`, `</sheetData><h:sheetData>`+nsRow("", 3, "", nsProduct("HIDDEN-1")...)+`</h:sheetData>`, 1)
			}
			s, err := parse(t, nsBook(t, sheet, ""))
			if tc.skus == nil {
				fe := fileErrCode(t, err)
				if !strings.Contains(fe.Message, tc.err) {
					t.Fatalf("%s: %s, want …%s…", fe.Code, fe.Message, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range s.Rows {
				got = append(got, r.Product.SellerSKU)
				if !r.Valid() {
					t.Errorf("row %d: %v", r.Number, r.Problems)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.skus, ",") {
				t.Fatalf("products %q, want %q", got, tc.skus)
			}
		})
	}
}

// The shared strings, the workbook's sheets and the relationships are read
// the same way: an ignorable entry is not an entry (the indexes after it
// are those Excel counts), a sheet listed in another namespace is not a
// sheet, and r:id is the relationships namespace's id.
func TestOnlySpreadsheetMLMakesStringsAndSheets(t *testing.T) {
	sstHeader := `<si><t>seller_sku</t></si><si><t>name</t></si><si><t>category_code</t></si><si><t>price</t></si><si><t>stock</t></si>`
	sharedSheet := sheetOf(``, `<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c><c r="C1" t="s"><v>2</v></c><c r="D1" t="s"><v>3</v></c><c r="E1" t="s"><v>4</v></c></row>`+
		`<row r="2"><c r="A2" t="s"><v>5</v></c><c r="B2" t="inlineStr"><is><t>셔츠</t></is></c><c r="C2" t="inlineStr"><is><t>CAT-1</t></is></c><c r="D2"><v>1000</v></c><c r="E2"><v>1</v></c></row>`)
	ign := ` xmlns:h="` + foreignNS + `" xmlns:mc="` + mcNS + `" mc:Ignorable="h"`
	okSheet := sheetOf(``, nsRow("", 1, "", nsHeader...)+nsRow("", 2, "", nsProduct("SHOWN-1")...))
	for _, tc := range []struct {
		name          string
		sheet, sst    string
		sheets        string
		extra         map[string]string
		want, wantErr string
	}{
		{name: "an ignorable shared string is not counted", sheet: sharedSheet,
			sst: `<sst xmlns="` + mainNS + `"` + ign + `>` + sstHeader + `<h:si><t>HIDDEN-1</t></h:si><si><t>SHOWN-1</t></si></sst>`, want: "SHOWN-1"},
		{name: "an ignorable run or text is not the string's", sheet: sharedSheet,
			sst: `<sst xmlns="` + mainNS + `"` + ign + `>` + sstHeader + `<si><r><t>SHOWN</t></r><h:r><t>XX</t></h:r><r><t>-1<h:t>YY</h:t></t></r></si></sst>`, want: "SHOWN-1"},
		{name: "a shared string in a foreign namespace", sheet: sharedSheet,
			sst:     `<sst xmlns="` + mainNS + `" xmlns:h="` + foreignNS + `">` + sstHeader + `<h:si><t>HIDDEN-1</t></h:si><si><t>SHOWN-1</t></si></sst>`,
			wantErr: `part xl/sharedStrings.xml: line 1: the element <h:si>`},
		{name: "shared strings under a prefix", sheet: sharedSheet,
			sst: `<s:sst xmlns:s="` + mainNS + `"><s:si><s:t>seller_sku</s:t></s:si><s:si><s:t>name</s:t></s:si><s:si><s:t>category_code</s:t></s:si><s:si><s:t>price</s:t></s:si><s:si><s:t>stock</s:t></s:si><s:si><s:t>SHOWN-1</s:t></s:si></s:sst>`, want: "SHOWN-1"},
		{name: "a sheet listed in an ignorable namespace is not a sheet", sheet: okSheet,
			sheets: `<h:sheet name="숨김" sheetId="2" r:id="rId2"/><sheet name="상품" sheetId="1" r:id="rId1"/>`,
			extra:  map[string]string{"xl/worksheets/sheet2.xml": sheetOf(``, nsRow("", 1, "", nsHeader...)+nsRow("", 2, "", nsProduct("HIDDEN-1")...))},
			want:   "SHOWN-1"},
		{name: "a sheet's id in another namespace than relationships' names no part", sheet: okSheet,
			sheets: `<sheet name="숨김" sheetId="2" xmlns:o="` + foreignNS + `" o:id="rId2"/><sheet name="상품" sheetId="1" r:id="rId1"/>`,
			extra:  map[string]string{"xl/worksheets/sheet2.xml": sheetOf(``, nsRow("", 1, "", nsHeader...)+nsRow("", 2, "", nsProduct("HIDDEN-1")...))},
			want:   "SHOWN-1"},
		{name: "the strict namespaces", sheet: strings.ReplaceAll(okSheet, mainNS, uriMainStrict), want: "SHOWN-1",
			sheets: `<sheet name="상품" sheetId="1" xmlns:rs="` + uriRelStrict + `" rs:id="rId1"/>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sheets := tc.sheets
			if sheets == "" {
				sheets = `<sheet name="상품" sheetId="1" r:id="rId1"/>`
			}
			s, err := parse(t, nsBookWith(t, tc.sheet, tc.sst, sheets, tc.extra))
			if tc.wantErr != "" {
				fe := fileErrCode(t, err)
				if fe.Code != CodeDamaged || !strings.Contains(fe.Message, tc.wantErr) {
					t.Fatalf("%s: %s, want damaged: …%s…", fe.Code, fe.Message, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Rows) != 1 || s.Rows[0].Product.SellerSKU != tc.want || !s.Rows[0].Valid() {
				t.Fatalf("rows %+v, want one product %s", s.Rows, tc.want)
			}
		})
	}
}

// excelParts are a workbook's parts as Excel 365 writes them (the roots'
// declarations, mc:Ignorable, x14ac:dyDescent on every row, xr:uid, the
// workbook's AlternateContent around x15ac:absPath, extLst), the elements
// prefixed by p as the Open XML SDK writes them ("x:") or not ("").
func excelParts(p string) map[string]string {
	decl := `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\r\n"
	ns := `xmlns="` + mainNS + `"`
	if p != "" {
		ns = `xmlns:` + strings.TrimSuffix(p, ":") + `="` + mainNS + `"`
	}
	var rows strings.Builder
	strs := []string{}
	for r, cells := range [][]string{nsHeader, nsProduct("EXCEL-1"), nsProduct("EXCEL-2")} {
		fmt.Fprintf(&rows, `<%srow r="%d" spans="1:5" x14ac:dyDescent="0.3">`, p, r+1)
		for c, v := range cells {
			if v == "1000" || v == "1" {
				fmt.Fprintf(&rows, `<%sc r="%s"><%sv>%s</%sv></%sc>`, p, cellName(c+1, r+1), p, v, p, p)
				continue
			}
			fmt.Fprintf(&rows, `<%sc r="%s" t="s"><%sv>%d</%sv></%sc>`, p, cellName(c+1, r+1), p, len(strs), p, p)
			strs = append(strs, v)
		}
		rows.WriteString("</" + p + "row>")
	}
	var sst strings.Builder
	fmt.Fprintf(&sst, `%s<%ssst %s count="%d" uniqueCount="%d">`, decl, p, ns, len(strs), len(strs))
	for _, s := range strs {
		fmt.Fprintf(&sst, `<%ssi><%st>%s</%st></%ssi>`, p, p, s, p, p)
	}
	sst.WriteString("</" + p + "sst>")
	return map[string]string{
		"[Content_Types].xml": decl + `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/></Types>`,
		"_rels/.rels":         decl + `<Relationships xmlns="` + pkgRelNS + `"><Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/extended-properties" Target="docProps/app.xml"/><Relationship Id="rId1" Type="` + relNS + `/officeDocument" Target="xl/workbook.xml"/></Relationships>`,
		"xl/workbook.xml": decl + `<` + p + `workbook ` + ns + ` xmlns:r="` + relNS + `" xmlns:mc="` + mcNS + `" mc:Ignorable="x15 xr xr6 xr10 xr2" xmlns:x15="http://schemas.microsoft.com/office/spreadsheetml/2010/11/main" xmlns:xr="` + xrNS + `" xmlns:xr6="http://schemas.microsoft.com/office/spreadsheetml/2016/revision6" xmlns:xr10="http://schemas.microsoft.com/office/spreadsheetml/2016/revision10" xmlns:xr2="http://schemas.microsoft.com/office/spreadsheetml/2015/revision2">` +
			`<` + p + `fileVersion appName="xl" lastEdited="7" lowestEdited="7" rupBuild="27328"/><` + p + `workbookPr defaultThemeVersion="166925"/>` +
			`<mc:AlternateContent xmlns:mc="` + mcNS + `"><mc:Choice Requires="x15"><x15ac:absPath url="C:\Users\seller\" xmlns:x15ac="http://schemas.microsoft.com/office/spreadsheetml/2010/11/ac"/></mc:Choice></mc:AlternateContent>` +
			`<xr:revisionPtr revIDLastSave="0" documentId="8_{5C0E0C2B}" xr6:coauthVersionLast="47" xr6:coauthVersionMax="47" xr10:uidLastSave="{00000000-0000-0000-0000-000000000000}"/>` +
			`<` + p + `bookViews><` + p + `workbookView xWindow="-110" yWindow="-110" windowWidth="38620" windowHeight="21100" xr2:uid="{A1B2}"/></` + p + `bookViews>` +
			`<` + p + `sheets><` + p + `sheet name="상품" sheetId="1" r:id="rId1"/></` + p + `sheets><` + p + `calcPr calcId="191029"/>` +
			`<` + p + `extLst><` + p + `ext uri="{140A7094-0E35-4892-8432-C4D2E57EDEB5}" xmlns:x15="http://schemas.microsoft.com/office/spreadsheetml/2010/11/main"><x15:workbookPr chartTrackingRefBase="1"/></` + p + `ext></` + p + `extLst></` + p + `workbook>`,
		"xl/_rels/workbook.xml.rels": decl + `<Relationships xmlns="` + pkgRelNS + `"><Relationship Id="rId3" Type="` + relNS + `/styles" Target="styles.xml"/><Relationship Id="rId4" Type="` + relNS + `/sharedStrings" Target="sharedStrings.xml"/><Relationship Id="rId1" Type="` + relNS + `/worksheet" Target="worksheets/sheet1.xml"/></Relationships>`,
		"xl/styles.xml": decl + `<` + p + `styleSheet ` + ns + ` xmlns:mc="` + mcNS + `" mc:Ignorable="x14ac x16r2 xr" xmlns:x14ac="` + x14acNS + `" xmlns:x16r2="http://schemas.microsoft.com/office/spreadsheetml/2015/02/main" xmlns:xr="` + xrNS + `">` +
			`<` + p + `fonts count="1" x14ac:knownFonts="1"><` + p + `font><` + p + `sz val="11"/><` + p + `name val="맑은 고딕"/></` + p + `font></` + p + `fonts>` +
			`<` + p + `cellXfs count="1"><` + p + `xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/></` + p + `cellXfs></` + p + `styleSheet>`,
		"xl/sharedStrings.xml": sst.String(),
		"xl/worksheets/sheet1.xml": decl + `<` + p + `worksheet ` + ns + ` xmlns:r="` + relNS + `" xmlns:mc="` + mcNS + `" mc:Ignorable="x14ac xr xr2 xr3" xmlns:x14ac="` + x14acNS + `" xmlns:xr="` + xrNS + `" xmlns:xr2="http://schemas.microsoft.com/office/spreadsheetml/2015/revision2" xmlns:xr3="http://schemas.microsoft.com/office/spreadsheetml/2016/revision3" xr:uid="{5E4D3C2B-0000-0000-0000-000000000000}">` +
			`<` + p + `dimension ref="A1:E3"/><` + p + `sheetViews><` + p + `sheetView tabSelected="1" workbookViewId="0"/></` + p + `sheetViews><` + p + `sheetFormatPr defaultRowHeight="17" x14ac:dyDescent="0.3"/>` +
			`<` + p + `sheetData>` + rows.String() + `</` + p + `sheetData><` + p + `pageMargins left="0.7" right="0.7" top="0.75" bottom="0.75" header="0.3" footer="0.3"/></` + p + `worksheet>`,
		"docProps/app.xml": decl + `<Properties xmlns="http://schemas.openxmlformats.org/officeDocument/2006/extended-properties"><Application>Microsoft Excel</Application></Properties>`,
	}
}

// Files as Excel and the Open XML SDK write them are read whole: their
// Office namespaces, ignorable attributes and AlternateContent are not data
// and refuse nothing.
func TestExcelWrittenWorkbooks(t *testing.T) {
	for _, p := range []string{"", "x:"} {
		s, err := parse(t, rawXLSX(t, excelParts(p)))
		if err != nil {
			t.Fatalf("prefix %q: %v", p, err)
		}
		if s.SheetName != "상품" || len(s.Rows) != 2 || s.Rows[0].Product.SellerSKU != "EXCEL-1" || s.Rows[1].Product.SellerSKU != "EXCEL-2" || s.Valid() != 2 {
			t.Fatalf("prefix %q: %+v", p, s)
		}
	}
}

// FuzzMarkupCompatibility: whatever a part holds, the reader is handed only
// elements of SpreadsheetML's namespace, balanced, and text only inside
// them; a part the scanner accepts is read to its end or refused.
func FuzzMarkupCompatibility(f *testing.F) {
	for _, s := range []string{
		sheetOf(` xmlns:mc="`+mcNS+`" xmlns:h="`+foreignNS+`" mc:Ignorable="h"`, nsRow("", 1, "", "a")+nsRow("h:", 2, "", "b")+
			`<mc:AlternateContent><mc:Choice Requires="h">`+nsRow("", 3, "", "c")+`</mc:Choice><mc:Fallback>`+nsRow("", 3, "", "d")+`</mc:Fallback></mc:AlternateContent>`),
		`<x:sst xmlns:x="` + mainNS + `"><x:si><x:t>a</x:t></x:si><si xmlns="` + mainNS + `"><r><t>b</t></r></si></x:sst>`,
		`<worksheet xmlns="` + mainNS + `"><sheetData><row xmlns=""/></sheetData></worksheet>`,
		`<worksheet xmlns="` + mainNS + `" xmlns:mc="` + mcNS + `"><mc:AlternateContent><mc:Choice Requires="mc"><mc:AlternateContent><mc:Fallback><sheetData/></mc:Fallback></mc:AlternateContent></mc:Choice></mc:AlternateContent></worksheet>`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		s := newXMLScanner(t.Context(), bytes.NewReader(doc), &xmlBudget{limit: 100_000})
		depth := 0
		visit := func(tok *xmlToken) error {
			switch tok.kind {
			case xmlStart:
				if tok.space != nsMain {
					t.Fatalf("handed <%s> of %q", tok.local, tok.uri)
				}
				depth++
			case xmlEnd:
				if depth--; depth < 0 {
					t.Fatalf("an end without its start")
				}
			case xmlText:
				if depth == 0 {
					t.Fatalf("text outside every element handed")
				}
			}
			return nil
		}
		mce := mceFilter{s: s, data: nsMain, visit: visit}
		for {
			tok, err := s.next()
			if err != nil {
				if errors.Is(err, errXMLEnd) && depth != 0 {
					t.Fatalf("%d elements handed without their end", depth)
				}
				return
			}
			if mce.plain(tok) {
				err = visit(tok)
			} else {
				err = mce.token(tok)
			}
			if err != nil {
				return
			}
		}
	})
}
