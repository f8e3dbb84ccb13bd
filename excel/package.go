package excel

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// maxParts caps the entries of the zip: a real workbook has tens.
const maxParts = 10000

// pkg is what checkPackage learned about the zip around the workbook.
type pkg struct {
	zr    *zip.Reader
	parts map[string]*zip.File // lower-cased part name → entry
	// sheetPart maps a worksheet name to its part, e.g. "xl/worksheets/sheet1.xml".
	sheetPart map[string]string
	// date1904: the workbook counts days from 1904 (old Mac Excel), not 1900.
	date1904 bool
}

// checkPackage opens the zip, refuses it when it would unpack to more than
// limit bytes (before unpacking anything: archive/zip refuses to unpack an
// entry past its declared size, so the declared sizes are a real bound), then
// unpacks every entry once, streaming: a bad checksum or cut-off data refuses
// the file, and every XML part must be well-formed to its last tag. excelize
// ignores both kinds of damage and would read half a sheet.
func checkPackage(ctx context.Context, data []byte, limit int64, maxRows int) (*pkg, *FileError) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, &FileError{Code: CodeDamaged, Message: "the file is damaged or incomplete (it is not a readable .xlsx); save it again from Excel and upload it again", Err: err}
	}
	if len(zr.File) > maxParts {
		return nil, fileErr(CodeDamaged, "the file holds %d parts, more than any workbook needs; save it again from Excel as .xlsx", len(zr.File))
	}
	var total uint64
	for _, f := range zr.File {
		total += f.UncompressedSize64
		if total > uint64(limit) || f.UncompressedSize64 > uint64(limit) {
			return nil, fileErr(CodeTooLarge, "the file would unpack to more than %s; a product list of %d rows is far smaller, so the file was refused", byteSize(limit), maxRows)
		}
	}
	p := &pkg{zr: zr, parts: make(map[string]*zip.File, len(zr.File))}
	for _, f := range zr.File {
		if err := ctx.Err(); err != nil {
			return nil, ctxErr(ctx, "unpacking")
		}
		name := strings.ToLower(strings.ReplaceAll(f.Name, "\\", "/"))
		p.parts[name] = f
		if err := checkEntry(ctx, f); err != nil {
			if ctx.Err() != nil {
				return nil, ctxErr(ctx, "unpacking")
			}
			return nil, &FileError{Code: CodeDamaged,
				Message: fmt.Sprintf("the file is damaged or incomplete (part %s: %v); save it again from Excel and upload it again", f.Name, err),
				Err:     err}
		}
	}
	if err := p.findSheets(); err != nil {
		return nil, &FileError{Code: CodeDamaged, Message: fmt.Sprintf("the file is not a complete Excel workbook (%v); save it again from Excel as .xlsx", err), Err: err}
	}
	return p, nil
}

// checkEntry unpacks one entry to the end (archive/zip checks size and CRC
// there) and, for XML, checks that the document is well-formed and complete.
func checkEntry(ctx context.Context, f *zip.File) error {
	if f.FileInfo().IsDir() {
		return nil
	}
	rc, err := f.Open()
	if err != nil {
		return describeZipErr(err)
	}
	defer rc.Close()
	lower := strings.ToLower(f.Name)
	// Worksheets are only unpacked here (size and checksum); the one that is
	// read is walked to its last tag by scanSheet, which refuses it when cut.
	if (strings.HasSuffix(lower, ".xml") || strings.HasSuffix(lower, ".rels")) && !strings.HasPrefix(lower, "xl/worksheets/") {
		return walkXML(ctx, rc, nil)
	}
	_, err = io.Copy(io.Discard, rc)
	return describeZipErr(err)
}

func describeZipErr(err error) error {
	switch {
	case errors.Is(err, zip.ErrFormat):
		return errors.New("its data does not match the zip directory")
	case errors.Is(err, zip.ErrChecksum):
		return errors.New("its checksum does not match: the data is corrupted")
	case errors.Is(err, zip.ErrAlgorithm):
		return errors.New("it is compressed with a method Excel does not use")
	}
	return err
}

// walkXML reads a whole XML document strictly, calling visit (when not nil)
// for each token. It fails on the first syntax error, on a document cut off
// before its root element closes and on a document without a root element.
func walkXML(ctx context.Context, r io.Reader, visit func(d *xml.Decoder, tok xml.Token) error) error {
	d := xml.NewDecoder(r)
	d.Strict = true
	// Only well-formedness is checked here; excelize decodes the text.
	d.CharsetReader = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
	depth, roots := 0, 0
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return describeXMLErr(err)
		}
		switch tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
			}
			depth++
		case xml.EndElement:
			depth--
		}
		if visit != nil {
			if err := visit(d, tok); err != nil {
				return err
			}
		}
	}
	if depth != 0 || roots == 0 {
		return errors.New("the XML is cut off")
	}
	return nil
}

func describeXMLErr(err error) error {
	var se *xml.SyntaxError
	if errors.As(err, &se) && strings.Contains(se.Msg, "unexpected EOF") {
		return fmt.Errorf("the XML is cut off at line %d", se.Line)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the data is cut off")
	}
	return describeZipErr(err)
}

// findSheets maps each worksheet's name to its part through the workbook and its relationships.
func (p *pkg) findSheets() error {
	wbPart := "xl/workbook.xml"
	if f := p.parts["_rels/.rels"]; f != nil {
		rels, err := readRels(f)
		if err != nil {
			return err
		}
		for _, r := range rels {
			if strings.HasSuffix(r.Type, "/officeDocument") {
				wbPart = strings.ToLower(strings.TrimPrefix(r.Target, "/"))
			}
		}
	}
	wb := p.parts[wbPart]
	if wb == nil {
		return errors.New("the workbook part is missing")
	}
	var workbook struct {
		Sheets []struct {
			Name string `xml:"name,attr"`
			// r:id; any namespace, so Strict Open XML workbooks are read too.
			RID string `xml:"id,attr"`
		} `xml:"sheets>sheet"`
		Pr struct {
			Date1904 string `xml:"date1904,attr"`
		} `xml:"workbookPr"`
	}
	if err := decodePart(wb, &workbook); err != nil {
		return err
	}
	dir := path.Dir(wbPart)
	relsPart := path.Join(dir, "_rels", path.Base(wbPart)+".rels")
	targets := map[string]string{}
	if f := p.parts[relsPart]; f != nil {
		rels, err := readRels(f)
		if err != nil {
			return err
		}
		for _, r := range rels {
			t := r.Target
			if strings.HasPrefix(t, "/") {
				t = strings.TrimPrefix(t, "/")
			} else {
				t = path.Join(dir, t)
			}
			targets[r.ID] = strings.ToLower(t)
		}
	}
	p.date1904 = workbook.Pr.Date1904 == "1" || workbook.Pr.Date1904 == "true"
	p.sheetPart = make(map[string]string, len(workbook.Sheets))
	for _, s := range workbook.Sheets {
		if t, ok := targets[s.RID]; ok {
			p.sheetPart[s.Name] = t
		}
	}
	return nil
}

type rel struct {
	ID     string `xml:"Id,attr"`
	Type   string `xml:"Type,attr"`
	Target string `xml:"Target,attr"`
}

func readRels(f *zip.File) ([]rel, error) {
	var rels struct {
		Rel []rel `xml:"Relationship"`
	}
	err := decodePart(f, &rels)
	return rels.Rel, err
}

func decodePart(f *zip.File, v any) error {
	rc, err := f.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	d := xml.NewDecoder(rc)
	d.CharsetReader = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
	return d.Decode(v)
}

// checkPart walks one XML part to its end.
func (p *pkg) checkPart(ctx context.Context, part string) error {
	f := p.parts[part]
	if f == nil {
		return fmt.Errorf("part %s is missing", part)
	}
	rc, err := f.Open()
	if err != nil {
		return describeZipErr(err)
	}
	defer rc.Close()
	return walkXML(ctx, rc, nil)
}

// cellMeta is what the sheet XML says about a cell that excelize's values do not.
type cellMeta struct {
	style          int    // index into the workbook's cell formats
	formula        string // the formula text, when the cell has one
	formulaNoValue bool   // a formula with no saved result
	errorValue     bool   // t="e": the cell shows an Excel error such as #REF!
	numeric        bool   // a number (t absent or "n"), which a date format turns into a date
	boolValue      bool   // t="b": TRUE or FALSE, which excelize reads as "1" or "0"
	isoDate        bool   // t="d": a date written as ISO 8601 text
}

// sheetMeta is the part of a worksheet's XML that the value reader does not report.
type sheetMeta struct {
	merges []string            // "B5:B7"
	cells  map[string]cellMeta // only cells in rows ≤ maxRow and columns ≤ maxCol
}

// scanSheet streams a worksheet part and collects merges and the cells of
// interest within the first maxRow rows and maxCol columns, so memory stays
// bounded whatever the sheet holds below.
// interesting says whether to keep a cell's meta, and whether to stop reading
// (scanSheet then returns errStopScan with what it has).
func (p *pkg) scanSheet(ctx context.Context, part string, maxRow, maxCol int, interesting func(ref string, m cellMeta) (keep, stop bool)) (*sheetMeta, error) {
	f := p.parts[part]
	if f == nil {
		return nil, fmt.Errorf("worksheet part %s is missing", part)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	m := &sheetMeta{cells: map[string]cellMeta{}}
	var (
		cur      cellMeta
		curRef   string
		inCell   bool
		hasV     bool
		inF      bool
		fText    strings.Builder
		rowNum   int
		colNum   int
		inRow    bool
		valEmpty bool
		inV      bool
	)
	visit := func(d *xml.Decoder, tok xml.Token) error {
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "row":
				inRow = true
				colNum = 0
				if r := attr(t, "r"); r != "" {
					if n, err := strconv.Atoi(r); err == nil {
						rowNum = n
						return nil
					}
				}
				rowNum++
			case "c":
				if !inRow {
					return nil
				}
				inCell, hasV, valEmpty, inF = true, false, true, false
				fText.Reset()
				cur = cellMeta{}
				colNum++
				if r := attr(t, "r"); r != "" {
					if c, rr, err := splitRef(r); err == nil {
						colNum, rowNum = c, rr
					}
				}
				curRef = cellName(colNum, rowNum)
				if s := attr(t, "s"); s != "" {
					cur.style, _ = strconv.Atoi(s)
				}
				switch attr(t, "t") {
				case "", "n":
					cur.numeric = true
				case "e":
					cur.errorValue = true
				case "b":
					cur.boolValue = true
				case "d":
					cur.isoDate = true
				}
			case "f":
				if inCell {
					inF = true
					cur.formula = "="
				}
			case "v":
				if inCell {
					hasV, inV = true, true
				}
			case "mergeCell":
				if ref := attr(t, "ref"); ref != "" && len(m.merges) < 100000 {
					m.merges = append(m.merges, ref)
				}
			}
		case xml.CharData:
			if inF && fText.Len() < 200 {
				fText.Write(t)
			}
			if inV && len(bytes.TrimSpace(t)) > 0 {
				valEmpty = false
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "f":
				inF = false
			case "v":
				inV = false
			case "row":
				inRow = false
			case "c":
				if !inCell {
					return nil
				}
				inCell = false
				if cur.formula != "" {
					cur.formula = "=" + fText.String()
					cur.formulaNoValue = !hasV || (valEmpty && cur.numeric)
				}
				if hasV && valEmpty {
					cur.numeric = false
				}
				if rowNum <= maxRow && colNum <= maxCol {
					keep, stop := interesting(curRef, cur)
					if keep {
						m.cells[curRef] = cur
					}
					if stop {
						return errStopScan
					}
				}
			}
		}
		return nil
	}
	if err := walkXML(ctx, rc, visit); err != nil {
		if errors.Is(err, errStopScan) {
			return m, err
		}
		return nil, err
	}
	return m, nil
}

// errStopScan ends scanSheet early when its caller has seen enough.
var errStopScan = errors.New("excel: sheet scan stopped by the caller")

func attr(t xml.StartElement, local string) string {
	for _, a := range t.Attr {
		if a.Name.Local == local && a.Name.Space == "" {
			return a.Value
		}
	}
	return ""
}
