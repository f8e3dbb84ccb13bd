package excel

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"
)

// Budgets of the entries of a workbook, each far above what a product list
// holds (tens of parts, one or a few sheets, hundreds of styles, thousands
// of shared strings) and each refusing the file when passed: an entry costs
// memory and time whether it is empty or not.
const (
	// maxParts caps the entries of the zip, counted from its directory's
	// end record before the directory is read.
	maxParts = 10000
	// maxRels caps the relationships of one relationships part, and
	// maxSheets the sheets a workbook lists.
	maxRels   = maxParts
	maxSheets = maxParts
	// maxStyles caps the cell formats and number formats of the styles
	// (Excel allows about 64,000 cell formats).
	maxStyles = 65536
	// maxSharedStrings caps the entries of the shared strings.
	maxSharedStrings = 500000
	// maxRefBytes caps a relationship's id, type and target and a sheet's
	// name and id: longer ones are not a workbook's.
	maxRefBytes = 2048
)

// maxMerges caps the merged ranges of a sheet; more refuse the file (they
// were ignored before, so a bad merge past them went unnoticed).
const maxMerges = 100000

// maxFormulaText is how much of a formula a message quotes.
const maxFormulaText = 200

// xlsxFile is an .xlsx being read: the zip, its parts, and what the workbook
// says about its sheets. Each part is unpacked once, in the order the reader
// needs it, and read to its end, which is where archive/zip checks its size
// and checksum.
type xlsxFile struct {
	ctx    context.Context
	opts   Options
	budget *textBudget
	xml    *xmlBudget
	zr     *zip.Reader
	parts  map[string]*zip.File // lower-cased, '/'-separated name → entry
	done   map[*zip.File]bool   // parts already read to their end

	sheets     []bookSheet // in workbook order
	date1904   bool        // days count from 1904 (old Mac Excel), not 1900
	dateStyles []bool      // by cell format index: shows a number as a date or time
	sst        sharedStrings
}

type bookSheet struct {
	name      string
	part      *zip.File
	hidden    bool
	worksheet bool // not a chart sheet or dialog
}

// textBudget counts the cell text one upload expands to.
type textBudget struct{ used, limit int64 }

// take counts n more bytes of cell text, refusing the file past the limit.
func (b *textBudget) take(n int) *FileError {
	b.used += int64(n)
	if b.used > b.limit {
		return fileErr(CodeTooLarge, "the file's cells hold more than %s of text (long texts, or one long text shown in many cells); a product list of a few hundred rows is far smaller, so the file was refused", byteSize(b.limit))
	}
	return nil
}

func damagedFile(err error) *FileError {
	return &FileError{Code: CodeDamaged, Message: "the file is damaged or incomplete (it is not a readable .xlsx); save it again from Excel and upload it again", Err: err}
}

func damagedPart(name string, err error) *FileError {
	return &FileError{Code: CodeDamaged, Message: fmt.Sprintf("the file is damaged or incomplete (part %s: %v); save it again from Excel and upload it again", name, describeZipErr(err)), Err: err}
}

func damagedSheet(sheet string, err error) *FileError {
	return &FileError{Code: CodeDamaged, Message: fmt.Sprintf("the file is damaged or incomplete (sheet %q: %v); save it again from Excel and upload it again", sheet, err), Err: err}
}

func incomplete(err error) *FileError {
	return &FileError{Code: CodeDamaged, Message: fmt.Sprintf("the file is not a complete Excel workbook (%v); save it again from Excel as .xlsx", err), Err: err}
}

// otherDocument names the kind of zip file a seller uploaded instead of an
// .xlsx when its parts say which, so that the answer says how to save the
// list rather than calling the file a damaged workbook: LibreOffice saves
// .ods unless told otherwise, Numbers its own format, and a product list is
// sometimes typed into Word. nil when the parts name no known kind.
func otherDocument(parts map[string]*zip.File) *FileError {
	has := func(name string) bool { return parts[name] != nil }
	switch {
	case has("content.xml") && (has("mimetype") || has("meta-inf/manifest.xml")):
		return fileErr(CodeNotXLSX, "the file is an OpenDocument file (.ods, LibreOffice's own format), not an Excel workbook; in LibreOffice choose File > Save As, \"Excel 2007-365 (.xlsx)\", or save it as CSV")
	case has("index/document.iwa"):
		return fileErr(CodeNotXLSX, "the file is an Apple Numbers document, not an Excel workbook; in Numbers choose File > Export To > Excel (.xlsx), or CSV")
	case has("word/document.xml"), has("ppt/presentation.xml"):
		return fileErr(CodeNotXLSX, "the file is a Word or PowerPoint document, not a spreadsheet; put the products in the template (.xlsx), one a row, or save them as CSV")
	}
	return nil
}

func isZipErr(err error) bool {
	return errors.Is(err, zip.ErrFormat) || errors.Is(err, zip.ErrChecksum) || errors.Is(err, zip.ErrAlgorithm) || errors.Is(err, io.ErrUnexpectedEOF)
}

func describeZipErr(err error) error {
	switch {
	case errors.Is(err, zip.ErrFormat):
		return errors.New("its data does not match the zip directory")
	case errors.Is(err, zip.ErrChecksum):
		return errors.New("its checksum does not match: the data is corrupted")
	case errors.Is(err, zip.ErrAlgorithm):
		return errors.New("it is compressed with a method Excel does not use")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the data is cut off")
	}
	return err
}

// readXLSX reads an .xlsx: the zip's directory (refusing a zip bomb by its
// declared sizes, and a directory of too many entries by its count, before
// anything is unpacked), then only the parts a product list needs: the
// package's and the workbook's relationships, the workbook, its styles and
// shared strings, and the sheets up to the first visible one with a header
// row. Any other part (document properties, themes, pictures, other sheets)
// is neither unpacked nor parsed, so whatever it holds costs nothing.
func (p *Parser) readXLSX(ctx context.Context, data []byte) (*Sheet, error) {
	if n, ok := zipEntries(data); ok && n > maxParts {
		return nil, fileErr(CodeTooLarge, "the file holds %s parts, more than any workbook needs (at most %s); save it again from Excel as .xlsx", group(int64(n)), group(maxParts))
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, damagedFile(err)
	}
	if len(zr.File) > maxParts {
		return nil, fileErr(CodeTooLarge, "the file holds %s parts, more than any workbook needs (at most %s); save it again from Excel as .xlsx", group(int64(len(zr.File))), group(maxParts))
	}
	limit := uint64(p.opts.UnzipSizeLimit)
	var total uint64
	for _, f := range zr.File {
		total += f.UncompressedSize64
		// archive/zip refuses to unpack an entry past its declared size, so
		// the declared sizes bound what unpacking can cost.
		if total > limit || f.UncompressedSize64 > limit {
			return nil, fileErr(CodeTooLarge, "the file would unpack to more than %s; a product list of %d rows is far smaller, so the file was refused", byteSize(p.opts.UnzipSizeLimit), p.opts.MaxRows)
		}
	}
	b := &xlsxFile{ctx: ctx, opts: p.opts, budget: &textBudget{limit: p.opts.MaxTextBytes}, xml: &xmlBudget{limit: p.opts.MaxXMLEntries}, zr: zr,
		parts: make(map[string]*zip.File, len(zr.File)), done: make(map[*zip.File]bool)}
	for _, f := range zr.File {
		name := partName(f.Name)
		if b.parts[name] != nil {
			// Two parts of one name: programs differ in which they read, so
			// what bulkreg reads might not be what the seller saw.
			return nil, fileErr(CodeDamaged, "the file is damaged: it holds two parts named %s; save it again from Excel as .xlsx", quote(f.Name))
		}
		b.parts[name] = f
	}
	if ferr := b.readWorkbook(); ferr != nil {
		return nil, ferr
	}
	for _, s := range b.sheets {
		if !s.worksheet || s.hidden || b.done[s.part] {
			continue
		}
		sheet, err := b.readSheet(s)
		switch {
		case errors.Is(err, errNoHeaderHere):
			continue
		case err != nil:
			return nil, err
		}
		return sheet, nil
	}
	return nil, noHeader(FormatXLSX)
}

// zipEntries reads the number of entries a zip's end-of-directory record
// (or its Zip64 record) declares, without reading the directory: ok is
// false when there is no such record, and archive/zip will say why.
func zipEntries(data []byte) (n uint64, ok bool) {
	const eocdLen, locLen = 22, 20
	from := max(0, len(data)-eocdLen-0xFFFF)
	i := bytes.LastIndex(data[from:], []byte("PK\x05\x06"))
	if i < 0 || from+i+eocdLen > len(data) {
		return 0, false
	}
	i += from
	n = uint64(binary.LittleEndian.Uint16(data[i+10:]))
	if n != 0xFFFF || i < locLen || !bytes.HasPrefix(data[i-locLen:], []byte("PK\x06\x07")) {
		return n, true
	}
	off := binary.LittleEndian.Uint64(data[i-locLen+8:])
	if off > uint64(len(data)) || off+40 > uint64(len(data)) || !bytes.HasPrefix(data[off:], []byte("PK\x06\x06")) {
		return n, true
	}
	return binary.LittleEndian.Uint64(data[off+32:]), true
}

// partName is how parts are looked up: lower case, '/' separated, no leading '/'.
func partName(name string) string {
	return strings.TrimPrefix(strings.ToLower(strings.ReplaceAll(name, `\`, "/")), "/")
}

// walk reads a part's XML to its end, strictly, calling visit (when not nil)
// for each token.
func (b *xlsxFile) walk(f *zip.File, visit func(t *xmlToken) error) error {
	b.done[f] = true
	rc, err := f.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	b.xml.part = f.Name
	s := newXMLScanner(b.ctx, rc, b.xml)
	for {
		tok, err := s.next()
		if errors.Is(err, errXMLEnd) {
			return nil
		}
		if err != nil {
			return err
		}
		if visit != nil {
			if err := visit(tok); err != nil {
				return err
			}
		}
	}
}

func (b *xlsxFile) partErr(f *zip.File, err error) *FileError {
	if b.ctx.Err() != nil {
		return ctxErr(b.ctx, "unpacking")
	}
	if fe, ok := errors.AsType[*FileError](err); ok {
		return fe // a budget refused the file
	}
	return damagedPart(f.Name, err)
}

// readWorkbook finds the sheets through the package's relationships and
// reads the workbook's styles and shared strings.
func (b *xlsxFile) readWorkbook() *FileError {
	wbPart := "xl/workbook.xml"
	if f := b.parts["_rels/.rels"]; f != nil {
		rels, err := b.readRels(f, "")
		if err != nil {
			return b.partErr(f, err)
		}
		for _, r := range rels {
			if strings.HasSuffix(r.typ, "/officeDocument") {
				wbPart = r.target
			}
		}
	}
	wb := b.parts[wbPart]
	if wb == nil {
		if ferr := otherDocument(b.parts); ferr != nil {
			return ferr
		}
		return incomplete(errors.New("the workbook part is missing"))
	}
	type sheetRef struct {
		name, rid string
		hidden    bool
	}
	var refs []sheetRef
	inSheets := false
	err := b.walk(wb, func(t *xmlToken) error {
		switch t.kind {
		case xmlStart:
			switch string(t.local) {
			case "workbookPr":
				v := string(t.attr("date1904"))
				b.date1904 = v == "1" || v == "true"
			case "sheets":
				inSheets = true
			case "sheet":
				if inSheets {
					if len(refs) == maxSheets {
						return fileErr(CodeTooLarge, "the workbook lists more than %s sheets; save the product list alone in a new workbook", group(maxSheets))
					}
					name, rid := t.attr("name"), t.anyAttr("id")
					if len(name) > maxRefBytes || len(rid) > maxRefBytes {
						return errors.New("a sheet with a name or id longer than any workbook's")
					}
					state := string(t.attr("state"))
					refs = append(refs, sheetRef{name: string(name), rid: string(rid), hidden: state == "hidden" || state == "veryHidden"})
				}
			}
		case xmlEnd:
			if string(t.local) == "sheets" {
				inSheets = false
			}
		}
		return nil
	})
	if err != nil {
		return b.partErr(wb, err)
	}
	dir := path.Dir(wbPart)
	targets := map[string]rel{}
	sstPart, stylesPart := path.Join(dir, "sharedstrings.xml"), path.Join(dir, "styles.xml")
	if f := b.parts[path.Join(dir, "_rels", path.Base(wbPart)+".rels")]; f != nil {
		rels, err := b.readRels(f, dir)
		if err != nil {
			return b.partErr(f, err)
		}
		for _, r := range rels {
			targets[r.id] = r
			switch {
			case strings.HasSuffix(r.typ, "/sharedStrings"):
				sstPart = r.target
			case strings.HasSuffix(r.typ, "/styles"):
				stylesPart = r.target
			}
		}
	}
	for _, ref := range refs {
		r, ok := targets[ref.rid]
		if !ok {
			continue // a sheet the workbook names without a part: nothing to read
		}
		f := b.parts[r.target]
		if f == nil {
			return incomplete(fmt.Errorf("the part of sheet %q is missing", ref.name))
		}
		b.sheets = append(b.sheets, bookSheet{name: ref.name, part: f, hidden: ref.hidden, worksheet: strings.HasSuffix(r.typ, "/worksheet")})
	}
	if f := b.parts[stylesPart]; f != nil {
		if err := b.readStyles(f); err != nil {
			return b.partErr(f, err)
		}
	}
	if f := b.parts[sstPart]; f != nil {
		if err := b.readSharedStrings(f); err != nil {
			if fe, ok := errors.AsType[*FileError](err); ok {
				return fe
			}
			return b.partErr(f, err)
		}
	}
	return nil
}

type rel struct{ id, typ, target string }

// readRels reads a relationships part; targets are resolved against dir.
// Every relationship counts against maxRels; only those of the kinds
// readWorkbook follows are kept.
func (b *xlsxFile) readRels(f *zip.File, dir string) ([]rel, error) {
	var rels []rel
	n := 0
	err := b.walk(f, func(t *xmlToken) error {
		if t.kind != xmlStart || string(t.local) != "Relationship" {
			return nil
		}
		if n++; n > maxRels {
			return fileErr(CodeTooLarge, "the file's part %s lists more than %s relationships, more than any workbook needs; save it again from Excel as .xlsx", f.Name, group(maxRels))
		}
		typ := t.attr("Type")
		if string(t.attr("TargetMode")) == "External" || !followedRel(typ) {
			return nil
		}
		if len(typ) > maxRefBytes || len(t.attr("Target")) > maxRefBytes || len(t.attr("Id")) > maxRefBytes {
			return errors.New("a relationship longer than any workbook's")
		}
		target := string(t.attr("Target"))
		if strings.HasPrefix(target, "/") {
			target = partName(target)
		} else {
			target = partName(path.Join(dir, target))
		}
		rels = append(rels, rel{id: string(t.attr("Id")), typ: string(typ), target: target})
		return nil
	})
	return rels, err
}

// followedRel reports the kinds of relationship readWorkbook follows: the
// workbook, its sheets of every kind, its styles and shared strings.
func followedRel(typ []byte) bool {
	for _, kind := range [...]string{"/officeDocument", "/worksheet", "/chartsheet", "/dialogsheet", "/macrosheet", "/xlMacrosheet", "/xlIntlMacrosheet", "/sharedStrings", "/styles"} {
		if bytes.HasSuffix(typ, []byte(kind)) {
			return true
		}
	}
	return false
}

// readStyles finds the cell formats that show numbers as dates or times.
// A custom number format is judged as it is read (only whether it shows a
// date is kept); the formats of both kinds count against maxStyles.
func (b *xlsxFile) readStyles(f *zip.File) error {
	custom := map[int]bool{} // custom number format → shows a date or time
	var xfs []int            // the number format of each cell format
	inCellXfs := false
	tooMany := func() error {
		return fileErr(CodeTooLarge, "the file's styles hold more than %s formats, more than Excel allows; save it again from Excel as .xlsx", group(maxStyles))
	}
	err := b.walk(f, func(t *xmlToken) error {
		switch t.kind {
		case xmlStart:
			switch string(t.local) {
			case "numFmt":
				if len(custom) >= maxStyles {
					return tooMany()
				}
				if id, err := strconv.Atoi(string(t.attr("numFmtId"))); err == nil {
					custom[id] = isDateFormatCode(string(t.attr("formatCode")))
				}
			case "cellXfs":
				inCellXfs = true
			case "xf":
				if inCellXfs {
					if len(xfs) >= maxStyles {
						return tooMany()
					}
					id, err := strconv.Atoi(string(t.attr("numFmtId")))
					if err != nil {
						id = -1
					}
					xfs = append(xfs, id)
				}
			}
		case xmlEnd:
			if string(t.local) == "cellXfs" {
				inCellXfs = false
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.dateStyles = make([]bool, len(xfs))
	for i, id := range xfs {
		if date, ok := custom[id]; ok {
			b.dateStyles[i] = date
		} else {
			b.dateStyles[i] = isBuiltinDateFormat(id)
		}
	}
	return nil
}

// sharedStrings is the workbook's table of texts, one arena: entry i is
// arena[ends[i-1]:ends[i]], at most MaxCellBytes of it kept. An entry costs
// 9 bytes besides its text (13 million empty entries cost 683 MB as ints
// and a slice each), and there are at most maxSharedStrings of them.
type sharedStrings struct {
	arena []byte
	ends  []uint32
	runes []int32 // characters of the whole entry (a part holds fewer than 2^31 bytes)
	cut   []bool  // the entry is longer than what is kept
}

func (s *sharedStrings) entry(i int) (text []byte, runes int, cut bool) {
	start := uint32(0)
	if i > 0 {
		start = s.ends[i-1]
	}
	return s.arena[start:s.ends[i]], int(s.runes[i]), s.cut[i]
}

// boundedText gathers one cell's text from chunks: at most max bytes are
// kept (cut at a character), every character is counted.
type boundedText struct {
	buf   []byte
	max   int
	runes int
	cut   bool
}

func (t *boundedText) reset() { t.buf, t.runes, t.cut = t.buf[:0], 0, false }

func (t *boundedText) write(p []byte) {
	t.runes += utf8.RuneCount(p)
	if t.cut {
		return
	}
	if room := t.max - len(t.buf); len(p) > room {
		for room > 0 && !utf8.RuneStart(p[room]) {
			room--
		}
		t.buf = append(t.buf, p[:room]...)
		t.cut = true
		return
	}
	t.buf = append(t.buf, p...)
}

// unescape decodes the escapes Excel writes for characters XML cannot hold
// ("_x000D_" for a carriage return, "_x005F_" for a literal "_"), as Excel
// and excelize read them. A cut text keeps the count of its raw characters.
func (t *boundedText) unescape() {
	if !bytes.Contains(t.buf, []byte("_x")) {
		return
	}
	out := make([]byte, 0, len(t.buf))
	b := t.buf
	for len(b) > 0 {
		i := bytes.Index(b, []byte("_x"))
		if i < 0 || i+7 > len(b) {
			out = append(out, b...)
			break
		}
		out = append(out, b[:i]...)
		esc := b[i : i+7]
		n, err := strconv.ParseUint(string(esc[2:6]), 16, 32)
		if esc[6] != '_' || err != nil {
			out = append(out, b[i])
			b = b[i+1:]
			continue
		}
		out = utf8.AppendRune(out, rune(n))
		b = b[i+7:]
	}
	t.buf = out
	if !t.cut {
		t.runes = utf8.RuneCount(out)
	}
}

// readSharedStrings reads the table of texts. The text of an entry is that
// of its <t> elements, plain or in rich-text runs; phonetic guides (<rPh>)
// are not part of it.
func (b *xlsxFile) readSharedStrings(f *zip.File) error {
	sst := &b.sst
	// The arena holds at most the part's text and at most MaxTextBytes:
	// taken at once, not grown by appends (which allocated five times an
	// 8 MiB table on the way).
	sst.arena = make([]byte, 0, min(f.UncompressedSize64, uint64(b.opts.MaxTextBytes)))
	tb := boundedText{max: b.opts.MaxCellBytes}
	inSI, inT, rph := false, false, 0
	err := b.walk(f, func(t *xmlToken) error {
		switch t.kind {
		case xmlStart:
			switch string(t.local) {
			case "si":
				inSI, inT, rph = true, false, 0
				tb.reset()
			case "rPh":
				rph++
			case "t":
				inT = inSI && rph == 0
			}
		case xmlEnd:
			switch string(t.local) {
			case "si":
				if inSI {
					if len(sst.ends) == maxSharedStrings {
						return fileErr(CodeTooLarge, "the file's shared strings hold more than %s entries, far more than a product list needs; save it again from Excel as .xlsx, or as CSV", group(maxSharedStrings))
					}
					tb.unescape()
					// The table's text is bounded like the cells': its
					// entries are kept whether a cell shows them or not.
					if int64(len(sst.arena)+len(tb.buf)) > b.opts.MaxTextBytes {
						return fileErr(CodeTooLarge, "the file's shared strings hold more than %s of text; a product list of a few hundred rows is far smaller, so the file was refused", byteSize(b.opts.MaxTextBytes))
					}
					sst.arena = append(sst.arena, tb.buf...)
					sst.ends = append(sst.ends, uint32(len(sst.arena)))
					sst.runes = append(sst.runes, int32(min(tb.runes, math.MaxInt32)))
					sst.cut = append(sst.cut, tb.cut)
				}
				inSI = false
			case "rPh":
				rph--
			case "t":
				inT = false
			}
		case xmlText:
			if inT {
				tb.write(t.text)
			}
		}
		return nil
	})
	return err
}

// readSheet reads one worksheet in one pass, handing its rows to a grid. It
// answers errNoHeaderHere (after checking the sheet to its end) when the
// sheet has no header row, or the sheet read.
func (b *xlsxFile) readSheet(s bookSheet) (*Sheet, error) {
	g := newGrid(b.opts, b.budget, FormatXLSX, s.name)
	r := sheetReader{xlsxFile: b, grid: g, vText: boundedText{max: b.opts.MaxCellBytes}, isText: boundedText{max: b.opts.MaxCellBytes}}
	err := b.walk(s.part, r.visit)
	if fe, ok := errors.AsType[*FileError](err); ok {
		return nil, fe
	}
	if err != nil && !errors.Is(err, errNoHeaderHere) {
		if b.ctx.Err() != nil {
			return nil, ctxErr(b.ctx, "reading the cells")
		}
		if isZipErr(err) {
			return nil, damagedPart(s.part.Name, err)
		}
		return nil, damagedSheet(s.name, err)
	}
	if r.skipping || errors.Is(err, errNoHeaderHere) {
		return nil, errNoHeaderHere
	}
	return g.finish(b.ctx, r.merges)
}

// sheetReader is the state of one pass over a worksheet's XML.
type sheetReader struct {
	*xlsxFile
	grid *grid
	// skipping: the sheet has no header; the rest is only checked.
	skipping bool

	inData  bool // inside <sheetData>
	inRow   bool
	row     int // the current row's number
	hidden  bool
	lastCol int
	cells   []cell

	inCell  bool
	cur     cell
	keep    bool // the current cell is in a column the grid reads
	typ     string
	style   int
	hasV    bool
	inV     bool
	hasF    bool
	inF     bool
	fText   []byte
	isDepth int // depth inside <is>, 0 outside
	hasIs   bool
	inT     bool
	rph     int
	vText   boundedText
	isText  boundedText

	merges []mergeRange
}

func (r *sheetReader) visit(t *xmlToken) error {
	if r.skipping {
		return nil
	}
	switch t.kind {
	case xmlStart:
		if r.isDepth > 0 {
			r.isDepth++
			switch string(t.local) {
			case "rPh":
				r.rph++
			case "t":
				r.inT = r.rph == 0
			}
			return nil
		}
		switch string(t.local) {
		case "sheetData":
			r.inData = true
		case "row":
			if r.inData {
				return r.startRow(t)
			}
		case "c":
			if r.inRow {
				return r.startCell(t)
			}
		case "v":
			if r.inCell {
				r.hasV, r.inV = true, true
			}
		case "f":
			if r.inCell {
				r.hasF, r.inF = true, true
			}
		case "is":
			if r.inCell {
				r.isDepth, r.hasIs = 1, true
			}
		case "mergeCell":
			if len(r.merges) == maxMerges {
				return fileErr(CodeTooLarge, "the sheet %q has more than %s merged ranges, far more than a product list needs; unmerge the cells and save the file again", r.grid.sheetName, group(maxMerges))
			}
			if m, ok := parseRange(string(t.attr("ref"))); ok {
				r.merges = append(r.merges, m)
			}
		}
	case xmlEnd:
		if r.isDepth > 0 {
			r.isDepth--
			switch string(t.local) {
			case "rPh":
				r.rph--
			case "t":
				r.inT = false
			}
			return nil
		}
		switch string(t.local) {
		case "sheetData":
			r.inData = false
		case "row":
			if r.inRow {
				r.inRow = false
				return r.endRow()
			}
		case "c":
			if r.inCell {
				r.inCell = false
				return r.endCell()
			}
		case "v":
			r.inV = false
		case "f":
			r.inF = false
		}
	case xmlText:
		switch {
		case !r.inCell || !r.keep:
		case r.isDepth > 0:
			if r.inT {
				r.isText.write(t.text)
			}
		case r.inV:
			r.vText.write(t.text)
		case r.inF:
			if room := maxFormulaText - len(r.fText); room > 0 {
				r.fText = append(r.fText, t.text[:min(room, len(t.text))]...)
			}
		}
	}
	return nil
}

func (r *sheetReader) startRow(t *xmlToken) error {
	n := r.row + 1
	if v := t.attr("r"); v != nil {
		var err error
		if n, err = strconv.Atoi(string(v)); err != nil || n < 1 {
			return fmt.Errorf("a row numbered %q", shorten(string(v)))
		}
		if n <= r.row {
			return fmt.Errorf("row %d comes after row %d", n, r.row)
		}
	}
	if n > maxSheetRow {
		return fmt.Errorf("a row numbered %d, past the last row a sheet can have (%d)", n, maxSheetRow)
	}
	h := string(t.attr("hidden"))
	r.inRow, r.row, r.hidden, r.lastCol, r.cells = true, n, h == "1" || h == "true", 0, r.cells[:0]
	return nil
}

func (r *sheetReader) endRow() error {
	if len(r.cells) == 0 && r.grid.headerRow != 0 {
		return nil
	}
	err := r.grid.add(r.row, r.hidden, r.cells)
	if errors.Is(err, errNoHeaderHere) {
		// Keep walking the sheet to its end so damage below is still found.
		r.skipping = true
		return nil
	}
	return err
}

func (r *sheetReader) startCell(t *xmlToken) error {
	col := r.lastCol + 1
	if ref := t.attr("r"); ref != nil {
		c, row, ok := splitRef(string(ref))
		if !ok {
			return fmt.Errorf("row %d: %q is not a cell name", r.row, shorten(string(ref)))
		}
		if row != r.row {
			return fmt.Errorf("cell %s is inside row %d", ref, r.row)
		}
		if c == r.lastCol {
			return fmt.Errorf("cell %s is given twice", ref)
		}
		if c < r.lastCol {
			return fmt.Errorf("cell %s comes after %s", ref, cellName(r.lastCol, r.row))
		}
		col = c
	}
	if col > maxSheetCol {
		return fmt.Errorf("row %d has a cell past the last column a sheet can have", r.row)
	}
	r.lastCol = col
	r.inCell, r.keep = true, col <= r.grid.cols()
	r.cur = cell{col: col}
	r.typ = string(t.attr("t"))
	r.style = -1
	if s := t.attr("s"); s != nil {
		if n, err := strconv.Atoi(string(s)); err == nil {
			r.style = n
		}
	}
	r.hasV, r.inV, r.hasF, r.inF, r.isDepth, r.hasIs, r.inT, r.rph = false, false, false, false, 0, false, false, 0
	r.fText = r.fText[:0]
	r.vText.reset()
	r.isText.reset()
	return nil
}

func (r *sheetReader) endCell() error {
	if !r.keep {
		return nil
	}
	c := &r.cur
	vBlank := len(bytes.TrimSpace(r.vText.buf)) == 0 && !r.vText.cut
	numeric := r.typ == "" || r.typ == "n"
	var text []byte
	runes, cut := r.vText.runes, r.vText.cut
	switch r.typ {
	case "s":
		if !vBlank {
			i, err := strconv.Atoi(string(bytes.TrimSpace(r.vText.buf)))
			if err != nil || i < 0 || i >= len(r.sst.ends) {
				return fmt.Errorf("cell %s points at shared text %q, which the file does not hold", cellName(c.col, r.row), shorten(string(r.vText.buf)))
			}
			text, runes, cut = r.sst.entry(i)
		}
	case "inlineStr":
		if !r.hasIs {
			text = r.vText.buf
		} else {
			r.isText.unescape()
			text, runes, cut = r.isText.buf, r.isText.runes, r.isText.cut
		}
	default:
		text = r.vText.buf
	}
	switch {
	case r.hasF && (!r.hasV || vBlank && numeric):
		c.kind = kindFormulaNoValue
		c.formula = "=" + string(r.fText)
	case r.typ == "b":
		c.kind = kindBool
	case r.typ == "d":
		c.kind = kindISODate
	case r.typ == "e":
		c.kind = kindError
	case numeric && !vBlank && r.style >= 0 && r.style < len(r.dateStyles) && r.dateStyles[r.style]:
		c.kind = kindDateNumber
		c.shown = shownDate(string(bytes.TrimSpace(r.vText.buf)), r.date1904)
	}
	if len(text) == 0 && c.kind == kindText {
		return nil // an empty cell, as if absent
	}
	if ferr := r.budget.take(len(text)); ferr != nil {
		return ferr
	}
	c.text, c.runes, c.cut = string(text), runes, cut
	r.cells = append(r.cells, *c)
	return nil
}

// shownDate is a day number as Excel shows it with a date format.
func shownDate(raw string, date1904 bool) string {
	v, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		return raw
	}
	t, err := excelize.ExcelDateToTime(v, date1904)
	if err != nil {
		return raw
	}
	if t.Hour() != 0 || t.Minute() != 0 || t.Second() != 0 {
		return t.Format("2006-01-02 15:04:05")
	}
	return t.Format("2006-01-02")
}

func isBuiltinDateFormat(id int) bool {
	return (id >= 14 && id <= 22) || (id >= 27 && id <= 36) || (id >= 45 && id <= 47) || (id >= 50 && id <= 58) || (id >= 71 && id <= 81)
}

// isDateFormatCode reports a custom number format that shows a date or a time:
// y, m, d, h or s outside quotes, escapes and [brackets] (except [h], [m], [s]).
func isDateFormatCode(code string) bool {
	inQuote, inBracket := false, false
	var bracket strings.Builder
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case inQuote:
			if c == '"' {
				inQuote = false
			}
		case inBracket:
			if c == ']' {
				inBracket = false
				b := strings.ToLower(bracket.String())
				if b == "h" || b == "hh" || b == "m" || b == "mm" || b == "s" || b == "ss" {
					return true
				}
			} else {
				bracket.WriteByte(c)
			}
		case c == '"':
			inQuote = true
		case c == '[':
			inBracket = true
			bracket.Reset()
		case c == '\\' || c == '_' || c == '*':
			i++
		default:
			switch c | 0x20 {
			case 'y', 'm', 'd', 'h', 's':
				return true
			case 'e':
				// "E+" is scientific notation, "e" alone is a year in some locales.
				if i+1 < len(code) && (code[i+1] == '+' || code[i+1] == '-') {
					i++
					continue
				}
				return true
			case 'g':
				// "General"
				if strings.HasPrefix(strings.ToLower(code[i:]), "general") {
					i += len("general") - 1
				}
			}
		}
	}
	return false
}
