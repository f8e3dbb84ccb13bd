package excel

import (
	"archive/zip"
	"bytes"
	"fmt"
	"html"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/bulkreg/bulkreg"
)

// rawXLSX zips parts written by hand, in name order, as other spreadsheet
// programs write them: the shapes excelize never writes.
func rawXLSX(t testing.TB, parts map[string]string) []byte {
	t.Helper()
	names := make([]string, 0, len(parts))
	for n := range parts {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(parts[n])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const mainNS = `http://schemas.openxmlformats.org/spreadsheetml/2006/main`

// writer says how one program lays out a workbook.
type writer struct {
	name        string
	inline      bool   // strings as inline strings, not shared ones
	rich        bool   // shared strings split into rich-text runs
	noRefs      bool   // rows and cells without r attributes
	prefix      string // element prefix, e.g. "x:"
	numsAsText  bool   // numbers stored as text
	absolute    bool   // relationship targets as absolute part names
	workbookAt  string // the workbook's part name
	preserve    bool   // xml:space="preserve" on every text
	declaration bool
}

// build writes rows (strings and ints) from A1 of one sheet the writer's way.
func (w writer) build(t testing.TB, rows [][]any) []byte {
	t.Helper()
	wbPart := w.workbookAt
	if wbPart == "" {
		wbPart = "xl/workbook.xml"
	}
	dir := wbPart[:strings.LastIndex(wbPart, "/")]
	target := func(rel string) string {
		if w.absolute {
			return "/" + dir + "/" + rel
		}
		return rel
	}
	p := w.prefix
	el := func(name string) string { return p + name }
	decl := ""
	if w.declaration {
		decl = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\r\n"
	}
	ns := `xmlns="` + mainNS + `"`
	if p != "" {
		ns = `xmlns:` + strings.TrimSuffix(p, ":") + `="` + mainNS + `"`
	}
	tOpen := "<" + el("t") + ">"
	if w.preserve {
		tOpen = "<" + el("t") + ` xml:space="preserve">`
	}
	var sst []string
	var sheet strings.Builder
	sheet.WriteString(decl + "<" + el("worksheet") + " " + ns + "><" + el("sheetData") + ">")
	for r, row := range rows {
		if w.noRefs {
			sheet.WriteString("<" + el("row") + ">")
		} else {
			sheet.WriteString("<" + el("row") + ` r="` + strconv.Itoa(r+1) + `">`)
		}
		for c, v := range row {
			ref := ""
			if !w.noRefs {
				ref = ` r="` + cellName(c+1, r+1) + `"`
			}
			s, isText := v.(string)
			if !isText && w.numsAsText {
				s, isText = fmt.Sprint(v), true
			}
			switch {
			case !isText:
				fmt.Fprintf(&sheet, "<%s%s><%s>%v</%s></%s>", el("c"), ref, el("v"), v, el("v"), el("c"))
			case s == "" && w.noRefs:
				fmt.Fprintf(&sheet, "<%s/>", el("c"))
			case s == "":
			case w.inline:
				fmt.Fprintf(&sheet, `<%s%s t="inlineStr"><%s>%s%s</%s></%s></%s>`, el("c"), ref, el("is"), tOpen, html.EscapeString(s), el("t"), el("is"), el("c"))
			default:
				fmt.Fprintf(&sheet, `<%s%s t="s"><%s>%d</%s></%s>`, el("c"), ref, el("v"), len(sst), el("v"), el("c"))
				sst = append(sst, s)
			}
		}
		sheet.WriteString("</" + el("row") + ">")
	}
	sheet.WriteString("</" + el("sheetData") + "></" + el("worksheet") + ">")
	var strs strings.Builder
	fmt.Fprintf(&strs, `%s<%s %s count="%d" uniqueCount="%d">`, decl, el("sst"), ns, len(sst), len(sst))
	for _, s := range sst {
		strs.WriteString("<" + el("si") + ">")
		if w.rich && len([]rune(s)) > 1 {
			// Two runs, the first bold, as a seller who formatted part of a cell leaves it.
			r := []rune(s)
			half := len(r) / 2
			fmt.Fprintf(&strs, "<%s><%s><%s/></%s>%s%s</%s></%s>", el("r"), el("rPr"), el("b"), el("rPr"), tOpen, html.EscapeString(string(r[:half])), el("t"), el("r"))
			fmt.Fprintf(&strs, "<%s>%s%s</%s></%s>", el("r"), tOpen, html.EscapeString(string(r[half:])), el("t"), el("r"))
		} else {
			strs.WriteString(tOpen + html.EscapeString(s) + "</" + el("t") + ">")
		}
		strs.WriteString("</" + el("si") + ">")
	}
	strs.WriteString("</" + el("sst") + ">")
	relNS := `http://schemas.openxmlformats.org/officeDocument/2006/relationships`
	parts := map[string]string{
		"[Content_Types].xml": decl + `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/></Types>`,
		"_rels/.rels":         decl + `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="` + relNS + `/officeDocument" Target="` + wbPart + `"/></Relationships>`,
		wbPart:                decl + "<" + el("workbook") + " " + ns + ` xmlns:r="` + relNS + `"><` + el("sheets") + "><" + el("sheet") + ` name="상품" sheetId="1" r:id="rId1"/></` + el("sheets") + "></" + el("workbook") + ">",
		dir + "/_rels/" + wbPart[len(dir)+1:] + ".rels": decl + `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId1" Type="` + relNS + `/worksheet" Target="` + target("worksheets/sheet1.xml") + `"/>` +
			`<Relationship Id="rId2" Type="` + relNS + `/sharedStrings" Target="` + target("sharedStrings.xml") + `"/></Relationships>`,
		dir + "/worksheets/sheet1.xml": sheet.String(),
		dir + "/sharedStrings.xml":     strs.String(),
	}
	return rawXLSX(t, parts)
}

// Workbooks as LibreOffice, Google Sheets, Numbers, openpyxl, streaming
// writers and .NET libraries lay them out all read the same.
func TestEveryWriterReadsTheSame(t *testing.T) {
	rows := [][]any{
		{"Seller SKU", "상품명", "Category Code", "Price", "Stock", "Brand", "Image URL", "Description", "Shipping Fee"},
		{"W-1", "린넨 셔츠 <화이트> & 블루", "CAT-101", 12000, 5, "", "https://img.example.com/w1.jpg", "  앞뒤 공백  ", 0},
		{"W-2", "데님 팬츠", "50000803", 29900, 0, "모던핏", "", "", 3000},
	}
	want := []bulkreg.Product{
		{SellerSKU: "W-1", Name: "린넨 셔츠 <화이트> & 블루", CategoryCode: "CAT-101", Price: 12000, Stock: 5, ImageURL: "https://img.example.com/w1.jpg", Description: "앞뒤 공백"},
		{SellerSKU: "W-2", Name: "데님 팬츠", CategoryCode: "50000803", Price: 29900, Stock: 0, Brand: "모던핏", ShippingFee: 3000},
	}
	for _, w := range []writer{
		{name: "Excel (shared strings, declarations)", declaration: true},
		{name: "LibreOffice (preserved spaces)", preserve: true, declaration: true},
		{name: "Google Sheets export (rich text runs)", rich: true},
		{name: "Numbers (rich runs, preserved spaces)", rich: true, preserve: true},
		{name: "openpyxl (absolute targets)", absolute: true},
		{name: "streaming writer (inline strings, no r attributes)", inline: true, noRefs: true},
		{name: ".NET OpenXML SDK (prefixed elements)", prefix: "x:"},
		{name: "numbers stored as text", numsAsText: true, inline: true},
		{name: "workbook in another folder", workbookAt: "book/main.xml", absolute: true},
	} {
		t.Run(w.name, func(t *testing.T) {
			s := mustParse(t, w.build(t, rows))
			if s.SheetName != "상품" || s.HeaderRow != 1 || len(s.Rows) != 2 || s.Valid() != 2 {
				t.Fatalf("sheet %q header %d rows %d valid %d: %v %v", s.SheetName, s.HeaderRow, len(s.Rows), s.Valid(), problems(s), warnings(s))
			}
			for i, r := range s.Rows {
				if r.Product != want[i] || r.Number != i+2 {
					t.Errorf("row %d: %+v\nwant %+v", r.Number, r.Product, want[i])
				}
			}
		})
	}
}

// Cell shapes other programs write, each read as what the seller sees.
func TestCellShapes(t *testing.T) {
	header := `<row r="1"><c r="A1" t="inlineStr"><is><t>sku</t></is></c><c r="B1" t="inlineStr"><is><t>name</t></is></c>` +
		`<c r="C1" t="inlineStr"><is><t>category</t></is></c><c r="D1" t="inlineStr"><is><t>price</t></is></c><c r="E1" t="inlineStr"><is><t>stock</t></is></c>` +
		`<c r="F1" t="inlineStr"><is><t>description</t></is></c></row>`
	sheet := func(rows string) string {
		return `<worksheet xmlns="` + mainNS + `"><sheetData>` + header + rows + `</sheetData></worksheet>`
	}
	styles := `<styleSheet xmlns="` + mainNS + `"><numFmts count="1"><numFmt numFmtId="164" formatCode="yyyy\-mm\-dd"/></numFmts>` +
		`<cellStyleXfs count="2"><xf numFmtId="0"/><xf numFmtId="14"/></cellStyleXfs>` +
		`<cellXfs count="3"><xf numFmtId="0"/><xf numFmtId="164"/><xf numFmtId="3"/></cellXfs></styleSheet>`
	sst := `<sst xmlns="` + mainNS + `"><si><r><t>판매</t></r><r><rPr><b/></rPr><t xml:space="preserve">가 </t></r><rPh sb="0" eb="2"><t>はんばい</t></rPh><phoneticPr fontId="1"/></si>` +
		`<si><t>첫 줄_x000D_` + "\n" + `둘째 줄 _x005F_x0041_ _xZZZZ_</t></si></sst>`
	parts := func(rows string) map[string]string {
		return map[string]string{
			"[Content_Types].xml":        `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`,
			"xl/workbook.xml":            `<workbook xmlns="` + mainNS + `" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>`,
			"xl/_rels/workbook.xml.rels": `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/><Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>`,
			"xl/styles.xml":              styles,
			"xl/sharedStrings.xml":       sst,
			"xl/worksheets/sheet1.xml":   sheet(rows),
		}
	}
	// Row 2: a rich-text name with a phonetic guide (not part of the text);
	// a price with the thousands format (a number, not a date); an empty cell
	// styled as a date (nothing) in F. Row 3: a date-formatted number in
	// stock, a formula's text result and Excel's escapes for characters XML
	// cannot hold. Row 4: CDATA text and character references.
	rows := `<row r="2"><c r="A2" t="inlineStr"><is><t>S-1</t></is></c><c r="B2" t="s"><v>0</v></c><c r="C2" t="str"><f>"CAT-"&amp;"1"</f><v>CAT-1</v></c><c r="D2" s="2"><v>12000</v></c><c r="E2"><v>3</v></c><c r="F2" s="1"/></row>` +
		`<row r="3"><c r="A3" t="inlineStr"><is><t>S-2</t></is></c><c r="B3" t="inlineStr"><is><t>이름</t></is></c><c r="C3"><v>50000803</v></c><c r="D3"><v>100</v></c><c r="E3" s="1"><v>45292</v></c><c r="F3" t="s"><v>1</v></c></row>` +
		`<row r="4"><c r="A4" t="inlineStr"><is><t><![CDATA[S-3]]></t></is></c><c r="B4" t="inlineStr"><is><t>&#xC0C1;&#54408;</t></is></c><c r="C4" t="inlineStr"><is><t>1</t></is></c><c r="D4" t="inlineStr"><is><t>1,000</t></is></c><c r="E4" t="inlineStr"><is><t>0</t></is></c></row>`
	s := mustParse(t, rawXLSX(t, parts(rows)))
	checkSheet(t, s, sheetWant{header: 1, rows: []int{2, 3, 4}, valid: 2, problems: []string{
		`E3: stock holds a date (Excel shows 2024-01-01 and stores the number 45292); format the column as text and type the value again`,
	}})
	if p := s.Rows[0].Product; p.Name != "판매가" || p.CategoryCode != "CAT-1" || p.Price != 12000 {
		t.Errorf("row 2 = %+v", p)
	}
	if got := s.Rows[1].Cells[5]; got != "첫 줄\r\n둘째 줄 _x0041_ _xZZZZ_" {
		t.Errorf("F3 = %q, want Excel's escapes decoded", got)
	}
	if p := s.Rows[2].Product; p.SellerSKU != "S-3" || p.Name != "상품" || p.Price != 1000 {
		t.Errorf("row 4 = %+v", p)
	}
}

// Damage the reader refuses, each naming what is wrong.
func TestSheetDamage(t *testing.T) {
	base := book(t, [][]any{koreanHeader, validRow(1), validRow(2)}, nil)
	sheet := string(zipPart(t, base, "xl/worksheets/sheet1.xml"))
	for _, tc := range []struct {
		name, from, to, message string
	}{
		{"rows out of order", `<row r="3"`, `<row r="1"`, `row 1 comes after row 2`},
		{"cell outside its row", `<c r="A3"`, `<c r="A4"`, `cell A4 is inside row 3`},
		{"cell twice", `<c r="B3"`, `<c r="A3"`, `cell A3 is given twice`},
		{"cells out of order", `<c r="A3"`, `<c r="Z3"`, `cell B3 comes after Z3`},
		{"bad cell name", `<c r="B3"`, `<c r="3B"`, `row 3: "3B" is not a cell name`},
		{"shared text out of range", `<c r="A3" t="s"><v>`, `<c r="A3" t="s"><v>999`, `cell A3 points at shared text`},
		{"row past the last", `<row r="3"`, `<row r="1048577"`, `past the last row`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(sheet, tc.from) {
				t.Fatalf("the sheet has no %s", tc.from)
			}
			data := replacePart(t, base, "xl/worksheets/sheet1.xml", []byte(strings.Replace(sheet, tc.from, tc.to, 1)))
			_, err := parse(t, data)
			if fe := fileErrCode(t, err); fe.Code != CodeDamaged || !strings.Contains(fe.Message, tc.message) {
				t.Errorf("%s: %s, want damaged naming %q", fe.Code, fe.Message, tc.message)
			}
		})
	}
}

// A zip that is another program's document, not an .xlsx, is named with how
// to save the list, not called a damaged workbook; a zip of nothing known
// still is.
func TestOtherZipDocuments(t *testing.T) {
	for _, tc := range []struct {
		name    string
		parts   map[string]string
		code    string
		message string
	}{
		{"LibreOffice .ods", map[string]string{"mimetype": "application/vnd.oasis.opendocument.spreadsheet", "content.xml": "<office:document-content/>", "META-INF/manifest.xml": "<manifest:manifest/>"},
			CodeNotXLSX, `the file is an OpenDocument file (.ods, LibreOffice's own format), not an Excel workbook; in LibreOffice choose File > Save As, "Excel 2007-365 (.xlsx)", or save it as CSV`},
		{"Numbers", map[string]string{"Index/Document.iwa": "\x00", "Metadata/Properties.plist": "bplist00"},
			CodeNotXLSX, `the file is an Apple Numbers document, not an Excel workbook; in Numbers choose File > Export To > Excel (.xlsx), or CSV`},
		{"Word", map[string]string{"[Content_Types].xml": "<Types/>", "word/document.xml": "<w:document/>"},
			CodeNotXLSX, `the file is a Word or PowerPoint document, not a spreadsheet; put the products in the template (.xlsx), one a row, or save them as CSV`},
		{"a zip of a text file", map[string]string{"notes.txt": "hello"}, CodeNotXLSX, `the file is a ZIP archive, not an Excel workbook; unpack it and upload the .xlsx inside, or save the list from Excel as "Excel Workbook (.xlsx)"`},
		{"content.xml alone", map[string]string{"content.xml": "<x/>"}, CodeNotXLSX, `the file is a ZIP archive, not an Excel workbook; unpack it and upload the .xlsx inside, or save the list from Excel as "Excel Workbook (.xlsx)"`},
		{"an Office package without a workbook", map[string]string{"[Content_Types].xml": "<Types/>"},
			CodeDamaged, `the file is not a complete Excel workbook (the workbook part is missing); save it again from Excel as .xlsx`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parse(t, rawXLSX(t, tc.parts))
			if s != nil {
				t.Fatalf("read %d rows from a file that is not a workbook", len(s.Rows))
			}
			if fe := fileErrCode(t, err); fe.Code != tc.code || fe.Message != tc.message {
				t.Errorf("got  %s: %s\nwant %s: %s", fe.Code, fe.Message, tc.code, tc.message)
			}
		})
	}
}
