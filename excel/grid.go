package excel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/bulkreg/bulkreg/productrules"
)

// formulaStarts are the first characters that make a spreadsheet treat text
// as a formula (CSV and formula injection); see WriteReport.
const formulaStarts = "=+-@\t\r"

// Limits of a worksheet.
const (
	maxSheetRow = 1 << 20 // 1,048,576
	maxSheetCol = 1 << 14 // 16,384: XFD
)

// cellKind says whether a cell's text is what the seller typed.
type cellKind uint8

const (
	kindText           cellKind = iota // text, or a number as stored
	kindFormulaNoValue                 // a formula without a saved result
	kindError                          // an Excel error such as #N/A
	kindBool                           // TRUE or FALSE
	kindISODate                        // a date written as ISO 8601 text (t="d")
	kindDateNumber                     // a number shown as a date or time
)

// cell is one cell as a reader found it.
type cell struct {
	col     int    // 1-based
	text    string // what the cell holds, at most Options.MaxCellBytes bytes of it
	runes   int    // characters in the whole text; more than in text when cut
	cut     bool   // text is only the start of what the cell holds
	kind    cellKind
	formula string // kindFormulaNoValue: the formula, shortened
	shown   string // kindDateNumber: the date as Excel shows it
}

// rawRow is a data row as read, its cells aligned with the header.
type rawRow struct {
	num    int
	hidden bool
	cells  []cell
}

// mergeRange is a merged range, both corners included.
type mergeRange struct{ c1, r1, c2, r2 int }

func (m mergeRange) String() string { return cellName(m.c1, m.r1) + ":" + cellName(m.c2, m.r2) }

// errNoHeaderHere: the sheet has no header row in its first rows; the reader
// walks it to its end (to check it) and tries the next sheet.
var errNoHeaderHere = errors.New("excel: no header row in this sheet")

// grid receives one sheet's rows from a reader (xlsx or CSV), top to bottom:
// it finds the header row, counts the data rows and keeps them, refusing the
// file as soon as the rows say so. The readers know nothing of columns or
// rules; the grid knows nothing of file formats.
type grid struct {
	opts      Options
	budget    *textBudget // shared with the reader: merges fill cells too
	format    string
	sheetName string
	where     string // for messages: `sheet "Sheet1"`, "the CSV file" or "the tab-separated file"

	headerRow int      // 0 until found
	header    []string // cut to MaxHeaderChars (cutHeader)
	fields    []string // per header column: the field, "" for an unknown or ignored column
	// long: per header column, the field a cell longer than MaxHeaderChars
	// would name were it short enough ("" for none), to say why it does not.
	long     []string
	warnings []Problem
	rows     []rawRow // the first MaxRows data rows
	count    int      // data rows seen
	// mergeProblems are the errors of merges across columns or from the header, by index in rows.
	mergeProblems []mergeProblem
}

type mergeProblem struct {
	row int
	p   Problem
}

func newGrid(opts Options, budget *textBudget, format, sheetName string) *grid {
	g := &grid{opts: opts, budget: budget, format: format, sheetName: sheetName, where: fmt.Sprintf("sheet %q", sheetName)}
	if format == FormatCSV {
		g.where = "the CSV file"
	}
	return g
}

// cols is how many columns of the next row the reader should read: every
// column a header may have, then the header's.
func (g *grid) cols() int {
	if g.headerRow == 0 {
		return MaxColumns
	}
	return len(g.header)
}

// countLimit is how many data rows are counted before a file over MaxRows is
// refused. Counting a little past the cap tells a seller who pasted 800 rows
// how many files to make; stopping at 10 × MaxRows keeps the time to refuse
// bounded whatever the sheet holds.
func (o Options) countLimit() int { return 10 * o.MaxRows }

// add takes the row numbered num; cells are in column order, within cols().
// It answers errNoHeaderHere, a *FileError that refuses the file, or nil.
func (g *grid) add(num int, hidden bool, cells []cell) error {
	if g.headerRow == 0 {
		if num > HeaderSearchRows {
			return errNoHeaderHere
		}
		// Score the cells as they are and lay them out by column only for
		// the header: a row of one cell in column IV laid out first would
		// cost 256 look-ups, on every row searched of every sheet.
		if headerScore(cells) >= 2 {
			texts := make([]string, 0, cells[len(cells)-1].col)
			for _, c := range cells {
				for len(texts) < c.col-1 {
					texts = append(texts, "")
				}
				texts = append(texts, c.text)
			}
			g.setHeader(num, texts)
			// A header without a required column refuses the file: say so
			// now rather than after reading every row below it.
			if ferr := g.checkHeader(); ferr != nil {
				return ferr
			}
		}
		return nil
	}
	if !g.isData(cells) {
		return nil
	}
	g.count++
	if g.count > g.opts.countLimit() {
		// Stop here: the file is refused whatever the rest holds, and a
		// crafted sheet of a million tiny rows would otherwise be walked to
		// its end only to be refused.
		return g.tooManyRows(true)
	}
	if len(g.rows) < g.opts.MaxRows {
		aligned := make([]cell, len(g.header))
		for _, c := range cells {
			if c.col <= len(aligned) {
				aligned[c.col-1] = c
			}
		}
		g.rows = append(g.rows, rawRow{num: num, hidden: hidden, cells: aligned})
	}
	return nil
}

// isData reports a row with a value, or a cell that is not plain text, in a known column.
func (g *grid) isData(cells []cell) bool {
	for _, c := range cells {
		if c.col > len(g.fields) || g.fields[c.col-1] == "" {
			continue
		}
		if c.kind != kindText || c.cut || cleanCell(c.text) != "" {
			return true
		}
	}
	return false
}

func (g *grid) setHeader(num int, texts []string) {
	last := 0
	for i, t := range texts {
		if strings.TrimFunc(t, isSpace) != "" {
			last = i + 1
		}
	}
	g.headerRow = num
	g.header = make([]string, last)
	g.fields = make([]string, last)
	g.long = make([]string, last)
	for i := range last {
		h := strings.TrimFunc(texts[i], isSpace)
		g.header[i] = cutHeader(h)
		if c, ok := lookupColumn(h); ok {
			g.fields[i] = c.Field
		} else if c, ok := lookupNormalized(h); ok && g.header[i] != h {
			g.long[i] = c.Field
		}
	}
}

// tooManyRows refuses the file for its row count; atLeast means counting
// stopped, so the sheet holds that many data rows or more.
func (g *grid) tooManyRows(atLeast bool) *FileError {
	has, count, kind := group(int64(g.count)), group(int64(g.count)), ""
	if atLeast {
		has, count, kind = "more than "+group(int64(g.count-1)), group(int64(g.count-1)), "atleast"
	}
	return &FileError{Code: CodeTooManyRows, Message: fmt.Sprintf("the file has %s data rows; at most %d can be uploaded at once, so nothing was registered: split it into files of at most %d rows", has, g.opts.MaxRows, g.opts.MaxRows),
		Params: pairs("kind", kind, "count", count, "max", strconv.Itoa(g.opts.MaxRows))}
}

// checkHeader refuses a header without a required column or with a column
// twice, and keeps a warning for each unknown column.
func (g *grid) checkHeader() *FileError {
	g.warnings = g.warnings[:0]
	seen := map[string]int{} // field → column index
	var dup []Problem
	for i, h := range g.header {
		ref := cellName(i+1, g.headerRow)
		field := g.fields[i]
		switch {
		case h == "":
		case g.long[i] != "":
			g.warnings = append(g.warnings, Problem{Row: g.headerRow, Cell: ref, Code: CodeUnknownColumn,
				Message: fmt.Sprintf("column %s is longer than %d characters, so it is not read as %s; shorten the header cell to the column's name", quote(h), MaxHeaderChars, g.long[i]),
				Params:  pairs("kind", "long", "header", quote(h), "field", g.long[i], "max", strconv.Itoa(MaxHeaderChars))})
		case field == "" && !ignoredHeaders[normalizeHeader(h)]:
			g.warnings = append(g.warnings, Problem{Row: g.headerRow, Cell: ref, Code: CodeUnknownColumn,
				Message: fmt.Sprintf("column %s is not a known column; it is ignored", quote(h)), Params: pairs("header", quote(h))})
		case field != "":
			if j, ok := seen[field]; ok {
				dup = append(dup, Problem{Row: g.headerRow, Column: field, Cell: ref, Code: CodeDuplicateColumn,
					Message: fmt.Sprintf("column %s names %s again (already %s)", quote(h), field, cellName(j+1, g.headerRow)),
					Params:  pairs("kind", "one", "header", quote(h), "field", field, "other", cellName(j+1, g.headerRow))})
				continue
			}
			seen[field] = i
		}
	}
	if len(dup) > 0 {
		msgs := make([]string, len(dup))
		for i, d := range dup {
			msgs[i] = d.Error()
		}
		return &FileError{Code: CodeDuplicateColumn, Message: "the header row names a column twice: " + strings.Join(msgs, "; "), Problems: dup,
			Params: pairs("detail", strings.Join(msgs, "; "))}
	}
	var missing []Problem
	var labels, longCells []string
	for _, c := range Columns() {
		if _, ok := seen[c.Field]; c.Required && !ok {
			labels = append(labels, c.Label())
			p := Problem{Row: g.headerRow, Column: c.Field, Code: CodeMissingColumn,
				Message: fmt.Sprintf("the required column %s is missing from the header row (row %d)", c.Label(), g.headerRow),
				Params:  pairs("kind", "one", "column", c.Label(), "row", strconv.Itoa(g.headerRow))}
			if j := slices.Index(g.long, c.Field); j >= 0 {
				ref := cellName(j+1, g.headerRow)
				longCells = append(longCells, ref)
				p.Cell = ref
				p.Message = fmt.Sprintf("the required column %s is missing from the header row (row %d): the header cell %s would name it but is longer than %d characters; shorten it to the column's name", c.Label(), g.headerRow, ref, MaxHeaderChars)
				p.Params = pairs("kind", "one_long", "column", c.Label(), "row", strconv.Itoa(g.headerRow), "cell", ref, "max", strconv.Itoa(MaxHeaderChars))
			}
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		fe := &FileError{Code: CodeMissingColumn, Problems: missing, Params: pairs("row", strconv.Itoa(g.headerRow), "columns", strings.Join(labels, ", ")),
			Message: fmt.Sprintf("the header row (row %d of %s) lacks the required column%s %s; add %s or start from the template",
				g.headerRow, g.where, plural(len(missing)), joinAnd(labels), map[bool]string{true: "it", false: "them"}[len(missing) == 1])}
		if len(longCells) > 0 {
			// Say why, in the sentence every page shows first.
			fe.Message = fmt.Sprintf("the header row (row %d of %s) lacks the required column%s %s: header cells longer than %d characters (%s) are not read as column names; shorten them to the columns' names, or start from the template",
				g.headerRow, g.where, plural(len(missing)), joinAnd(labels), MaxHeaderChars, strings.Join(longCells, ", "))
			fe.Params["kind"], fe.Params["cells"], fe.Params["max"] = "long", strings.Join(longCells, ", "), strconv.Itoa(MaxHeaderChars)
		}
		return fe
	}
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// noHeader refuses a file none of whose sheets has a header row.
func noHeader(format string) *FileError {
	names := make([]string, 0, 5)
	for _, c := range Columns() {
		if c.Required {
			names = append(names, c.Korean+"/"+c.Field)
		}
	}
	where := "a visible sheet"
	if format == FormatCSV {
		where = "the CSV file"
	}
	return fileErr(CodeNoHeader, "no header row was found: one of the first %d rows of %s must name the columns (%s, ...); start from the template", HeaderSearchRows, where, strings.Join(names, ", ")).
		withParams("rows", strconv.Itoa(HeaderSearchRows), "names", strings.Join(names, ", "))
}

// finish builds the sheet once every row has been added.
func (g *grid) finish(ctx context.Context, merges []mergeRange) (*Sheet, error) {
	if g.headerRow == 0 {
		return nil, errNoHeaderHere
	}
	if g.count > g.opts.MaxRows {
		return nil, g.tooManyRows(false)
	}
	if g.count == 0 {
		if g.format == FormatCSV {
			return nil, fileErr(CodeNoRows, "%s has a header row (row %d) but no product rows below it", g.where, g.headerRow).withParams("row", strconv.Itoa(g.headerRow))
		}
		return nil, fileErr(CodeNoRows, "the sheet %q has a header row (row %d) but no product rows below it", g.sheetName, g.headerRow).withParams("row", strconv.Itoa(g.headerRow))
	}
	s := &Sheet{Format: g.format, SheetName: g.sheetName, HeaderRow: g.headerRow, Header: g.header, Warnings: g.warnings}
	mergedBad, ferr := g.applyMerges(ctx, merges, s)
	if ferr != nil {
		return nil, ferr
	}
	g.validate(mergedBad, s)
	boundProblems(s)
	return s, nil
}

// applyMerges gives a vertical merge's value to every row it covers (what the
// seller sees) and marks the cells under a merge that spans two known
// columns, starts in the header or overlaps an earlier merge (Excel itself
// refuses to open overlapping merges). Such a merge is one problem, on the
// first data row it covers, naming its range; each other row it covers gets
// one short problem pointing there, however many merges cover the row. It
// returns the bad cells, by row index and column.
//
// Its cost is linear in the merges and the cells of the kept rows: each
// known column's rows are handed out once, to the first merge that covers
// them (a "next free row" table with path compression), so 10,000 merges
// of the same 500 rows are not 5 million visits. A value given to more rows
// counts again against the upload's text budget: the rows are stored and
// reported with it.
func (g *grid) applyMerges(ctx context.Context, merges []mergeRange, s *Sheet) (bad [][]bool, ferr *FileError) {
	rows := g.rows
	if len(merges) == 0 || len(rows) == 0 {
		return nil, nil
	}
	var known []int // the columns of known fields
	for c, f := range g.fields {
		if f != "" {
			known = append(known, c+1)
		}
	}
	// next[ki][k]: the first row index ≥ k whose cell in known[ki] no merge took yet.
	next := make([][]int32, len(known))
	for ki := range next {
		next[ki] = make([]int32, len(rows)+1)
		for k := range next[ki] {
			next[ki][k] = int32(k)
		}
	}
	free := func(ki, k int) int {
		n := next[ki]
		root := k
		for int(n[root]) != root {
			root = int(n[root])
		}
		for int(n[k]) != root { // path compression
			n[k], k = int32(root), int(n[k])
		}
		return root
	}
	bad = make([][]bool, len(rows))
	pointed := make([]bool, len(rows)) // the row already has a merge problem
	seen := make(map[mergeRange]bool, min(len(merges), 1024))
	for mi, m := range merges {
		if mi&1023 == 1023 && ctx.Err() != nil {
			return nil, ctxErr(ctx, "reading the merged cells")
		}
		if m.r2 <= g.headerRow || seen[m] {
			continue
		}
		seen[m] = true
		var kis []int
		var covered []string
		for ki, c := range known {
			if c >= m.c1 && c <= m.c2 {
				kis = append(kis, ki)
				covered = append(covered, g.fields[c-1])
			}
		}
		if len(kis) == 0 {
			continue
		}
		i, j := rowsIn(rows, max(m.r1, g.headerRow+1), m.r2)
		// Take the cells no earlier merge took; a cell taken before means
		// this merge overlaps another.
		took, overlap := 0, false
		var taken [][2]int // (ki, k) this merge took
		for _, ki := range kis {
			for k := free(ki, i); k < j; k = free(ki, k+1) {
				next[ki][k] = int32(k + 1)
				taken = append(taken, [2]int{ki, k})
				took++
			}
		}
		if took < (j-i)*len(kis) {
			overlap = true
		}
		ref := m.String()
		var msg, kind string
		switch {
		case m.r1 <= g.headerRow:
			msg, kind = fmt.Sprintf("cells %s are merged with the header row; unmerge them and type each value in its own cell", ref), "header"
		case len(covered) > 1:
			msg, kind = fmt.Sprintf("cells %s are merged across %s; unmerge them and type each value in its own cell", ref, joinAnd(covered)), "across"
		case overlap:
			msg, kind = fmt.Sprintf("cells %s overlap other merged cells, which Excel cannot open; unmerge them and type each value in its own cell", ref), "overlap"
		}
		if msg != "" {
			if i == j {
				continue // it covers no data row
			}
			for _, t := range taken {
				if bad[t[1]] == nil {
					bad[t[1]] = make([]bool, len(g.fields))
				}
				bad[t[1]][known[t[0]]-1] = true
			}
			top := rows[i].num
			g.mergeProblems = append(g.mergeProblems, mergeProblem{row: i, p: Problem{Row: top, Cell: cellName(m.c1, top), Code: CodeMergedCells, Message: msg,
				Params: pairs("kind", kind, "range", ref, "fields", joinAnd(covered))}})
			pointed[i] = true
			for _, t := range taken {
				if k := t[1]; !pointed[k] {
					pointed[k] = true
					r := rows[k].num
					g.mergeProblems = append(g.mergeProblems, mergeProblem{row: k, p: Problem{Row: r, Cell: cellName(known[t[0]], r), Code: CodeMergedCells,
						Message: fmt.Sprintf("the cell is inside the merged cells %s (see row %d); unmerge them and type each value in its own cell", ref, top),
						Params:  pairs("kind", "inside", "range", ref, "row", strconv.Itoa(top))}})
				}
			}
			continue
		}
		if m.r1 == m.r2 || i == j || rows[i].num != m.r1 {
			continue // within one row, or the top cell's row holds nothing
		}
		col := known[kis[0]]
		top := rows[i].cells[m.c1-1]
		top.col = col
		filled := 0
		for _, t := range taken {
			if t[1] == i {
				continue
			}
			if ferr := g.budget.take(len(top.text)); ferr != nil {
				return nil, ferr
			}
			rows[t[1]].cells[col-1] = top
			filled++
		}
		if filled > 0 {
			s.Warnings = append(s.Warnings, Problem{Row: m.r1, Column: g.fields[col-1], Cell: cellName(m.c1, m.r1), Code: CodeMergedFill,
				Message: fmt.Sprintf("cells %s are merged: the value %s is used for %s in rows %d to %d", ref, quote(cleanCell(top.text)), g.fields[col-1], m.r1, m.r2),
				Params:  pairs("range", ref, "value", quote(cleanCell(top.text)), "field", g.fields[col-1], "from", strconv.Itoa(m.r1), "to", strconv.Itoa(m.r2))})
		}
	}
	return bad, nil
}

// rowsIn returns the index range of the rows numbered from..to. A merge may
// name a million rows: only the rows that exist are visited.
func rowsIn(rows []rawRow, from, to int) (i, j int) {
	i = sort.Search(len(rows), func(i int) bool { return rows[i].num >= from })
	j = sort.Search(len(rows), func(i int) bool { return rows[i].num > to })
	return i, max(i, j)
}

// validate checks every kept row and fills s.Rows.
func (g *grid) validate(mergedBad [][]bool, s *Sheet) {
	colOf := map[string]int{}
	for i, f := range g.fields {
		if f != "" {
			if _, ok := colOf[f]; !ok {
				colOf[f] = i + 1
			}
		}
	}
	v := newValidator()
	skuIndex := 0
	for fi, rule := range v.rules {
		if rule.Field == FieldSellerSKU {
			skuIndex = fi
		}
	}
	firstSKU := map[string]int{}
	s.Rows = make([]Row, 0, len(g.rows))
	byRow := map[int][]Problem{}
	for _, mp := range g.mergeProblems {
		byRow[mp.row] = append(byRow[mp.row], mp.p)
	}
	for k, raw := range g.rows {
		row := Row{Number: raw.num, Cells: make([]string, len(g.header)), Problems: byRow[k]}
		for i, c := range raw.cells {
			row.Cells[i] = c.text
		}
		var values [numFields]cellValue
		skip := [numFields]bool{}
		for fi, rule := range v.rules {
			col, ok := colOf[rule.Field]
			if !ok {
				continue
			}
			c := raw.cells[col-1]
			ref := cellName(col, raw.num)
			if mergedBad != nil && mergedBad[k] != nil && mergedBad[k][col-1] {
				skip[fi] = true
				continue
			}
			if pr, bad := kindProblem(rule.Field, ref, c); bad {
				pr.Row = raw.num
				row.Problems = append(row.Problems, pr)
				skip[fi] = true
				continue
			}
			values[fi] = cellValue{text: cleanCell(c.text), runes: c.runes, cut: c.cut}
		}
		row.Product, row.typed = v.product(values, func(fi int, viol *productrules.Violation) {
			if skip[fi] {
				return // the cell already has its real problem
			}
			field := v.rules[fi].Field
			row.Problems = append(row.Problems, Problem{Row: raw.num, Column: field, Cell: cellName(colOf[field], raw.num), Code: viol.Code, Message: viol.Message, Params: viol.Params})
		})
		if sku := row.Product.SellerSKU; sku != "" && !skip[skuIndex] {
			if first, ok := firstSKU[sku]; ok {
				row.Problems = append(row.Problems, Problem{Row: raw.num, Column: FieldSellerSKU, Cell: cellName(colOf[FieldSellerSKU], raw.num), Code: CodeDuplicateSKU,
					Message: fmt.Sprintf("seller_sku %s is already used in row %d; each product needs its own code", quote(sku), first),
					Params:  pairs("field", FieldSellerSKU, "value", quote(sku), "row", strconv.Itoa(first))})
			} else {
				firstSKU[sku] = raw.num
			}
		}
		if raw.hidden {
			s.Warnings = append(s.Warnings, Problem{Row: raw.num, Code: CodeHiddenRow,
				Message: "the row is hidden in the spreadsheet; it is registered like every other row"})
		}
		sort.SliceStable(row.Problems, func(i, j int) bool { return colIndex(row.Problems[i].Cell) < colIndex(row.Problems[j].Cell) })
		s.Rows = append(s.Rows, row)
	}
}

// kindProblem reports a cell whose text is not what the seller typed.
func kindProblem(field, ref string, c cell) (Problem, bool) {
	raw := strings.TrimSpace(c.text)
	switch c.kind {
	case kindFormulaNoValue:
		what := "a formula (" + quote(c.formula) + ")"
		if c.formula == "=" {
			what = "a shared formula"
		}
		return Problem{Column: field, Cell: ref, Code: CodeFormulaNoValue,
			Message: fmt.Sprintf("%s is %s without a saved result; open the file in Excel and save it, or type the value instead", field, what),
			Params:  pairs("field", field, "formula", quote(c.formula))}, true
	case kindBool:
		shown := "TRUE"
		if raw == "0" {
			shown = "FALSE"
		}
		return Problem{Column: field, Cell: ref, Code: CodeBoolValue,
			Message: fmt.Sprintf("%s holds the logical value %s, not text or a number; type the value instead", field, shown),
			Params:  pairs("field", field, "value", shown)}, true
	case kindISODate:
		return Problem{Column: field, Cell: ref, Code: CodeDateValue,
			Message: fmt.Sprintf("%s holds a date (%s); format the column as text and type the value again", field, quote(raw)),
			Params:  pairs("field", field, "value", quote(raw))}, true
	case kindError:
		return Problem{Column: field, Cell: ref, Code: CodeExcelError,
			Message: fmt.Sprintf("%s shows the Excel error %s; fix the formula or type the value", field, shorten(raw)),
			Params:  pairs("field", field, "value", shorten(raw))}, true
	case kindDateNumber:
		return Problem{Column: field, Cell: ref, Code: CodeDateValue,
			Message: fmt.Sprintf("%s holds a date (Excel shows %s and stores the number %s); format the column as text and type the value again", field, c.shown, raw),
			Params:  pairs("field", field, "kind", "number", "shown", c.shown, "value", raw)}, true
	}
	return Problem{}, false
}

// cellName names a cell as Excel does: column 4, row 17 is "D17".
func cellName(col, row int) string {
	if col < 1 || col > maxSheetCol || row < 1 || row > maxSheetRow {
		return "R" + strconv.Itoa(row) + "C" + strconv.Itoa(col)
	}
	var b [12]byte
	return string(strconv.AppendInt(appendColName(b[:0], col), int64(row), 10))
}

func appendColName(dst []byte, col int) []byte {
	var tmp [3]byte
	i := len(tmp)
	for col > 0 {
		col--
		i--
		tmp[i] = byte('A' + col%26)
		col /= 26
	}
	return append(dst, tmp[i:]...)
}

// splitRef parses a cell name such as "D17".
func splitRef(ref string) (col, row int, ok bool) {
	i := 0
	for i < len(ref) && i < 3 {
		c := ref[i] | 0x20 // lower case
		if c < 'a' || c > 'z' {
			break
		}
		col = col*26 + int(c-'a') + 1
		i++
	}
	if i == 0 || i == len(ref) || col > maxSheetCol {
		return 0, 0, false
	}
	n, err := strconv.Atoi(ref[i:])
	if err != nil || n < 1 || n > maxSheetRow || ref[i] == '+' || ref[i] == '-' {
		return 0, 0, false
	}
	return col, n, true
}

// colIndex orders problems by column; an empty cell (a whole-row problem) comes first.
func colIndex(ref string) int {
	c, _, ok := splitRef(ref)
	if !ok {
		return 0
	}
	return c
}

// parseRange parses "B5:C7" (or one cell).
func parseRange(ref string) (mergeRange, bool) {
	a, b, found := strings.Cut(ref, ":")
	if !found {
		b = a
	}
	c1, r1, ok1 := splitRef(a)
	c2, r2, ok2 := splitRef(b)
	if !ok1 || !ok2 {
		return mergeRange{}, false
	}
	return mergeRange{min(c1, c2), min(r1, r2), max(c1, c2), max(r1, r2)}, true
}
