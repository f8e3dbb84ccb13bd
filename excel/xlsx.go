package excel

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Budgets of the entries of a workbook, each far above what a product list
// holds (tens of parts, one or a few sheets, hundreds of styles, thousands
// of shared strings) and each refusing the file when passed: an entry costs
// memory and time whether it is empty or not.
const (
	// maxParts caps the entries of the zip, counted from its directory's
	// end record and its headers before archive/zip reads the directory
	// (readZipDirectory).
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

// maxMerges caps the merged ranges of a sheet; more refuse the file (were
// they ignored, a bad merge past them would go unnoticed).
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
	// last is the XML scanner of the part read last and mce its filter:
	// their buffers are handed to the next part's (parts are read one
	// after another).
	last *xmlScanner
	mce  mceFilter

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
		return fileErr(CodeTooLarge, "the file's cells hold more than %s of text (long texts, or one long text shown in many cells); a product list of a few hundred rows is far smaller, so the file was refused", byteSize(b.limit)).withParams("kind", "content")
	}
	return nil
}

func damagedFile(err error) *FileError {
	return &FileError{Code: CodeDamaged, Message: "the file is damaged or incomplete (it is not a readable .xlsx); save it again from Excel and upload it again", Err: err}
}

func damagedPart(name string, err error) *FileError {
	return &FileError{Code: CodeDamaged, Message: fmt.Sprintf("the file is damaged or incomplete (part %s: %v); save it again from Excel and upload it again", name, describeZipErr(err)), Err: err,
		Params: pairs("kind", "part", "part", name)}
}

func damagedSheet(sheet string, err error) *FileError {
	return &FileError{Code: CodeDamaged, Message: fmt.Sprintf("the file is damaged or incomplete (sheet %q: %v); save it again from Excel and upload it again", sheet, err), Err: err,
		Params: pairs("kind", "sheet", "sheet", strconv.Quote(sheet))}
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
		return fileErr(CodeNotXLSX, "the file is an OpenDocument file (.ods, LibreOffice's own format), not an Excel workbook; in LibreOffice choose File > Save As, \"Excel 2007-365 (.xlsx)\", or save it as CSV").withParams("kind", "ods")
	case has("index/document.iwa"):
		return fileErr(CodeNotXLSX, "the file is an Apple Numbers document, not an Excel workbook; in Numbers choose File > Export To > Excel (.xlsx), or CSV").withParams("kind", "numbers")
	case has("word/document.xml"), has("ppt/presentation.xml"):
		return fileErr(CodeNotXLSX, "the file is a Word or PowerPoint document, not a spreadsheet; put the products in the template (.xlsx), one a row, or save them as CSV").withParams("kind", "office")
	case !has("[content_types].xml"):
		// Every Office Open XML file has it; a zip without it is an
		// archive of something else, or of the workbook.
		return fileErr(CodeNotXLSX, "the file is a ZIP archive, not an Excel workbook; unpack it and upload the .xlsx inside, or save the list from Excel as \"Excel Workbook (.xlsx)\"").withParams("kind", "zip")
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

// MaxHeaderSheets is how many visible worksheets are searched for the
// header row. Every sheet searched costs opening its part and scanning its
// first rows whatever it holds: searching every sheet of a crafted workbook
// of 9,990 sheets without a header (testdata/hostile) would take the
// upload's whole CPU ceiling. A seller's workbook has its product sheet
// among its first few.
const MaxHeaderSheets = 50

// readXLSX reads an .xlsx: the zip's directory (refusing a directory of too
// many entries or bytes before it is read, and a zip bomb by its declared
// sizes before anything is unpacked), then only the parts a product list needs: the
// package's and the workbook's relationships, the workbook, its styles and
// shared strings, and the sheets up to the first visible one with a header
// row. Any other part (document properties, themes, pictures, other sheets)
// is neither unpacked nor parsed, so whatever it holds costs nothing.
func (p *Parser) readXLSX(ctx context.Context, data []byte) (*Sheet, error) {
	// archive/zip reads every header of the directory into memory before
	// its entries can be counted (and reads on past the count the end
	// record declares): the directory is measured first, without keeping
	// anything, and one too large is refused before zip.NewReader.
	d, ok := readZipDirectory(data)
	if !ok {
		// Where the directory is not found as archive/zip finds it, its
		// size is not known: the file is refused rather than handed to
		// archive/zip unmeasured.
		return nil, damagedFile(errors.New("excel: the zip's directory could not be found"))
	}
	n := group(int64(min(d.declaredEntries, 1<<62)))
	if d.declaredEntries <= maxParts && d.entries > maxParts {
		// The end record says fewer than the directory holds.
		n = "more than " + group(maxParts)
	}
	if d.declaredEntries > maxParts || d.entries > maxParts {
		return nil, fileErr(CodeTooLarge, "the file holds %s parts, more than any workbook needs (at most %s); save it again from Excel as .xlsx", n, group(maxParts)).withParams("kind", "content")
	}
	if n := max(d.declaredBytes, d.bytes); n > maxDirectoryBytes {
		return nil, fileErr(CodeTooLarge, "the file's zip directory holds more than %s, more than any workbook needs; save it again from Excel as .xlsx", byteSize(maxDirectoryBytes)).withParams("kind", "content")
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, damagedFile(err)
	}
	if len(zr.File) > maxParts {
		return nil, fileErr(CodeTooLarge, "the file holds %s parts, more than any workbook needs (at most %s); save it again from Excel as .xlsx", group(int64(len(zr.File))), group(maxParts)).withParams("kind", "content")
	}
	limit := uint64(p.opts.UnzipSizeLimit)
	var total uint64
	for _, f := range zr.File {
		total += f.UncompressedSize64
		// archive/zip refuses to unpack an entry past its declared size, so
		// the declared sizes bound what unpacking can cost.
		if total > limit || f.UncompressedSize64 > limit {
			return nil, fileErr(CodeTooLarge, "the file would unpack to more than %s; a product list of %d rows is far smaller, so the file was refused", byteSize(p.opts.UnzipSizeLimit), p.opts.MaxRows).withParams("kind", "content")
		}
	}
	b := &xlsxFile{ctx: ctx, opts: p.opts, budget: &textBudget{limit: p.opts.MaxTextBytes}, xml: &xmlBudget{limit: p.opts.MaxXMLEntries}, zr: zr,
		parts: make(map[string]*zip.File, len(zr.File)), done: make(map[*zip.File]bool)}
	for _, f := range zr.File {
		name := partName(f.Name)
		if b.parts[name] != nil {
			// Two parts of one name: programs differ in which they read, so
			// what bulkreg reads might not be what the seller saw.
			return nil, fileErr(CodeDamaged, "the file is damaged: it holds two parts named %s; save it again from Excel as .xlsx", quote(f.Name)).withParams("kind", "parts", "part", quote(f.Name))
		}
		b.parts[name] = f
	}
	if ferr := b.readWorkbook(); ferr != nil {
		return nil, ferr
	}
	searched := 0
	for _, s := range b.sheets {
		if !s.worksheet || s.hidden || b.done[s.part] {
			continue
		}
		if searched == MaxHeaderSheets {
			return nil, fileErr(CodeNoHeader, "no header row was found in the first %d visible sheets; move the product sheet to the front or start from the template", MaxHeaderSheets).
				withParams("kind", "sheets", "sheets", strconv.Itoa(MaxHeaderSheets))
		}
		searched++
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

// partName is how parts are looked up: lower case, '/' separated, no leading '/'.
func partName(name string) string {
	return strings.TrimPrefix(strings.ToLower(strings.ReplaceAll(name, `\`, "/")), "/")
}

// walk reads a part's XML to its end, strictly, calling visit for each
// token Excel reads as the part's content: the elements of the namespace
// space (nsMain, or nsPkgRel for a relationships part) and their text, with
// Markup Compatibility applied (mceFilter).
func (b *xlsxFile) walk(f *zip.File, space xmlNS, visit func(t *xmlToken) error) error {
	b.done[f] = true
	rc, err := f.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	b.xml.part = f.Name
	// Tokens point into the buffers only until the next one, so the next
	// part may read into them.
	s := newXMLScannerAfter(b.ctx, rc, b.xml, b.last)
	defer func() { b.last = s }()
	mce := &b.mce
	*mce = mceFilter{s: s, data: space, visit: visit, open: mce.open[:0], ignorable: mce.ignorable[:0]}
	for {
		tok, err := s.next()
		if errors.Is(err, errXMLEnd) {
			return nil
		}
		if err != nil {
			return err
		}
		if mce.plain(tok) {
			err = visit(tok)
		} else {
			err = mce.token(tok)
		}
		if err != nil {
			return err
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
