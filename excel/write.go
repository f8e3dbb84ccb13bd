package excel

import (
	"fmt"
	"io"
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

// TemplateHeader returns the header cells the template uses:
// "판매자상품코드* (seller_sku)", ... — both names, required ones marked.
func TemplateHeader() []string {
	cols := Columns()
	out := make([]string, len(cols))
	for i, c := range cols {
		mark := ""
		if c.Required {
			mark = "*"
		}
		out[i] = c.Korean + mark + " (" + c.Field + ")"
	}
	return out
}

// exampleRow is the product shown on the instructions sheet.
var exampleRow = []string{"ABC-0001", "여름 반팔 티셔츠 화이트 L", "50000803", "12900", "100", "베이직하우스", "https://img.example.com/abc-0001.jpg", "면 100% 반팔 티셔츠입니다.", "3000"}

// columnRule is the instructions sheet's line for a column, in Korean and
// English, with the limits of the field's rule (package productrules).
func columnRule(c Column) string {
	r := productrules.Must(c.Field)
	n := func(v int64) string { return group(v) }
	req := map[bool]string{true: "필수", false: "선택"}[r.Required]
	reqEn := map[bool]string{true: "Required", false: "Optional"}[r.Required]
	switch c.Field {
	case FieldSellerSKU:
		return fmt.Sprintf("%s. 판매자가 정한 상품 코드, 공백 없이 %s자 이내, 파일 안에서 한 번만. %s; your own code, no spaces, at most %s characters, once per file.", req, n(int64(r.MaxLen)), reqEn, n(int64(r.MaxLen)))
	case FieldCategoryCode:
		return fmt.Sprintf("%s. 마켓의 카테고리 코드: 영문, 숫자, - _ . 로 %s자 이내 (예: 50000803, CAT-101). %s; the marketplace's category code: letters, digits, '-', '_' or '.', at most %s characters (e.g. 50000803, CAT-101).", req, n(int64(r.MaxLen)), reqEn, n(int64(r.MaxLen)))
	case FieldImageURL:
		return fmt.Sprintf("%s. https:// 로 시작하는 이미지 주소, %s자 이내. %s; an address starting with https://, at most %s characters.", req, n(int64(r.MaxLen)), reqEn, n(int64(r.MaxLen)))
	case FieldDescription:
		return fmt.Sprintf("%s. %s자 이내, 줄바꿈 가능. %s; at most %s characters, line breaks allowed.", req, n(int64(r.MaxLen)), reqEn, n(int64(r.MaxLen)))
	case FieldPrice:
		return fmt.Sprintf("%s. %s원 이상 %s원 이하의 정수, 단위(원) 없이. %s; a whole number of won from %s to %s, without \"원\".", req, n(r.Min), n(r.Max), reqEn, n(r.Min), n(r.Max))
	case FieldShippingFee:
		return fmt.Sprintf("%s. %s원 이상 %s원 이하의 정수, 비우면 %s (무료배송). %s; a whole number of won from %s to %s, empty means %s (free shipping).", req, n(r.Min), n(r.Max), n(r.Default), reqEn, n(r.Min), n(r.Max), n(r.Default))
	}
	if r.Type == productrules.WholeNumber {
		return fmt.Sprintf("%s. %s 이상 %s 이하의 정수. %s; a whole number from %s to %s.", req, n(r.Min), n(r.Max), reqEn, n(r.Min), n(r.Max))
	}
	return fmt.Sprintf("%s. %s자 이내, 한 줄. %s; at most %s characters, one line.", req, n(int64(r.MaxLen)), reqEn, n(int64(r.MaxLen)))
}

// WriteTemplate writes the upload template: a product sheet with the header
// row frozen and the code columns formatted as text, and an instructions
// sheet with the rules and an example row. The example is not on the product
// sheet so that uploading an untouched template registers nothing.
func WriteTemplate(w io.Writer) error {
	f := excelize.NewFile()
	defer f.Close()
	if err := f.SetSheetName("Sheet1", TemplateSheet); err != nil {
		return fmt.Errorf("excel: template: %w", err)
	}
	header := TemplateHeader()
	if err := writeTable(f, TemplateSheet, header, nil); err != nil {
		return fmt.Errorf("excel: template: %w", err)
	}
	text, err := f.NewStyle(&excelize.Style{NumFmt: textFormat})
	if err != nil {
		return fmt.Errorf("excel: template: %w", err)
	}
	for i, c := range Columns() {
		if c.Field == FieldSellerSKU || c.Field == FieldCategoryCode {
			col, _ := excelize.ColumnNumberToName(i + 1)
			if err := f.SetColStyle(TemplateSheet, col, text); err != nil {
				return fmt.Errorf("excel: template: %w", err)
			}
		}
	}
	if _, err := f.NewSheet(InstructionsSheet); err != nil {
		return fmt.Errorf("excel: template: %w", err)
	}
	lines := [][]string{
		{"상품 일괄 등록 작성 방법 / How to fill in the product sheet"},
		{"'" + TemplateSheet + "' 시트의 2행부터 한 행에 상품 하나씩 입력하세요. 최대 500행. / One product per row from row 2 of the '" + TemplateSheet + "' sheet, at most 500 rows."},
		{"머리글(1행)은 바꾸지 마세요. * 표시는 필수 항목입니다. / Keep the header row; columns marked * are required."},
		{"셀 병합, 수식, 날짜 서식은 사용하지 마세요. / Do not merge cells, use formulas or date formats."},
		{},
		{"항목 / Column", "규칙 / Rule"},
	}
	for i, c := range Columns() {
		lines = append(lines, []string{header[i], columnRule(c)})
	}
	lines = append(lines, []string{}, []string{"예시 / Example"})
	for i, l := range lines {
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		row := make([]any, len(l))
		for j, v := range l {
			row[j] = v
		}
		if err := f.SetSheetRow(InstructionsSheet, cell, &row); err != nil {
			return fmt.Errorf("excel: template: %w", err)
		}
	}
	start := len(lines) + 1
	for j, v := range header {
		cell, _ := excelize.CoordinatesToCellName(j+1, start)
		if err := f.SetCellStr(InstructionsSheet, cell, v); err != nil {
			return fmt.Errorf("excel: template: %w", err)
		}
		cell, _ = excelize.CoordinatesToCellName(j+1, start+1)
		if err := f.SetCellStr(InstructionsSheet, cell, exampleRow[j]); err != nil {
			return fmt.Errorf("excel: template: %w", err)
		}
	}
	if err := f.SetColWidth(InstructionsSheet, "A", "A", 34); err != nil {
		return fmt.Errorf("excel: template: %w", err)
	}
	if err := f.SetColWidth(InstructionsSheet, "B", "B", 90); err != nil {
		return fmt.Errorf("excel: template: %w", err)
	}
	f.SetActiveSheet(0)
	if err := f.Write(w); err != nil {
		return fmt.Errorf("excel: template: %w", err)
	}
	return nil
}

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
	Reason string   // why it failed, in the seller's words
	// ProductID is the marketplace's product number of a registered or
	// already registered row.
	ProductID string
	// At is when the row's result was recorded, said as the seller reads
	// times (the caller's); "" while the row waits.
	At string
}

// WriteReport writes the result report: the seller's columns as they were
// uploaded, then the original row number, the result and the reason. Text
// that a spreadsheet could run as a formula (starting with = + - @, tab or
// CR) is written as it is, in a cell with the quote-prefix style: Excel
// shows the seller's text, keeps it text when the cell is edited, and the
// parser reads it back unchanged, so the failedOnly report (only
// ResultFailed rows) can be fixed and uploaded again as it is. Cells longer
// than Excel's 32,767 characters are cut to that length.
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
	sheet := ReportSheetIn(lang)
	if err := f.SetSheetName("Sheet1", sheet); err != nil {
		return fmt.Errorf("excel: report: %w", err)
	}
	if len(header) > 0 {
		// Before any cell is written: SetColStyle restyles existing cells,
		// the header's bold among them.
		text, err := f.NewStyle(&excelize.Style{NumFmt: textFormat})
		if err != nil {
			return fmt.Errorf("excel: report: %w", err)
		}
		last, _ := excelize.ColumnNumberToName(len(header))
		if err := f.SetColStyle(sheet, "A:"+last, text); err != nil {
			return fmt.Errorf("excel: report: %w", err)
		}
	}
	full := make([]string, 0, len(header)+3)
	full = append(full, header...)
	full = append(full, reportColumns(lang)...)
	body := make([][]any, 0, len(rows))
	for _, r := range rows {
		if failedOnly && r.Result != ResultFailed {
			continue
		}
		line := make([]any, 0, len(full))
		for i := range header {
			v := ""
			if i < len(r.Cells) {
				v = r.Cells[i]
			}
			line = append(line, v)
		}
		line = append(line, r.Number, ResultText(lang, r.Result), r.Reason, r.ProductID, r.At)
		body = append(body, line)
	}
	if err := writeTable(f, sheet, full, body); err != nil {
		return fmt.Errorf("excel: report: %w", err)
	}
	if err := quotePrefixCells(f, sheet, full, body); err != nil {
		return fmt.Errorf("excel: report: %w", err)
	}
	if err := f.Write(w); err != nil {
		return fmt.Errorf("excel: report: %w", err)
	}
	return nil
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

// writeTable writes a bold, frozen header row and the rows under it. Strings
// are written as strings (never as formulas or numbers).
func writeTable(f *excelize.File, sheet string, header []string, rows [][]any) error {
	bold, err := f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true},
		Fill: excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{"DDEBF7"}}})
	if err != nil {
		return err
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
	return f.SetPanes(sheet, &excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft",
		Selection: []excelize.Selection{{SQRef: "A2", ActiveCell: "A2", Pane: "bottomLeft"}}})
}
