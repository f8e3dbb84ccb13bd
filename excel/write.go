package excel

import (
	"fmt"
	"io"
	"strings"

	"github.com/xuri/excelize/v2"
)

// Sheet names of the files this package writes.
const (
	TemplateSheet     = "상품목록"
	InstructionsSheet = "작성방법"
	ReportSheet       = "결과"
)

// Results of a report row. WriteReport's failedOnly keeps ResultFailed rows.
const (
	ResultRegistered = "registered"
	ResultFailed     = "failed"
	ResultWaiting    = "waiting"
)

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

var columnRules = map[string]string{
	FieldSellerSKU:    "필수. 판매자가 정한 상품 코드, 공백 없이 50자 이내, 파일 안에서 한 번만. Required; your own code, no spaces, at most 50 characters, once per file.",
	FieldName:         "필수. 100자 이내, 한 줄. Required; at most 100 characters, one line.",
	FieldCategoryCode: "필수. 숫자로 된 카테고리 코드 (20자리 이내). Required; the category code, digits only.",
	FieldPrice:        "필수. 1원 이상 10억원 이하의 정수, 단위(원) 없이. Required; a whole number of won from 1 to 1,000,000,000, without \"원\".",
	FieldStock:        "필수. 0 이상 1,000,000 이하의 정수. Required; a whole number from 0 to 1,000,000.",
	FieldBrand:        "선택. 50자 이내. Optional; at most 50 characters.",
	FieldImageURL:     "선택. https:// 로 시작하는 이미지 주소. Optional; an address starting with https://.",
	FieldDescription:  "선택. 10,000자 이내, 줄바꿈 가능. Optional; at most 10,000 characters, line breaks allowed.",
	FieldShippingFee:  "선택. 0 이상의 정수, 비우면 0 (무료배송). Optional; a whole number of won, empty means 0 (free shipping).",
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
		lines = append(lines, []string{header[i], columnRules[c.Field]})
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

// ReportRow is one row of a result report.
type ReportRow struct {
	Number int      // the row in the seller's file
	Cells  []string // the seller's cells, aligned with the header
	Result string   // ResultRegistered, ResultFailed, ResultWaiting
	Reason string   // why it failed, in the seller's words
}

// WriteReport writes the result report: the seller's columns as they were
// uploaded, then the original row number, the result and the reason. Text
// that a spreadsheet could run as a formula (starting with = + - @, tab or
// CR) gets a leading apostrophe; the parser takes it off again, so the
// failedOnly report (only ResultFailed rows) can be fixed and uploaded again
// as it is. Cells longer than Excel's 32,767 characters are cut to that length.
func WriteReport(w io.Writer, header []string, rows []ReportRow, failedOnly bool) error {
	f := excelize.NewFile()
	defer f.Close()
	if err := f.SetSheetName("Sheet1", ReportSheet); err != nil {
		return fmt.Errorf("excel: report: %w", err)
	}
	full := make([]string, 0, len(header)+3)
	for _, h := range header {
		full = append(full, neutralize(h))
	}
	full = append(full, ReportColumnRow, ReportColumnResult, ReportColumnReason)
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
			line = append(line, neutralize(v))
		}
		line = append(line, r.Number, neutralize(r.Result), neutralize(r.Reason))
		body = append(body, line)
	}
	if err := writeTable(f, ReportSheet, full, body); err != nil {
		return fmt.Errorf("excel: report: %w", err)
	}
	if len(header) > 0 {
		text, err := f.NewStyle(&excelize.Style{NumFmt: textFormat})
		if err != nil {
			return fmt.Errorf("excel: report: %w", err)
		}
		last, _ := excelize.ColumnNumberToName(len(header))
		if err := f.SetColStyle(ReportSheet, "A:"+last, text); err != nil {
			return fmt.Errorf("excel: report: %w", err)
		}
	}
	if err := f.Write(w); err != nil {
		return fmt.Errorf("excel: report: %w", err)
	}
	return nil
}

// neutralize makes text that could start a formula stay text.
func neutralize(s string) string {
	if s != "" && strings.ContainsRune(formulaStarts, rune(s[0])) {
		return "'" + s
	}
	return s
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
