package excel

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/messages"
	"github.com/bulkreg/bulkreg/productrules"
)

// Sheet names of the files this package writes.
const (
	TemplateSheet     = "상품목록"
	InstructionsSheet = "작성방법"
	ReportSheet       = "결과"
	ReportSheetEN     = "Results" // the English report's
)

// ReportSheetIn is the report's sheet name in lang.
func ReportSheetIn(lang string) string {
	if lang == messages.EN {
		return ReportSheetEN
	}
	return ReportSheet
}

// Results of a report row. WriteReport's failedOnly keeps ResultFailed rows.
const (
	ResultRegistered = "registered"
	ResultFailed     = "failed"
	ResultWaiting    = "waiting"
	// ResultAlreadyRegistered: the seller had registered the product with
	// the same content before; nothing was sent again.
	ResultAlreadyRegistered = "already_registered"
	// ResultOtherContent: the SKU is registered already with different
	// content, which bulk registration does not change. Nothing in the file
	// is wrong, so a failed-rows report leaves these rows out.
	ResultOtherContent = "already_registered_other_content"
)

// ResultText is a result as a report in lang shows it: the result's code
// in English (what the reports always said), its words in Korean.
func ResultText(lang, result string) string {
	if s, ok := messages.Render(lang, "result."+result, nil); ok {
		return s
	}
	return result
}

// textFormat is Excel's built-in "@" number format: what is typed stays text,
// so a code such as 00123 or 8801234567890 is not turned into a number.
const textFormat = 49

// HeaderField returns the field of the upload format a header cell names, read
// as the parser reads headers ("Price", "판매가 (필수)*" → "price"); false for a
// column the format does not know. A result report keeps only these columns.
func HeaderField(header string) (string, bool) {
	c, ok := lookupColumn(header)
	return c.Field, ok
}

// ReportRow is one row of a result report.
type ReportRow struct {
	Number int      // the row in the seller's file
	Cells  []string // the seller's cells, aligned with the header
	Result string   // ResultRegistered, ResultFailed, ResultWaiting, ResultAlreadyRegistered, ResultOtherContent
	// Reason is why it failed (or which product it is already), in the
	// seller's words; the reason column says it when Problems is empty.
	Reason string
	// Problems are what is wrong with the row, one by one, in the report's
	// language. The report names each by its own cell (the field's column
	// in the report, the row the report writes it on) and the original
	// row; a failed row's cells with problems are filled and carry them as
	// notes.
	Problems []ReportProblem
	// ProductID is the marketplace's product number of a registered or
	// already registered row.
	ProductID string
	// At is when the row's result was recorded, said as the seller reads
	// times (the caller's); "" while the row waits.
	At string
}

// ReportProblem is one problem of a report row: the field whose cell it
// concerns ("" for the row as a whole) and what is wrong, without a place.
type ReportProblem struct {
	Field string
	// Name is the field as the reader's language names it, said once
	// before Text; "" when Text names the field itself.
	Name string
	Text string
}

// WriteReport writes the result report: the seller's columns as they were
// uploaded, then the original row number, the result and the reason. Text
// that a spreadsheet could run as a formula (starting with = + - @, tab or
// CR) is written as it is, in a cell with the quote-prefix style: Excel
// shows the seller's text, keeps it text when the cell is edited, and the
// parser reads it back unchanged, so the failedOnly report (only
// ResultFailed rows, the fix file) can be fixed and uploaded again as it
// is. The text columns are formatted as text (a SKU such as 00123 stays
// 00123); a number column holds each whole number its rule accepts as a
// number and any other value as the seller typed it. Cells longer than
// Excel's 32,767 characters are cut to that length.
func WriteReport(w io.Writer, header []string, rows []ReportRow, failedOnly bool) error {
	return WriteReportIn(w, messages.EN, header, rows, failedOnly)
}

// WriteReportIn is WriteReport in lang (messages.KO or messages.EN): the
// result column says each row's result in that language (the reasons
// are the caller's, already in it). Then come the product number
// (상품번호) of each registered row and when each row's result was
// recorded (처리 시각).
func WriteReportIn(w io.Writer, lang string, header []string, rows []ReportRow, failedOnly bool) error {
	f := excelize.NewFile()
	defer f.Close()
	if err := writeReport(f, lang, header, rows, failedOnly); err != nil {
		return fmt.Errorf("excel: report: %w", err)
	}
	if err := f.Write(w); err != nil {
		return fmt.Errorf("excel: report: %w", err)
	}
	return nil
}

func writeReport(f *excelize.File, lang string, header []string, rows []ReportRow, failedOnly bool) error {
	sheet := ReportSheetIn(lang)
	if err := f.SetSheetName("Sheet1", sheet); err != nil {
		return err
	}
	styles, err := columnStyles(f, header)
	if err != nil {
		return err
	}
	text, err := f.NewStyle(&excelize.Style{NumFmt: textFormat})
	if err != nil {
		return err
	}
	full := make([]string, 0, len(header)+4)
	full = append(full, header...)
	full = append(full, reportColumns(lang)...)
	// The original row is a number; the result, reason and product number
	// are text (a product number of digits would be flagged otherwise).
	styles = append(styles, 0, text, text, text)
	rules := make([]*productrules.Rule, len(header))
	cols := map[string]int{}
	for i, h := range header {
		if field, ok := HeaderField(h); ok {
			r := productrules.Must(field)
			rules[i] = &r
			if _, seen := cols[field]; !seen {
				cols[field] = i
			}
		}
	}
	var kept []ReportRow
	for _, r := range rows {
		if !failedOnly || r.Result == ResultFailed {
			kept = append(kept, r)
		}
	}
	body := make([][]any, 0, len(kept))
	for i, r := range kept {
		line := make([]any, 0, len(full))
		for j := range header {
			v := ""
			if j < len(r.Cells) {
				v = r.Cells[j]
			}
			line = append(line, reportValue(rules[j], v))
		}
		line = append(line, r.Number, ResultText(lang, r.Result), reportReason(lang, cols, r, i+2), r.ProductID, r.At)
		body = append(body, line)
	}
	if err := writeTable(f, sheet, full, styles, body); err != nil {
		return err
	}
	if err := markProblems(f, sheet, cols, styles, kept); err != nil {
		return err
	}
	if err := quotePrefixCells(f, sheet, full, body); err != nil {
		return err
	}
	reason, _ := excelize.ColumnNumberToName(len(header) + 3)
	return f.SetColWidth(sheet, reason, reason, 60)
}

// columnStyles are the styles of a sheet's columns under header: the text
// format for every column but those of whole numbers (and of unknown
// columns: text too), so a code typed into the sheet stays as typed and a
// number typed into a number column is a number.
func columnStyles(f *excelize.File, header []string) ([]int, error) {
	text, err := f.NewStyle(&excelize.Style{NumFmt: textFormat})
	if err != nil {
		return nil, err
	}
	out := make([]int, len(header))
	for i, h := range header {
		if field, ok := HeaderField(h); ok && productrules.Must(field).Type == productrules.WholeNumber {
			continue
		}
		out[i] = text
	}
	return out, nil
}

// reportValue is a seller's cell as a report writes it: a whole number
// that its column's rule accepts, as a number; anything else as the seller
// typed it, so a value refused as a number is shown as it was.
func reportValue(rule *productrules.Rule, cell string) any {
	if rule == nil || rule.Type != productrules.WholeNumber {
		return cell
	}
	v := cleanCell(cell)
	if v == "" {
		return cell
	}
	n, viol := parseWhole(*rule, v)
	if viol != nil {
		return cell
	}
	return n
}

// place is a problem's place in a report: its cell in the report ("D2: "),
// or nothing for a problem of the whole row or of a column the report does
// not have.
func place(cols map[string]int, p ReportProblem, row int) string {
	if i, ok := cols[p.Field]; ok && p.Field != "" {
		return cellName(i+1, row)
	}
	return ""
}

// reportReason is a report row's reason: its problems, each at its cell in
// the report, and the row it was in the seller's file ("D2: …; E2: …
// (원본 3행)"); the row's Reason when it has no problems.
func reportReason(lang string, cols map[string]int, r ReportRow, row int) string {
	if len(r.Problems) == 0 {
		return r.Reason
	}
	parts := make([]string, len(r.Problems))
	for i, p := range r.Problems {
		parts[i] = messages.At(lang, place(cols, p, row), 0, p.Name, p.Text)
	}
	orig, _ := messages.Render(lang, "report.original_row", map[string]string{"row": strconv.Itoa(r.Number)})
	return strings.Join(parts, "; ") + " (" + orig + ")"
}

// badStyle marks a cell to fix: Excel's own "bad" colours, in the number
// format numFmt.
func badStyle(numFmt int) *excelize.Style {
	return &excelize.Style{NumFmt: numFmt, Fill: excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{"FFC7CE"}}, Font: &excelize.Font{Color: "9C0006"}}
}

// markProblems fills the cells of each failed row that its problems name
// and gives each a note saying them, so a seller sees in the file what to
// fix. rows are the rows written, from row 2.
func markProblems(f *excelize.File, sheet string, cols map[string]int, styles []int, rows []ReportRow) error {
	bad := map[int]int{} // column style → its filled variant
	for i, r := range rows {
		if r.Result != ResultFailed {
			continue
		}
		var order []int
		notes := map[int][]string{}
		for _, p := range r.Problems {
			c, ok := cols[p.Field]
			if !ok || p.Field == "" {
				continue
			}
			if _, seen := notes[c]; !seen {
				order = append(order, c)
			}
			notes[c] = append(notes[c], p.Text)
		}
		for _, c := range order {
			cell := cellName(c+1, i+2)
			st, ok := bad[styles[c]]
			if !ok {
				numFmt := 0
				if styles[c] != 0 {
					numFmt = textFormat
				}
				var err error
				if st, err = f.NewStyle(badStyle(numFmt)); err != nil {
					return err
				}
				bad[styles[c]] = st
			}
			if err := f.SetCellStyle(sheet, cell, cell, st); err != nil {
				return err
			}
			note := strings.Join(notes[c], "\n")
			if err := f.AddComment(sheet, excelize.Comment{Cell: cell, Author: "bulkreg",
				Paragraph: []excelize.RichTextRun{{Text: "bulkreg:", Font: &excelize.Font{Bold: true, Size: 9}}, {Text: "\n" + note, Font: &excelize.Font{Size: 9}}},
				Width:     280, Height: noteHeight(note)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// noteHeight is a note's height in pixels for its text at a width of 280
// pixels: about 24 Korean or 40 Latin characters a line.
func noteHeight(s string) uint {
	lines := 1
	for _, l := range strings.Split(s, "\n") {
		w := 0
		for _, c := range l {
			if c >= 0x1100 {
				w += 2
			} else {
				w++
			}
		}
		lines += 1 + w/44
	}
	return uint(min(20+15*lines, 400))
}

// quotePrefixed reports whether a spreadsheet could run s as a formula.
func quotePrefixed(s string) bool {
	return s != "" && strings.ContainsRune(formulaStarts, rune(s[0]))
}

// quotePrefixCells gives every text cell that could start a formula the
// quote-prefix variant of the style it has.
func quotePrefixCells(f *excelize.File, sheet string, header []string, rows [][]any) error {
	variants := map[int]int{}
	mark := func(col, row int) error {
		cell, _ := excelize.CoordinatesToCellName(col, row)
		base, err := f.GetCellStyle(sheet, cell)
		if err != nil {
			return err
		}
		v, ok := variants[base]
		if !ok {
			if v, err = quotePrefixStyle(f, base); err != nil {
				return err
			}
			variants[base] = v
		}
		return f.SetCellStyle(sheet, cell, cell, v)
	}
	for c, h := range header {
		if quotePrefixed(h) {
			if err := mark(c+1, 1); err != nil {
				return err
			}
		}
	}
	for r, row := range rows {
		for c, v := range row {
			if s, ok := v.(string); ok && quotePrefixed(s) {
				if err := mark(c+1, r+2); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// quotePrefixStyle adds a copy of style base with quotePrefix set.
// excelize's Style has no such field, but its cell formats (xf) do.
func quotePrefixStyle(f *excelize.File, base int) (int, error) {
	if f.Styles == nil || f.Styles.CellXfs == nil || base < 0 || base >= len(f.Styles.CellXfs.Xf) {
		return 0, fmt.Errorf("no cell format %d to copy", base)
	}
	xf := f.Styles.CellXfs.Xf[base]
	on := true
	xf.QuotePrefix = &on
	f.Styles.CellXfs.Xf = append(f.Styles.CellXfs.Xf, xf)
	f.Styles.CellXfs.Count = len(f.Styles.CellXfs.Xf)
	return len(f.Styles.CellXfs.Xf) - 1, nil
}

// writeTable writes a bold, frozen header row and the rows under it, each
// column in its style (styles[i]; 0 for none), the header's cells all in
// one. Strings are written as strings (never as formulas or numbers).
func writeTable(f *excelize.File, sheet string, header []string, styles []int, rows [][]any) error {
	bold, err := f.NewStyle(headerStyle())
	if err != nil {
		return err
	}
	// Before any cell is written: SetColStyle restyles the cells there are.
	for i, st := range styles {
		if st == 0 {
			continue
		}
		col, _ := excelize.ColumnNumberToName(i + 1)
		if err := f.SetColStyle(sheet, col, st); err != nil {
			return err
		}
	}
	for i, h := range header {
		cell, _ := excelize.CoordinatesToCellName(i+1, 1)
		if err := f.SetCellStr(sheet, cell, h); err != nil {
			return err
		}
		if err := f.SetCellStyle(sheet, cell, cell, bold); err != nil {
			return err
		}
	}
	for r, row := range rows {
		for c, v := range row {
			cell, _ := excelize.CoordinatesToCellName(c+1, r+2)
			switch v := v.(type) {
			case string:
				if v == "" {
					continue
				}
				err = f.SetCellStr(sheet, cell, v)
			default:
				err = f.SetCellValue(sheet, cell, v)
			}
			if err != nil {
				return err
			}
		}
	}
	if len(header) > 0 {
		last, _ := excelize.ColumnNumberToName(len(header))
		if err := f.SetColWidth(sheet, "A", last, 18); err != nil {
			return err
		}
	}
	return f.SetPanes(sheet, frozenHeader())
}

// headerStyle is every header row's: bold on light blue.
func headerStyle() *excelize.Style {
	return &excelize.Style{Font: &excelize.Font{Bold: true}, Fill: excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{"DDEBF7"}}}
}

// frozenHeader keeps the header row in view.
func frozenHeader() *excelize.Panes {
	return &excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft",
		Selection: []excelize.Selection{{SQRef: "A2", ActiveCell: "A2", Pane: "bottomLeft"}}}
}
