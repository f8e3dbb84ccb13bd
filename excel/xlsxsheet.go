// One worksheet's XML, read in one pass into rows and cells.

package excel

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// readSheet reads one worksheet in one pass, handing its rows to a grid. It
// answers errNoHeaderHere (after checking the sheet to its end) when the
// sheet has no header row, or the sheet read.
func (b *xlsxFile) readSheet(s bookSheet) (*Sheet, error) {
	g := newGrid(b.opts, b.budget, FormatXLSX, s.name)
	r := sheetReader{xlsxFile: b, grid: g, vText: boundedText{max: b.opts.MaxCellBytes}, isText: boundedText{max: b.opts.MaxCellBytes}}
	err := b.walk(s.part, nsMain, r.visit)
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
	shape  xmlShape
}

func (r *sheetReader) visit(t *xmlToken) error {
	// The shape is checked to the sheet's end, past its header too.
	switch t.kind {
	case xmlStart:
		if _, err := r.shape.start(t.local); err != nil {
			return r.mce.s.fail("%v", err)
		}
	case xmlEnd:
		defer r.shape.end()
	}
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
				return fileErr(CodeTooLarge, "the sheet %q has more than %s merged ranges, far more than a product list needs; unmerge the cells and save the file again", r.grid.sheetName, group(maxMerges)).withParams("kind", "content")
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
		// A reference that reads as a cell may still be long ("A" and a
		// million zeros before the row): it is named as Excel would.
		if row != r.row {
			return fmt.Errorf("cell %s is inside row %d", cellName(c, row), r.row)
		}
		if c == r.lastCol {
			return fmt.Errorf("cell %s is given twice", cellName(c, row))
		}
		if c < r.lastCol {
			return fmt.Errorf("cell %s comes after %s", cellName(c, row), cellName(r.lastCol, r.row))
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
