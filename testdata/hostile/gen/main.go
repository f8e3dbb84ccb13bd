// Command gen writes the hostile corpus under testdata/hostile: uploads of a
// few kilobytes built to cost the upload service as much as their shape
// allows, one of each kind found or thought of, .xlsx and text.
// Every upload of at most 10 MiB must stay under the cost ceiling (1 s of
// CPU, 64 MiB of RSS, 8 MiB in Redis, 1 MiB of answer); excel's and
// producer/upload's hostile tests and `go run ./bench/hostile` read them.
//
//	go run ./testdata/hostile/gen            # rewrites testdata/hostile/*
//	go run ./testdata/hostile/gen -out DIR
//
// An upload larger than 256 KiB is stored gzip-compressed (NAME.gz):
// the upload is the decompressed bytes (see Load). The output is
// deterministic: running the generator again leaves git clean.
package main

import (
	"archive/zip"
	"bytes"
	"cmp"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/bulkreg/bulkreg/excel"
)

func main() {
	out := flag.String("out", filepath.Join("testdata", "hostile"), "directory to write the corpus into")
	only := flag.String("only", "", "write only the files whose name holds this, and no INDEX.tsv")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	var index strings.Builder
	index.WriteString("# hostile corpus, written by go run ./testdata/hostile/gen: name, upload bytes, what it is\n")
	for _, h := range corpus() {
		if !strings.Contains(h.name, *only) {
			continue
		}
		data := h.make()
		name := h.name
		stored := data
		if len(data) > 256<<10 {
			stored = gz(data)
			name += ".gz"
		}
		if err := os.WriteFile(filepath.Join(*out, name), stored, 0o644); err != nil {
			log.Fatal(err)
		}
		fmt.Fprintf(&index, "%s\t%d\t%s\n", h.name, len(data), h.what)
		fmt.Printf("%-34s %9d bytes (%8d stored)  %s\n", h.name, len(data), len(stored), h.what)
	}
	if *only != "" {
		return
	}
	if err := os.WriteFile(filepath.Join(*out, "INDEX.tsv"), []byte(index.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}

type hostile struct {
	name, what string
	make       func() []byte
}

func corpus() []hostile {
	return []hostile{
		// Merges, tables and attributes in numbers no workbook needs.
		{"merges-10000.xlsx", "500 valid rows and 10,000 x <mergeCell ref=\"A2:B501\"/> (issue 27: a 1.12 GB answer)", func() []byte {
			return book(bookOpts{rows: validRows(500), merges: repeat(`<mergeCell ref="A2:B501"/>`, 10000)})
		}},
		{"merges-1000.xlsx", "500 valid rows and 1,000 x <mergeCell ref=\"A2:B501\"/> (issue 27: a 111.8 MB answer)", func() []byte {
			return book(bookOpts{rows: validRows(500), merges: repeat(`<mergeCell ref="A2:B501"/>`, 1000)})
		}},
		{"merges-distinct.xlsx", "500 valid rows and 10,000 distinct merges across known columns, each covering rows", func() []byte {
			var m strings.Builder
			for i := range 10000 {
				top := 2 + i%500
				fmt.Fprintf(&m, `<mergeCell ref="%s%d:%s%d"/>`, col(1+i%8), top, col(2+i%8), min(501, top+i/500))
			}
			return book(bookOpts{rows: validRows(500), merges: m.String()})
		}},
		{"merges-vertical.xlsx", "500 valid rows and 10,000 overlapping vertical merges of the brand column", func() []byte {
			var m strings.Builder
			for i := range 10000 {
				fmt.Fprintf(&m, `<mergeCell ref="F%d:F501"/>`, 2+i%500)
			}
			return book(bookOpts{rows: validRows(500), merges: m.String()})
		}},
		{"sst-13m-empty.xlsx", "13,000,000 empty <si/> in the shared strings (issue 27: 683 MB RSS)", func() []byte {
			return book(bookOpts{rows: validRows(5), sst: "<sst " + ns + ">" + repeat("<si/>", 13_000_000) + "</sst>"})
		}},
		{"styles-13m-xf.xlsx", "13,000,000 <xf/> in the styles' cellXfs (issue 27: 500 MB RSS)", func() []byte {
			return book(bookOpts{rows: validRows(5), styles: "<styleSheet " + ns + "><cellXfs>" + repeat("<xf/>", 13_000_000) + "</cellXfs></styleSheet>"})
		}},
		{"docprops-149k-attrs.xlsx", "one element with 149,000 distinct attributes in docProps/app.xml (issue 27: 39 s of CPU)", func() []byte {
			return book(bookOpts{rows: validRows(5), extra: map[string]string{"docProps/app.xml": manyAttrs("Properties", 149000)}})
		}},
		{"workbook-149k-attrs.xlsx", "the same element as the workbook's root, a part bulkreg reads", func() []byte {
			return book(bookOpts{rows: validRows(5), workbookAttrs: attrs(149000)})
		}},
		// Budgets of entries, empty or not.
		{"rels-1m.xlsx", "1,000,000 relationships in the workbook's relationships", func() []byte {
			return book(bookOpts{rows: validRows(5), extraRels: repeat(`<Relationship Id="x" Type="t" Target="a.xml"/>`, 1_000_000)})
		}},
		{"sheets-1m.xlsx", "1,000,000 <sheet> entries in the workbook", func() []byte {
			return book(bookOpts{rows: validRows(5), extraSheets: repeat(`<sheet name="x" sheetId="2" r:id="rIdX"/>`, 1_000_000)})
		}},
		{"numfmts-200k.xlsx", "200,000 custom number formats with 200-character codes", func() []byte {
			code := strings.Repeat("0", 200)
			var b strings.Builder
			b.WriteString("<styleSheet " + ns + "><numFmts>")
			for i := range 200_000 {
				fmt.Fprintf(&b, `<numFmt numFmtId="%d" formatCode="%s"/>`, 200+i, code)
			}
			b.WriteString("</numFmts><cellXfs><xf numFmtId=\"0\"/></cellXfs></styleSheet>")
			return book(bookOpts{rows: validRows(5), styles: b.String()})
		}},
		{"sheet-13m-empty-elements.xlsx", "13,000,000 empty elements in the worksheet after its rows", func() []byte {
			return book(bookOpts{rows: validRows(5), afterData: repeat("<x/>", 13_000_000)})
		}},
		{"sheet-1m-empty-rows.xlsx", "1,048,000 empty <row/> elements after 5 rows", func() []byte {
			return book(bookOpts{rows: validRows(5), tailRows: repeat("<row/>", 1_048_000)})
		}},
		{"sheet-wide-rows.xlsx", "900 rows of 16,384 empty cells in unknown columns", func() []byte {
			var b strings.Builder
			for r := 7; r < 7+900; r++ {
				fmt.Fprintf(&b, `<row r="%d">`, r)
				b.WriteString(repeat("<c/>", 16384))
				b.WriteString("</row>")
			}
			return book(bookOpts{rows: validRows(5), tailRows: b.String()})
		}},
		{"sheet-many-attrs-cells.xlsx", "30,000 cells with 250 attributes each", func() []byte {
			a := attrs(250)
			var b strings.Builder
			for r := 7; r < 7+30; r++ {
				fmt.Fprintf(&b, `<row r="%d">`, r)
				for range 1000 {
					b.WriteString("<c " + a + "/>")
				}
				b.WriteString("</row>")
			}
			return book(bookOpts{rows: validRows(5), tailRows: b.String()})
		}},
		{"sheet-deep-nesting.xlsx", "elements nested 100,000 deep in the worksheet", func() []byte {
			return book(bookOpts{rows: validRows(5), afterData: repeat("<x>", 100000) + repeat("</x>", 100000)})
		}},
		{"sheet-comments.xlsx", "9,000,000 empty comments in the worksheet", func() []byte {
			return book(bookOpts{rows: validRows(5), afterData: repeat("<!---->", 9_000_000)})
		}},
		{"sheet-entities.xlsx", "a cell of 12,000,000 &amp; entities", func() []byte {
			return book(bookOpts{rows: validRows(5), tailRows: `<row r="7"><c r="B7" t="inlineStr"><is><t>` + repeat("&amp;", 12_000_000) + `</t></is></c></row>`})
		}},
		{"sheet-long-cell.xlsx", "one inline cell of 60 MiB of text", func() []byte {
			return book(bookOpts{rows: validRows(5), tailRows: `<row r="7"><c r="A7" t="inlineStr"><is><t>` + strings.Repeat("a", 60<<20) + `</t></is></c></row>`})
		}},
		{"sheet-long-formula.xlsx", "490 cells each with a 100 KiB formula and no saved result", func() []byte {
			f := strings.Repeat("A1+", 100<<10/3)
			var b strings.Builder
			for r := 7; r < 7+490; r++ {
				fmt.Fprintf(&b, `<row r="%d"><c r="A%d"><f>%s1</f></c></row>`, r, r, f)
			}
			return book(bookOpts{rows: validRows(5), tailRows: b.String()})
		}},
		{"sheet-huge-numbers.xlsx", "500 rows whose numbers are 1e308, 400 digits, -0, NaN, Infinity and 0x1p-1074", func() []byte {
			nums := []string{"1e308", strings.Repeat("9", 400), "-0", "NaN", "Infinity", "0x1p-1074", "1E+400", "4.9406564584124654e-324"}
			var b strings.Builder
			for r := 2; r < 502; r++ {
				n := nums[r%len(nums)]
				fmt.Fprintf(&b, `<row r="%d"><c r="A%d" t="inlineStr"><is><t>N-%d</t></is></c><c r="B%d" t="inlineStr"><is><t>n</t></is></c><c r="C%d"><v>%s</v></c><c r="D%d"><v>%s</v></c><c r="E%d"><v>%s</v></c></row>`,
					r, r, r, r, r, n, r, n, r, n)
			}
			return book(bookOpts{rawRows: b.String()})
		}},
		{"sheet-every-cell-bad.xlsx", "500 rows with every one of the 9 fields invalid: 4,500 problems", func() []byte {
			return book(bookOpts{rows: badRows(500)})
		}},
		{"sheet-hidden-500.xlsx", "500 valid rows, every one hidden: 500 warnings", func() []byte {
			return book(bookOpts{rows: validRows(500), hidden: true})
		}},
		{"sst-long-strings.xlsx", "900 shared strings of 64 KiB each (56 MiB of text)", func() []byte {
			return book(bookOpts{rows: validRows(5), sst: "<sst " + ns + ">" + repeat("<si><t>"+strings.Repeat("가", 64<<10/3)+"</t></si>", 900) + "</sst>"})
		}},
		{"sst-expansion.xlsx", "4,500 cells all showing one 1 MiB shared string", func() []byte {
			var b strings.Builder
			for r := 2; r < 502; r++ {
				fmt.Fprintf(&b, `<row r="%d">`, r)
				for c := 1; c <= 9; c++ {
					fmt.Fprintf(&b, `<c r="%s%d" t="s"><v>0</v></c>`, col(c), r)
				}
				b.WriteString("</row>")
			}
			return book(bookOpts{rawRows: b.String(), sst: "<sst " + ns + "><si><t>" + strings.Repeat("a", 1<<20) + "</t></si></sst>"})
		}},
		{"xml-utf16-part.xlsx", "the worksheet written in UTF-16 with an encoding=\"UTF-16\" declaration", func() []byte {
			return book(bookOpts{rows: validRows(5), sheetUTF16: true})
		}},
		// Zip tricks.
		{"zip-9999-entries.xlsx", "a workbook with 9,994 more empty entries (just under the cap of parts)", func() []byte {
			extra := map[string]string{}
			for i := range 9994 {
				extra[fmt.Sprintf("customXml/item%d.xml", i)] = ""
			}
			return book(bookOpts{rows: validRows(5), extra: extra})
		}},
		{"zip-20000-entries.xlsx", "a zip directory of 20,000 entries", func() []byte {
			extra := map[string]string{}
			for i := range 20000 {
				extra[fmt.Sprintf("e%d", i)] = ""
			}
			return book(bookOpts{rows: validRows(5), extra: extra})
		}},
		{"zip-bomb-docprops.xlsx", "a deflate bomb in docProps/core.xml (a part bulkreg does not need) whose sizes say 4 KiB", func() []byte {
			return lyingBomb(book(bookOpts{rows: validRows(5), extra: map[string]string{"docProps/core.xml": "<cp:coreProperties xmlns:cp=\"c\">" + strings.Repeat(" ", 200<<20) + "</cp:coreProperties>"}}), "docProps/core.xml")
		}},
		{"zip-bomb-sheet-lying.xlsx", "the same bomb in the worksheet, its sizes saying 4 KiB", func() []byte {
			return lyingBomb(book(bookOpts{rows: validRows(5), tailRows: strings.Repeat(" ", 200<<20)}), "xl/worksheets/sheet1.xml")
		}},
		{"zip-declared-huge.xlsx", "a small docProps part whose sizes say 4 GiB", func() []byte {
			return declareSize(book(bookOpts{rows: validRows(5), extra: map[string]string{"docProps/app.xml": "<Properties/>"}}), "docProps/app.xml", 1<<32-1)
		}},
		{"zip-duplicate-names.xlsx", "two entries named xl/worksheets/sheet1.xml, one with 5 rows, one with 500", func() []byte {
			return book(bookOpts{rows: validRows(5), duplicateSheet: sheetXML(bookOpts{rows: validRows(500)})})
		}},
		{"zip-stored-60mib.xlsx", "a worksheet of 60 MiB of <row/>, deflated: near the most a sheet may unpack to, and rows past the last a sheet has", func() []byte {
			var b strings.Builder
			for b.Len() < 60<<20 {
				b.WriteString("<row/>")
			}
			return book(bookOpts{rows: validRows(5), tailRows: b.String()})
		}},
		// Text uploads.
		{"csv-every-cell-bad.csv", "500 rows with every one of the 9 fields invalid: 4,500 problems", func() []byte {
			return csv(badRows(500), ',')
		}},
		{"csv-10mib-line.csv", "one line of 10 MiB: a header, then 5 million empty fields", func() []byte {
			b := csv(nil, ',')
			return append(b, bytes.Repeat([]byte(","), 10<<20-len(b))...)
		}},
		{"csv-10mib-cell.csv", "a header and one quoted cell of 10 MiB", func() []byte {
			b := csv(nil, ',')
			b = append(b, '"')
			b = append(b, bytes.Repeat([]byte("가"), (10<<20-300)/3)...)
			return append(b, "\",n,1,1,1\r\n"...)
		}},
		{"csv-quote-never-closed.csv", "a header, then a quote that is never closed and 10 MiB", func() []byte {
			b := csv(nil, ',')
			b = append(b, '"')
			return append(b, bytes.Repeat([]byte("a,\r\n"), (10<<20-300)/4)...)
		}},
		{"csv-5m-lines.csv", "a header and 5,000,000 line ends", func() []byte {
			b := csv(nil, ',')
			return append(b, bytes.Repeat([]byte("\n"), 10<<20-len(b))...)
		}},
		{"csv-2m-tiny-rows.csv", "a header and 2,000,000 rows of one character", func() []byte {
			return append(csv(nil, ','), bytes.Repeat([]byte("a\n"), 2_000_000)...)
		}},
		{"csv-wide.csv", "a header and 500 rows of 2,000 columns", func() []byte {
			b := csv(nil, ',')
			row := strings.Repeat("x,", 2000) + "\n"
			return append(b, strings.Repeat(row, 500)...)
		}},
		{"csv-no-header-10mib.csv", "10 MiB of separators and quotes with no header row", func() []byte {
			return bytes.Repeat([]byte("\t;,\"\"\r\n"), 10<<20/7)
		}},
		{"csv-cp949-10mib.csv", "10 MiB of CP949 text (Korean Excel's CSV)", func() []byte {
			b := csv(nil, ',')
			line := []byte("\xb0\xa1,\xb0\xa1,1,1,1\r\n") // 가,가,1,1,1
			return append(b, bytes.Repeat(line, (10<<20-300)/len(line))...)
		}},
		{"tsv-utf16-surrogates.txt", "UTF-16LE tab text: a header and 10 MiB of surrogate pairs in one cell", func() []byte {
			var u []uint16
			u = append(u, 0xFEFF)
			u = append(u, utf16.Encode([]rune(strings.Join(excel.TemplateHeader(), "\t")+"\r\nA\t"))...)
			for range (10<<20 - 1000) / 4 {
				u = append(u, 0xD83D, 0xDE00) // 😀
			}
			u = append(u, utf16.Encode([]rune("\t1\t1\t1\t1\r\n"))...)
			b := make([]byte, 2*len(u))
			for i, v := range u {
				binary.LittleEndian.PutUint16(b[2*i:], v)
			}
			return b
		}},
		{"tsv-utf16be-lone-surrogate.txt", "UTF-16BE text that ends in half a surrogate pair after 10 MiB", func() []byte {
			b := []byte{0xFE, 0xFF}
			for range (10<<20 - 100) / 2 {
				b = append(b, 0, 'a')
			}
			return append(b, 0xD8, 0x3D)
		}},
		{"csv-bom-then-binary.csv", "a UTF-8 byte-order mark followed by 1 MiB that is not UTF-8", func() []byte {
			b := []byte{0xEF, 0xBB, 0xBF}
			return append(b, bytes.Repeat([]byte{0xC0, 0x80}, 1<<19)...)
		}},
		{"csv-formula-cells.csv", "500 rows whose every cell is =\"…\" text and formulas", func() []byte {
			var b strings.Builder
			b.WriteString(strings.Join(excel.TemplateHeader(), ",") + "\r\n")
			for i := range 500 {
				fmt.Fprintf(&b, "\"=\"\"F-%d\"\"\",=HYPERLINK(\"\"x\"\"),=1+1,@SUM(1),-1,+1,\"=\"\"\"\"\",=,\t=1\r\n", i)
			}
			return []byte(b.String())
		}},
		// Shapes a reader's shortcuts must survive: sheets-9990-far-cell.xlsx
		// costs a reader that lays out each row searched for a header by
		// column 256 look-ups a row.
		{"sst-index-huge.xlsx", "500 rows of 9 cells each naming shared string 4294967295, 2^70, -1, 0 or 1 of a table of one", func() []byte {
			var b strings.Builder
			idx := []string{"4294967295", "1180591620717411303424", "-1", "0", "1"}
			for r := 2; r <= 501; r++ {
				fmt.Fprintf(&b, `<row r="%d">`, r)
				for c := 1; c <= 9; c++ {
					fmt.Fprintf(&b, `<c r="%s%d" t="s"><v>%s</v></c>`, col(c), r, idx[(r+c)%len(idx)])
				}
				b.WriteString("</row>")
			}
			return book(bookOpts{rawRows: b.String(), sst: `<sst ` + ns + `><si><t>x</t></si></sst>`})
		}},
		{"sheet-huge-refs.xlsx", "5 rows, then a row of 2,000,000 <c/> with references like XFD1048576, ZZZZZZZZZZZZZZZZ1 and A99999999999999999999", func() []byte {
			refs := []string{`<c r="XFD1048576"/>`, `<c r="ZZZZZZZZZZZZZZZZ1"/>`, `<c r="A99999999999999999999"/>`, `<c/>`}
			var b strings.Builder
			b.WriteString(`<row r="7">`)
			for i := range 2_000_000 {
				b.WriteString(refs[i%len(refs)])
			}
			b.WriteString("</row>")
			return book(bookOpts{rows: validRows(5), tailRows: b.String()})
		}},
		{"csv-quoted-rows.csv", "a header and 10 MiB of quoted rows of 9 short cells", func() []byte {
			var b strings.Builder
			b.WriteString(strings.Join(excel.TemplateHeader(), ",") + "\r\n")
			line := `"a","b","c","d","e","f","g","h","i"` + "\r\n"
			for b.Len()+len(line) <= 10<<20 {
				b.WriteString(line)
			}
			return []byte(b.String())
		}},
		{"csv-one-char.csv", "a header and 10 MiB of one three-byte character", func() []byte {
			h := strings.Join(excel.TemplateHeader(), ",") + "\r\n"
			return []byte(h + repeat("가", (10<<20-len(h))/3))
		}},
		{"csv-cp949-invalid.csv", "a CP949 header, then 10 MiB in which every other byte starts a CP949 pair that cannot be", func() []byte {
			h := strings.Join(excel.TemplateHeader(), ",") + "\r\n"
			var b bytes.Buffer
			b.WriteString(h)
			for b.Len() < 10<<20-2 {
				b.WriteString("\xb0\x20,\x81\xff")
			}
			return b.Bytes()
		}},
		{"zip-method-deflate64.xlsx", "the worksheet marked as compressed with method 9 (deflate64)", func() []byte {
			data := book(bookOpts{rows: validRows(5)})
			return setMethod(data, "xl/worksheets/sheet1.xml", 9)
		}},
		{"sheets-9990-no-header.xlsx", "9,990 visible sheets, each its own part of 10 rows of 6 cells and no header: near the cap of parts and of XML entries", func() []byte {
			var rows strings.Builder
			for r := 1; r <= 10; r++ {
				fmt.Fprintf(&rows, `<row r="%d">`, r)
				for c := 1; c <= 6; c++ {
					fmt.Fprintf(&rows, `<c r="%s%d" t="inlineStr"><is><t>no header %d</t></is></c>`, col(c), r, c)
				}
				rows.WriteString("</row>")
			}
			sheet := `<worksheet ` + ns + `><sheetData>` + rows.String() + `</sheetData></worksheet>`
			return manySheets(9990, sheet)
		}},
		{"sheets-9990-far-cell.xlsx", "9,990 visible sheets, each its own part of 10 rows whose one cell is in column IV, the last one read", func() []byte {
			var rows strings.Builder
			for r := 1; r <= 10; r++ {
				fmt.Fprintf(&rows, `<row r="%d"><c r="%s%d" t="inlineStr"><is><t>x</t></is></c></row>`, r, col(excel.MaxColumns), r)
			}
			sheet := `<worksheet ` + ns + `><sheetData>` + rows.String() + `</sheetData></worksheet>`
			return manySheets(9990, sheet)
		}},
		{"rels-outside.xlsx", "the workbook's sheet relationship pointing at ../../etc/passwd", func() []byte {
			return book(bookOpts{rows: validRows(5), sheetTarget: "../../etc/passwd"})
		}},
		// What an answer repeats. Header text in brackets is ignored when
		// headers are matched, so a header can be long and still name a
		// known column; a page that says the header once per problem
		// multiplies it by the problems.
		{"csv-header-attack.csv", "500 rows with a bad price under the price header 판매가( + 60,000 & + ) (issue 45: 601 MB of Korean HTML)", func() []byte {
			h := excel.TemplateHeader()
			h[3] = "판매가(" + repeat("&", 60000) + ")"
			rows := validRows(500)
			for i := range rows {
				rows[i][3] = "abc"
			}
			return csvWith(h, rows, ',')
		}},
		{"csv-256-unknown-columns.csv", "500 valid rows with 256 unknown columns of 66 & each (issue 45: a 41 MB check page)", func() []byte {
			h := excel.TemplateHeader()
			for c := range 256 {
				h = append(h, fmt.Sprintf("메모 %d", c+1))
			}
			rows := validRows(500)
			for i := range rows {
				for c := range 256 {
					rows[i] = append(rows[i], repeat("&", 60)+fmt.Sprintf("%03d%03d", i%1000, c))
				}
			}
			return csvWith(h, rows, ',')
		}},
		{"csv-long-headers-bad-cells.csv", "every header as long as a header that still matches can be (excel.MaxHeaderChars, the rest markup in brackets), 64 more such headers, and 500 rows of a problem in every field and right-to-left overrides", func() []byte {
			h := excel.TemplateHeader()
			// longest pads a header with bracketed markup to exactly
			// MaxHeaderChars characters: longer headers match no column.
			longest := func(name string) string {
				pad := []rune(repeat("<&\"'>", excel.MaxHeaderChars))
				return name + "(" + string(pad[:excel.MaxHeaderChars-utf8.RuneCountInString(name)-2]) + ")"
			}
			for i := range h {
				h[i] = longest(h[i])
			}
			for c := range 64 {
				h = append(h, longest(fmt.Sprintf("x%d", c)))
			}
			rows := badRows(500)
			for i := range rows {
				for range 64 {
					rows[i] = append(rows[i], "\u202e"+repeat("가", 10))
				}
			}
			return csvWith(h, rows, ',')
		}},
		{"sheet-header-attack.xlsx", "the price header 판매가( + 32,000 & + ) (Excel's longest cell) over 500 rows with a bad price", func() []byte {
			h := excel.TemplateHeader()
			h[3] = "판매가(" + repeat("&", 32000) + ")"
			rows := validRows(500)
			for i := range rows {
				rows[i][3] = "abc"
			}
			var b strings.Builder
			b.WriteString(rowXML(1, h, false))
			for i, r := range rows {
				b.WriteString(rowXML(i+2, r, false))
			}
			return book(bookOpts{sheetFirst: `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n" +
				`<worksheet ` + ns + `><sheetData>` + b.String() + `</sheetData></worksheet>`})
		}},
	}
}

// csvWith is a CSV of header and rows, every cell quoted.
func csvWith(header []string, rows [][]string, sep byte) []byte {
	var b strings.Builder
	for _, r := range append([][]string{header}, rows...) {
		for i, c := range r {
			if i > 0 {
				b.WriteByte(sep)
			}
			b.WriteString(`"` + strings.ReplaceAll(c, `"`, `""`) + `"`)
		}
		b.WriteString("\r\n")
	}
	return []byte(b.String())
}

// manySheets is a workbook of n visible sheets, each its own part holding
// sheet.
func manySheets(n int, sheet string) []byte {
	var sheets, rels strings.Builder
	extra := map[string]string{}
	for i := 2; i <= n; i++ {
		fmt.Fprintf(&sheets, `<sheet name="S%d" sheetId="%d" r:id="rIdS%d"/>`, i, i, i)
		fmt.Fprintf(&rels, `<Relationship Id="rIdS%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/s%d.xml"/>`, i, i)
		extra[fmt.Sprintf("xl/worksheets/s%d.xml", i)] = sheet
	}
	return book(bookOpts{extraSheets: sheets.String(), extraRels: rels.String(), extra: extra, sheetFirst: sheet})
}

// setMethod rewrites the compression method of entry name (central
// directory and local header).
func setMethod(data []byte, name string, method uint16) []byte {
	return editEntry(data, name, func(central, local []byte) {
		binary.LittleEndian.PutUint16(central[10:], method)
		binary.LittleEndian.PutUint16(local[8:], method)
	})
}

// editEntry calls edit with the central directory header and the local
// header of entry name, in a copy of data.
func editEntry(data []byte, name string, edit func(central, local []byte)) []byte {
	out := bytes.Clone(data)
	n := []byte(name)
	// Central directory headers: signature PK\1\2, name length at +28, name at +46, local header offset at +42.
	for i := 0; i+46 < len(out); i++ {
		if out[i] == 'P' && out[i+1] == 'K' && out[i+2] == 1 && out[i+3] == 2 {
			nl := int(binary.LittleEndian.Uint16(out[i+28:]))
			if i+46+nl <= len(out) && bytes.Equal(out[i+46:i+46+nl], n) {
				off := int(binary.LittleEndian.Uint32(out[i+42:]))
				edit(out[i:], out[off:])
			}
		}
	}
	return out
}

// bookOpts describes a workbook: every field is optional.
type bookOpts struct {
	rows           [][]string // data rows under the template header
	rawRows        string     // sheetData rows written as they are (with the header row added before)
	tailRows       string     // written inside sheetData after the rows
	afterData      string     // written after </sheetData>
	merges         string     // <mergeCell> elements
	hidden         bool       // every data row hidden
	sst            string     // xl/sharedStrings.xml
	styles         string     // xl/styles.xml
	workbookAttrs  string     // extra attributes of <workbook>
	extraSheets    string     // more <sheet> elements
	extraRels      string     // more <Relationship> elements of the workbook
	extra          map[string]string
	sheetUTF16     bool
	sheetFirst     string // the first sheet's XML, when not sheetXML's
	sheetTarget    string // the Target of the sheet's relationship, when not worksheets/sheet1.xml
	duplicateSheet string // a second entry xl/worksheets/sheet1.xml with this content
}

const ns = `xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`

func sheetXML(o bookOpts) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n")
	b.WriteString(`<worksheet ` + ns + `><sheetData>`)
	b.WriteString(rowXML(1, excel.TemplateHeader(), false))
	for i, r := range o.rows {
		b.WriteString(rowXML(i+2, r, o.hidden))
	}
	b.WriteString(o.rawRows)
	b.WriteString(o.tailRows)
	b.WriteString(`</sheetData>`)
	b.WriteString(o.afterData)
	if o.merges != "" {
		b.WriteString(`<mergeCells>` + o.merges + `</mergeCells>`)
	}
	b.WriteString(`</worksheet>`)
	return b.String()
}

func rowXML(r int, cells []string, hidden bool) string {
	var b strings.Builder
	h := ""
	if hidden {
		h = ` hidden="1"`
	}
	fmt.Fprintf(&b, `<row r="%d"%s>`, r, h)
	for i, c := range cells {
		fmt.Fprintf(&b, `<c r="%s%d" t="inlineStr"><is><t>%s</t></is></c>`, col(i+1), r, xmlEscape(c))
	}
	b.WriteString("</row>")
	return b.String()
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func book(o bookOpts) []byte {
	sheet := cmp.Or(o.sheetFirst, sheetXML(o))
	target := cmp.Or(o.sheetTarget, "worksheets/sheet1.xml")
	wbRels := `<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="` + target + `"/>`
	ct := `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/></Types>`
	parts := []part{
		{"[Content_Types].xml", ct},
		{"_rels/.rels", `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>`},
		{"xl/workbook.xml", `<?xml version="1.0" encoding="UTF-8"?><workbook ` + ns + o.workbookAttrs + `><sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/>` + o.extraSheets + `</sheets></workbook>`},
	}
	if o.sst != "" {
		wbRels += `<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/>`
		parts = append(parts, part{"xl/sharedStrings.xml", o.sst})
	}
	if o.styles != "" {
		wbRels += `<Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/>`
		parts = append(parts, part{"xl/styles.xml", o.styles})
	}
	parts = append(parts, part{"xl/_rels/workbook.xml.rels", `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` + wbRels + o.extraRels + `</Relationships>`})
	if o.sheetUTF16 {
		sheet = strings.Replace(sheet, `encoding="UTF-8"`, `encoding="UTF-16"`, 1)
		u := utf16.Encode([]rune(sheet))
		b := make([]byte, 2+2*len(u))
		b[0], b[1] = 0xFF, 0xFE
		for i, v := range u {
			binary.LittleEndian.PutUint16(b[2+2*i:], v)
		}
		sheet = string(b)
	}
	parts = append(parts, part{"xl/worksheets/sheet1.xml", sheet})
	if o.duplicateSheet != "" {
		parts = append(parts, part{"xl/worksheets/sheet1.xml", o.duplicateSheet})
	}
	names := make([]string, 0, len(o.extra))
	for n := range o.extra {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		parts = append(parts, part{n, o.extra[n]})
	}
	return zipParts(parts)
}

type part struct{ name, data string }

var fixedTime = time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)

func zipParts(parts []part) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) { return flate.NewWriter(w, flate.BestCompression) })
	for _, p := range parts {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: p.name, Method: zip.Deflate, Modified: fixedTime})
		if err != nil {
			log.Fatal(err)
		}
		if _, err := w.Write([]byte(p.data)); err != nil {
			log.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}
	return buf.Bytes()
}

// lyingBomb rewrites the sizes of entry name in the central directory and
// its local header to 4 KiB, the CRC left as it is: a reader that trusts the
// directory's sizes unpacks until the data says otherwise.
func lyingBomb(data []byte, name string) []byte {
	return declareSize(data, name, 4096)
}

// declareSize rewrites the uncompressed size of entry name (central
// directory and local header) to size.
func declareSize(data []byte, name string, size uint32) []byte {
	return editEntry(data, name, func(central, local []byte) {
		binary.LittleEndian.PutUint32(central[24:], size)
		// Local header: size at +22 (zero when a data descriptor follows; set it anyway).
		binary.LittleEndian.PutUint32(local[22:], size)
	})
}

func repeat(s string, n int) string { return strings.Repeat(s, n) }

// attrs writes n distinct attributes of three-character names (at most
// 52 × 62 × 62), 7 bytes each, so 149,000 fit in one tag under 1 MiB.
func attrs(n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	const alnum = letters + "0123456789"
	var b strings.Builder
	for i := range n {
		b.WriteByte(' ')
		b.WriteByte(letters[i/(62*62)%52])
		b.WriteByte(alnum[i/62%62])
		b.WriteByte(alnum[i%62])
		b.WriteString(`=""`)
	}
	return b.String()
}

func manyAttrs(name string, n int) string { return "<" + name + attrs(n) + "/>" }

func col(c int) string {
	s := ""
	for c > 0 {
		c--
		s = string(rune('A'+c%26)) + s
		c /= 26
	}
	return s
}

func validRows(n int) [][]string {
	rows := make([][]string, n)
	for i := range rows {
		rows[i] = []string{fmt.Sprintf("H-%04d", i+1), "반팔 티셔츠 " + strconv.Itoa(i+1), "50000803", strconv.Itoa(9900 + i), "10",
			"브랜드", fmt.Sprintf("https://img.example.com/h/%04d.jpg", i+1), "설명", "0"}
	}
	return rows
}

// badRows are rows with every field invalid, with long values quoted in
// the messages and characters JSON escapes.
func badRows(n int) [][]string {
	rows := make([][]string, n)
	long := strings.Repeat("<&>", 100)
	for i := range rows {
		rows[i] = []string{"bad sku <" + strconv.Itoa(i) + "> " + long, strings.Repeat("<", 300), "코드 " + long, "12,000원<>" + long, "-1<>" + long,
			strings.Repeat("&", 200), "javascript:<script>" + long, strings.Repeat("<", 10001), "1.5<>" + long}
	}
	return rows
}

func csv(rows [][]string, sep byte) []byte {
	var b strings.Builder
	b.WriteString(strings.Join(excel.TemplateHeader(), string(sep)) + "\r\n")
	for _, r := range rows {
		for i, c := range r {
			if i > 0 {
				b.WriteByte(sep)
			}
			b.WriteString(`"` + strings.ReplaceAll(c, `"`, `""`) + `"`)
		}
		b.WriteString("\r\n")
	}
	return []byte(b.String())
}

func gz(data []byte) []byte {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		log.Fatal(err)
	}
	zw.ModTime = fixedTime
	if _, err := zw.Write(data); err != nil {
		log.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}
	return buf.Bytes()
}
