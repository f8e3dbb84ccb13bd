package excel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/xuri/excelize/v2"
)

// formulaStarts are the first characters that make a spreadsheet treat text
// as a formula (CSV and formula injection); see WriteReport.
const formulaStarts = "=+-@\t\r"

// maxSheetRow is the last row a worksheet can have.
const maxSheetRow = excelize.TotalRows

// rawRow is a data row as excelize read it.
type rawRow struct {
	num    int
	cells  []string
	hidden bool
}

// sheetRead is one worksheet after the value pass.
type sheetRead struct {
	name      string
	headerRow int
	header    []string // trimmed, as the seller wrote it
	fields    []string // per header column: the field, "" for an unknown or ignored column
	rows      []rawRow // data rows with a value in a known column, at most MaxRows+1
	nonBlank  rowSet   // every data row with a value or a cell problem in a known column
}

// rowSet is a set of row numbers of one worksheet (1..maxSheetRow), 128 KiB.
type rowSet []uint64

func newRowSet() rowSet { return make(rowSet, maxSheetRow/64+1) }

func (s rowSet) add(r int) {
	if r > 0 && r <= maxSheetRow {
		s[r/64] |= 1 << (r % 64)
	}
}

func (s rowSet) has(r int) bool { return r > 0 && r <= maxSheetRow && s[r/64]&(1<<(r%64)) != 0 }

func (s rowSet) count() int {
	n := 0
	for _, w := range s {
		for ; w != 0; w &= w - 1 {
			n++
		}
	}
	return n
}

func (p *Parser) readWorkbook(ctx context.Context, data []byte, pk *pkg) (*Sheet, error) {
	f, err := excelize.OpenReader(bytes.NewReader(data), excelize.Options{
		RawCellValue:      true,
		UnzipSizeLimit:    p.opts.UnzipSizeLimit,
		UnzipXMLSizeLimit: p.opts.UnzipXMLSizeLimit,
	})
	if err != nil {
		return nil, &FileError{Code: CodeDamaged, Message: fmt.Sprintf("the file could not be opened as an Excel workbook (%v); save it again from Excel as .xlsx", err), Err: err}
	}
	defer f.Close()
	for _, name := range f.GetSheetList() {
		if ctx.Err() != nil {
			return nil, ctxErr(ctx, "reading the sheets")
		}
		part, ok := pk.sheetPart[name]
		if !ok || !strings.HasPrefix(part, "xl/worksheets/") {
			continue // a chart sheet, or a sheet excelize lists but the package lacks
		}
		if visible, err := f.GetSheetVisible(name); err == nil && !visible {
			continue
		}
		sr, ferr := p.readValues(ctx, f, name)
		if ferr != nil {
			return nil, ferr
		}
		if sr == nil {
			continue
		}
		return p.buildSheet(ctx, f, pk, part, sr)
	}
	// No header anywhere: a sheet cut off before its header explains that better.
	for _, name := range f.GetSheetList() {
		if part, ok := pk.sheetPart[name]; ok && strings.HasPrefix(part, "xl/worksheets/") {
			if err := pk.checkPart(ctx, part); err != nil {
				return nil, damaged(name, err)
			}
		}
	}
	names := make([]string, 0, 5)
	for _, c := range Columns() {
		if c.Required {
			names = append(names, c.Korean+"/"+c.Field)
		}
	}
	return nil, fileErr(CodeNoHeader, "no header row was found: one of the first %d rows of a visible sheet must name the columns (%s, ...); start from the template", HeaderSearchRows, strings.Join(names, ", "))
}

// readValues streams a worksheet's values. It returns nil when the sheet has
// no header row in its first HeaderSearchRows rows.
func (p *Parser) readValues(ctx context.Context, f *excelize.File, name string) (sr *sheetRead, ferr *FileError) {
	rows, err := f.Rows(name)
	if err != nil {
		return nil, damaged(name, err)
	}
	defer func() {
		// Close reports what Next swallowed (e.g. a row number past the last row).
		if err := rows.Close(); err != nil && ferr == nil {
			sr, ferr = nil, damaged(name, err)
		}
	}()
	count := 0 // data rows seen
	for n := 1; rows.Next(); n++ {
		if n%256 == 0 && ctx.Err() != nil {
			return nil, ctxErr(ctx, "reading the rows")
		}
		cells, err := rows.Columns()
		if err != nil {
			return nil, damaged(name, fmt.Errorf("row %d: %w", n, err))
		}
		if sr == nil {
			if n > HeaderSearchRows {
				return nil, nil
			}
			if headerScore(cells) >= 2 {
				sr = newSheetRead(name, n, cells)
				// A header without a required column refuses the file: say so
				// now rather than after reading every row below it.
				if ferr := checkHeader(sr, &Sheet{}); ferr != nil {
					return nil, ferr
				}
			}
			continue
		}
		hasValue := false
		for i, c := range cells {
			if i < len(sr.fields) && sr.fields[i] != "" && cleanCell(c) != "" {
				hasValue = true
				break
			}
		}
		if !hasValue {
			continue
		}
		sr.nonBlank.add(n)
		count++
		if count > p.opts.countLimit() {
			// Stop here: the file is refused whatever the rest holds, and a
			// crafted sheet of a million tiny rows would otherwise be walked
			// to its end (seconds of CPU) only to be refused.
			return nil, p.tooManyRows(count, true)
		}
		if len(sr.rows) <= p.opts.MaxRows {
			if len(cells) > len(sr.header) {
				cells = cells[:len(sr.header)]
			}
			sr.rows = append(sr.rows, rawRow{num: n, cells: cells, hidden: rows.GetRowOpts().Hidden})
		}
	}
	if err := rows.Error(); err != nil {
		return nil, damaged(name, err)
	}
	if count > p.opts.MaxRows {
		// Refused before the sheet scan, which would walk the whole sheet again.
		return nil, p.tooManyRows(count, false)
	}
	return sr, nil
}

// countLimit is how many data rows are counted before a file over MaxRows is
// refused. Counting a little past the cap tells a seller who pasted 800 rows
// how many files to make; stopping at 10 × MaxRows keeps the time to refuse
// bounded (a few milliseconds per thousand rows) whatever the sheet holds.
func (o Options) countLimit() int { return 10 * o.MaxRows }

// tooManyRows refuses the file for its row count; atLeast means counting
// stopped at count, so the sheet holds that many data rows or more.
func (p *Parser) tooManyRows(count int, atLeast bool) *FileError {
	has := group(int64(count))
	if atLeast {
		has = "more than " + group(int64(count-1))
	}
	return &FileError{Code: CodeTooManyRows, Message: fmt.Sprintf("the file has %s data rows; at most %d can be uploaded at once, so nothing was registered: split it into files of at most %d rows", has, p.opts.MaxRows, p.opts.MaxRows)}
}

func newSheetRead(name string, headerRow int, cells []string) *sheetRead {
	sr := &sheetRead{name: name, headerRow: headerRow, nonBlank: newRowSet()}
	last := 0
	for i, c := range cells {
		if strings.TrimFunc(c, isSpace) != "" {
			last = i + 1
		}
	}
	sr.header = make([]string, last)
	sr.fields = make([]string, last)
	for i := range last {
		sr.header[i] = strings.TrimFunc(cells[i], isSpace)
		if c, ok := lookupColumn(sr.header[i]); ok {
			sr.fields[i] = c.Field
		}
	}
	return sr
}

func damaged(sheet string, err error) *FileError {
	return &FileError{Code: CodeDamaged, Message: fmt.Sprintf("the file is damaged or incomplete (sheet %q: %v); save it again from Excel and upload it again", sheet, err), Err: err}
}

// buildSheet checks the header, adds what the sheet XML says about cells
// (merges, formulas without a result, errors, dates) and validates every row.
func (p *Parser) buildSheet(ctx context.Context, f *excelize.File, pk *pkg, part string, sr *sheetRead) (*Sheet, error) {
	s := &Sheet{SheetName: sr.name, HeaderRow: sr.headerRow, Header: sr.header}
	if ferr := checkHeader(sr, s); ferr != nil {
		return nil, ferr
	}
	dateStyles := dateStyleSet(f)
	colField := func(col int) string {
		if col >= 1 && col <= len(sr.fields) {
			return sr.fields[col-1]
		}
		return ""
	}
	// Cells with a problem the values do not show make their row a data row
	// even when every value is empty (a row of formulas without results).
	total := sr.nonBlank.count()
	meta, err := pk.scanSheet(ctx, part, maxSheetRow, len(sr.header), func(ref string, m cellMeta) (keep, stop bool) {
		col, row, err := splitRef(ref)
		if err != nil || row <= sr.headerRow || colField(col) == "" {
			return false, false
		}
		if !(m.formulaNoValue || m.errorValue || m.boolValue || m.isoDate || (m.numeric && dateStyles[m.style])) {
			return false, false
		}
		if !sr.nonBlank.has(row) {
			sr.nonBlank.add(row)
			total++
		}
		// Past the row cap nothing more is kept (the file is refused below);
		// past the count limit, nothing more is read either.
		return total <= p.opts.MaxRows, total > p.opts.countLimit()
	})
	if errors.Is(err, errStopScan) {
		return nil, p.tooManyRows(total, true)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxErr(ctx, "reading the cells")
		}
		return nil, damaged(sr.name, err)
	}
	if total > p.opts.MaxRows {
		return nil, p.tooManyRows(total, false)
	}
	if total == 0 {
		return nil, fileErr(CodeNoRows, "the sheet %q has a header row (row %d) but no product rows below it", sr.name, sr.headerRow)
	}
	rows := p.collectRows(sr, meta)
	mergedBad := applyMerges(sr, rows, meta.merges, s)
	validateRows(sr, rows, meta, mergedBad, dateStyles, pk.date1904, s)
	return s, nil
}

// checkHeader refuses a header without a required column or with a column twice,
// and warns about unknown columns.
func checkHeader(sr *sheetRead, s *Sheet) *FileError {
	seen := map[string]int{} // field → column index
	var dup []Problem
	for i, h := range sr.header {
		ref := cellName(i+1, sr.headerRow)
		field := sr.fields[i]
		switch {
		case h == "":
		case field == "" && !ignoredHeaders[normalizeHeader(h)]:
			s.Warnings = append(s.Warnings, Problem{Row: sr.headerRow, Cell: ref, Code: CodeUnknownColumn,
				Message: fmt.Sprintf("column %s is not a known column; it is ignored", quote(h))})
		case field != "":
			if j, ok := seen[field]; ok {
				dup = append(dup, Problem{Row: sr.headerRow, Column: field, Cell: ref, Code: CodeDuplicateColumn,
					Message: fmt.Sprintf("column %s names %s again (already %s)", quote(h), field, cellName(j+1, sr.headerRow))})
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
		return &FileError{Code: CodeDuplicateColumn, Message: "the header row names a column twice: " + strings.Join(msgs, "; "), Problems: dup}
	}
	var missing []Problem
	var labels []string
	for _, c := range Columns() {
		if _, ok := seen[c.Field]; c.Required && !ok {
			labels = append(labels, c.Label())
			missing = append(missing, Problem{Row: sr.headerRow, Column: c.Field, Code: CodeMissingColumn,
				Message: fmt.Sprintf("the required column %s is missing from the header row (row %d)", c.Label(), sr.headerRow)})
		}
	}
	if len(missing) > 0 {
		return &FileError{Code: CodeMissingColumn, Problems: missing,
			Message: fmt.Sprintf("the header row (row %d of sheet %q) lacks the required column%s %s; add %s or start from the template",
				sr.headerRow, sr.name, plural(len(missing)), joinAnd(labels), map[bool]string{true: "it", false: "them"}[len(missing) == 1])}
	}
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// collectRows lays out every data row, in order, with cells aligned to the header.
func (p *Parser) collectRows(sr *sheetRead, meta *sheetMeta) []*Row {
	byNum := make(map[int]rawRow, len(sr.rows))
	for _, r := range sr.rows {
		byNum[r.num] = r
	}
	nums := make([]int, 0, len(sr.rows))
	for _, r := range sr.rows {
		nums = append(nums, r.num)
	}
	for ref := range meta.cells {
		if _, row, err := splitRef(ref); err == nil {
			if _, ok := byNum[row]; !ok && sr.nonBlank.has(row) {
				byNum[row] = rawRow{num: row}
				nums = append(nums, row)
			}
		}
	}
	sort.Ints(nums)
	out := make([]*Row, 0, len(nums))
	for _, n := range nums {
		r := byNum[n]
		cells := make([]string, len(sr.header))
		copy(cells, r.cells)
		out = append(out, &Row{Number: n, Cells: cells})
	}
	return out
}

// applyMerges gives a vertical merge's value to every row it covers (what the
// seller sees) and marks rows under a merge that spans two known columns or
// starts in the header. It returns the cells covered by such a merge.
func applyMerges(sr *sheetRead, rows []*Row, merges []string, s *Sheet) (mergedBad map[string]bool) {
	mergedBad = map[string]bool{}
	if len(merges) == 0 || len(rows) == 0 {
		return mergedBad
	}
	byNum := make(map[int]*Row, len(rows))
	for _, r := range rows {
		byNum[r.Number] = r
	}
	for _, ref := range merges {
		c1, r1, c2, r2, ok := rangeCoords(ref)
		if !ok || r2 <= sr.headerRow {
			continue
		}
		known := 0
		for c := c1; c <= min(c2, len(sr.fields)); c++ {
			if sr.fields[c-1] != "" {
				known++
			}
		}
		if known == 0 {
			continue
		}
		if known > 1 || r1 <= sr.headerRow {
			var covered []string
			for c := c1; c <= min(c2, len(sr.fields)); c++ {
				if f := sr.fields[c-1]; f != "" {
					covered = append(covered, f)
				}
			}
			msg := fmt.Sprintf("cells %s are merged across %s; unmerge them and type each value in its own cell", ref, joinAnd(covered))
			if r1 <= sr.headerRow {
				msg = fmt.Sprintf("cells %s are merged with the header row; unmerge them and type each value in its own cell", ref)
			}
			for _, row := range rowsIn(rows, max(r1, sr.headerRow+1), r2) {
				r := row.Number
				row.Problems = append(row.Problems, Problem{Row: r, Cell: cellName(c1, r), Code: CodeMergedCells, Message: msg})
				for c := c1; c <= min(c2, len(sr.fields)); c++ {
					if f := sr.fields[c-1]; f != "" {
						mergedBad[cellName(c, r)] = true
					}
				}
			}
			continue
		}
		if r1 == r2 {
			continue // a merge within one row and one known column changes nothing
		}
		top, ok := byNum[r1]
		if !ok {
			continue
		}
		col := c1
		for c := c1; c <= c2; c++ {
			if c <= len(sr.fields) && sr.fields[c-1] != "" {
				col = c
			}
		}
		v := ""
		if c1-1 < len(top.Cells) {
			v = top.Cells[c1-1]
		}
		filled := 0
		for _, row := range rowsIn(rows, r1+1, r2) {
			row.Cells[col-1] = v
			filled++
		}
		if filled > 0 {
			s.Warnings = append(s.Warnings, Problem{Row: r1, Column: sr.fields[col-1], Cell: cellName(c1, r1), Code: CodeMergedFill,
				Message: fmt.Sprintf("cells %s are merged: the value %s is used for %s in rows %d to %d", ref, quote(cleanCell(v)), sr.fields[col-1], r1, r2)})
		}
	}
	return mergedBad
}

// rowsIn returns the rows numbered from..to; rows are in ascending order.
// A merge may name a million rows: only the rows that exist are visited.
func rowsIn(rows []*Row, from, to int) []*Row {
	i := sort.Search(len(rows), func(i int) bool { return rows[i].Number >= from })
	j := sort.Search(len(rows), func(i int) bool { return rows[i].Number > to })
	if i >= j {
		return nil
	}
	return rows[i:j]
}

// validateRows validates each row and fills s.Rows.
func validateRows(sr *sheetRead, rows []*Row, meta *sheetMeta, mergedBad map[string]bool, dateStyles map[int]bool, date1904 bool, s *Sheet) {
	colOf := map[string]int{}
	for i, f := range sr.fields {
		if f != "" {
			if _, ok := colOf[f]; !ok {
				colOf[f] = i + 1
			}
		}
	}
	hidden := map[int]bool{}
	for _, r := range sr.rows {
		if r.hidden {
			hidden[r.num] = true
		}
	}
	firstSKU := map[string]int{}
	values := make(map[string]string, len(colOf))
	s.Rows = make([]Row, 0, len(rows))
	for _, row := range rows {
		clear(values)
		cellProblem := map[string]bool{}
		for field, col := range colOf {
			ref := cellName(col, row.Number)
			if mergedBad[ref] {
				cellProblem[field] = true
				continue
			}
			if m, ok := meta.cells[ref]; ok {
				if pr, bad := metaProblem(field, ref, row.Cells[col-1], m, dateStyles, date1904); bad {
					pr.Row = row.Number
					row.Problems = append(row.Problems, pr)
					cellProblem[field] = true
					continue
				}
			}
			values[field] = cleanCell(row.Cells[col-1])
		}
		p := validateFields(values, func(field string, fe *fieldError) {
			if cellProblem[field] {
				return // the cell already has its real problem
			}
			row.Problems = append(row.Problems, Problem{Row: row.Number, Column: field, Cell: cellName(colOf[field], row.Number), Code: fe.code, Message: fe.msg})
		})
		row.Product = p
		if sku := p.SellerSKU; sku != "" && !cellProblem[FieldSellerSKU] {
			if first, ok := firstSKU[sku]; ok {
				row.Problems = append(row.Problems, Problem{Row: row.Number, Column: FieldSellerSKU, Cell: cellName(colOf[FieldSellerSKU], row.Number), Code: CodeDuplicateSKU,
					Message: fmt.Sprintf("seller_sku %s is already used in row %d; each product needs its own code", quote(sku), first)})
			} else {
				firstSKU[sku] = row.Number
			}
		}
		if hidden[row.Number] {
			s.Warnings = append(s.Warnings, Problem{Row: row.Number, Code: CodeHiddenRow,
				Message: "the row is hidden in the spreadsheet; it is registered like every other row"})
		}
		sort.SliceStable(row.Problems, func(i, j int) bool { return colIndex(row.Problems[i].Cell) < colIndex(row.Problems[j].Cell) })
		s.Rows = append(s.Rows, *row)
	}
}

// metaProblem reports a cell whose value cannot be trusted as the seller's text.
func metaProblem(field, ref, raw string, m cellMeta, dateStyles map[int]bool, date1904 bool) (Problem, bool) {
	switch {
	case m.formulaNoValue:
		what := "a formula (" + quote(m.formula) + ")"
		if m.formula == "=" {
			what = "a shared formula"
		}
		return Problem{Column: field, Cell: ref, Code: CodeFormulaNoValue,
			Message: fmt.Sprintf("%s is %s without a saved result; open the file in Excel and save it, or type the value instead", field, what)}, true
	case m.boolValue:
		shown := "TRUE"
		if strings.TrimSpace(raw) == "0" {
			shown = "FALSE"
		}
		return Problem{Column: field, Cell: ref, Code: CodeBoolValue,
			Message: fmt.Sprintf("%s holds the logical value %s, not text or a number; type the value instead", field, shown)}, true
	case m.isoDate:
		return Problem{Column: field, Cell: ref, Code: CodeDateValue,
			Message: fmt.Sprintf("%s holds a date (%s); format the column as text and type the value again", field, quote(strings.TrimSpace(raw)))}, true
	case m.errorValue:
		return Problem{Column: field, Cell: ref, Code: CodeExcelError,
			Message: fmt.Sprintf("%s shows the Excel error %s; fix the formula or type the value", field, strings.TrimSpace(raw))}, true
	case m.numeric && dateStyles[m.style]:
		shown := raw
		if v, err := strconv.ParseFloat(strings.TrimSpace(raw), 64); err == nil {
			if t, err := excelize.ExcelDateToTime(v, date1904); err == nil {
				shown = t.Format("2006-01-02")
				if t.Hour() != 0 || t.Minute() != 0 || t.Second() != 0 {
					shown = t.Format("2006-01-02 15:04:05")
				}
			}
		}
		return Problem{Column: field, Cell: ref, Code: CodeDateValue,
			Message: fmt.Sprintf("%s holds a date (Excel shows %s and stores the number %s); format the column as text and type the value again", field, shown, strings.TrimSpace(raw))}, true
	}
	return Problem{}, false
}

// dateStyleSet returns the cell formats (by index) that show numbers as dates or times.
func dateStyleSet(f *excelize.File) map[int]bool {
	out := map[int]bool{}
	st := f.Styles
	if st == nil || st.CellXfs == nil {
		return out
	}
	custom := map[int]string{}
	if st.NumFmts != nil {
		for _, nf := range st.NumFmts.NumFmt {
			if nf != nil {
				custom[nf.NumFmtID] = nf.FormatCode
			}
		}
	}
	for i, xf := range st.CellXfs.Xf {
		if xf.NumFmtID == nil {
			continue
		}
		id := *xf.NumFmtID
		if code, ok := custom[id]; ok {
			out[i] = isDateFormatCode(code)
		} else {
			out[i] = isBuiltinDateFormat(id)
		}
	}
	return out
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

func cellName(col, row int) string {
	s, err := excelize.CoordinatesToCellName(col, row)
	if err != nil {
		return "R" + strconv.Itoa(row) + "C" + strconv.Itoa(col)
	}
	return s
}

func splitRef(ref string) (col, row int, err error) {
	return excelize.CellNameToCoordinates(ref)
}

// colIndex orders problems by column; an empty cell (a whole-row problem) comes first.
func colIndex(ref string) int {
	if ref == "" {
		return 0
	}
	c, _, err := splitRef(ref)
	if err != nil {
		return 0
	}
	return c
}

// rangeCoords parses "B5:C7".
func rangeCoords(ref string) (c1, r1, c2, r2 int, ok bool) {
	a, b, found := strings.Cut(ref, ":")
	if !found {
		b = a
	}
	var err error
	if c1, r1, err = splitRef(a); err != nil {
		return 0, 0, 0, 0, false
	}
	if c2, r2, err = splitRef(b); err != nil {
		return 0, 0, 0, 0, false
	}
	if c1 > c2 {
		c1, c2 = c2, c1
	}
	if r1 > r2 {
		r1, r2 = r2, r1
	}
	return c1, r1, c2, r2, true
}
